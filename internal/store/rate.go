package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// RateWindow is a rate bucket's current one-minute window.
type RateWindow struct {
	Hits  int
	Start time.Time
}

// RateHit counts one hit in a bucket's current window and returns the
// window.
func (s *Store) RateHit(ctx context.Context, bucket string) (*RateWindow, error) {
	row, err := s.q.RateHit(ctx, s.x, bucket)
	if err != nil {
		return nil, InterpretError(err)
	}
	return &RateWindow{Hits: int(row.Hits), Start: row.WindowStart}, nil
}

// RatePrune forgets windows that ended more than a minute ago.
func (s *Store) RatePrune(ctx context.Context) error {
	return InterpretError(s.q.RatePrune(ctx, s.x))
}

// RateShare is one replica's cumulative count of a bucket's window.
type RateShare struct {
	Bucket string
	Window time.Time
	Hits   int
}

// RateShareFlush raises each share's row of replica to its count. It is
// idempotent: a row only ever rises, so sending a count again (a flush
// retried after its answer was lost) changes nothing.
func (s *Store) RateShareFlush(ctx context.Context, replica uuid.UUID, shares []RateShare) error {
	p := &db.RateShareFlushParams{Replica: replica, Buckets: make([]string, len(shares)),
		Windows: make([]time.Time, len(shares)), Hits: make([]int32, len(shares))}
	for i, sh := range shares {
		p.Buckets[i], p.Windows[i], p.Hits[i] = sh.Bucket, sh.Window, clampInt32(sh.Hits)
	}
	return InterpretError(s.q.RateShareFlush(ctx, s.x, p))
}

// RateWindowKey names a bucket's window.
type RateWindowKey struct {
	Bucket string
	Window time.Time
}

// RateShareTotals returns, for each window of keys, the sum of every
// replica's count but replica's own, and the database's clock.
func (s *Store) RateShareTotals(ctx context.Context, replica uuid.UUID, keys []RateWindowKey) (map[RateWindowKey]int, time.Time, error) {
	p := &db.RateShareTotalsParams{Replica: replica, Buckets: make([]string, len(keys)), Windows: make([]time.Time, len(keys))}
	for i, k := range keys {
		p.Buckets[i], p.Windows[i] = k.Bucket, k.Window
	}
	rows, err := s.q.RateShareTotals(ctx, s.x, p)
	if err != nil {
		return nil, time.Time{}, InterpretError(err)
	}
	out := make(map[RateWindowKey]int, len(rows))
	var now time.Time
	for _, r := range rows {
		out[RateWindowKey{Bucket: r.Bucket, Window: r.WindowStart}] = int(r.Others)
		now = r.Now
	}
	return out, now, nil
}

// RateSharePrune forgets windows that ended more than a minute ago.
func (s *Store) RateSharePrune(ctx context.Context) error {
	return InterpretError(s.q.RateSharePrune(ctx, s.x))
}
