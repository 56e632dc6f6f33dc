package engine_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// stallConn is a connection whose reads, once stalled, wait until cut is
// closed: the answer Postgres sent arrives after the caller hung up. It
// is then read as the socket gives it, under whatever deadline pgx set
// meanwhile (its context watcher sets one when a query's context ends).
type stallConn struct {
	net.Conn
	stalled atomic.Bool
	cut     <-chan struct{}
}

func (c *stallConn) Read(b []byte) (int, error) {
	if c.stalled.Load() {
		<-c.cut
	}
	return c.Conn.Read(b)
}

// stallSpend is a pool tracer that, once armed, stalls the connection that
// sends a budget_spend batch: the batch is written whole, and its answer
// is held.
type stallSpend struct{ armed atomic.Bool }

func (*stallSpend) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*stallSpend) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *stallSpend) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	for _, q := range data.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "budget_spend") && s.armed.CompareAndSwap(true, false) {
			conn.PgConn().Conn().(*stallConn).stalled.Store(true)
		}
	}
	return ctx
}
func (*stallSpend) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*stallSpend) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestSpendAnsweredAfterTheCallerHangsUp: the spend is one pipelined
// statement (the tenant's scope, budget_spend, Sync) sent in one round
// trip, and it commits at the Sync, whether or not anyone reads its
// answer. A caller that hangs up after it was sent and before its answer
// is read (the spend's round trip: longer under load, or queued on the
// counts' lock) left the count kept and the slot held until its lease
// expired (2 × statement_timeout + 5s), nothing run, refusing every call
// of the action in the tenant for max_concurrent meanwhile. The answer is
// read all the same now, and the execution, which stops at the hang-up,
// gives both back.
func TestSpendAnsweredAfterTheCallerHangsUp(t *testing.T) {
	t.Parallel()
	clearOfMinuteEnd(t)
	b := setupExample(t)
	ctx := context.Background()
	cut := make(chan struct{})
	tracer := &stallSpend{}
	pool, err := database.Open(ctx, b.url, func(c *pgxpool.Config) {
		c.MaxConns = 1 // one connection: budget_spend is prepared on it by the first call
		c.ConnConfig.Tracer = tracer
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: conn, cut: cut}, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.SetYAML("actions.add_order_note.budget", "{max_concurrent: 1}"))
	e, err := engine.New(engine.Config{Ontology: cfg, Store: pool, Catalog: readCatalog(t, cfg, pool), Key: b.key, Logger: quiet,
		Effects: effects.Factories()})
	if err != nil {
		t.Fatal(err)
	}
	note := json.RawMessage(`{"order_id": "o-1001", "note": "n"}`)
	want(t, e.Call(ctx, support("acme"), "add_order_note", note), engine.StatusOK)

	tracer.armed.Store(true)
	callCtx, hangUp := context.WithCancel(ctx)
	done := make(chan *engine.Outcome, 1)
	go func() { done <- e.Call(callCtx, support("acme"), "add_order_note", note) }()
	// The spend committed; its answer is on its way.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, leases := budgetCounts(t, b.testBundle, "acme", "add_order_note"); leases == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spend never committed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hangUp() // the agent hangs up
	close(cut)
	out := <-done
	t.Logf("the cancelled call answered %s (%v)", out.Status, out.Err)

	var notes, records int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM order_notes WHERE org_id = 'acme' AND note = 'n'").Scan(&notes); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme' AND correlation_id = $1",
		out.CorrelationID).Scan(&records); err != nil {
		t.Fatal(err)
	}
	minute, day, leases := budgetCounts(t, b.testBundle, "acme", "add_order_note")
	t.Logf("after the hang-up: %d notes written, minute %d, day %d, leases held %d, audit records of the call %d", notes, minute, day, leases, records)
	if notes != 1 {
		t.Fatalf("%d notes: the cancelled call's effect ran?", notes)
	}
	if leases != 0 || minute != 1 || day != 1 {
		t.Errorf("nothing ran for the cancelled call, yet its slot is held (%d leases) and its count kept (minute %d, day %d; want 1, 1)",
			leases, minute, day)
	}
	// The next call, with nothing running, is refused for max_concurrent.
	if next := e.Call(ctx, support("acme"), "add_order_note", note); next.Status != engine.StatusOK {
		t.Errorf("the next call, nothing running, answered %s %+v", next.Status, next.RateLimit)
	}
}
