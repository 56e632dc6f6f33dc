package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// Call budgets. Each action's executions are counted against three limits
// (ontology.Action.EffectiveBudget), per tenant and action, in Postgres, so
// every replica spends one budget: per tenant, because tenants are
// separate customers whose agents must not exhaust each other's; per
// action, not per caller, because a budget protects what the action acts
// on, which one agent must not escape by calling under several names.
//
// The budget is spent when the effect is about to run — after the input,
// the gates, the precondition and the approval, so a call refused by any
// of them, or staged, spends nothing — and in a transaction of its own,
// committed before the execution begins, so that other replicas count it
// while it runs. It is spent before the approval is consumed: a budget's
// refusal leaves an approved approval approved, and a later poll executes
// it. An execution that then ends before its effect ran (another poller
// consumed the approval, a re-check refused it) gets its count back.

// BudgetLimit names which of an action's budgets refused a call, from a
// closed set: spec 001's names, which an agent reads.
type BudgetLimit string

// The limits.
const (
	LimitPerMinute  BudgetLimit = "calls_per_minute"
	LimitConcurrent BudgetLimit = "max_concurrent"
	LimitPerDay     BudgetLimit = "daily_call_budget"
)

// BudgetLimits returns every limit.
func BudgetLimits() []BudgetLimit { return []BudgetLimit{LimitPerMinute, LimitConcurrent, LimitPerDay} }

// RateLimit is a budget's refusal: which limit, how many calls it allows,
// and when a call may succeed.
type RateLimit struct {
	Limit      BudgetLimit
	Allowed    int
	RetryAfter time.Duration
	Detail     string
}

// concurrentRetry is what a call refused for max_concurrent is told to
// wait: when a running execution ends cannot be foreseen, so a short
// wait, or less when a lease expires sooner.
const concurrentRetry = time.Second

// spent is the budget one execution spent: the windows it was counted in
// and the lease holding its slot.
type spent struct {
	key         store.BudgetKey
	lease       uuid.UUID
	minute, day time.Time
	// released is set once a transaction that released the lease
	// committed (releaseIn).
	released bool
}

// leaseTTL is how long an execution's slot is held at most: its effect's
// deadline, and a statement timeout more for the consume before it and
// the record after it. A replica that dies mid-execution frees its slot
// this long after it took it.
func (e *Engine) leaseTTL() time.Duration {
	_, statement := e.cfg.Limits.Timeouts()
	return e.effectTimeout + statement
}

