package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/orangerail/orangerail/internal/tracing"
)

// openTracing takes the settings' tracing, or opens the config's for a
// serving runtime (a CLI command's runtime traces nothing: it would wait
// at exit on a collector it may not reach); with tracing on, the host
// log's lines written inside a span carry its trace_id and span_id.
func (rt *Runtime) openTracing(ctx context.Context, s Settings) error {
	rt.tracing = s.Tracing
	if rt.tracing == nil && s.Serve {
		t, err := tracing.Open(ctx, rt.Config.Tracing, rt.Config.Service, s.Version)
		if err != nil {
			return err
		}
		rt.tracing, rt.ownTracing = t, true
	}
	if rt.tracing != nil {
		rt.log = slog.New(tracing.LogHandler(rt.log.Handler()))
		rt.log.Info("tracing", "otlp_endpoint", rt.Config.Tracing.OTLPEndpoint, "sample_ratio", rt.Config.Tracing.Ratio())
	}
	return nil
}

// closeTracing exports the spans still batched, when the runtime opened
// its tracing.
func (rt *Runtime) closeTracing() {
	if !rt.ownTracing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.tracing.Shutdown(ctx); err != nil {
		rt.log.Warn("the last spans were not exported", "error", err)
	}
}
