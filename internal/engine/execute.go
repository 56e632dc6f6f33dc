package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/store"
)

// Check is an agent polling its approval. Pending, rejected, expired and
// consumed approvals report their status; an approved one executes, once,
// whoever polls first.
func (e *Engine) Check(ctx context.Context, caller *Caller, approvalID string) (out *Outcome) {
	ctx = e.observe(ctx)
	ctx = e.begin(ctx, OpCheck, approvalID)
	defer e.settle(ctx, OpCheck, approvalID, caller, time.Now(), &out)
	return e.check(ctx, caller, approvalID)
}

// check is Check, for a call that has entered the engine already.
func (e *Engine) check(ctx context.Context, caller *Caller, approvalID string) *Outcome {
	id, err := uuid.Parse(approvalID)
	if err != nil || !caller.Authenticated() {
		return &Outcome{Status: StatusNotFound, Code: errcode.ApprovalNotFound}
	}
	// The id as the approval's records spell it, whichever spelling the
	// poll used (upper case, braces, a urn:uuid: one): its execution's
	// records and budget lease are under it, and a later poll finds them.
	approvalID = id.String()
	approval, err := store.New(database.RowReader(e.store, caller.Tenant)).ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: caller.Tenant})
	if err == nil && caller.owns(approval) && e.lapsed(approval) {
		if e.beforeExpire != nil {
			e.beforeExpire()
		}
		read := approval
		err = database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
			// Expiring twice is expiring once.
			database.Repeatable(tx)
			approval, err = e.expireIfLapsed(ctx, tx, caller.Tenant, read)
			return err
		})
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &Outcome{Status: StatusNotFound, Code: errcode.ApprovalNotFound}
	case err != nil:
		return e.storeFailure(ctx, "check approval", approvalID, err)
	case !caller.owns(approval):
		// Another caller's approval is not this caller's to see.
		return &Outcome{Status: StatusNotFound, Code: errcode.ApprovalNotFound}
	}
	if out := approvalStatus(approval); out != nil {
		if out.Status == StatusConsumed {
			return e.consumed(ctx, caller, approvalID, out)
		}
		return out
	}
	if unserved, ok := e.cfg.UnservedAction(approval.Action); ok {
		// Staged before the environment changed: it fails closed, and
		// says so in the audit log, rather than run where the action is
		// not served.
		return e.refuse(ctx, caller, approval.Action, &id, errcode.ActionNotServed, "",
			fmt.Sprintf("the action is not served in the environment %q (it is served in %v), so its approved approval does not execute here",
				e.cfg.Environment, unserved.Environments))
	}
	a, ok := e.cfg.Actions[approval.Action]
	if !ok {
		// Not consumed, and recorded as a refusal under the approval, as
		// an unserved action's is: an auditor sees the poll and why.
		why := fmt.Sprintf("the action %q is no longer declared, so its approved approval does not execute", approval.Action)
		e.recordRefusal(ctx, caller, approval.Action, &id, approvalID, "", why)
		return e.failure(ctx, "check approval", &Outcome{Status: StatusSignatureMismatch, CorrelationID: approvalID, ApprovalID: &id,
			Err: errors.New(why)})
	}
	// The poller must still be allowed the action when it runs: a role
	// revoked, or a token without the action's scope, stops it; the
	// approval stays approved for a poller who is.
	if out := e.recheck(ctx, caller, approval.Action, &id); out != nil {
		return out
	}
	input, state := e.openInput(approval)
	if state != InputOpen {
		// Not consumed: the approval stays approved, and says why it does
		// not run (a key dropped from the ring too soon, or not yet given
		// to this replica), in the audit log too.
		why := fmt.Sprintf("the approval's sealed input is %s here, so it does not execute here", state)
		e.recordRefusal(ctx, caller, approval.Action, &id, approvalID, errcode.ApprovalInputUnreadable, why)
		return e.failure(ctx, "check approval", &Outcome{Status: StatusSignatureMismatch, Code: errcode.ApprovalInputUnreadable,
			CorrelationID: approvalID, ApprovalID: &id, Err: errors.New(why)})
	}
	c := &call{name: approval.Action, action: a, input: input, digest: approval.InputDigest, digestKey: keyring.KID(approval.InputKeyID),
		sealed: approval.InputSealed != nil}
	if c.canonical, err = jcs.Canonicalize(input); err != nil {
		return e.internal(ctx, "check approval", err)
	}
	if err := json.Unmarshal(c.canonical, &c.values); err != nil {
		return e.internal(ctx, "check approval", err)
	}
	if e.mode == ModeDryRun {
		// Never consume: a live engine sharing this database completes it.
		return e.auditRefusal(ctx, caller, c, &id, approvalID, PhaseDryRun, StatusDryRun, nil)
	}
	out := e.execute(ctx, caller, c, approval, approvalID)
	if out.Status == StatusConsumed {
		// Another poll consumed the approval while this one was on its
		// way to: answered as a poll after it is. This poll's own slot
		// is given back by now (unspend), or owed, and consumed gives it
		// back before it reads whether an execution runs.
		return e.consumed(ctx, caller, approvalID, out)
	}
	return out
}

