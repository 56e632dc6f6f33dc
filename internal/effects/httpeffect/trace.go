package httpeffect

import (
	"context"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of an attempt's span: orangerail's.
const scope = "github.com/orangerail/orangerail"

// startAttemptSpan starts the client span of one attempt, beneath the
// effect's span, from the tracer provider of the span ctx carries (a
// no-op one when the call is not traced). It names the upstream's host,
// never the request's path or query, which hold the input.
func startAttemptSpan(ctx context.Context, method, rawURL string, n int) (context.Context, trace.Span) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(scope)
	host := ""
	if u, err := url.Parse(rawURL); err == nil {
		host = u.Host
	}
	return tracer.Start(ctx, "HTTP "+method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", method), attribute.String("server.address", host),
		attribute.Int("orangerail.attempt", n)))
}

// endAttemptSpan ends it with the status answered, failed with the
// attempt's diagnostic when it failed.
func endAttemptSpan(span trace.Span, a *attempted) {
	if a.record.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", a.record.Status))
	}
	if a.diagnostic != "" {
		span.SetStatus(codes.Error, string(a.diagnostic))
		span.SetAttributes(attribute.String("orangerail.diagnostic", string(a.diagnostic)))
	}
	span.End()
}
