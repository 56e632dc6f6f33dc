package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// TestBudgetSpend: one statement spends an execution or says why not —
// a spend sent again under its lease answers spent and counts nothing
// more (what makes it safe to send again after its connection died),
// another execution of the same correlation (another poll of an approval)
// spends as its own, and of several limits reached the day's is named
// before the minute's before max_concurrent.
func TestBudgetSpend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	st := store.New(database.RowWriterWithoutFlush(b.runtime, "acme"))
	k := store.BudgetKey{Tenant: "acme", Action: "cancel_order"}
	roomy := store.BudgetLimits{PerMinute: 100, PerDay: 100, MaxConcurrent: 100}
	spend := func(t *testing.T, limits store.BudgetLimits, lease uuid.UUID, correlation string) *store.BudgetSpendResult {
		t.Helper()
		r, err := st.BudgetSpend(ctx, k, limits, lease, correlation, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	counted := func(t *testing.T) (calls, leases int) {
		t.Helper()
		if err := b.admin.QueryRow(ctx, `SELECT (SELECT day_calls FROM orangerail.budget_counts WHERE tenant_id = 'acme'),
			(SELECT count(*) FROM orangerail.budget_leases WHERE tenant_id = 'acme')`).Scan(&calls, &leases); err != nil {
			t.Fatal(err)
		}
		return calls, leases
	}

	first := uuid.New()
	if r := spend(t, roomy, first, "c-1"); !r.Spent || r.RefusedBy != "" || r.DayCalls != 0 || r.Running != 0 {
		t.Fatalf("the first spend: %+v", r)
	}
	if r := spend(t, roomy, first, "c-1"); !r.Spent || r.RefusedBy != "" {
		t.Fatalf("the same spend again: %+v, want spent", r)
	}
	if calls, leases := counted(t); calls != 1 || leases != 1 {
		t.Fatalf("after one spend sent twice: %d calls and %d leases, want 1 and 1", calls, leases)
	}
	// Another poll of the same approval: a second lease of the correlation
	// is its own execution, counted (and given back if its consume loses).
	if r := spend(t, roomy, uuid.New(), "c-1"); !r.Spent || r.Running != 1 || r.DayCalls != 1 {
		t.Fatalf("another poll beside it: %+v, want spent with 1 running and 1 counted", r)
	}
	for _, tc := range []struct {
		limits store.BudgetLimits
		want   string
	}{
		{store.BudgetLimits{PerMinute: 2, PerDay: 2, MaxConcurrent: 2}, "daily_call_budget"},
		{store.BudgetLimits{PerMinute: 2, PerDay: 3, MaxConcurrent: 2}, "calls_per_minute"},
		{store.BudgetLimits{PerMinute: 3, PerDay: 3, MaxConcurrent: 2}, "max_concurrent"},
	} {
		if r := spend(t, tc.limits, uuid.New(), "c-2"); r.Spent || r.RefusedBy != tc.want || r.Running != 2 || r.DayCalls != 2 {
			t.Fatalf("limits %+v: %+v, want refused by %s", tc.limits, r, tc.want)
		}
	}
	if calls, leases := counted(t); calls != 2 || leases != 2 {
		t.Fatalf("after refusals: %d calls and %d leases, want 2 and 2", calls, leases)
	}
	// The function no longer has a rule that spends nothing for a poll
	// beside another's slot: asked with p_approved true, as a replica
	// before migration 00035 could, it spends.
	var spent, held bool
	if err := pgx.BeginFunc(ctx, b.admin, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT spent, held FROM orangerail.budget_spend('acme', 'cancel_order', $1, 'c-1', 60, 100, 100, 100, true)`,
			uuid.New()).Scan(&spent, &held)
	}); err != nil || !spent || held {
		t.Fatalf("a spend asked to be held beside another poll's slot: spent %v, held %v (%v); want spent", spent, held, err)
	}
}
