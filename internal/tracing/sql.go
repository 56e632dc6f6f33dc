package tracing

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// SQL returns the tracer a database pool's connections carry
// (database.WithQueryTracer): a span per statement and per batch run
// under a traced call, named by its query (sqlc's "-- name: X" comment,
// else its first keyword, such as SELECT). A statement's text is not
// recorded: the read-only SQL tool runs an agent's, and an action's
// carries the config's. A statement outside any trace (the sealer, the
// sweeper) makes no span. Off, it returns nil.
func (t *Tracing) SQL(pool string) pgx.QueryTracer {
	if t == nil {
		return nil
	}
	return &sqlTracer{tracer: t.Tracer(), pool: pool}
}

type sqlTracer struct {
	tracer trace.Tracer
	pool   string
}

var (
	_ pgx.QueryTracer = (*sqlTracer)(nil)
	_ pgx.BatchTracer = (*sqlTracer)(nil)
)

func (s *sqlTracer) start(ctx context.Context, name string) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	ctx, _ = s.tracer.Start(ctx, "SQL "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNamePostgreSQL, semconv.DBQuerySummary(name), Attr("orangerail.pool", s.pool)))
	return ctx
}

func end(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		// The code, never the text: a datasource's words stay in the
		// host log.
		Fail(span, "error")
	}
	span.End()
}

// TraceQueryStart starts a statement's span.
func (s *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return s.start(ctx, QueryName(data.SQL))
}

// TraceQueryEnd ends it.
func (s *sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err)
}

// TraceBatchStart starts a batch's span (a pipelined read).
func (s *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	name := "batch"
	if data.Batch != nil && len(data.Batch.QueuedQueries) > 0 {
		name = "batch " + QueryName(data.Batch.QueuedQueries[0].SQL)
	}
	return s.start(ctx, name)
}

// TraceBatchQuery is told of each statement of a batch; the batch's span
// covers them.
func (s *sqlTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd ends the batch's span.
func (s *sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err)
}

// QueryName names a statement for its span: sqlc's query name from its
// "-- name: X :kind" comment, else its first word in capitals (SELECT,
// UPDATE, SET …), else "statement".
func QueryName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok && name != "" {
			return name
		}
	}
	for strings.HasPrefix(sql, "--") { // other comments
		_, sql, _ = strings.Cut(sql, "\n")
		sql = strings.TrimSpace(sql)
	}
	word, _, _ := strings.Cut(sql, " ")
	word = strings.ToUpper(strings.TrimRight(word, ";\n\t("))
	for _, r := range word {
		if r < 'A' || r > 'Z' {
			return "statement"
		}
	}
	if word == "" {
		return "statement"
	}
	return word
}
