package front

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// Limiter counts hits in fixed one-minute windows per bucket.
// Implementations must be safe for concurrent use.
type Limiter interface {
	// Hit counts one hit in the bucket's current window, whose limit is
	// limit, and returns the window's total counting it and when the window
	// ends; the front refuses the hit when the total exceeds limit. A hit
	// refused so need not be counted. A limiter shared by replicas states
	// how far their totals may lag one another (BatchLimiter).
	Hit(ctx context.Context, bucket string, limit int) (hits int, windowEnd time.Time, err error)
}

// bucketKind names what a rate bucket counts.
type bucketKind string

// The kinds of bucket.
const (
	bucketCalls    bucketKind = "call"      // one caller's calls of one class: tenant, subject, class
	bucketNoToken  bucketKind = "no-token"  // requests without a token from one address
	bucketBadToken bucketKind = "bad-token" // refused tokens from one address
)

// bucket names a rate bucket: its kind, then each part quoted as Go quotes
// a string. A quoted part ends at its first unescaped quote and reads back
// exactly, so a key names one list of parts only: no tenant, subject or
// address, whatever it holds, can make its bucket another's. It is the one
// place bucket keys are made.
func bucket(kind bucketKind, parts ...string) string {
	key := []byte(kind)
	for _, p := range parts {
		key = append(key, ' ')
		key = strconv.AppendQuote(key, p)
	}
	return string(key)
}

// PostgresLimiter keeps the counters in orangerail.rate_counters, so every
// replica of a deployment shares one allowance.
type PostgresLimiter struct {
	pool database.TxBeginner
}

// NewPostgresLimiter returns a limiter on the service database: a runtime
// pool, bounded by the deployment's limits as the server's every
// transaction is (database.Bounded).
func NewPostgresLimiter(pool database.TxBeginner) *PostgresLimiter {
	return &PostgresLimiter{pool: pool}
}

// pruneOdds is how often a hit also forgets old windows: rarely enough to
// cost nothing, often enough that the table stays small.
const pruneOdds = 200

// Hit implements Limiter: every hit is one write, and the total is exact.
func (l *PostgresLimiter) Hit(ctx context.Context, bucket string, _ int) (int, time.Time, error) {
	// One transaction of no tenant (database.Tenantless): it acts as
	// orangerail_runtime on whatever connection a pooler hands it.
	var w *store.RateWindow
	err := database.Tenantless(ctx, l.pool, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		s := store.New(tx)
		if rand.IntN(pruneOdds) == 0 { //nolint:gosec // G404: when to prune needs no secrecy
			// Best effort, in a savepoint: a failure leaves rows for the
			// next prune and the hit still counts.
			_ = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return store.New(sp).RatePrune(ctx) })
		}
		w, err = s.RateHit(ctx, bucket)
		return err
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	return w.Hits, w.Start.Add(time.Minute), nil
}

// MemoryLimiter keeps the counters in this process: for a single replica.
type MemoryLimiter struct {
	mu      sync.Mutex
	window  time.Time
	buckets map[string]int
	now     func() time.Time
}

// NewMemoryLimiter returns an empty in-process limiter.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{buckets: map[string]int{}, now: time.Now}
}

func (l *MemoryLimiter) roll() time.Time {
	w := l.now().Truncate(time.Minute)
	if !w.Equal(l.window) {
		l.window, l.buckets = w, map[string]int{}
	}
	return w.Add(time.Minute)
}

// Hit implements Limiter.
func (l *MemoryLimiter) Hit(_ context.Context, bucket string, _ int) (int, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.roll()
	l.buckets[bucket]++
	return l.buckets[bucket], end, nil
}
