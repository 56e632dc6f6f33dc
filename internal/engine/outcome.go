package engine

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// Status is the outcome of one engine call, from a closed set. Transports
// render each status in exactly one way.
type Status string

// The statuses.
const (
	StatusOK                 Status = "ok"                  // a read answered, or an action executed
	StatusApprovalPending    Status = "approval_pending"    // an action was staged and waits for a person
	StatusPending            Status = "pending"             // a polled approval is not decided yet
	StatusRejected           Status = "rejected"            // a person rejected the approval
	StatusExpired            Status = "expired"             // the approval lapsed before it executed
	StatusConsumed           Status = "consumed"            // the approval was used already: executed, or refused when it came to run (an idempotent re-poll)
	StatusExecuting          Status = "executing"           // the approval was consumed and its execution has no recorded end yet, its budget slot held: it runs
	StatusDryRun             Status = "dry_run"             // dry-run mode: recorded, not executed
	StatusNotImplemented     Status = "not_implemented"     // the action is declared but has no effect yet
	StatusDenied             Status = "denied"              // the caller may not do this
	StatusInvalidInput       Status = "invalid_input"       // the input does not satisfy the schema or the read's rules
	StatusNotFound           Status = "not_found"           // no such row, approval or tool for this caller
	StatusPreconditionFailed Status = "precondition_failed" // the action's where does not hold
	StatusFailed             Status = "failed"              // the datasource rejected the action
	StatusResolveError       Status = "resolve_error"       // the target or rows could not be read
	StatusAuditBlocked       Status = "audit_blocked"       // the audit record could not be written, so nothing ran
	StatusSignatureMismatch  Status = "signature_mismatch"  // the action changed since the approval was staged
	StatusInternalError      Status = "internal_error"      // an unexpected internal error
	StatusOutcomeUnknown     Status = "outcome_unknown"     // the effect may have run; its end could not be confirmed or recorded
	StatusRateLimited        Status = "rate_limited"        // a call budget refused the execution; nothing ran (Outcome.RateLimit says which)
)

// Statuses returns every status.
func Statuses() []Status {
	return []Status{StatusOK, StatusApprovalPending, StatusPending, StatusRejected, StatusExpired, StatusConsumed, StatusExecuting,
		StatusDryRun, StatusNotImplemented, StatusDenied, StatusInvalidInput, StatusNotFound, StatusPreconditionFailed,
		StatusFailed, StatusResolveError, StatusAuditBlocked, StatusSignatureMismatch, StatusInternalError, StatusOutcomeUnknown,
		StatusRateLimited}
}

// refusalCode is the code a refusal of status carries: X_FORBIDDEN for a
// policy's refusal (a precondition that does not hold); "" for the others,
// which name their own or none.
func (s Status) refusalCode() errcode.Code {
	if s == StatusPreconditionFailed {
		return errcode.Forbidden
	}
	return ""
}

// Diagnostic classifies a failure orangerail can positively identify, from
// a closed set. It is derived from SQLSTATE codes and Go error types, never
// from message text.
type Diagnostic string

// The diagnostics.
const (
	DiagnosticNone                    Diagnostic = ""
	DiagnosticDatasourceNotConfigured Diagnostic = "datasource_not_configured" // the URL is missing or the server refused us
	DiagnosticDatasourceUnavailable   Diagnostic = "datasource_unavailable"    // the server could not be reached
	DiagnosticDatasourceSchema        Diagnostic = ontology.DiagnosticSchemaMismatch
	DiagnosticDatasourcePermission    Diagnostic = "datasource_permission_denied"
	DiagnosticDatasourceConstraint    Diagnostic = "datasource_constraint_violation"
	DiagnosticDatasourceTimeout       Diagnostic = "datasource_timeout" // a lock wait or statement ran past limits.lock_timeout or statement_timeout
	// DiagnosticStoreTimeout: a wait in orangerail's own database ran past
	// the limits, so the call stopped before anything ran.
	DiagnosticStoreTimeout Diagnostic = "store_timeout"
	// DiagnosticStoreUnavailable: the connection to orangerail's own
	// database was lost under the call (a backend terminated, a failover,
	// a reset socket), so the call stopped and its open transaction rolled
	// back; a retry runs on a new connection.
	DiagnosticStoreUnavailable Diagnostic = "store_unavailable"
	// DiagnosticIdempotencyKeyBusy: another call under the same
	// idempotency key still runs, so this one ran nothing; a retry under
	// the key gets that call's outcome once it is filed.
	DiagnosticIdempotencyKeyBusy Diagnostic = "idempotency_key_busy"
	// The failures of an upstream call (execute: {http: …}).
	DiagnosticUpstreamRejected    Diagnostic = "upstream_rejected"    // answered with a status that is not success: the request was refused
	DiagnosticUpstreamUnavailable Diagnostic = "upstream_unavailable" // unreachable, or busy (429, 502, 503, 504) through every attempt
	DiagnosticUpstreamError       Diagnostic = "upstream_error"       // answered with a server error (500, 501 …) it does not ask to retry
	DiagnosticUpstreamTimeout     Diagnostic = "upstream_timeout"     // no whole answer within the timeout or the deadline
	DiagnosticUpstreamTooLarge    Diagnostic = "upstream_response_too_large"
	// DiagnosticUpstreamUnplaceable: the input holds a value the call's
	// path, query, headers or body cannot carry (an object bound into a
	// query, a SOAP list item holding whitespace), so nothing was sent: the action's input schema allows what its call
	// cannot place.
	DiagnosticUpstreamUnplaceable Diagnostic = "upstream_request_unplaceable"
)