// spend spends one execution of the call's action from the tenant's
// budget, or says which limit refuses it. Of several limits reached, the
// one that lifts last is named: retrying sooner would only be refused by
// it.
func (x *execution) spend(ctx context.Context) (*RateLimit, error) {
	b := x.c.action.EffectiveBudget()
	k := store.BudgetKey{Tenant: x.caller.Tenant, Action: x.c.name}
	lease := uuid.New()
	// Every execution of the action in the tenant locks its counts: the
	// whole spend is one statement (orangerail.budget_spend), sent with its
	// scope and its commit in one round trip and committed without a
	// flush, so the lock is held for microseconds inside Postgres, not
	// across round trips or an fsync, and one tenant's executions do not
	// queue behind each other's network. A spend a crash forgets is one
	// whose execution never committed its records (their durable commit
	// would have flushed it): it would have been given back. Sent again
	// after its connection died, the spend answers by its lease, counted
	// once.
	//
	// A poll of an approval spends as any execution does, even while
	// another poll of it holds a slot: of polls that race, the consume
	// lets one execute, and the others, whose effect never ran, give their
	// count and slot back (unspend). So each execution is counted once,
	// max_concurrent sees every one that runs, and a poll never waits on a
	// slot another poll left behind (its replica died: the slot holds until
	// its lease expires, but only as any execution's does).
	//
	// A caller that hangs up does not cut the spend short: sent, it
	// commits whether or not its answer is read, and unread it would
	// leave the count kept and the slot held until the lease lapsed,
	// nothing run. Its answer is read all the same, within the store's
	// deadline, so that the execution, which stops at the hang-up, gives
	// both back (unspend).
	r, err := store.New(database.RowWriterWithoutFlush(x.e.store, x.caller.Tenant)).BudgetSpend(context.WithoutCancel(ctx), k,
		store.BudgetLimits{PerMinute: b.PerMinute, PerDay: b.PerDay, MaxConcurrent: b.MaxConcurrent},
		lease, x.correlation, x.e.leaseTTL())
	if err != nil {
		return nil, err
	}
	if r.Spent {
		x.spent = &spent{key: k, lease: lease, minute: r.MinuteStart, day: r.DayStart}
		return nil, nil
	}
	now := r.Now
	switch BudgetLimit(r.RefusedBy) {
	case LimitPerDay:
		renews := r.DayStart.Add(24 * time.Hour)
		return &RateLimit{Limit: LimitPerDay, Allowed: b.PerDay, RetryAfter: renews.Sub(now),
			Detail: fmt.Sprintf("%s has executed %d times today in this tenant, its daily budget; the budget renews at %s",
				x.c.name, r.DayCalls, renews.UTC().Format(time.RFC3339))}, nil
	case LimitPerMinute:
		return &RateLimit{Limit: LimitPerMinute, Allowed: b.PerMinute, RetryAfter: r.MinuteStart.Add(time.Minute).Sub(now),
			Detail: fmt.Sprintf("%s has executed %d times this minute in this tenant, as many as a minute allows", x.c.name, r.MinuteCalls)}, nil
	case LimitConcurrent:
		return &RateLimit{Limit: LimitConcurrent, Allowed: b.MaxConcurrent, RetryAfter: min(concurrentRetry, r.FirstExpiry.Sub(now)),
			Detail: fmt.Sprintf("%s is executing %d times at once in this tenant, as many as are allowed; a slot frees when one ends", x.c.name, r.Running)}, nil
	}
	return nil, fmt.Errorf("the budget of %s neither spent nor refused (limit %q)", x.c.name, r.RefusedBy)
}

// rateLimited answers a call a budget refused, and records it: a
// rate_limited record under the call's correlation id and approval.
// Nothing was consumed, so an approved approval stays approved.
func (x *execution) rateLimited(ctx context.Context, r *RateLimit) *Outcome {
	rec := x.record(PhaseRateLimited)
	rec.Error = fmt.Sprintf("%s: %s (%s: %d)", errcode.RateLimited, r.Detail, r.Limit, r.Allowed)
	if err := x.e.appendAlone(ctx, x.caller.Tenant, rec); err != nil {
		return x.e.auditBlocked(ctx, x.c.name, x.correlation, err)
	}
	return &Outcome{Status: StatusRateLimited, Code: errcode.RateLimited, RateLimit: r, CorrelationID: x.correlation, ApprovalID: x.approvalID}
}

// extendIn queues on q, which is sent on the transaction that commits the
// execution's start, the extension of its lease to last the rest of the
// execution: the effect's deadline and the end's transaction
// (ExecutionBound). The lease was taken at the spend, and the waits for
// connections since may have outlasted it; a poll of the consumed
// approval reads the live lease as the execution running (executing).
func (x *execution) extendIn(ctx context.Context, q *database.Queue) {
	if s := x.spent; s != nil {
		_ = store.New(q).BudgetExtend(ctx, s.key, s.lease, ExecutionBound(x.e.cfg.Limits)) // queued: its error is q.Send's
	}
}

// releaseIn queues on q, which is sent on stx, the transaction that
// records how its effect ended, the release of the execution's slot, once
// the effect ran: the count stays spent, so there is nothing to give
// back, and the release is the delete of the execution's own lease row,
// which no other execution waits on. It spares the common execution
// unspend's transaction; should stx not commit, unspend releases the slot
// as before.
func (x *execution) releaseIn(ctx context.Context, q *database.Queue, stx pgx.Tx) {
	s := x.spent
	if s == nil || !x.ran || x.e.keepLeases {
		return
	}
	_, _ = store.New(q).BudgetRelease(ctx, s.key, s.lease) // queued: its error is q.Send's
	database.AfterCommit(stx, func() { s.released = true })
}

