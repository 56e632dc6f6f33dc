package front

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/store"
)

// BatchLimiter counts hits in this process and flushes the counts to the
// service database in batches, so a request is not a write: every
// FlushInterval, and as soon as a bucket's unflushed count reaches half its
// share, it sends the count of each window that rose since and reads back
// the other replicas' totals of those windows.
//
// A hit is admitted while the others' last-read total plus this replica's
// own count stays within the limit, and while this replica's unflushed
// count is below its share (Share(limit)); at the share a hit waits for a
// flush. The bound: in one window, N replicas admit at most
//
//	limit + (N-1) × share
//
// hits together. Each replica's count reaches the store before it reads
// the others' (the read's snapshot follows its own write's commit), and its
// hits count as confirmed only once that read is done, so of the hits the
// latest read missed, each other replica holds at most share, all
// admitted since its own latest read. A limit whose share is 0 is
// counted exactly, one write per hit, through PostgresLimiter.
//
// A flush sends each count whole, never a delta, and a row only rises
// (RateShareFlush): a flush that fails — before its write commits or after,
// its answer lost — is sent again whole with the next, never lost nor
// doubled. While the last flush failed, every hit flushes first, and
// reports the error when that fails too: the front then refuses or admits
// as http.rate_limits.on_store_error says, as it does for PostgresLimiter.
//
// Close flushes what remains and stops the flusher. A BatchLimiter is safe
// for concurrent use.
type BatchLimiter struct {
	pool     database.TxBeginner
	exact    *PostgresLimiter
	share    func(limit int) int
	interval time.Duration
	replica  uuid.UUID
	log      *slog.Logger
	now      func() time.Time
	// afterWrite, when set, runs after a flush's write commits and before
	// its read, with the backend serving both: a test's seam.
	afterWrite func(pid uint32)

	mu     sync.Mutex
	counts map[windowKey]*shareCount
	// changed holds the windows of counts with hits not known to be
	// stored: what a flush sends and reads, so that its cost is the
	// windows that changed, not every window held.
	changed map[windowKey]*shareCount
	// forgotten is the start of the current window when ended windows
	// were last forgotten: once a window.
	forgotten int64
	failed    error // the last flush's error, until one succeeds
	skew      time.Duration
	flushes   uint64 // flushes finished, failed or not
	kick      chan struct{}

	flushMu   sync.Mutex // one flush at a time
	lastPrune time.Time

	// base is what every flush runs under besides its own bound: Close
	// ends it when its context ends, so that no flush in flight — the
	// flusher's, which Close waits for, nor a hit's — outlasts a
	// shutdown's deadline; and once it has closed, as no flush follows
	// the last.
	base    context.Context
	endBase context.CancelFunc
	loop    *periodic.Loop
	closed  sync.Once
}

// windowKey is a bucket's window, by its start in Unix seconds.
type windowKey struct {
	bucket string
	window int64
}

// shareCount is this replica's count of one window.
type shareCount struct {
	admitted  int // hits admitted here
	confirmed int // of them, how many the store is known to hold
	others    int // the other replicas' total at the last read
}

