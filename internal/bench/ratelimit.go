package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/front"
)

// idleWindows is how many windows the idle replica of rate_flush holds: a
// hundred thousand addresses' failed-auth buckets, say.
const idleWindows = 100_000

// rateFlush measures a rate-limit flush of a replica that holds
// idleWindows windows with no new hits and one with a new hit, against the
// flush of a replica that holds only that one: a flush's cost should be
// the windows that changed, not every window held.
func rateFlush(ctx context.Context, runtime *pgxpool.Pool, emit func(result)) error {
	// A share no hit here reaches: only Flush flushes.
	opts := front.BatchOptions{Share: func(int) int { return 1_000_000 }, FlushInterval: time.Hour}
	idle, lone := front.NewBatchLimiter(runtime, opts), front.NewBatchLimiter(runtime, opts)
	defer func() { _, _ = idle.Close(ctx), lone.Close(ctx) }()
	const limit = 10_000_000
	for i := range idleWindows {
		if _, _, err := idle.Hit(ctx, fmt.Sprintf("bench idle %d", i), limit); err != nil {
			return err
		}
	}
	if err := idle.Flush(ctx); err != nil {
		return err
	}
	flushOne := func(l *front.BatchLimiter, bucket string) func() (float64, error) {
		return func() (float64, error) {
			if _, _, err := l.Hit(ctx, bucket, limit); err != nil {
				return 0, err
			}
			start := time.Now()
			err := l.Flush(ctx)
			return float64(time.Since(start).Microseconds()), err
		}
	}
	g, b, err := alternate(benchRounds, flushOne(idle, "bench active idle"), flushOne(lone, "bench active lone"))
	if err != nil {
		return err
	}
	emit(roundsResult("rate_flush_100k_idle_windows", "µs", g, b, "ratio <= 2",
		func(_, ratio float64) bool { return ratio <= 2 }))
	return nil
}
