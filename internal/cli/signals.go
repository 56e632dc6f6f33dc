package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// NotifyContext returns a context that ends at the process's first
// SIGINT or SIGTERM: the command asked to stop stops (serve drains, a
// verify stops reading, a file read waiting on a pipe gives up). The
// signals after it act as they do by default again, so a second ends a
// command that does not stop, or stops too slowly for its operator.
// stop releases the signals, as signal.NotifyContext's does.
func NotifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