// BatchOptions configure a BatchLimiter.
type BatchOptions struct {
	// Share is how many hits one replica may admit between its flushes in
	// a window whose limit is limit. Required.
	Share func(limit int) int
	// FlushInterval is how often counts are flushed. Required.
	FlushInterval time.Duration
	// Logger receives failed background flushes. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// NewBatchLimiter returns a limiter on the service database (a runtime
// pool, bounded by the deployment's limits as the server's every
// transaction is: database.Bounded), flushing in the background until
// Close.
func NewBatchLimiter(pool database.TxBeginner, o BatchOptions) *BatchLimiter {
	return newBatchLimiter(pool, o, nil)
}

func newBatchLimiter(pool database.TxBeginner, o BatchOptions, afterWrite func(pid uint32)) *BatchLimiter {
	l := &BatchLimiter{pool: pool, exact: NewPostgresLimiter(pool), share: o.Share, interval: o.FlushInterval,
		replica: uuid.New(), log: o.Logger, now: time.Now, counts: map[windowKey]*shareCount{}, changed: map[windowKey]*shareCount{},
		kick: make(chan struct{}, 1), afterWrite: afterWrite}
	l.base, l.endBase = context.WithCancel(context.Background()) //nolint:gosec // G118: Close calls it
	if l.log == nil {
		l.log = slog.Default()
	}
	// Flushes every interval, and when a share is half spent (kick).
	l.loop = periodic.Start(periodic.Config{Interval: l.interval, Kick: l.kick, Log: l.log, What: "rate-limit flush"}, func(ctx context.Context) error {
		l.mu.Lock()
		seen := l.flushes
		l.mu.Unlock()
		return l.flush(ctx, seen)
	})
	return l
}

// ErrLimiterClosed is a BatchLimiter's answer once it is closed, or its
// Close's context has ended: it neither admits a hit it could not store
// nor flushes after its last flush.
var ErrLimiterClosed = errors.New("the rate limiter is closed")

// Hit implements Limiter.
func (l *BatchLimiter) Hit(ctx context.Context, bucket string, limit int) (int, time.Time, error) {
	if l.base.Err() != nil {
		return 0, time.Time{}, ErrLimiterClosed
	}
	share := l.share(limit)
	if share <= 0 {
		hits, end, err := l.exact.Hit(ctx, bucket, limit)
		l.mu.Lock()
		end = end.Add(-l.skew) // the database's clock, as this replica's reads it
		l.mu.Unlock()
		return hits, end, err
	}
	for {
		l.mu.Lock()
		start := l.now().Add(l.skew).Truncate(time.Minute)
		// The window is the database's; its end is given in this
		// replica's clock, which the front measures Retry-After by.
		end := start.Add(time.Minute).Add(-l.skew)
		k := windowKey{bucket: bucket, window: start.Unix()}
		c := l.counts[k]
		if c == nil {
			c = &shareCount{}
			l.counts[k] = c
		}
		if total := c.others + c.admitted; total >= limit {
			// Refused: not counted, and no flush can make room in this window.
			l.mu.Unlock()
			return total + 1, end, nil
		}
		if l.failed == nil && c.admitted-c.confirmed < share {
			c.admitted++
			l.changed[k] = c
			hits := c.others + c.admitted
			if c.admitted-c.confirmed >= max(share/2, 1) {
				select {
				case l.kick <- struct{}{}:
				default:
				}
			}
			l.mu.Unlock()
			return hits, end, nil
		}
		seen := l.flushes
		l.mu.Unlock()
		if err := l.flush(ctx, seen); err != nil {
			return 0, time.Time{}, err
		}
	}
}

// flushTimeout bounds one flush, whoever waits on it.
const flushTimeout = 5 * time.Second

// flush sends every count not known to be stored, then reads the other
// replicas' totals of those of the current window. seen is the number of
// flushes the caller saw finished: when another finished since, flush
// returns its outcome instead of flushing again.
//
// A flush is every waiting caller's, not only the one that runs it: its
// caller hanging up must not fail it for the others, who would be refused
// as if the store were down (and every hit after would flush first). It
// runs detached from ctx, bounded on its own (flushTimeout) and by Close.
func (l *BatchLimiter) flush(ctx context.Context, seen uint64) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(l.base, cancel)()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.base.Err() != nil {
		return ErrLimiterClosed // Close has run its flush, the last
	}
	l.mu.Lock()
	if l.flushes != seen {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	return l.flushLocked(ctx)
}

// flushLocked runs one flush under ctx and flushTimeout, flushMu held, and
// records its outcome for those who waited on it.
func (l *BatchLimiter) flushLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	err := l.flushOnce(ctx)
	cancel()
	l.mu.Lock()
	l.flushes++
	l.failed = err
	l.mu.Unlock()
	return err
}

