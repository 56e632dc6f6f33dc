// Package periodic runs a replica's background rounds — sealing, signing
// checkpoints, sweeping lapsed approvals, delivering webhooks, flushing
// rate counts — on an interval until stopped, and says when they fail
// without flooding the log: a round every 50ms that fails through a
// database outage would otherwise write twenty lines a second.
package periodic

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// QuietDefault is how often a run of failures is reported after its first
// failure, when Config.Quiet is zero.
const QuietDefault = 30 * time.Second

// Config says when rounds run and who hears of them.
type Config struct {
	// Interval is the time between rounds. Required, positive.
	Interval time.Duration
	// Immediately runs the first round at Start instead of an interval
	// later.
	Immediately bool
	// Kick, when set, runs a round early each time it receives.
	Kick <-chan struct{}
	// Log hears of failed rounds, as What ("audit sealing"): the first
	// failure of a run of them at once, then at most one line every Quiet
	// (QuietDefault when zero) with how many failed since, and one line
	// when a round succeeds again. Nil: failures are not logged.
	Log   *slog.Logger
	What  string
	Quiet time.Duration
	// OnError, when set, hears of every failed round.
	OnError func(error)
}

// Loop is rounds running. Stop ends them.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start runs round as c says until Stop. A round's error after Stop was
// called is not a failure: the round was cut short.
func Start(c Config, round func(ctx context.Context) error) *Loop {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // G118: Stop calls it
	l := &Loop{cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, c, round)
	return l
}

// Stop ends the rounds and waits for the one running. It may be called
// more than once.
func (l *Loop) Stop() {
	l.once.Do(l.cancel)
	<-l.done
}

func (l *Loop) run(ctx context.Context, c Config, round func(ctx context.Context) error) {
	defer close(l.done)
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	r := reporter{Config: c}
	if c.Immediately {
		r.report(ctx, round(ctx))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.Kick:
		}
		r.report(ctx, round(ctx))
	}
}

// reporter tells of a run of failed rounds: its first failure, then one
// line a Quiet period at most, then its end.
type reporter struct {
	Config
	failing    bool
	failed     int // failures not yet reported
	total      int // failures of the run
	lastReport time.Time
}

func (r *reporter) report(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if r.failing && r.Log != nil {
			r.Log.Info(r.What+" works again", "failed_rounds", r.total)
		}
		r.failing, r.failed, r.total = false, 0, 0
		return
	}
	if r.OnError != nil {
		r.OnError(err)
	}
	r.failed++
	r.total++
	quiet := r.Quiet
	if quiet <= 0 {
		quiet = QuietDefault
	}
	now := time.Now()
	if r.failing && now.Sub(r.lastReport) < quiet {
		return
	}
	if r.Log != nil {
		if r.failing {
			r.Log.Warn(r.What+" still fails; it is retried", "error", err, "failed_rounds_since_last_report", r.failed)
		} else {
			r.Log.Warn(r.What+" failed; it is retried", "error", err)
		}
	}
	r.failing, r.failed, r.lastReport = true, 0, now
}
