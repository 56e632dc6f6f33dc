package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestSpendDoesNotWaitOnALapsedLeaseBeingReleased: a spend locks the
// action's counts and then deletes the leases that have lapsed; a give-back
// deletes its lease and then locks the counts to refund. When the lease
// given back has lapsed (its execution waited past it, or the release was
// owed while the database was out of reach) the two took the same locks in
// opposite orders: the spend, holding the counts, waited on the lease the
// give-back had deleted, and the give-back waited on the counts. Postgres
// broke the deadlock after deadlock_timeout by aborting one of them: a call
// that should have run failed (the spend), or the count stayed unrefunded
// (the give-back). A spend now passes over a lapsed lease another
// transaction holds — it counts for nothing either way — so neither waits.
func TestSpendDoesNotWaitOnALapsedLeaseBeingReleased(t *testing.T) {
	t.Parallel()
	clearOfMinuteEnd(t)
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.SetYAML("actions.add_order_note.budget", "{per_minute: 10, per_day: 10}"))
	note := json.RawMessage(`{"order_id": "o-1001", "note": "n"}`)
	want(t, e.Call(ctx, support("acme"), "add_order_note", note), engine.StatusOK)

	// An execution whose effect never ran, its lease lapsed, its release
	// owed: the sweeper pays it (release, then refund).
	var minute, day time.Time
	if err := b.admin.QueryRow(ctx, `SELECT minute_start, day_start FROM orangerail.budget_counts
		WHERE tenant_id = 'acme' AND action = 'add_order_note'`).Scan(&minute, &day); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE orangerail.budget_counts SET minute_calls = minute_calls + 1, day_calls = day_calls + 1
		WHERE tenant_id = 'acme' AND action = 'add_order_note'`); err != nil {
		t.Fatal(err)
	}
	lapsed := uuid.New()
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
		VALUES ('acme', 'add_order_note', $1, 'lapsed', now() - interval '1 second')`, lapsed); err != nil {
		t.Fatal(err)
	}
	engine.OweRelease(e, "acme", "add_order_note", "lapsed", lapsed, minute, day)

	// The order the two meet in under load, held in place: another spend
	// holds the counts (here an admin's lock); a call's spend queues for
	// them first, the give-back second.
	hold, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, "SELECT FROM orangerail.budget_counts WHERE tenant_id = 'acme' AND action = 'add_order_note' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waiting := func(like string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var n int
			if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, like).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no statement like %q waits", like)
			}
		}
	}
	called := make(chan *engine.Outcome, 1)
	go func() { called <- e.Call(ctx, support("acme"), "add_order_note", note) }()
	waiting("%budget_spend%")
	swept := make(chan error, 1)
	go func() { _, err := e.Sweep(ctx); swept <- err }()
	waiting("%UPDATE orangerail.budget_counts%")
	// Past deadlock_timeout (1s), so that the give-back's own deadlock
	// check has run, finding nothing yet.
	time.Sleep(1200 * time.Millisecond)
	start := time.Now()
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out := <-called
	took := time.Since(start)
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if out.Status != engine.StatusOK {
		t.Fatalf("the call answered %s (%v) after %s: its spend deadlocked with the release of a lapsed lease", out.Status, out.Err, took)
	}
	if took > 800*time.Millisecond {
		t.Errorf("the call waited %s once the counts were free", took)
	}
	// Two executions ran; the third, owed, was given back.
	if m, d, leases := budgetCounts(t, b.testBundle, "acme", "add_order_note"); m != 2 || d != 2 || leases != 0 {
		t.Errorf("counts minute %d day %d leases %d, want 2, 2 and 0", m, d, leases)
	}
}