func (l *BatchLimiter) flushOnce(ctx context.Context) error {
	l.mu.Lock()
	current := l.now().Add(l.skew).Truncate(time.Minute).Unix()
	var shares []store.RateShare
	var keys []store.RateWindowKey
	sent := map[windowKey]int{}
	// Only the windows with hits since they were last stored are sent, and
	// read: the bound asks that a replica have read the others' totals
	// since it admitted more than its share, and a window with no new hits
	// has admitted none. Reading every window it held made each flush's
	// cost the count of buckets, idle ones too (a hundred thousand
	// addresses' failed-auth buckets: a statement of 0.4s, every
	// flush_interval). A window that has ended by this replica's clock is
	// read too: its hits are confirmed below, and a skew estimate moving
	// back into it would admit on the view of the others it held.
	for k, c := range l.changed {
		w := time.Unix(k.window, 0).UTC()
		shares = append(shares, store.RateShare{Bucket: k.bucket, Window: w, Hits: c.admitted})
		keys = append(keys, store.RateWindowKey{Bucket: k.bucket, Window: w})
		sent[k] = c.admitted
	}
	if l.forgotten != current {
		l.forgotten = current
		for k, c := range l.counts {
			// A window that ended a minute ago or more, all of it stored.
			// The one before the current is kept: a skew estimate that
			// moves back across a minute's start goes on counting in it
			// from what it holds — forgotten, its count would start again
			// at nothing, a second share of its limit, and hits the store
			// (which keeps the highest count sent) would never hold.
			if c.admitted == c.confirmed && k.window < current-60 {
				delete(l.counts, k)
			}
		}
	}
	l.mu.Unlock()
	if len(shares) == 0 {
		return nil
	}
	// Each statement runs in a transaction of no tenant (database.Tenantless),
	// as orangerail_runtime on whatever connection a pooler hands it, and
	// may run twice (a prune forgets what is old, a read assigns).
	tenantless := func(opts pgx.TxOptions, fn func(*store.Store) error) error {
		return database.Tenantless(ctx, l.pool, opts, func(tx pgx.Tx) error {
			database.Repeatable(tx)
			return fn(store.New(tx))
		})
	}
	var pid uint32
	err := database.Tenantless(ctx, l.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// A flush raises each row to a count, never adds to it.
		database.Repeatable(tx)
		pid = tx.Conn().PgConn().PID()
		return store.New(tx).RateShareFlush(ctx, l.replica, shares)
	})
	if err != nil {
		return err
	}
	if l.afterWrite != nil {
		l.afterWrite(pid)
	}
	if time.Since(l.lastPrune) > time.Minute {
		l.lastPrune = time.Now()
		// Best effort: a failure leaves rows for the next prune.
		_ = tenantless(pgx.TxOptions{}, func(s *store.Store) error { return s.RateSharePrune(ctx) })
	}
	var before, after time.Time
	var others map[store.RateWindowKey]int
	var dbNow time.Time
	err = tenantless(pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(s *store.Store) (err error) {
		// The database's clock is read during this statement
		// (clock_timestamp), so its own round trip brackets it — not the
		// wait for a connection, nor the transaction's start.
		before = l.now()
		others, dbNow, err = s.RateShareTotals(ctx, l.replica, keys)
		after = l.now()
		return err
	})
	if err != nil {
		// Sent again whole with the next flush, which reads again.
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// What the store holds is recorded once the read that follows the
	// write is done, never between them: until then a hit admitted here
	// still counts against the share, so this replica's hits beyond its
	// latest stored count are at most share, all under the view of the
	// others that the same flush read. Confirming at the write let a
	// replica admit up to share more under the view of the flush before,
	// and two replicas admit limit + 2 × share together.
	for k, n := range sent {
		if c := l.counts[k]; c != nil {
			if c.confirmed = max(c.confirmed, n); c.confirmed == c.admitted {
				delete(l.changed, k)
			}
		}
	}
	if !dbNow.IsZero() {
		// Windows follow the database's clock, as PostgresLimiter's do.
		l.skew = dbNow.Sub(before.Add(after.Sub(before) / 2))
	}
	for k, n := range others {
		if c := l.counts[windowKey{bucket: k.Bucket, window: k.Window.Unix()}]; c != nil {
			c.others = max(c.others, n)
		}
	}
	return nil
}

// Flush flushes now, as the background flusher does: it sends the counts
// not known to be stored and reads back the others' totals of their
// windows.
func (l *BatchLimiter) Flush(ctx context.Context) error {
	l.mu.Lock()
	seen := l.flushes
	l.mu.Unlock()
	return l.flush(ctx, seen)
}

// Close flushes what remains and stops the flusher. It ends with ctx,
// should ctx end first, and so does a flush in flight (a shutdown's
// deadline is the closer's to set: what is not flushed is lost, at most a
// share of each window, as a replica that dies loses it). It is safe to
// call more than once; later calls return nil.
func (l *BatchLimiter) Close(ctx context.Context) error {
	var err error
	l.closed.Do(func() {
		defer l.endBase()
		defer context.AfterFunc(ctx, l.endBase)()
		l.loop.Stop()
		l.flushMu.Lock()
		defer l.flushMu.Unlock()
		// A flush of its own, never the outcome of one in flight when
		// Close began: that one took its counts before the last hits
		// were admitted, and they would be lost.
		err = l.flushLocked(ctx)
	})
	return err
}
