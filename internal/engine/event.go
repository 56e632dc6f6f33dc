package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
)

// Event is something that happened, as observers see it: one of the
// types below. Events are values of plain fields — a subscriber's copy is
// its own — and hold no arguments, rows, tokens or error texts.
type Event interface{ event() }

// ToolCalled is a tool call a transport answered: every tools/call, a
// call of a tool that does not exist or is hidden from the caller too.
type ToolCalled struct {
	Tool          string
	Outcome       Status
	Actor         string // the caller's subject
	Tenant        string
	Code          errcode.Code
	CorrelationID string
	// Refusal names the gate that refused the call; "" for a call no gate
	// refused (whatever its outcome).
	Refusal Refusal
	// Scope is the scope a RefusalScope found missing.
	Scope string
	// TraceID is the id of the trace the call was served in, in hex; ""
	// when it was not traced. The host log's line pairs it with the
	// correlation id the call's audit records carry.
	TraceID string
}

// Refusal names the gate that refused a tool call, from a closed set.
type Refusal string

// The refusals, in the order the gates run.
const (
	// RefusalUnknown: no tool of the name exists.
	RefusalUnknown Refusal = "unknown"
	// RefusalHidden: the tool exists, and the caller is outside its
	// audience; the caller was answered as for an unknown tool.
	RefusalHidden Refusal = "hidden"
	// RefusalScope: the caller's token lacks the tool's scope.
	RefusalScope Refusal = "scope"
	// RefusalPolicy: the action's policy refused the call — its
	// precondition, or a poller no longer allowed the action.
	RefusalPolicy Refusal = "policy"
	// RefusalBudget: the action's call budget refused the execution
	// (budget.go).
	RefusalBudget Refusal = "budget"
)

// RefusalOf classifies an outcome a tool call ended in by the gate that
// refused it; "" when none did.
func RefusalOf(o *Outcome) Refusal {
	switch {
	case o.Code == errcode.MCPToolUnknown:
		return RefusalHidden
	case o.Code == errcode.MCPScopeDenied:
		return RefusalScope
	case o.Status == StatusDenied, o.Status == StatusPreconditionFailed:
		return RefusalPolicy
	case o.Status == StatusRateLimited:
		return RefusalBudget
	}
	return ""
}

