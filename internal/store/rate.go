package store

import (
	"context"
	"time"
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