// consumed answers a poll of a consumed approval, out: consumed once its
// execution's end is recorded (or it was refused when it came to run);
// executing while it has no recorded end and an execution of it holds its
// budget slot — it runs, or its replica stopped within the lease's time,
// after which the slot lapses; outcome_unknown while it has no recorded
// end and no slot is held: it may have acted, and the agent is told so,
// not what the poll that ran it said (that answer never arrived, or was
// outcome_unknown itself).
func (e *Engine) consumed(ctx context.Context, caller *Caller, approvalID string, out *Outcome) *Outcome {
	// A slot this replica could not give back is no execution running.
	e.payOwed(ctx, caller.Tenant, approvalID)
	p, err := store.New(database.RowReader(e.store, caller.Tenant)).AuditCorrelationProgress(ctx, caller.Tenant, approvalID)
	switch {
	case err != nil:
		return e.storeFailure(ctx, "check approval", approvalID, err)
	case !unfinished(p.Phases):
	case p.Leased:
		out.Status = StatusExecuting
	default:
		out.Status, out.Err = StatusOutcomeUnknown, errUnfinished
	}
	return out
}

// errUnfinished is why a poll of a consumed approval answers
// outcome_unknown: an operator's reading, never an agent's.
var errUnfinished = errors.New("the consumed approval's execution has no recorded end and holds no budget slot: its server stopped mid-call, or could not record its end; audit verify lists it unfinished until an operator settles it")

// approvalStatus is the outcome of polling an approval that will not
// execute now; nil for an approved one.
func approvalStatus(a *store.Approval) *Outcome {
	out := &Outcome{ApprovalID: &a.ID, CorrelationID: a.ID.String()}
	switch a.Status {
	case store.ApprovalPending:
		out.Status, out.ExpiresAt = StatusPending, &a.ExpiresAt
	case store.ApprovalRejected:
		out.Status = StatusRejected
		if a.DecisionNote != nil {
			out.Note = *a.DecisionNote
		}
	case store.ApprovalExpired:
		out.Status = StatusExpired
	case store.ApprovalConsumed:
		out.Status = StatusConsumed
	default:
		return nil
	}
	return out
}