// Diagnostics returns every diagnostic but DiagnosticNone.
func Diagnostics() []Diagnostic {
	return []Diagnostic{DiagnosticDatasourceNotConfigured, DiagnosticDatasourceUnavailable, DiagnosticDatasourceSchema,
		DiagnosticDatasourcePermission, DiagnosticDatasourceConstraint, DiagnosticDatasourceTimeout, DiagnosticStoreTimeout, DiagnosticStoreUnavailable,
		DiagnosticIdempotencyKeyBusy, DiagnosticUpstreamRejected, DiagnosticUpstreamUnavailable, DiagnosticUpstreamError, DiagnosticUpstreamTimeout, DiagnosticUpstreamTooLarge,
		DiagnosticUpstreamUnplaceable}
}

// Issue is one way an input fails its rules, at a JSON pointer path such as
// /filters/status/in/0.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Outcome is what one engine call produced. Every failure carries Err, the
// full underlying text (for operators; a transport answering an agent must
// withhold it), and CorrelationID, the key that finds it in the audit log
// and the host log.
type Outcome struct {
	Status        Status
	Data          json.RawMessage
	ApprovalID    *uuid.UUID
	ExpiresAt     *time.Time
	CorrelationID string
	Issues        []Issue
	Diagnostic    Diagnostic
	// Note is the decider's note on a rejected approval, for the agent.
	Note string
	// Code names a refusal from the closed set of errcode, when one fits.
	Code errcode.Code
	// Scope is the scope a refusal under X_MCP_SCOPE_DENIED found the
	// caller's token without.
	Scope string
	// RateLimit says which budget refused a StatusRateLimited call.
	RateLimit *RateLimit
	// Replayed marks the outcome a call's idempotency key filed, given
	// back to a retry under the key (which ran nothing).
	Replayed bool
	Err      error
}

// OK reports whether the outcome is a success of its kind.
func (o *Outcome) OK() bool {
	switch o.Status {
	case StatusOK, StatusApprovalPending, StatusPending, StatusConsumed, StatusExecuting, StatusDryRun:
		return true
	}
	return false
}

// classify returns the diagnostic of a datasource error: the store reads
// what Postgres said (store.InterpretError), and the diagnostic names it for
// the agent.
func classify(err error) Diagnostic {
	if c, ok := errors.AsType[*classifiedError](err); ok {
		return c.d
	}
	err = store.InterpretError(err)
	switch {
	case errors.Is(err, store.ErrLoginRefused):
		return DiagnosticDatasourceNotConfigured
	case errors.Is(err, store.ErrTimeout):
		return DiagnosticDatasourceTimeout
	case errors.Is(err, store.ErrUnavailable):
		return DiagnosticDatasourceUnavailable
	case errors.Is(err, store.ErrPermission):
		return DiagnosticDatasourcePermission
	case errors.Is(err, store.ErrSchemaMismatch):
		return DiagnosticDatasourceSchema
	case errors.Is(err, store.ErrConstraint):
		return DiagnosticDatasourceConstraint
	}
	return DiagnosticNone
}

// timedOut reports whether err is a wait that ran past its limit: a lock
// wait past lock_timeout (55P03), a statement cancelled at
// statement_timeout (57014), or a context whose deadline passed.
func timedOut(err error) bool {
	return errors.Is(store.InterpretError(err), store.ErrTimeout)
}
