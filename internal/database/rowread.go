package database

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/store"
)

// errNotARowRead is what a RowReader or a RowWriter answers a statement
// other than a single row's.
var errNotARowRead = errors.New("database: a RowReader or RowWriter runs single-row statements (QueryRow) only")

// RowReader returns a store.DBTX on which every QueryRow is a read-only
// transaction of its own, scoped to tenant and sent with its statement in
// one round trip, as QueryInTenant sends a statement of the caller's
// text: for a store read of one row (a sqlc :one query) that needs no
// transaction around it, at a third of InTenant's round trips. The read
// is made when its row is scanned, and is made again on another
// connection should it meet a dead pooled one, as QueryInTenant's is.
// Query and Exec fail. It is safe for concurrent use, as pool is.
func RowReader(pool Acquirer, tenant string) store.DBTX {
	return &rowReader{pool: pool, tenant: tenant, kind: readOnly}
}

// RowWriter is RowReader for a statement that writes: every QueryRow is a
// transaction of its own, scoped to tenant, sent with its scope and
// committed in one round trip — a third of InTenant's for a transaction
// of one statement. Should it meet a dead connection it is sent again on
// another, whether or not it committed there: its statement must be
// repeatable, a second run answering as the first without writing again.
// A lock the statement takes is held only while Postgres runs it and
// commits, never across a round trip.
func RowWriter(pool Acquirer, tenant string) store.DBTX {
	return &rowReader{pool: pool, tenant: tenant, kind: write}
}

// RowWriterWithoutFlush is RowWriter for a statement whose commit need not
// wait for its WAL to reach disk (as InTenantWithoutFlush's).
func RowWriterWithoutFlush(pool Acquirer, tenant string) store.DBTX {
	return &rowReader{pool: pool, tenant: tenant, kind: writeWithoutFlush}
}

type rowReader struct {
	pool   Acquirer
	tenant string
	kind   pipelined
}

func (r *rowReader) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &readRow{r: r, ctx: ctx, sql: sql, args: args}
}

func (r *rowReader) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errNotARowRead
}

func (r *rowReader) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNotARowRead
}

// readRow is a row a RowReader or RowWriter runs its
// statement for when it is scanned.
type readRow struct {
	r    *rowReader
	ctx  context.Context //nolint:containedctx // the ctx of the QueryRow whose Scan makes the read
	sql  string
	args []any
}

// Scan reads the statement's first row into dest, or returns
// pgx.ErrNoRows when it has none, as a pgx.Row's Scan does.
func (row *readRow) Scan(dest ...any) error {
	found := false
	err := inPipeline(row.ctx, row.r.pool, row.r.tenant, row.r.kind, row.sql, row.args, func(rows pgx.Rows) error {
		found = false // of a read made again
		if !rows.Next() {
			return rows.Err()
		}
		found = true
		return rows.Scan(dest...)
	})
	if err == nil && !found {
		return pgx.ErrNoRows
	}
	return err
}
