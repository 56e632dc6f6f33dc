package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// TestBudgetSpendSentAgainAnswersItsOwnWindow: a spend sent again (its
// connection died, nobody knew whether it committed) answers spent by its
// lease — and the windows it answers are those a refund of it gives the
// count back in. They must be the windows it was counted in: sent again
// after the minute (or day) turned, it answered the row's newer window,
// and the refund took a count of that window, which belongs to another
// execution, leaving its own in the older one.
func TestBudgetSpendSentAgainAnswersItsOwnWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	st := store.New(database.RowWriterWithoutFlush(b.runtime, "acme"))
	k := store.BudgetKey{Tenant: "acme", Action: "cancel_order"}
	roomy := store.BudgetLimits{PerMinute: 100, PerDay: 100, MaxConcurrent: 100}
	lease := uuid.New()
	first, err := st.BudgetSpend(ctx, k, roomy, lease, "c-1", time.Hour)
	if err != nil || !first.Spent {
		t.Fatalf("the first spend: %+v, %v", first, err)
	}
	// The next minute and day began, and another execution was counted
	// in them, before the spend was sent again.
	if _, err := b.admin.Exec(ctx, `UPDATE orangerail.budget_counts
		SET minute_start = $1, minute_calls = 1, day_start = $2, day_calls = 1 WHERE tenant_id = 'acme'`,
		first.MinuteStart.Add(time.Minute), first.DayStart.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	again, err := st.BudgetSpend(ctx, k, roomy, lease, "c-1", time.Hour)
	if err != nil || !again.Spent {
		t.Fatalf("the same spend again: %+v, %v", again, err)
	}
	if !again.MinuteStart.Equal(first.MinuteStart) || !again.DayStart.Equal(first.DayStart) {
		t.Fatalf("sent again, the spend answers the windows %s and %s; it was counted in %s and %s",
			again.MinuteStart, again.DayStart, first.MinuteStart, first.DayStart)
	}
	// Its effect never ran: it is given back in the windows it answered.
	if err := b.inTenant(t, "acme", func(s *store.Store) error { return s.BudgetRefund(ctx, k, again.MinuteStart, again.DayStart) }); err != nil {
		t.Fatal(err)
	}
	var minuteCalls, dayCalls int
	if err := b.admin.QueryRow(ctx, `SELECT minute_calls, day_calls FROM orangerail.budget_counts WHERE tenant_id = 'acme'`).
		Scan(&minuteCalls, &dayCalls); err != nil {
		t.Fatal(err)
	}
	if minuteCalls != 1 || dayCalls != 1 {
		t.Fatalf("the refund took the newer windows' count of another execution: %d this minute, %d today; want 1 and 1",
			minuteCalls, dayCalls)
	}
}

// TestBudgetSpendReadsTheClockOnceItHoldsTheCounts: a spend that waited
// for the counts' lock judges the leases, and picks its window, by the
// time it got the lock, not by when its transaction began. It read now(),
// the transaction's start, so a lease that lapsed while it waited was
// counted as running (refused by max_concurrent with no execution
// running), and a spend that waited across a minute's end was counted in
// the minute before.
func TestBudgetSpendReadsTheClockOnceItHoldsTheCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	st := store.New(database.RowWriterWithoutFlush(b.runtime, "acme"))
	k := store.BudgetKey{Tenant: "acme", Action: "cancel_order"}
	if r, err := st.BudgetSpend(ctx, k, store.BudgetLimits{PerMinute: 100, PerDay: 100, MaxConcurrent: 100}, uuid.New(), "c-0", time.Hour); err != nil || !r.Spent {
		t.Fatalf("the first spend: %+v, %v", r, err)
	}
	if _, err := b.admin.Exec(ctx, `DELETE FROM orangerail.budget_leases WHERE tenant_id = 'acme'`); err != nil {
		t.Fatal(err)
	}

	// The waiting spend's transaction begins.
	conn, err := b.admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	waiter, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = waiter.Rollback(ctx) }()
	var began time.Time
	var pid int
	if err := waiter.QueryRow(ctx, "SELECT now(), pg_backend_pid()").Scan(&began, &pid); err != nil {
		t.Fatal(err)
	}

	// Another transaction holds the counts and, meanwhile, a lease that
	// lapses a millisecond after the waiter began.
	hold, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, "SELECT FROM orangerail.budget_counts WHERE tenant_id = 'acme' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	lapses := began.Add(time.Millisecond)
	if _, err := hold.Exec(ctx, `INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
		VALUES ('acme', 'cancel_order', $1, 'lapsing', $2)`, uuid.New(), lapses); err != nil {
		t.Fatal(err)
	}

	type result struct {
		spent   bool
		refused string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = waiter.QueryRow(ctx, `SELECT spent, coalesce(refused_by, '')
			FROM orangerail.budget_spend('acme', 'cancel_order', $1, 'c-1', 60, 100, 100, 1, false)`, uuid.New()).Scan(&r.spent, &r.refused)
		done <- r
	}()
	// The spend waits for the counts; the lease lapses (the database's
	// clock passes it) before the holder lets go.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting, lapsed bool
		if err := b.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'),
			clock_timestamp() > $2`, pid, lapses).Scan(&waiting, &lapsed); err != nil {
			t.Fatal(err)
		}
		if waiting && lapsed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spend does not wait for the counts (waiting %v, lease lapsed %v)", waiting, lapsed)
		}
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.spent || r.refused != "" {
		t.Fatalf("a spend that got the counts after the only lease lapsed: spent %v, refused by %q; want spent", r.spent, r.refused)
	}
}
