package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/ontology"
)

// Effect is what an action does when it executes: a statement on the
// datasource today (internal/effects/sqleffect), an upstream call later.
// The engine owns everything around it — the consume, the re-checks, the
// target's row lock, the audit records and where each commits — and calls
// Run once per execution, between execution_started and its end. An Effect
// is made once per action (EffectFactory) and must be safe for concurrent
// use: every execution of the action shares it.
type Effect interface {
	// Transactional reports whether the effect's work is done in the
	// datasource transaction that holds the target's row lock
	// (EffectCall.Tx), and so commits or rolls back with it. Where that
	// transaction can be the service database's own — the datasource is
	// the service database — the engine runs consume, audit records and a
	// transactional effect as one transaction: all of it commits or none
	// does. Otherwise, and always for an effect that is not transactional,
	// execution_started commits before Run, and the end is recorded after.
	Transactional() bool
	// Run performs the effect, once. ctx carries the deadline the engine
	// gives every effect, limits.statement_timeout and a grace (see
	// effectGrace); an effect may set a shorter one of its own. An error means the effect did not take
	// place, unless it wraps an OutcomeUnknown error: then it may have (a
	// request that timed out after it was sent), and the engine reports
	// outcome_unknown, leaving execution_started without an end for an
	// operator to settle (`audit verify` lists it). A transactional
	// effect's work is its transaction's, so its outcome is always known.
	Run(ctx context.Context, call *EffectCall) (EffectResult, error)
}

// ResultDescriber is an Effect that says what its result's Data holds, as
// a JSON Schema: an action's tool advertises it (ActionResultSchema).
type ResultDescriber interface {
	ResultSchema() map[string]any
}

// ActionResultSchema returns the JSON Schema of an action's result as its
// effect describes it; a JSON object of any shape for an effect that does
// not (ResultDescriber), and nil for an action with no effect, which never
// returns one.
func (e *Engine) ActionResultSchema(action string) map[string]any {
	effect, ok := e.effects[action]
	if !ok {
		return nil
	}
	if d, ok := effect.(ResultDescriber); ok {
		return d.ResultSchema()
	}
	return map[string]any{"type": "object"}
}

// EffectCall is what one execution of an effect runs with. Nothing in it
// may be kept after Run returns.
type EffectCall struct {
	// Tenant is the caller's tenant; Tx, when set, is scoped to it.
	Tenant string
	// Action is the action's name.
	Action string
	// CorrelationID identifies the execution in the audit log: an
	// upstream that takes an idempotency key can be given it.
	CorrelationID string
	// Input is the call's input, canonical JSON (RFC 8785): the bytes an
	// approver approved, checked again against the input schema.
	Input json.RawMessage
	// Target is the action's target row as locked and re-checked, as JSON;
	// nil for an action without a target.
	Target json.RawMessage
	// Tx is the datasource transaction holding the target's row lock,
	// scoped to Tenant and bounded by the limits; set for a Transactional
	// effect only. Run must not commit or roll it back.
	Tx pgx.Tx
	// RecordAttempt appends an effect_attempt record for one attempt of an
	// effect that is not transactional, committed in the tenant's chain
	// before it returns; set by the engine for such an effect only. An
	// effect that makes several attempts records each as it ends, and
	// makes no further attempt when recording fails: the audit log must
	// hold every attempt made.
	RecordAttempt func(ctx context.Context, a EffectAttempt) error
}

// EffectAttempt is one attempt an effect made: what an effect_attempt
// record keeps. It never holds a header, a body, a URL or a credential.
type EffectAttempt struct {
	// Number counts the invocation's attempts from 1.
	Number int
	// Status is the response's status code; 0 when none arrived.
	Status int
	// Failure classifies an attempt that failed; "" for one answered
	// with a status the effect reads as its end.
	Failure AttemptFailure
	// Sent reports whether the request was written in full: after that,
	// an attempt without an answer may have taken effect.
	Sent bool
	// Duration is how long the attempt took.
	Duration time.Duration
	// IdempotencyKey is the key the request carried, "" for none: what
	// names the call in the upstream's own log. It is a random value the
	// effect made for the invocation, no credential and no input.
	IdempotencyKey string
}

// AttemptFailure classifies a failed attempt, from a closed set.
type AttemptFailure string

// The attempt failures.
const (
	// AttemptConnect: no connection, or the request could not be written
	// in full (refused, reset, no route, TLS): nothing was received.
	AttemptConnect AttemptFailure = "connect_failed"
	// AttemptDropped: the request was written and the connection ended
	// before a whole answer.
	AttemptDropped AttemptFailure = "connection_dropped"
	// AttemptTimeout: the attempt's timeout, or the deadline, passed
	// before a whole answer.
	AttemptTimeout AttemptFailure = "timeout"
	// AttemptStatus: answered with a status the effect does not take as
	// success, or with an answer stating its own failure (a SOAP fault).
	AttemptStatus AttemptFailure = "status"
	// AttemptTooLarge: the answer's body was longer than its cap.
	AttemptTooLarge AttemptFailure = "body_too_large"
	// AttemptUnreadable: answered with success, in a body the effect's
	// kind cannot read (a SOAP envelope that does not parse).
	AttemptUnreadable AttemptFailure = "body_unreadable"
)

