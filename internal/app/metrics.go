package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/metrics"
)

// openMetrics builds the runtime's metrics and subscribes them to its
// hooks when the config sets metrics.listen; without it, nothing is
// collected.
func (rt *Runtime) openMetrics(version string) {
	if rt.Config.Metrics.Listen == "" {
		return
	}
	store := rt.Store
	rt.Metrics = metrics.New(metrics.Options{Version: version, Logger: rt.log,
		Pools:   map[string]*pgxpool.Pool{"store": rt.Store, "datasource": rt.Datasource},
		SealLag: func(ctx context.Context) (time.Duration, error) { return engine.SealLag(ctx, store) },
		Pending: func(ctx context.Context) (int, time.Duration, error) { return engine.PendingApprovals(ctx, store) }})
	rt.Metrics.Subscribe(rt.Hooks)
}

// StartMetrics serves the metrics at /metrics on ln, or when ln is nil on
// the config's metrics.listen, until the returned stop is called (which
// shuts the listener down and waits). Without metrics.listen it serves
// nothing, closes ln, and stop does nothing. The listener is bound before
// it returns: a busy address fails here, not later.
func (rt *Runtime) StartMetrics(ctx context.Context, ln net.Listener) (stop func(), err error) {
	if rt.Metrics == nil {
		if ln != nil {
			_ = ln.Close()
		}
		return func() {}, nil
	}
	if ln == nil {
		var lc net.ListenConfig
		if ln, err = lc.Listen(ctx, "tcp", rt.Config.Metrics.Listen); err != nil {
			return nil, errcode.New(errcode.ListenFailed, fmt.Sprintf("metrics.listen %s: %v", rt.Config.Metrics.Listen, err), err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metrics.Path, rt.Metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.log.Error("the metrics listener stopped", "error", err)
		}
	}()
	rt.log.Info("serving metrics", "address", ln.Addr().String(), "path", metrics.Path)
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-done
	}, nil
}
