package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/tracing"
)

// TestTraceOfACall serves the example with an in-memory span recorder and
// follows one agent's call that executes an approved action: its trace is
// the HTTP request, the MCP tool call beneath it, the engine's check
// beneath that, the execution and its effect beneath the check, and the
// SQL statements beneath each, the action's UPDATE under the effect; the
// host log's line for the call carries the trace's id beside the
// correlation id its audit records carry.
func TestTraceOfACall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	logged := &logbuf.Buffer{}
	s := serve(t, nil, func(st *Settings) {
		st.Tracing = tracing.New(provider)
		st.Logger = slog.New(slog.NewJSONHandler(logged, nil))
	})
	agent := s.token("agent-7", false, "orders:read orders:write", "support")
	approver := s.token("ada", true, "", "approver")
	staged := s.call(t, agent, "cancel_order", map[string]any{"order_id": "o-1001", "reason": "customer asked"})
	id, _ := staged["approvalId"].(string)
	code, body := s.do(t, http.MethodGet, "/api/v1/approvals/"+id, approver, nil)
	var shown struct{ Digest string }
	if code != http.StatusOK || json.Unmarshal(body, &shown) != nil {
		t.Fatalf("review: %d %s", code, body)
	}
	if code, body := s.do(t, http.MethodPost, "/api/v1/approvals/"+id+"/decision", approver,
		map[string]string{"decision": "approve", "digest": shown.Digest}); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	if executed := s.call(t, agent, "check_approval", map[string]any{"approvalId": id}); executed["status"] != "executed" {
		t.Fatalf("execute: %v", executed)
	}
	s.stopHTTP() // every span of every request has ended
	// The host log's lines are written by a hook, on its own goroutine:
	// closing the hooks delivers what they hold and waits for it.
	s.rt.Hooks.Close()

	spans := rec.Ended()
	traceID, paths := traceOf(t, spans, "tools/call check_approval")
	call := "HTTP POST > tools/call check_approval > engine.check"
	for _, want := range []string{
		"HTTP POST",
		"HTTP POST > tools/call check_approval",
		call,
		call + " > engine.execute",
		call + " > engine.execute > engine.effect",
		call + " > engine.execute > engine.effect > SQL UPDATE",
		call + " > engine.execute > SQL ApprovalConsume",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("no span %q in the call's trace:\n%s", want, strings.Join(paths, "\n"))
		}
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "HTTP POST") {
			t.Errorf("a span outside the request's tree: %s", p)
		}
	}
	// The staging call's trace holds the stage phase and its statements.
	_, staging := traceOf(t, spans, "tools/call cancel_order")
	stage := "HTTP POST > tools/call cancel_order > engine.call > engine.stage"
	if !slices.Contains(staging, stage) || !slices.ContainsFunc(staging, func(p string) bool { return strings.HasPrefix(p, stage+" > SQL ") }) {
		t.Errorf("no stage phase with its statements in the staging call's trace:\n%s", strings.Join(staging, "\n"))
	}
	// The engine's span names the outcome and the correlation id.
	var correlation string
	for _, sp := range spans {
		if sp.Name() == "engine.check" && sp.SpanContext().TraceID() == traceID {
			attrs := map[attribute.Key]string{}
			for _, a := range sp.Attributes() {
				attrs[a.Key] = a.Value.AsString()
			}
			correlation = attrs["orangerail.correlation_id"]
			if attrs["orangerail.status"] != "ok" || correlation == "" || attrs["orangerail.approval_id"] != id {
				t.Errorf("engine.check's attributes: %v", attrs)
			}
		}
	}
	// The host log maps the call's correlation id to its trace.
	found := false
	for line := range strings.Lines(logged.String()) {
		var l struct {
			Msg, Tool, CorrelationID, TraceID string
		}
		if err := json.Unmarshal([]byte(line), &struct {
			Msg           *string `json:"msg"`
			Tool          *string `json:"tool"`
			CorrelationID *string `json:"correlation_id"`
			TraceID       *string `json:"trace_id"`
		}{&l.Msg, &l.Tool, &l.CorrelationID, &l.TraceID}); err != nil {
			t.Fatal(err)
		}
		if l.Msg == "tool call" && l.Tool == "check_approval" {
			found = true
			if l.TraceID != traceID.String() || l.CorrelationID != correlation {
				t.Errorf("the host log's line: %s; want trace_id %s, correlation_id %s", line, traceID, correlation)
			}
		}
	}
	if !found {
		t.Fatalf("no tool call line for check_approval in the host log:\n%s", logged.String())
	}
}

// TestTracingFromTheConfig: tracing.enabled with an otlp_endpoint exports
// a served call's spans to that collector over OTLP/HTTP, as protobuf.
func TestTracingFromTheConfig(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var names []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					names = append(names, sp.GetName())
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	s := serve(t, func(cfg *ontology.Config) {
		cfg.Tracing = ontology.Tracing{Enabled: true, OTLPEndpoint: collector.URL}
	}, nil)
	agent := s.token("agent-7", false, "orders:read", "support")
	if got := s.call(t, agent, "order_get", map[string]any{"id": "o-1001"}); got["rpc_error"] != nil || len(got) == 0 {
		t.Fatalf("order_get: %v", got)
	}
	s.stopHTTP()
	if err := s.rt.tracing.Shutdown(context.Background()); err != nil { // exports what is batched
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"HTTP POST", "tools/call order_get", "engine.get"} {
		if !slices.Contains(names, want) {
			t.Errorf("the collector received no %q span: %q", want, names)
		}
	}
}

// traceOf returns the trace of the span named name and its tree, each span
// as its ancestry of names ("HTTP POST > tools/call x > …"), sorted, once
// each.
func traceOf(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) (trace.TraceID, []string) {
	t.Helper()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
		if sp.Name() == name {
			root = sp
		}
	}
	if root == nil {
		t.Fatalf("no span %q among %d", name, len(spans))
	}
	traceID := root.SpanContext().TraceID()
	var paths []string
	for _, sp := range spans {
		if sp.SpanContext().TraceID() != traceID {
			continue
		}
		path := []string{sp.Name()}
		for p := sp.Parent(); p.IsValid(); {
			parent, ok := byID[p.SpanID()]
			if !ok {
				t.Fatalf("%s's parent %s did not end", sp.Name(), p.SpanID())
			}
			path = append([]string{parent.Name()}, path...)
			p = parent.Parent()
		}
		paths = append(paths, strings.Join(path, " > "))
	}
	slices.Sort(paths)
	return traceID, slices.Compact(paths)
}
