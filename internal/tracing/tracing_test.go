package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/tracing"
)

// collector is an OTLP/HTTP trace receiver: it decodes each export
// request's protobuf body and keeps the spans' names and the resources'
// service names.
type collector struct {
	mu       sync.Mutex
	spans    []string
	services []string
	paths    []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP protobuf export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, r.URL.Path)
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				c.services = append(c.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, s.GetName())
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestExportsOverOTLP: with tracing on and an endpoint, the spans reach an
// OTLP/HTTP collector at /v1/traces under it, as protobuf, named for
// orangerail; off, nothing is made.
func TestExportsOverOTLP(t *testing.T) {
	t.Parallel()
	c := &collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	tr, err := tracing.Open(ctx, ontology.Tracing{Enabled: true, OTLPEndpoint: srv.URL}, "acme-orders", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Tracer().Start(ctx, "tools/call cancel_order")
	span.End()
	if err := tr.Shutdown(ctx); err != nil { // exports what is batched
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spans) != 1 || c.spans[0] != "tools/call cancel_order" || len(c.services) != 1 || c.services[0] != "orangerail" ||
		len(c.paths) != 1 || c.paths[0] != "/v1/traces" {
		t.Fatalf("collected spans %q of services %q at %q", c.spans, c.services, c.paths)
	}

	off, err := tracing.Open(ctx, ontology.Tracing{}, "acme-orders", "v1.2.3")
	if err != nil || off != nil {
		t.Fatalf("tracing off: %v, %v", off, err)
	}
	if _, span := off.Tracer().Start(ctx, "x"); span.SpanContext().IsValid() || off.SQL("store") != nil {
		t.Fatal("tracing off made a span")
	}
}

// TestHandlerFollowsTraceparent: the front's span is the child of the
// caller's traceparent, named by its method, and the log lines written
// inside it carry its trace and span ids; a request the filter leaves
// untraced makes no span.
func TestHandlerFollowsTraceparent(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tr := tracing.New(provider)
	var logged bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&logged, nil)))
	h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "inside")
		w.WriteHeader(http.StatusTeapot)
	}), func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil)) // untraced
	logged.Reset()
	req := httptest.NewRequest("BREW", "/mcp/anything", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name() != "HTTP _OTHER" || s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		s.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("span %q in trace %s under %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	var line struct{ TraceID, SpanID string }
	if err := json.Unmarshal(logged.Bytes(), &struct {
		TraceID *string `json:"trace_id"`
		SpanID  *string `json:"span_id"`
	}{&line.TraceID, &line.SpanID}); err != nil || line.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || line.SpanID != s.SpanContext().SpanID().String() {
		t.Fatalf("log line %s: %v", logged.String(), err)
	}
	var status int64
	for _, a := range s.Attributes() {
		if a.Key == "http.response.status_code" {
			status = a.Value.AsInt64()
		}
	}
	if status != http.StatusTeapot {
		t.Fatalf("status attribute %d", status)
	}
}

func TestQueryName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: ApprovalConsume :one\nUPDATE orangerail.approvals SET": "ApprovalConsume",
		"select 1":                  "SELECT",
		"  UPDATE orders SET x = 1": "UPDATE",
		"-- a comment\nwith x as (select 1) select * from x": "WITH",
		"":                  "statement",
		"(select 1)":        "statement",
		"SELECT'x'":         "statement",
		"-- only a comment": "statement",
		"set local role x;": "SET",
	} {
		if got := tracing.QueryName(sql); got != want {
			t.Errorf("QueryName(%q) = %q, want %q", sql, got, want)
		}
	}
}
