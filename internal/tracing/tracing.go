// Package tracing owns orangerail's OpenTelemetry traces: the tracer
// provider and its OTLP/HTTP exporter (tracing.enabled), the HTTP front's
// server span, the spans of the SQL statements run under a traced call,
// and the trace id on host log lines written under one. Spans nest as
// HTTP request → MCP tool call → engine call → engine phase (stage,
// execute, effect) → SQL statement. Off (the default), every tracer is a
// no-op and nothing is exported.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orangerail/orangerail/internal/ontology"
)

// Name is the instrumentation scope of every orangerail span.
const Name = "github.com/orangerail/orangerail"

// Tracing is one runtime's tracer provider. A nil *Tracing is off: its
// tracers are no-ops. It is safe for concurrent use.
type Tracing struct {
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// Open builds the tracer provider the config asks for: off unless
// tracing.enabled, else exporting over OTLP/HTTP to tracing.otlp_endpoint
// (or where the standard OTEL_EXPORTER_OTLP_* variables say), batched,
// sampling tracing.sample_ratio of the traces that start here and
// following a caller's sampled traceparent. service and version name the
// resource (service.name, service.version).
func Open(ctx context.Context, cfg ontology.Tracing, service, version string) (*Tracing, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if cfg.OTLPEndpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.OTLPEndpoint, "/")+"/v1/traces"))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("orangerail"),
		semconv.ServiceVersion(version), semconv.ServiceInstanceID(service))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))))
	return &Tracing{provider: provider, shutdown: provider.Shutdown}, nil
}

// New wraps a tracer provider of the caller's (a test's in-memory
// recorder); its shutdown is the caller's.
func New(provider trace.TracerProvider) *Tracing { return &Tracing{provider: provider} }

// Provider is the tracer provider; a no-op one when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Tracer is orangerail's tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.Provider().Tracer(Name) }

// Shutdown exports the spans still batched, within ctx, and stops the
// exporter. It is safe on a nil or caller-owned Tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// propagator reads and writes W3C traceparent and tracestate headers; the
// package never touches otel's global propagator.
func propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Handler wraps the HTTP front: each request is a server span, the child
// of the caller's traceparent when it sends one — but a request untraced
// says to leave alone (the probes, which would fill a trace store with
// one span every few seconds per replica). The span's name is the method
// alone (paths are any string a client sends); its attributes hold the
// path and the status answered. Off, it returns next.
func (t *Tracing) Handler(next http.Handler, untraced func(*http.Request) bool) http.Handler {
	if t == nil {
		return next
	}
	tracer := t.Tracer()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if untraced != nil && untraced(r) {
			next.ServeHTTP(w, r)
			return
		}
		ctx := propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "HTTP "+method(r.Method), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method(r.Method)), semconv.URLPath(r.URL.Path)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// method is r's method if it is a standard one, else _OTHER (as the
// semantic conventions say), so span names stay a closed set.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush and
// deadlines (Streamable HTTP streams its answers).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes a streamed answer.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TraceID is the id of the trace ctx's span is in, in hex; "" when none
// is (tracing is off, or the call is not sampled).
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// Fail marks span failed with a closed-set description (a status or a
// diagnostic), never an error's text, which may hold a datasource's
// words.
func Fail(span trace.Span, description string) {
	span.SetStatus(codes.Error, description)
}

// Attr is a string attribute.
func Attr(key, value string) attribute.KeyValue { return attribute.String(key, value) }
