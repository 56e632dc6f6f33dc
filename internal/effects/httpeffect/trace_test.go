package httpeffect_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestAttemptsCarryTheTrace: each attempt of a traced call is a client
// span of the call's trace, and the upstream receives it as its parent
// (traceparent); a call of an engine without a tracer sends none.
func TestAttemptsCarryTheTrace(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, statuses(503, 201))
	h := newHarness(t, up.URL, defaultExecute, "{roles: [support]}")
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	traced, err := engine.New(engine.Config{Ontology: h.cfg, Store: h.runtime, Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet, Tracer: provider.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := provider.Tracer("test").Start(context.Background(), "test call")
	if out := traced.Call(ctx, agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`)); out.Status != engine.StatusOK {
		t.Fatalf("status %s (%v)", out.Status, out.Err)
	}
	root.End()
	if out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-2"}`)); out.Status != engine.StatusOK {
		t.Fatalf("status %s (%v)", out.Status, out.Err)
	}
	reqs := up.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	traceID := root.SpanContext().TraceID().String()
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "HTTP POST" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, r := range reqs[:2] {
		parent := r.header.Get("traceparent")
		want := "00-" + traceID + "-" + attempts[i].SpanContext().SpanID().String() + "-01"
		if parent != want || attempts[i].SpanContext().TraceID().String() != traceID {
			t.Errorf("attempt %d: traceparent %q, want %q", i+1, parent, want)
		}
	}
	if got := attempts[0].Status().Description; !strings.Contains(got, string(engine.DiagnosticUpstreamUnavailable)) {
		t.Errorf("the 503 attempt's span status %q", got)
	}
	if parent := reqs[2].header.Get("traceparent"); parent != "" {
		t.Errorf("an untraced call sent traceparent %q", parent)
	}
}
