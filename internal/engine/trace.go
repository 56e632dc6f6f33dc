package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span names and attributes: each engine call is a span
// (engine.call, engine.check …) holding its phases (engine.stage,
// engine.execute, engine.effect), whose statements the database's tracer
// adds beneath. Attributes hold names and ids, never inputs, rows or
// error texts.
const (
	attrOp          = "orangerail.op"
	attrSubject     = "orangerail.subject"
	attrAction      = "orangerail.action"
	attrStatus      = "orangerail.status"
	attrCode        = "orangerail.code"
	attrDiagnostic  = "orangerail.diagnostic"
	attrCorrelation = "orangerail.correlation_id"
	attrApproval    = "orangerail.approval_id"
)

// callSpanKey marks the context of an engine call's own span, which settle
// ends.
type callSpanKey struct{}

func tracerOr(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return t
}

// begin starts the span of an engine call; settle ends it.
func (e *Engine) begin(ctx context.Context, op Op, subject string) context.Context {
	ctx, span := e.tracer.Start(ctx, "engine."+string(op), trace.WithAttributes(
		attribute.String(attrOp, string(op)), attribute.String(attrSubject, subject)))
	return context.WithValue(ctx, callSpanKey{}, span)
}

// endCall ends the span begin started, with the call's outcome.
func endCall(ctx context.Context, out *Outcome) {
	span, ok := ctx.Value(callSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if out != nil {
		outcomeAttributes(span, out)
	}
	span.End()
}

// outcomeAttributes records an outcome on span: failed when the outcome
// is a failure of orangerail or of the effect (a refusal is an answer, not
// an error).
func outcomeAttributes(span trace.Span, out *Outcome) {
	span.SetAttributes(attribute.String(attrStatus, string(out.Status)), attribute.String(attrCorrelation, out.CorrelationID))
	if out.Code != "" {
		span.SetAttributes(attribute.String(attrCode, string(out.Code)))
	}
	if out.Diagnostic != "" {
		span.SetAttributes(attribute.String(attrDiagnostic, string(out.Diagnostic)))
	}
	if out.ApprovalID != nil {
		span.SetAttributes(attribute.String(attrApproval, out.ApprovalID.String()))
	}
	switch out.Status {
	case StatusFailed, StatusInternalError, StatusOutcomeUnknown, StatusAuditBlocked, StatusResolveError:
		span.SetStatus(codes.Error, string(out.Status))
	}
}

// phase starts the span of a phase of a call; the caller ends it, with
// its outcome when it has one.
func (e *Engine) phase(ctx context.Context, name, action string) (context.Context, trace.Span) {
	return e.tracer.Start(ctx, "engine."+name, trace.WithAttributes(attribute.String(attrAction, action)))
}

// endPhase ends a phase's span with the outcome it reached.
func endPhase(span trace.Span, out *Outcome) {
	if out != nil {
		outcomeAttributes(span, out)
	}
	span.End()
}