// unspend frees the execution's slot however the execution ended, and
// gives its count back when its effect never ran, unless the transaction
// that recorded its end released it already (releaseIn). It runs past a
// cancelled caller: the execution is over either way. A failure (the
// database out of reach) leaves the slot owed (owedReleases).
func (x *execution) unspend(ctx context.Context) {
	s := x.spent
	if s == nil || s.released || x.e.keepLeases {
		return
	}
	ctx = context.WithoutCancel(ctx)
	o := owedRelease{tenant: x.caller.Tenant, correlation: x.correlation, spent: *s, ran: x.ran,
		lapses: time.Now().Add(max(x.e.leaseTTL(), ExecutionBound(x.e.cfg.Limits)))}
	if err := x.e.giveBack(ctx, o, false); err != nil {
		owed := x.e.owed.add(o)
		x.e.log.ErrorContext(ctx, "an execution's budget slot could not be released", "action", x.c.name,
			"correlation_id", x.correlation, "retried_once_it_answers", owed, "lease_expires_in", x.e.leaseTTL().String(), "error", err)
	}
}

// giveBack frees o's slot, and gives its count back when its effect never
// ran. Neither waits for a flush: a release a crash forgets, the lease's
// expiry makes anyway, and a refund it forgets leaves the budget one
// execution stricter until its window ends. A retry refunds only if its
// release found the lease held: the attempt before it may have committed
// with its answer lost, and a second refund would give back twice.
func (e *Engine) giveBack(ctx context.Context, o owedRelease, retry bool) error {
	return database.InTenantWithoutFlush(ctx, e.store, o.tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		st := store.New(tx)
		held, err := st.BudgetRelease(ctx, o.spent.key, o.spent.lease)
		if err != nil || o.ran || retry && !held {
			return err
		}
		return st.BudgetRefund(ctx, o.spent.key, o.spent.minute, o.spent.day)
	})
}

// owedReleases are the budget slots this engine's executions ended without
// giving back (unspend failed: the database was out of reach). Left held,
// such a slot reads to every poll of its approval as an execution running
// (executing) until its lease lapses, though none runs — after the poll
// that ran it answered outcome_unknown — and counts against
// max_concurrent meanwhile. So each is owed, and paid once the database
// answers: by the next poll of its approval on this replica, before that
// poll reads whether the execution runs (payOwed), and by the sweeper's
// next round (Sweep). A replica that stops forgets what it owed, and the
// leases lapse on their own, as before.
type owedReleases struct {
	mu sync.Mutex
	m  map[uuid.UUID]owedRelease // by lease
}

// owedRelease is one slot owed: its execution's tenant and correlation
// id, what it spent, whether its effect ran, and when its lease lapses
// at the latest, after which nothing is owed.
type owedRelease struct {
	tenant, correlation string
	spent               spent
	ran                 bool
	lapses              time.Time
}

// maxOwed bounds what one engine owes: past it, a slot waits for its
// lease to lapse.
const maxOwed = 4096

// add owes o, and says whether it is (false when maxOwed are owed).
func (r *owedReleases) add(o owedRelease) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxOwed {
		return false
	}
	if r.m == nil {
		r.m = map[uuid.UUID]owedRelease{}
	}
	r.m[o.spent.lease] = o
	return true
}

// take removes and returns the slots owed in tenant under correlation, or
// every slot owed where tenant is empty; those whose lease has lapsed are
// dropped, owed no more.
func (r *owedReleases) take(tenant, correlation string, now time.Time) []owedRelease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []owedRelease
	for lease, o := range r.m {
		switch {
		case !now.Before(o.lapses):
			delete(r.m, lease)
		case tenant == "" || o.tenant == tenant && o.correlation == correlation:
			delete(r.m, lease)
			due = append(due, o)
		}
	}
	return due
}

// payOwed gives back the slots this engine owes in tenant under
// correlation, or every slot it owes where tenant is empty, each in a
// transaction of its own. What fails stays owed; ctx's end stops it.
func (e *Engine) payOwed(ctx context.Context, tenant, correlation string) {
	for _, o := range e.owed.take(tenant, correlation, time.Now()) {
		if ctx.Err() != nil || e.giveBack(ctx, o, true) != nil {
			e.owed.add(o)
			continue
		}
		e.log.InfoContext(ctx, "an execution's budget slot was released once the database answered", "action", o.spent.key.Action,
			"correlation_id", o.correlation)
	}
}
