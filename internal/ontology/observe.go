package ontology

import (
	"net"
	"net/url"
	"strconv"
)

// Metrics configures the Prometheus metrics listener.
type Metrics struct {
	// Listen is the address the metrics are served on, at /metrics, apart
	// from the HTTP front: no token, no rate limit, so keep it on a
	// network only the scraper reaches. Empty (the default): no metrics are
	// collected or served.
	Listen string `yaml:"listen"`
}

// Tracing configures OpenTelemetry traces.
type Tracing struct {
	// Enabled turns tracing on. Defaults to false: no span is made or
	// exported.
	Enabled bool `yaml:"enabled"`
	// OTLPEndpoint is the OTLP/HTTP collector's URL (such as
	// http://otel-collector:4318) the spans are sent to, at /v1/traces
	// under it. Empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT environment variables, else
	// https://localhost:4318.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the fraction of traces kept, 0 to 1, decided at each
	// trace's root (a caller's sampled traceparent is honoured). Defaults
	// to 1: every trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// Ratio is the sample ratio in force: SampleRatio, or 1 when unset.
func (t Tracing) Ratio() float64 {
	if t.SampleRatio == nil {
		return 1
	}
	return *t.SampleRatio
}

// validateObservability checks metrics and tracing.
func (c *Config) validateObservability(add func(path, format string, args ...any)) {
	if l := c.Metrics.Listen; l != "" {
		if host, port, err := net.SplitHostPort(l); err != nil {
			add("metrics.listen", "%q is not host:port, such as 127.0.0.1:9090 or :9090", l)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			add("metrics.listen", "%q has no port number", l)
		} else if l == c.HTTP.Listen || (n != 0 && sameListen(host, port, c.HTTP.Listen)) {
			add("metrics.listen", "%q is http.listen's address: metrics need a listener of their own", l)
		}
	}
	t := c.Tracing
	if e := t.OTLPEndpoint; e != "" {
		u, err := url.Parse(e)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add("tracing.otlp_endpoint", "%s is not an http or https URL such as http://otel-collector:4318", ShownURL(e))
		case u.User != nil:
			add("tracing.otlp_endpoint", "%s holds a user: put credentials in OTEL_EXPORTER_OTLP_HEADERS, never in the config", ShownURL(e))
		}
		if !t.Enabled {
			add("tracing.otlp_endpoint", "is set while tracing.enabled is false: set tracing.enabled: true, or remove it")
		}
	}
	switch r := t.SampleRatio; {
	case r != nil && (*r < 0 || *r > 1):
		add("tracing.sample_ratio", "is %v; it must be from 0 to 1", *r)
	case r != nil && !t.Enabled:
		add("tracing.sample_ratio", "is set while tracing.enabled is false: set tracing.enabled: true, or remove it")
	}
}

// sameListen reports whether host:port names the same port as other on
// an address both would bind.
func sameListen(host, port, other string) bool {
	h, p, err := net.SplitHostPort(other)
	if err != nil || p != port {
		return false
	}
	return h == host || h == "" || host == "" || h == "0.0.0.0" || host == "0.0.0.0" || h == "::" || host == "::"
}