// AttemptFailures returns every attempt failure.
func AttemptFailures() []AttemptFailure {
	return []AttemptFailure{AttemptConnect, AttemptDropped, AttemptTimeout, AttemptStatus, AttemptTooLarge, AttemptUnreadable}
}

// Classified wraps err, an effect's failure, with the diagnostic that
// names it for the agent (classify reads it before the datasource's).
func Classified(d Diagnostic, err error) error { return &classifiedError{d: d, err: err} }

type classifiedError struct {
	d   Diagnostic
	err error
}

func (c *classifiedError) Error() string { return c.err.Error() }
func (c *classifiedError) Unwrap() error { return c.err }

// EffectResult is what an effect that took place produced.
type EffectResult struct {
	// Data is the effect's result as a JSON object: recorded in the
	// execution_succeeded audit record and returned to the caller.
	Data json.RawMessage
	// RowsAffected is how many rows or records the effect changed, as far
	// as it can tell.
	RowsAffected int64
}

// EffectFactory makes the effect of one action, from its declaration,
// once, when the engine is built. It returns an error for a declaration
// it cannot run, which refuses to build the engine.
type EffectFactory func(name string, a *ontology.Action) (Effect, error)

// TargetReader reads the target of an action declared target: {upstream:
// …, get: …}: what an upstream answers, outside the datasource. The
// engine calls it before staging and again after the consume, and
// evaluates the precondition on what it returns each time, as it does on
// a row — but nothing holds an upstream's state still between the second
// read and the effect the way a row lock does. It is made once per action
// (TargetReaderFactory) and must be safe for concurrent use.
type TargetReader interface {
	// ReadTarget returns the target as a JSON object, or nil when the
	// upstream has none (404). call carries the tenant, action and input;
	// it has no Tx, no Target and no RecordAttempt. An error is a read
	// that failed, classified (Classified) where it can be.
	ReadTarget(ctx context.Context, call *EffectCall) (json.RawMessage, error)
}

// TargetReaderFactory makes the target reader of one action, once, when
// the engine is built; an error refuses to build the engine.
type TargetReaderFactory func(name string, a *ontology.Action) (TargetReader, error)

// targetReaders makes the reader of each action whose target is read from
// an upstream.
func targetReaders(actions map[string]*ontology.Action, factory TargetReaderFactory) (map[*ontology.Action]TargetReader, error) {
	made := map[*ontology.Action]TargetReader{}
	for name, a := range actions {
		if !a.Target.Read() {
			continue
		}
		if factory == nil {
			return nil, fmt.Errorf("engine: actions.%s.target: the target is read from an upstream, and no reader is configured (Config.TargetReaders)", name)
		}
		r, err := factory(name, a)
		if err != nil {
			return nil, fmt.Errorf("engine: actions.%s.target: %w", name, err)
		}
		made[a] = r
	}
	return made, nil
}

// OutcomeUnknown wraps err, an effect's failure after which whether the
// effect took place cannot be known.
func OutcomeUnknown(err error) error { return &outcomeUnknownError{err} }

// IsOutcomeUnknown reports whether err is, or wraps, an OutcomeUnknown
// error.
func IsOutcomeUnknown(err error) bool {
	var u *outcomeUnknownError
	return errors.As(err, &u)
}

type outcomeUnknownError struct{ err error }

func (u *outcomeUnknownError) Error() string {
	return "the effect may have taken place: " + u.err.Error()
}
func (u *outcomeUnknownError) Unwrap() error { return u.err }

// effectGrace is how long past the statement timeout an effect's context
// lasts. The database cancels a statement at statement_timeout and the
// transaction lives on to record the failure; the context's deadline is a
// backstop for a server that cannot answer at all, so it must not fire
// first: an expired context closes the connection, and the transaction
// with it.
const effectGrace = 5 * time.Second

// effects makes each action's effect with the factory of its kind.
func effects(actions map[string]*ontology.Action, factories map[ontology.ExecuteKind]EffectFactory) (map[string]Effect, error) {
	made := make(map[string]Effect, len(actions))
	for name, a := range actions {
		kind := a.Execute.Kind()
		if kind == ontology.ExecuteNotImplemented {
			continue
		}
		factory, ok := factories[kind]
		if !ok {
			return nil, fmt.Errorf("engine: actions.%s: no effect is configured for execute kind %q (Config.Effects)", name, kind)
		}
		effect, err := factory(name, a)
		if err != nil {
			return nil, fmt.Errorf("engine: actions.%s.execute.%s: %w", name, kind, err)
		}
		made[name] = effect
	}
	return made, nil
}
