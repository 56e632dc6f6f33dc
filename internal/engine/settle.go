package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// SettledOutcome is what an operator found an execution left unfinished
// did: an upstream write that was sent and never answered, an execution
// whose server went away mid-call (outcome_unknown).
type SettledOutcome string

// The outcomes an operator can find.
const (
	SettledSucceeded SettledOutcome = "succeeded" // the effect took place
	SettledFailed    SettledOutcome = "failed"    // it did not
)

// SettledOutcomes returns every SettledOutcome.
func SettledOutcomes() []SettledOutcome { return []SettledOutcome{SettledSucceeded, SettledFailed} }

// SettledOutcomeMember is the member of an execution_settled record's
// result that holds the outcome; its reason is under
// BreakGlassReasonMember, where every operator's record keeps why.
const SettledOutcomeMember = "settled_outcome"

// Settled is an execution an operator settled: its execution_settled
// record.
type Settled struct {
	Tenant        string
	CorrelationID string
	Action        string
	ApprovalID    *uuid.UUID
	Outcome       SettledOutcome
	Operator      string
	At            time.Time
}

// StoreLimits are the limits every transaction a deployment under limits
// runs on its own database is bounded by: the engine's store, and an
// operator's connection that acts as the deployment (database.Bound).
func StoreLimits(limits ontology.Limits) database.Limits {
	lock, statement := limits.Timeouts()
	return database.Limits{LockTimeout: lock, StatementTimeout: statement}
}

// ExecutionBound is how long after its execution_started record an
// execution under limits can still record its end: its effect's deadline
// (statement_timeout and a grace), then the end's own transaction,
// bounded by lock_timeout and statement_timeout. Past it, an execution
// with no end never records one.
func ExecutionBound(limits ontology.Limits) time.Duration {
	l := StoreLimits(limits)
	return l.StatementTimeout + effectGrace + l.LockTimeout + l.StatementTimeout
}

// SettleExecution records how an execution left unfinished ended, as an
// operator found out (the upstream's own records, its support): an
// execution_settled record in the tenant's chain, after the
// execution_started it finishes, with the outcome and the reason. Both
// verifiers then count the execution finished; both list the record among
// the operator's, with its reason, as they list a break-glass decision.
//
// owner is a connection logged in as the owner of the orangerail schema,
// or a superuser, acting as that login, as for a break-glass decision —
// bounded by the deployment's StoreLimits (database.Bound), so that
// another operator's settle or a stuck session is waited on lock_timeout,
// not forever:
// anything else is refused X_BREAK_GLASS_REFUSED, as is an empty reason
// (and the database refuses an operator's record from any other login,
// ORA06). An execution that is not unfinished in the tenant — none of that
// correlation id, or one finished or settled already — is refused
// X_EXECUTION_NOT_UNFINISHED; two operators settling one at once settle it
// once. Settling runs nothing and changes no approval.
//
// bound is ExecutionBound of the deployment's limits: an execution that
// started more recently may still be running — its effect waiting on an
// upstream, its end about to be recorded — and is refused
// X_EXECUTION_MAY_BE_RUNNING, so that no settle ever stands beside the
// end the execution records itself.
func SettleExecution(ctx context.Context, owner database.TxBeginner, tenant, correlationID string, outcome SettledOutcome, reason string, bound time.Duration, now time.Time) (*Settled, error) {
	switch {
	case !slices.Contains(SettledOutcomes(), outcome):
		return nil, errcode.New(errcode.Usage, fmt.Sprintf("the outcome %q is not one of %q", outcome, SettledOutcomes()), nil)
	case strings.TrimSpace(reason) == "":
		return nil, errcode.New(errcode.BreakGlassRefused, "settling an execution needs a reason: the record keeps what the operator found, and how", nil)
	case correlationID == "":
		return nil, errcode.New(errcode.ExecutionNotUnfinished, "name the execution by its correlation id (audit verify lists each unfinished one's)", nil)
	}
	var settled *Settled
	// READ COMMITTED whatever the database's default: the read of the
	// execution after the settle lock's wait must see the end, or the
	// other settle, that committed during it (migration 00063), where a
	// snapshot taken before the wait (REPEATABLE READ) would not, and
	// the lock's row would fail the settle to serialize (00074), uncoded.
	err := database.InTenant(ctx, owner, tenant, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		st := store.New(tx)
		login, err := st.SessionOperatorGet(ctx)
		if err != nil {
			return err
		}
		if !login.OwnRights || !login.Owner {
			return errcode.New(errcode.BreakGlassRefused, fmt.Sprintf("the login %q is not the owner of the orangerail schema acting as itself", login.Login), nil)
		}
		u, err := st.AuditUnfinishedExecutionGet(ctx, tenant, correlationID)
		if errors.Is(err, store.ErrNotFound) {
			return errcode.New(errcode.ExecutionNotUnfinished, fmt.Sprintf("no execution of correlation id %q is unfinished in tenant %q", correlationID, tenant), nil)
		}
		if err != nil {
			return err
		}
		if u.Age < bound {
			return errcode.New(errcode.ExecutionMayBeRunning, fmt.Sprintf("execution %s started %s ago, and an execution here can record its end up to %s after it starts; settle it once that has passed",
				correlationID, u.Age.Round(time.Second), bound), nil)
		}
		action, approval := u.Action, u.ApprovalID
		result, err := json.Marshal(map[string]string{BreakGlassReasonMember: reason, SettledOutcomeMember: string(outcome)})
		if err != nil {
			return err
		}
		rec := &Record{Tenant: tenant, At: now.UTC(), CorrelationID: correlationID, Phase: PhaseExecutionSettled, Action: action,
			Actor: Actor{Kind: ActorOperator, Subject: login.Login}, ApprovalID: approval, Result: result}
		if err := appendAudit(ctx, tx, rec); err != nil {
			return err
		}
		settled = &Settled{Tenant: tenant, CorrelationID: correlationID, Action: action, ApprovalID: approval, Outcome: outcome,
			Operator: login.Login, At: rec.At}
		return nil
	})
	if errors.Is(store.InterpretError(err), store.ErrPermission) {
		// A login of neither role: not even the tenant's scope is its.
		return nil, errcode.New(errcode.BreakGlassRefused, "this login may not act in the orangerail schema: settle as its owner, with the URL `orangerail migrate` runs with", err)
	}
	if err != nil {
		return nil, err
	}
	return settled, nil
}
