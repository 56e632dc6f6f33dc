package ontology

import (
	"errors"
	"slices"
	"testing"
)

// TestObservabilityConfig: metrics.listen and tracing load as written,
// default to off, and every bad value is refused at its path.
func TestObservabilityConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Listen != "" || cfg.Tracing.Enabled || cfg.Tracing.Ratio() != 1 {
		t.Fatalf("defaults: metrics %+v, tracing %+v (ratio %v), want both off and ratio 1", cfg.Metrics, cfg.Tracing, cfg.Tracing.Ratio())
	}
	cfg, err = Parse([]byte(base + "metrics: {listen: \"127.0.0.1:9464\"}\ntracing: {enabled: true, otlp_endpoint: \"http://otel:4318\", sample_ratio: 0.25}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Listen != "127.0.0.1:9464" || !cfg.Tracing.Enabled || cfg.Tracing.OTLPEndpoint != "http://otel:4318" || cfg.Tracing.Ratio() != 0.25 {
		t.Fatalf("read metrics %+v, tracing %+v", cfg.Metrics, cfg.Tracing)
	}
	for _, tt := range []struct {
		name, extra string
		paths       []string
	}{
		{"listen without a port", "metrics: {listen: \"127.0.0.1\"}\n", []string{"metrics.listen"}},
		{"listen with a port that is no number", "metrics: {listen: \"127.0.0.1:metrics\"}\n", []string{"metrics.listen"}},
		{"listen on http.listen's address", "metrics: {listen: \"127.0.0.1:8080\"}\n", []string{"metrics.listen"}},
		{"listen on http.listen's port, every address", "http: {listen: \"127.0.0.1:9000\"}\nmetrics: {listen: \":9000\"}\n", []string{"metrics.listen"}},
		{"listen empty", "metrics: {listen: \"\"}\n", []string{"metrics.listen"}},
		{"an endpoint that is no URL", "tracing: {enabled: true, otlp_endpoint: \"otel:4318\"}\n", []string{"tracing.otlp_endpoint"}},
		{"an endpoint over grpc", "tracing: {enabled: true, otlp_endpoint: \"grpc://otel:4317\"}\n", []string{"tracing.otlp_endpoint"}},
		{"an endpoint with a user", "tracing: {enabled: true, otlp_endpoint: \"https://u:p@otel:4318\"}\n", []string{"tracing.otlp_endpoint"}},
		{"an endpoint while tracing is off", "tracing: {otlp_endpoint: \"http://otel:4318\"}\n", []string{"tracing.otlp_endpoint"}},
		{"a ratio past 1", "tracing: {enabled: true, sample_ratio: 2}\n", []string{"tracing.sample_ratio"}},
		{"a ratio while tracing is off", "tracing: {sample_ratio: 0.5}\n", []string{"tracing.sample_ratio"}},
		{"an unknown tracing key", "tracing: {enabled: true, exporter: zipkin}\n", []string{"tracing.exporter"}},
	} {
		_, err := Parse([]byte(base + tt.extra))
		var problems Problems
		if !errors.As(err, &problems) {
			t.Fatalf("%s: Parse = %v, want Problems", tt.name, err)
		}
		var paths []string
		for _, p := range problems {
			paths = append(paths, p.Path)
		}
		if !slices.Equal(slices.Compact(paths), tt.paths) {
			t.Errorf("%s: problem paths %q, want %q\n%v", tt.name, paths, tt.paths, err)
		}
	}
}
