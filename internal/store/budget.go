package store

import (
	"context"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// BudgetKey names whose budget is spent: a tenant's, for one action.
type BudgetKey struct {
	Tenant, Action string
}

// BudgetSpendResult is what spending one execution found and did.
type BudgetSpendResult struct {
	// Spent: the execution was counted and its lease taken.
	Spent bool
	// RefusedBy names the limit that refused the execution, "" when none
	// did: calls_per_minute, max_concurrent or daily_call_budget.
	RefusedBy string
	// The counts of the current minute and day before this execution, the
	// executions running (their leases live), when the first of those
	// leases expires, and the database's clock.
	MinuteStart, DayStart time.Time
	MinuteCalls, DayCalls int
	Running               int
	FirstExpiry, Now      time.Time
}

// BudgetLimits are an action's budget: executions a minute, a day, and at
// once.
type BudgetLimits struct {
	PerMinute, PerDay, MaxConcurrent int
}

// BudgetSpend spends one execution of k under limits, holding a slot for
// it under lease until it is released or ttl passes, in one statement,
// unless a limit is reached. Run again after a spend under the same lease
// committed, it answers Spent and counts nothing more.
func (s *Store) BudgetSpend(ctx context.Context, k BudgetKey, limits BudgetLimits, lease uuid.UUID, correlation string,
	ttl time.Duration) (*BudgetSpendResult, error) {
	r, err := s.q.BudgetSpend(ctx, s.x, &db.BudgetSpendParams{
		TenantID: k.Tenant, Action: k.Action, ID: lease, CorrelationID: correlation, TtlSeconds: ttl.Seconds(),
		PerMinute: clampInt32(limits.PerMinute), PerDay: clampInt32(limits.PerDay), MaxConcurrent: clampInt32(limits.MaxConcurrent),
	})
	if err != nil {
		return nil, InterpretError(err)
	}
	return &BudgetSpendResult{Spent: r.Spent, RefusedBy: r.RefusedBy,
		MinuteStart: r.MinuteStart, DayStart: r.DayStart, MinuteCalls: int(r.MinuteCalls), DayCalls: int(r.DayCalls),
		Running: int(r.Running), FirstExpiry: r.FirstExpiry, Now: r.Now}, nil
}

// BudgetRelease frees an execution's slot, and says whether it was held
// (no other transaction released it, nor a spend forgot it lapsed).
func (s *Store) BudgetRelease(ctx context.Context, k BudgetKey, lease uuid.UUID) (held bool, err error) {
	n, err := s.q.BudgetLeaseRelease(ctx, s.x, &db.BudgetLeaseReleaseParams{TenantID: k.Tenant, Action: k.Action, ID: lease})
	return n > 0, InterpretError(err)
}

// BudgetExtend extends an execution's lease to last at least ttl from
// now; a lease forgotten meanwhile is not taken again.
func (s *Store) BudgetExtend(ctx context.Context, k BudgetKey, lease uuid.UUID, ttl time.Duration) error {
	return InterpretError(s.q.BudgetLeaseExtend(ctx, s.x, &db.BudgetLeaseExtendParams{TtlSeconds: ttl.Seconds(), TenantID: k.Tenant, Action: k.Action, ID: lease}))
}

// BudgetRefund gives back an execution counted in the windows starting at
// minute and day, where they are still the current ones.
func (s *Store) BudgetRefund(ctx context.Context, k BudgetKey, minute, day time.Time) error {
	return InterpretError(s.q.BudgetRefund(ctx, s.x, &db.BudgetRefundParams{MinuteStart: minute, DayStart: day, TenantID: k.Tenant, Action: k.Action}))
}

// clampInt32 is n, not negative, as an integer column holds it: a count
// or limit past the largest reads as the largest (a limit that large is
// no limit a count could reach).
func clampInt32(n int) int32 {
	return int32(min(n, math.MaxInt32)) //nolint:gosec // G115: clamped
}