// execute runs a call's effect under the audit trail. With approval set,
// it first consumes the approval, exactly once, and re-checks the action's
// definition and the stored input against today's declaration. The target
// is re-read under a row lock and the precondition re-evaluated, so what
// was approved still holds when it runs.
func (e *Engine) execute(ctx context.Context, caller *Caller, c *call, approval *store.Approval, correlation string) (out *Outcome) {
	var approvalID *uuid.UUID
	if approval != nil {
		approvalID = &approval.ID
	}
	ctx, span := e.phase(ctx, "execute", c.name)
	defer func() { endPhase(span, out) }()
	if e.beforeExecute != nil {
		e.beforeExecute(ctx)
	}
	x := &execution{e: e, caller: caller, c: c, approval: approval, approvalID: approvalID, correlation: correlation, effect: e.effects[c.name]}
	defer x.attempted(ctx, &out)
	ctx, started := startWatch(ctx)
	defer x.contain(ctx, started, &out)
	// The budget is spent here, before the approval is consumed, in a
	// transaction of its own (budget.go): a refusal leaves the approval
	// approved for a later poll, and the slot is released, and the count
	// given back if the effect never ran, however the execution ends —
	// a panic included, since this deferred call runs as it unwinds.
	if x.effect != nil {
		limited, err := x.spend(ctx)
		switch {
		case err != nil:
			return e.storeFailure(ctx, "spend the budget of "+c.name, correlation, err)
		case limited != nil:
			return x.rateLimited(ctx, limited)
		}
		defer x.unspend(ctx)
	}
	// An action without an effect is refused by the consume's definition
	// check before anything would run; it takes the together path, the
	// one that keeps nothing of a refusal but its record.
	if e.sameDB && (x.effect == nil || x.effect.Transactional()) {
		return x.together(ctx)
	}
	return x.apart(ctx)
}

// execution is one run of an action's effect.
type execution struct {
	e           *Engine
	caller      *Caller
	c           *call
	approval    *store.Approval
	approvalID  *uuid.UUID
	correlation string
	effect      Effect // nil for an action declared without one
	out         *Outcome
	// spent is the budget this execution spent; ran is set once its
	// effect was called, after which the count is not given back.
	spent *spent
	ran   bool
}

func (x *execution) record(phase Phase) *Record {
	return x.e.record(x.caller, x.c, phase, x.correlation, x.approvalID)
}

// refuse records a refusal after the consume and sets the outcome.
func (x *execution) refuse(ctx context.Context, stx pgx.Tx, phase Phase, status Status, cause error) error {
	cause = x.e.maskError(x.c, cause)
	rec := x.record(phase)
	rec.Error = cause.Error()
	x.out = &Outcome{Status: status, Code: status.refusalCode(), CorrelationID: x.correlation, ApprovalID: x.approvalID, Err: cause}
	return appendAudit(ctx, stx, rec)
}

