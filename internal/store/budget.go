package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// BudgetKey names whose budget is spent: a tenant's, for one action.
type BudgetKey struct {
	Tenant, Action string
}

// BudgetCounts are an action's executions counted in the current minute
// and day, and the database's clock when they were read.
type BudgetCounts struct {
	MinuteStart, DayStart time.Time
	MinuteCalls, DayCalls int
	Now                   time.Time
}

// BudgetOpen locks k's counts for the rest of the transaction, starting a
// new window's count where one has passed, and returns them.
func (s *Store) BudgetOpen(ctx context.Context, k BudgetKey) (*BudgetCounts, error) {
	r, err := s.q.BudgetOpen(ctx, s.x, &db.BudgetOpenParams{TenantID: k.Tenant, Action: k.Action})
	if err != nil {
		return nil, InterpretError(err)
	}
	return &BudgetCounts{MinuteStart: r.MinuteStart, DayStart: r.DayStart, MinuteCalls: int(r.MinuteCalls), DayCalls: int(r.DayCalls), Now: r.Now}, nil
}

// BudgetRunning counts k's executions running now (their leases live),
// after forgetting the leases that expired, and returns when the first
// live one expires.
func (s *Store) BudgetRunning(ctx context.Context, k BudgetKey) (int, time.Time, error) {
	if err := s.q.BudgetLeasesPrune(ctx, s.x, &db.BudgetLeasesPruneParams{TenantID: k.Tenant, Action: k.Action}); err != nil {
		return 0, time.Time{}, InterpretError(err)
	}
	row, err := s.q.BudgetLeasesLive(ctx, s.x, &db.BudgetLeasesLiveParams{TenantID: k.Tenant, Action: k.Action})
	if err != nil {
		return 0, time.Time{}, InterpretError(err)
	}
	return int(row.Running), row.FirstExpiry, nil
}

// BudgetSpend counts one execution of k, and holds a slot for it under
// lease until it is released or ttl passes.
func (s *Store) BudgetSpend(ctx context.Context, k BudgetKey, lease uuid.UUID, correlation string, ttl time.Duration) error {
	if err := s.q.BudgetSpend(ctx, s.x, &db.BudgetSpendParams{TenantID: k.Tenant, Action: k.Action}); err != nil {
		return InterpretError(err)
	}
	return InterpretError(s.q.BudgetLeaseTake(ctx, s.x, &db.BudgetLeaseTakeParams{
		TenantID: k.Tenant, Action: k.Action, ID: lease, CorrelationID: correlation, TtlSeconds: ttl.Seconds(),
	}))
}

// BudgetRelease frees an execution's slot.
func (s *Store) BudgetRelease(ctx context.Context, k BudgetKey, lease uuid.UUID) error {
	return InterpretError(s.q.BudgetLeaseRelease(ctx, s.x, &db.BudgetLeaseReleaseParams{TenantID: k.Tenant, Action: k.Action, ID: lease}))
}

// BudgetRefund gives back an execution counted in the windows starting at
// minute and day, where they are still the current ones.
func (s *Store) BudgetRefund(ctx context.Context, k BudgetKey, minute, day time.Time) error {
	return InterpretError(s.q.BudgetRefund(ctx, s.x, &db.BudgetRefundParams{MinuteStart: minute, DayStart: day, TenantID: k.Tenant, Action: k.Action}))
}

// BudgetLeaseHeld reports whether a live lease of k is held for the
// execution correlation names.
func (s *Store) BudgetLeaseHeld(ctx context.Context, k BudgetKey, correlation string) (bool, error) {
	held, err := s.q.BudgetLeaseHeld(ctx, s.x, &db.BudgetLeaseHeldParams{TenantID: k.Tenant, Action: k.Action, CorrelationID: correlation})
	return held, InterpretError(err)
}