// Level is the host log level of the call's line: warn for a refusal
// (an agent probing tools or scopes shows up there), info otherwise —
// failures are logged in full, at error, where they happen.
func (ev ToolCalled) Level() slog.Level {
	if ev.Refusal != "" {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// Op names an engine call.
type Op string

// The engine calls a Gate reports.
const (
	OpGet    Op = "get"
	OpList   Op = "list"
	OpCall   Op = "call"
	OpCheck  Op = "check"
	OpDecide Op = "decide"
)

// Gate is the outcome of one engine call, whichever transport made it.
type Gate struct {
	Op Op
	// Subject is what the call was about: the object read, the action
	// called, or the approval checked or decided.
	Subject       string
	Status        Status
	Code          errcode.Code
	Diagnostic    Diagnostic
	Actor         string
	ActorKind     ActorKind
	Tenant        string
	CorrelationID string
	DevMode       bool
	// Duration is how long the call took, from its start until its
	// outcome was settled.
	Duration time.Duration
}

// Transition is a change of an approval's status.
type Transition string

// The transitions.
const (
	TransitionStaged   Transition = "staged"
	TransitionApproved Transition = "approved"
	TransitionRejected Transition = "rejected"
	TransitionExpired  Transition = "expired"
	TransitionConsumed Transition = "consumed"
)

// ApprovalChanged is an approval's transition, emitted once the
// transaction that made it committed.
type ApprovalChanged struct {
	ApprovalID uuid.UUID
	Transition Transition
	Action     string
	Tenant     string
	// Actor caused it: the requester, the decider, the poller that
	// consumed it, or orangerail, which expires approvals.
	Actor string
	// Age is how long the approval had been open when it was approved,
	// rejected or consumed: from its staging to this transition, by the
	// engine's clock. Zero for the other transitions.
	Age time.Duration
}

// AuditAppended is an audit record appended to a tenant's chain, emitted
// once the transaction that appended it committed; a sealer gives it its
// place in the chain soon after.
type AuditAppended struct {
	Tenant        string
	Phase         Phase
	Action        string
	CorrelationID string
	Actor         string
}

// EffectAttempted is an execution that reached its effect: the effect
// succeeded (StatusOK), failed (StatusFailed) or may have run
// (StatusOutcomeUnknown).
type EffectAttempted struct {
	Action        string
	Tenant        string
	CorrelationID string
	ApprovalID    uuid.UUID // zero for an action that needs no approval
	Outcome       Status
	Diagnostic    Diagnostic
}

// Allowance is what a rate refusal found spent.
type Allowance string

// The allowances.
const (
	AllowanceReads    Allowance = "reads"     // a caller's read calls this minute
	AllowanceWrites   Allowance = "writes"    // a caller's write calls this minute
	AllowanceNoToken  Allowance = "no_token"  // an address's requests without a token
	AllowanceBadToken Allowance = "bad_token" // an address's requests with a refused token
)

// RateRefused is a request the HTTP front refused because an allowance was
// spent. The request's RequestRefused follows.
type RateRefused struct {
	Allowance Allowance
	Code      errcode.Code
	// Tenant and Actor are the caller's, for a caller's allowance.
	Tenant string
	Actor  string
	// Address is the client's, for an address's allowance.
	Address string
}

// RequestRefused is a request the HTTP front answered with a refusal.
type RequestRefused struct {
	Path       string
	HTTPStatus int
	Code       errcode.Code
}

func (ToolCalled) event()      {}
func (Gate) event()            {}
func (ApprovalChanged) event() {}
func (AuditAppended) event()   {}
func (EffectAttempted) event() {}
func (RateRefused) event()     {}
func (RequestRefused) event()  {}

// HostLog returns the subscriber that writes the host log's event lines:
// one per tool call (tool, outcome, refusal, actor, tenant, code, scope,
// correlation_id, and trace_id when the call was traced; warn for a
// refusal, info otherwise) and one per refused HTTP request (code, status,
// path; warn). No event holds arguments, rows or tokens, so no line can.
func HostLog(log *slog.Logger) func(Event) {
	ctx := context.Background()
	return func(ev Event) {
		switch ev := ev.(type) {
		case ToolCalled:
			attrs := []any{"tool", ev.Tool, "outcome", string(ev.Outcome), "refusal", string(ev.Refusal),
				"actor", ev.Actor, "tenant", ev.Tenant, "code", string(ev.Code), "scope", ev.Scope, "correlation_id", ev.CorrelationID}
			if ev.TraceID != "" {
				attrs = append(attrs, "trace_id", ev.TraceID)
			}
			log.Log(ctx, ev.Level(), "tool call", attrs...)
		case RequestRefused:
			log.Warn("request refused", "code", string(ev.Code), "status", ev.HTTPStatus, "path", ev.Path)
		}
	}
}

type hooksKey struct{}

// observe returns ctx carrying the engine's hooks, for the events a call
// emits deep inside it.
func (e *Engine) observe(ctx context.Context) context.Context {
	if e.hooks == nil {
		return ctx
	}
	return context.WithValue(ctx, hooksKey{}, e.hooks)
}

// emitOnCommit emits ev to the call's hooks once tx commits, and never if
// it rolls back; at once when tx is nil, a change that has committed (a
// statement that was its own transaction).
func emitOnCommit(ctx context.Context, tx pgx.Tx, ev Event) {
	if h, _ := ctx.Value(hooksKey{}).(*Hooks); h != nil {
		database.AfterCommit(tx, func() { h.Emit(ev) })
	}
}

// approvalChanged emits, once tx commits, an approval's transition and,
// but for a consume, the audit record the approval statement appended
// with it (under the approval's id, as every such record is).
func approvalChanged(ctx context.Context, tx pgx.Tx, ev ApprovalChanged) {
	emitOnCommit(ctx, tx, ev)
	if phase := ev.Transition.phase(); phase != "" {
		emitOnCommit(ctx, tx, AuditAppended{Tenant: ev.Tenant, Phase: phase, Action: ev.Action,
			CorrelationID: ev.ApprovalID.String(), Actor: ev.Actor})
	}
}

// phase is the audit phase the statement making t records; none for a
// consume.
func (t Transition) phase() Phase {
	switch t {
	case TransitionStaged:
		return PhaseStaged
	case TransitionApproved:
		return PhaseApproved
	case TransitionRejected:
		return PhaseRejected
	case TransitionExpired:
		return PhaseExpired
	}
	return ""
}

// settle ends an engine call that began at start. A panic is contained:
// logged with its stack under a correlation id of its own, and answered
// internal_error, whose text a transport withholds. Then the call's span
// ends, and the outcome is emitted as a Gate.
func (e *Engine) settle(ctx context.Context, op Op, subject string, caller *Caller, start time.Time, out **Outcome) {
	if v := recover(); v != nil {
		correlation := uuid.NewString()
		e.log.ErrorContext(ctx, "engine panic", "op", string(op), "correlation_id", correlation,
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		*out = &Outcome{Status: StatusInternalError, CorrelationID: correlation, Err: fmt.Errorf("panic: %v", v)}
	}
	if o := *out; o != nil && !o.OK() && o.CorrelationID == "" {
		// Every call that did not succeed carries an id its caller can
		// quote and an operator finds in the host log's line of the call —
		// a refusal of nothing audited (an unknown row, an invalid input)
		// too.
		o.CorrelationID = uuid.NewString()
	}
	endCall(ctx, *out)
	if e.hooks == nil || *out == nil {
		return
	}
	o := *out
	g := Gate{Op: op, Subject: subject, Status: o.Status, Code: o.Code, Diagnostic: o.Diagnostic, CorrelationID: o.CorrelationID,
		Duration: time.Since(start)}
	if caller != nil { // a nil caller is a caller's bug, contained above
		a := caller.actor()
		g.Actor, g.ActorKind, g.Tenant, g.DevMode = a.Subject, a.Kind, caller.Tenant, caller.DevMode
	}
	e.hooks.Emit(g)
}

// attempted emits the effect attempt an execution ended in, if it reached
// its effect.
func (x *execution) attempted(ctx context.Context, out **Outcome) {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	if h == nil || *out == nil {
		return
	}
	switch o := *out; o.Status {
	case StatusOK, StatusFailed, StatusOutcomeUnknown:
		var approval uuid.UUID
		if x.approvalID != nil {
			approval = *x.approvalID
		}
		h.Emit(EffectAttempted{Action: x.c.name, Tenant: x.caller.Tenant, CorrelationID: x.correlation,
			ApprovalID: approval, Outcome: o.Status, Diagnostic: o.Diagnostic})
	}
}

type startedKey struct{}

// startWatch returns ctx carrying a flag that startedOnCommit sets once an
// execution_started record commits under it.
func startWatch(ctx context.Context) (context.Context, *bool) {
	started := new(bool)
	return context.WithValue(ctx, startedKey{}, started), started
}

// startedOnCommit sets the execution's flag, if it has one, once tx (which
// appended its execution_started record) commits.
func startedOnCommit(ctx context.Context, tx pgx.Tx) {
	if started, ok := ctx.Value(startedKey{}).(*bool); ok {
		database.AfterCommit(tx, func() { *started = true })
	}
}

// contain answers an execution that panicked, logging the panic with its
// stack under the execution's correlation id (the id its audit records
// carry). Once its execution_started record committed, the effect may
// have run: outcome_unknown, which tells the caller not to simply retry.
// Before, nothing ran: whatever the execution began rolled back with its
// transaction, and the answer is internal_error.
func (x *execution) contain(ctx context.Context, started *bool, out **Outcome) {
	v := recover()
	if v == nil {
		return
	}
	status := StatusInternalError
	if *started {
		status = StatusOutcomeUnknown
	}
	x.e.log.ErrorContext(ctx, "engine panic", "op", "execute "+x.c.name, "status", string(status), "correlation_id", x.correlation,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	*out = &Outcome{Status: status, CorrelationID: x.correlation, ApprovalID: x.approvalID, Err: fmt.Errorf("panic: %v", v)}
}