// consume takes the approval, exactly once, and re-checks it. It reports
// false when the caller must stop: someone else consumed it, it lapsed, or
// a re-check refused it (recorded).
func (x *execution) consume(ctx context.Context, stx pgx.Tx) (bool, error) {
	if x.approval == nil {
		return true, nil
	}
	st := store.New(stx)
	consumed, decided, err := st.ApprovalConsume(ctx, x.caller.Tenant, x.approval.ID)
	if errors.Is(err, store.ErrNotFound) {
		now, err := st.ApprovalGet(ctx, &store.ApprovalGetParams{ID: x.approval.ID, TenantID: x.caller.Tenant})
		if err != nil {
			return false, err
		}
		if x.out = approvalStatus(now); x.out == nil { // approved but lapsed this instant
			x.out = &Outcome{Status: StatusExpired, ApprovalID: x.approvalID, CorrelationID: x.correlation}
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	approvalChanged(ctx, stx, ApprovalChanged{ApprovalID: x.approval.ID, Transition: TransitionConsumed, Action: x.c.name,
		Tenant: x.caller.Tenant, Actor: x.caller.actor().Subject, Age: x.e.now().Sub(x.approval.CreatedAt)})
	if x.e.afterConsume != nil {
		x.e.afterConsume()
	}
	if !bytes.Equal(consumed.DefinitionHash, x.e.definitions[x.c.name]) {
		return false, x.refuse(ctx, stx, PhaseSignatureMismatch, StatusSignatureMismatch,
			errors.New("the action's declaration changed after the approval was staged"))
	}
	// The digest an approver approved must be the stored input's, and the
	// chain must hold the decision (the consume read whether it does): a
	// row written around the engine, or an input changed after staging,
	// does not execute.
	// It is checked under the key that made it, which the approval names:
	// an approval staged before a rotation executes after it.
	want, known := x.e.inputDigestBy(keyring.KID(consumed.InputKeyID), x.caller.Tenant, x.c.name, x.c.canonical)
	if !known {
		return false, x.refuse(ctx, stx, PhaseSignatureMismatch, StatusSignatureMismatch,
			fmt.Errorf("the key %q that made the approval's digest is no longer in the key ring", consumed.InputKeyID))
	}
	if !hmac.Equal(consumed.InputDigest, want) {
		return false, x.refuse(ctx, stx, PhaseSignatureMismatch, StatusSignatureMismatch,
			errors.New("the stored input is not the input whose digest was approved"))
	}
	if !decided {
		return false, x.refuse(ctx, stx, PhaseSignatureMismatch, StatusSignatureMismatch,
			errors.New("the audit chain holds no decision approving this approval"))
	}
	if issues := validateInput(x.c.action.InputSchema(), x.c.canonical); issues != nil {
		x.out = &Outcome{Status: StatusInvalidInput, Issues: issues, CorrelationID: x.correlation, ApprovalID: x.approvalID}
		rec := x.record(PhaseInvalidInput)
		rec.Error = "the approved input no longer satisfies the action's input schema"
		return false, appendAudit(ctx, stx, rec)
	}
	return true, nil
}

// lockTarget re-reads the target under a row lock in the executing
// transaction and re-evaluates the precondition. It reports false, having
// recorded why, when the action must not run. A target an upstream
// answers is read again instead: no lock holds it until the effect runs,
// so a change in between is not seen (the TOCTOU window README states).
func (x *execution) lockTarget(ctx context.Context, dtx, stx pgx.Tx) (json.RawMessage, bool, error) {
	target, err := x.e.resolveTarget(ctx, dtx, x.caller.Tenant, x.c.action, x.c, true)
	if err != nil {
		return nil, false, &resolveError{err}
	}
	if x.c.action.Target != nil && target == nil {
		return nil, false, x.refuse(ctx, stx, PhasePreconditionFailed, StatusPreconditionFailed, errTargetGone)
	}
	if ok, err := x.e.where(x.c.action, target, x.c.values, x.caller); !ok {
		return nil, false, x.refuse(ctx, stx, PhasePreconditionFailed, StatusPreconditionFailed, err)
	}
	return target, true, nil
}

// resolveError marks a failure to read the target while executing.
type resolveError struct{ err error }

func (r *resolveError) Error() string { return r.err.Error() }
func (r *resolveError) Unwrap() error { return r.err }

// started is the execution_started record, with the target's prior state
// masked by redact_prior, or withheld whole when only the input is masked:
// the input's masks say the action handles secrets, but not where the row
// keeps them.
func (x *execution) started(target json.RawMessage) *Record {
	rec := x.record(PhaseExecutionStarted)
	if !x.c.action.WithholdsPrior() {
		rec.Prior = mask(target, x.c.action.PriorMasks())
	}
	return rec
}

// together runs consume, checks, effect and audit in one transaction of
// the service database, which is also the datasource: all of it commits or
// none of it does.
func (x *execution) together(ctx context.Context) *Outcome {
	finished := false // the effect ran and its end was recorded, all uncommitted
	err := database.InTenant(ctx, x.e.store, x.caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if ok, err := x.consume(ctx, tx); !ok || err != nil {
			return err
		}
		target, ok, err := x.lockTarget(ctx, tx, tx)
		if !ok || err != nil {
			return err
		}
		// The effect runs in a savepoint, so that its failure is recorded
		// in the same transaction instead of aborting it, set with the
		// start's record in one round trip.
		started := x.started(target)
		var q database.Queue
		if err := AppendAudit(ctx, &q, started); err != nil {
			return &auditAppendError{err} // the record could not be encoded
		}
		savepoint := q.Savepoint(tx)
		if err := sendRecorded(ctx, &q, tx, 0); err != nil {
			return err
		}
		appended(ctx, tx, started)
		result, runErr := x.run(ctx, savepoint, target)
		if runErr != nil {
			if err := savepoint.Rollback(ctx); err != nil {
				return err
			}
			return x.finish(ctx, tx, EffectResult{}, runErr, false)
		}
		// A good effect's savepoint is not released: the COMMIT releases
		// it with the rest, and a RELEASE would cost a round trip. Should
		// the COMMIT fail, InTenant asks Postgres whether it took effect
		// (finish reads the transaction's id for it): a commit it
		// confirms answers as any other.
		if err := x.finish(ctx, tx, result, nil, true); err != nil {
			return err
		}
		finished = true
		return nil
	})
	switch {
	case finished && errors.Is(err, database.ErrNotCommitted):
		// Only the COMMIT failed, and Postgres confirms nothing of it took
		// effect: a failure as any before it, the approval still approved.
		return x.outcome(ctx, err)
	case finished && err != nil:
		// Only the COMMIT failed, and Postgres could not say whether it
		// took effect.
		return x.unknown(ctx, err)
	}
	return x.outcome(ctx, err)
}

// unknown reports an effect that may have run but whose end could not be
// confirmed or recorded. A caller told this must not simply retry.
func (x *execution) unknown(ctx context.Context, err error) *Outcome {
	return x.e.failure(ctx, "execute "+x.c.name, &Outcome{Status: StatusOutcomeUnknown, CorrelationID: x.correlation, ApprovalID: x.approvalID, Err: err})
}

// apart runs the effect outside the service database's transaction: in
// the datasource's own transaction, the one holding the target's row lock,
// or, for an effect that is not transactional, beside it. The consume and
// execution_started commit to the service database before the effect, and
// the finishing record after it, so an execution cut short in between is
// visible to `audit verify` as unfinished.
func (x *execution) apart(ctx context.Context) *Outcome {
	var (
		started bool
		result  EffectResult
		runErr  error
	)
	err := database.InTenant(ctx, x.e.datasource, x.caller.Tenant, pgx.TxOptions{}, func(dtx pgx.Tx) error {
		var (
			target json.RawMessage
			// locking is when the target's lock was asked for: dtx's
			// last statement began then.
			locking time.Time
		)
		err := database.InTenant(ctx, x.e.store, x.caller.Tenant, pgx.TxOptions{}, func(stx pgx.Tx) error {
			if ok, err := x.consume(ctx, stx); !ok || err != nil {
				return err
			}
			locking = time.Now()
			locked, ok, err := x.lockTarget(ctx, dtx, stx)
			if !ok || err != nil {
				return err
			}
			target, started = locked, true
			// The start's record is sent with a read of the transaction's
			// id: should the COMMIT's answer be lost, InTenant asks
			// Postgres whether it took effect, and a start that committed
			// goes on to its effect instead of being answered as a
			// failure while its record says it began.
			rec := x.started(target)
			var q database.Queue
			if err := appendConfirmed(ctx, &q, stx, rec); err != nil {
				return &auditAppendError{err} // the record could not be encoded
			}
			x.extendIn(ctx, &q)
			if err := sendRecorded(ctx, &q, stx, 0); err != nil {
				return err
			}
			appended(ctx, stx, rec)
			return nil
		})
		if err != nil {
			// The record rolled back with its transaction; or, its
			// COMMIT's answer lost and Postgres unable to say, it may
			// have committed, and stays unfinished. Either way no effect
			// ran, and the poll answers the store's failure.
			started = false
			return err
		}
		if !started {
			return nil
		}
		if !x.effect.Transactional() && !x.lockOutlasts(dtx, locking) {
			runErr = errLockLapsing
			return runErr
		}
		result, runErr = x.run(ctx, dtx, target)
		return runErr // a failed effect rolls back; a good one commits
	})
	if !started {
		return x.outcome(ctx, err)
	}
	if IsOutcomeUnknown(runErr) {
		// The effect may have taken place: execution_started stays
		// without an end, which `audit verify` reports, until an operator
		// finds out.
		return x.unknown(ctx, runErr)
	}
	if runErr == nil && err != nil && x.effect.Transactional() {
		// The effect ran but its COMMIT failed: it may or may not have
		// taken effect. execution_started stays without an end, which
		// `audit verify` reports.
		return x.unknown(ctx, err)
	}
	// An effect outside the datasource's transaction (an upstream call)
	// took effect, or failed, whatever became of that transaction: it
	// only held the target's row while the effect ran, and a COMMIT that
	// fails there (its connection ended by a restart while the call
	// waited) undoes nothing the effect did. Its end is recorded.
	// The effect's end is recorded even if the caller has gone: the
	// effect is done (or undone) either way.
	finishCtx := context.WithoutCancel(ctx)
	if x.e.beforeFinish != nil {
		x.e.beforeFinish()
	}
	err = database.InTenant(finishCtx, x.e.store, x.caller.Tenant, pgx.TxOptions{}, func(stx pgx.Tx) error {
		return x.finish(finishCtx, stx, result, runErr, false)
	})
	if err != nil && runErr == nil {
		// Committed, but unrecorded: never "nothing ran".
		return x.unknown(ctx, err)
	}
	return x.outcome(ctx, err)
}

// errLockLapsing is the end of an execution whose effect did not run
// because the transaction holding its target's row lock had too little of
// its time left (its start's COMMIT took most of it: an answer lost, and
// asked about): the effect would have run as Postgres let the lock go.
// The start's slack is limits.lock_timeout plus limits.statement_timeout:
// the bound is lock_timeout + 2 × statement_timeout + 5s, the effect's
// deadline statement_timeout + 5s.
var errLockLapsing = Classified(DiagnosticDatasourceTimeout,
	errors.New("the target's row lock would not have held for the effect's whole deadline: the effect did not run"))

// lockOutlasts reports whether dtx, the transaction holding the target's
// row lock, holds it for as long as an effect beside it may take: dtx is
// idle while it runs, and Postgres ends a bounded transaction idle for
// its limit (database.IdleLimit) after its last statement, which began at
// locking. (A transactional effect runs its statements in dtx, which
// keeps it awake; its connection's deadline bounds it.)
func (x *execution) lockOutlasts(dtx pgx.Tx, locking time.Time) bool {
	limit, ok := database.IdleLimit(dtx)
	return !ok || time.Now().Add(x.e.effectTimeout).Before(locking.Add(limit))
}

// run runs the action's effect once, under the engine's deadline for
// effects. tx is the transaction holding the target's row lock; a
// transactional effect does its work in it.
func (x *execution) run(ctx context.Context, tx pgx.Tx, target json.RawMessage) (_ EffectResult, err error) {
	if x.effect == nil {
		return EffectResult{}, fmt.Errorf("the action %q has no effect", x.c.name)
	}
	ctx, cancel := context.WithTimeout(ctx, x.e.effectTimeout)
	defer cancel()
	ctx, span := x.e.phase(ctx, "effect", x.c.name)
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, "the effect failed") // its words stay in the host log
		}
		span.End()
	}()
	span.SetAttributes(attribute.Bool("orangerail.transactional", x.effect.Transactional()))
	x.ran = true
	call := &EffectCall{Tenant: x.caller.Tenant, Action: x.c.name, CorrelationID: x.correlation, Input: x.c.canonical, Target: target}
	if x.effect.Transactional() {
		call.Tx = tx
	} else {
		call.RecordAttempt = x.attempt
	}
	result, err := x.effect.Run(ctx, call)
	if classify(err) == DiagnosticUpstreamUnplaceable {
		// Nothing was sent (the input could not be placed in the
		// request): the budget, which counts calls of the effect, gets
		// the count back, as for an execution that never reached it.
		x.ran = false
	}
	return result, err
}

