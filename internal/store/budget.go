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

// BudgetLeases are the live leases of an action: the executions running
// now, when the first of their leases expires, and whether one is held for
// a given execution.
type BudgetLeases struct {
	Running     int
	FirstExpiry time.Time
	Held        bool
}

// BudgetLeases forgets k's leases that expired and reads the live ones,
// Held naming whether one is the execution correlation names. Called after
// BudgetOpen, it sees every lease committed before the counts were locked.
func (s *Store) BudgetLeases(ctx context.Context, k BudgetKey, correlation string) (*BudgetLeases, error) {
	row, err := s.q.BudgetLeases(ctx, s.x, &db.BudgetLeasesParams{TenantID: k.Tenant, Action: k.Action, CorrelationID: correlation})
	if err != nil {
		return nil, InterpretError(err)
	}
	return &BudgetLeases{Running: int(row.Running), FirstExpiry: row.FirstExpiry, Held: row.Held}, nil
}

// BudgetSpend counts one execution of k, and holds a slot for it under
// lease until it is released or ttl passes.
func (s *Store) BudgetSpend(ctx context.Context, k BudgetKey, lease uuid.UUID, correlation string, ttl time.Duration) error {
	return InterpretError(s.q.BudgetTake(ctx, s.x, &db.BudgetTakeParams{
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