// attempt appends an effect_attempt record, in a transaction of its own:
// the attempt was made, whether or not the caller is still waiting, so it
// is recorded past a cancelled context.
func (x *execution) attempt(ctx context.Context, a EffectAttempt) error {
	ctx = context.WithoutCancel(ctx)
	rec := x.record(PhaseEffectAttempt)
	rec.Input, rec.InputDigest, rec.Attempt = nil, "", &a // execution_started holds the input
	return database.InTenant(ctx, x.e.store, x.caller.Tenant, pgx.TxOptions{}, func(stx pgx.Tx) error {
		return appendAudit(ctx, stx, rec)
	})
}

// finish records how the effect ended, frees its budget slot, and sets
// the outcome. The release and the record, and with confirm the
// transaction's id that ConfirmCommit reads, are sent in one round trip.
func (x *execution) finish(ctx context.Context, stx pgx.Tx, result EffectResult, runErr error, confirm bool) error {
	var rec *Record
	if runErr != nil {
		runErr = x.e.maskError(x.c, runErr)
		rec = x.record(PhaseExecutionFailed)
		rec.Error, rec.Diagnostic = runErr.Error(), string(classify(runErr))
		x.out = &Outcome{Status: StatusFailed, CorrelationID: x.correlation, ApprovalID: x.approvalID, Diagnostic: classify(runErr), Err: runErr}
	} else {
		rec = x.record(PhaseExecutionSucceeded)
		rec.Result = mask(result.Data, x.c.action.ResultMasks())
		x.out = &Outcome{Status: StatusOK, Data: result.Data, CorrelationID: x.correlation, ApprovalID: x.approvalID}
	}
	var q database.Queue
	x.releaseIn(ctx, &q, stx)
	recorded := q.Len()
	var err error
	if confirm {
		err = appendConfirmed(ctx, &q, stx, rec)
	} else {
		err = AppendAudit(ctx, &q, rec)
	}
	if err != nil {
		return &auditAppendError{err} // the record could not be encoded
	}
	if err := sendRecorded(ctx, &q, stx, recorded); err != nil {
		return err
	}
	appended(ctx, stx, rec)
	return nil
}

// sendRecorded sends q on tx, q's statement at place recorded being an
// audit record's append. The first failure is classified by its place: a
// statement before the record is the store's, the record's an audit
// failure, one after it (a savepoint, the transaction's id) as it came.
func sendRecorded(ctx context.Context, q *database.Queue, tx pgx.Tx, recorded int) error {
	switch failed, err := q.Send(ctx, tx); {
	case err == nil:
		return nil
	case failed == recorded:
		return &auditAppendError{classifyAuditError(store.InterpretError(err))}
	case failed < recorded:
		return store.InterpretError(err)
	default:
		return err
	}
}

// outcome turns the execution's end into its outcome, logging failures.
func (x *execution) outcome(ctx context.Context, err error) *Outcome {
	op := "execute " + x.c.name
	var resolve *resolveError
	switch {
	case errors.As(err, &resolve):
		// Nothing was consumed or run: the transaction rolled back.
		return x.e.auditFailure(ctx, x.caller, x.c, x.approvalID, x.correlation, PhaseResolveError, StatusResolveError, resolve.err)
	case err != nil:
		return x.e.storeFailure(ctx, op, x.correlation, err)
	case x.out.Err != nil && !routine(x.out.Err):
		return x.e.failure(ctx, op, x.out)
	}
	return x.out
}
