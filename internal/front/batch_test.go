package front_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// awayFromMinute waits, when the minute is near its end, for the next one:
// a test counting one window must not straddle two.
func awayFromMinute() {
	if s := time.Now().Second(); s >= 45 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
}

// stored is the sum of every replica's count in the store.
func stored(t *testing.T, admin *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT coalesce(sum(hits), 0) FROM orangerail.rate_shares`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// hitN hits l's readBucket n times under a limit of 1000, each admitted.
func hitN(t *testing.T, l *front.BatchLimiter, n int) {
	t.Helper()
	for range n {
		if _, _, err := l.Hit(context.Background(), readBucket, 1000); err != nil {
			t.Fatal(err)
		}
	}
}

// sendCall posts body with token and returns the status and error code, for
// use off the test's goroutine.
func sendCall(url, token, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url+mcpPath, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		return 0, "", fmt.Errorf("a 429 without Retry-After: %s", b)
	}
	return resp.StatusCode, errorCode(m), nil
}

// readBucket is an agent's read allowance, the bucket the flush tests
// count in.
const readBucket = "call \"acme\" \"agent\" \"read\""

// flushOnDemand flushes only when a test says so (or a share of 100 is
// half spent).
var flushOnDemand = front.BatchOptions{Share: func(int) int { return 100 }, FlushInterval: time.Hour}

// TestBatchFlushOutlivesItsCaller: a flush is every waiting caller's, so
// the caller that runs it hanging up mid-flush does not fail it: the
// flush reads the others' counts and stores its own, and the next hit is
// admitted without a flush of its own first. Failed, the flush would have
// answered every caller waiting on it (each refused 503, as if the store
// were down) and made every hit after flush first.
func TestBatchFlushOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	callerCtx, hangUp := context.WithCancel(ctx)
	var hungUp atomic.Bool
	l := front.NewBatchLimiterForTest(testdb.RuntimePool(t, url), flushOnDemand,
		func(uint32) {
			if hungUp.CompareAndSwap(false, true) {
				hangUp() // between the flush's write and its read
			}
		})
	t.Cleanup(func() { _ = l.Close(ctx) })
	hitN(t, l, 5)
	if err := l.Flush(callerCtx); err != nil {
		t.Fatalf("the flush failed with its caller: %v", err)
	}
	if !hungUp.Load() || callerCtx.Err() == nil {
		t.Fatal("the caller never hung up mid-flush")
	}
	if got := stored(t, admin); got != 5 {
		t.Fatalf("the store holds %d; want 5", got)
	}
	if hits, _, err := l.Hit(ctx, readBucket, 1000); err != nil || hits != 6 {
		t.Fatalf("the next hit: %d, %v; want the sixth, admitted", hits, err)
	}
}

// TestBatchCloseEndsWithItsContext: the last flush, Close's, is the
// closer's alone, and ends with its context — a shutdown's deadline —
// where a flush a hit runs outlives its caller. (It went on regardless, up
// to its own bound of seconds, past the shutdown's.) Closed with time to
// spare, it stores what remains.
func TestBatchCloseEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	late := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	hitN(t, late, 3)
	ended, end := context.WithCancel(ctx)
	end()
	if err := late.Close(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("closed with its context ended: %v; want context.Canceled", err)
	}
	if got := stored(t, admin); got != 0 {
		t.Fatalf("the store holds %d; want nothing", got)
	}
	timely := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	hitN(t, timely, 4)
	if err := timely.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, admin); got != 4 {
		t.Fatalf("the store holds %d; want 4", got)
	}
}

// TestBatchClosedLimiterNeitherAdmitsNorFlushes: once closed, a limiter
// refuses a hit (it admitted up to a share it would never store) and a
// flush (none follows Close's, the last), each with ErrLimiterClosed.
func TestBatchClosedLimiterNeitherAdmitsNorFlushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	l := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	hitN(t, l, 2)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Hit(ctx, readBucket, 100); !errors.Is(err, front.ErrLimiterClosed) {
		t.Fatalf("a hit after Close: %v; want ErrLimiterClosed", err)
	}
	if err := l.Flush(ctx); !errors.Is(err, front.ErrLimiterClosed) {
		t.Fatalf("a flush after Close: %v; want ErrLimiterClosed", err)
	}
	if got := stored(t, admin); got != 2 {
		t.Fatalf("the store holds %d; want the 2 admitted before Close", got)
	}
}

// TestBatchCloseSendsHitsAdmittedDuringAFlush: Close flushes on its own
// even while a flush is in flight: that flush took its counts before the
// hits admitted since, and Close answering with its outcome (as a hit
// waiting on a flush does) lost them.
func TestBatchCloseSendsHitsAdmittedDuringAFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	inFlush, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	l := front.NewBatchLimiterForTest(testdb.RuntimePool(t, url), flushOnDemand, func(uint32) {
		if first.CompareAndSwap(false, true) {
			close(inFlush)
			<-release
		}
	})
	hitN(t, l, 3)
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush(ctx) }()
	<-inFlush // the flush has sent 3
	hitN(t, l, 2)
	closed := make(chan error, 1)
	go func() { closed <- l.Close(ctx) }()
	// Close waits for the flush in flight (a wait it begins within this
	// pause on any machine; were it later, the test would pass for the
	// wrong reason, never fail for one).
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := stored(t, admin); got != 5 {
		t.Fatalf("the store holds %d; want the 5 admitted", got)
	}
}

// TestBatchCloseEndsAFlushInFlight: a background flush held up in the
// store — its write waiting on a lock — ends with Close's context, and
// Close with it. Close waited for it to run to its own bound (flushTimeout,
// seconds) past a shutdown's deadline.
func TestBatchCloseEndsAFlushInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	l := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE orangerail.rate_shares IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Half a share kicks the flusher, whose write waits on the lock.
	hitN(t, l, 50)
	for waiting := false; !waiting; time.Sleep(10 * time.Millisecond) {
		if err := admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%RateShareFlush%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	const deadline = 200 * time.Millisecond
	closeCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	err = l.Close(closeCtx)
	// Not a speed target: a Close that waits for the flush in flight
	// returns after its bound, flushTimeout (5s), at the earliest.
	if took := time.Since(start); err == nil || took > deadline+3*time.Second {
		t.Fatalf("Close took %s past its context's %s deadline (%v); want it ended with its context", took, deadline, err)
	}
}

// TestBatchFlushUnderTheLimits: on a pool bounded by the deployment's
// limits, as the server gives it, a flush that meets a lock gives up at
// lock_timeout — its transaction never outlives the limits every other
// one runs under — and the next flush stores what it could not.
func TestBatchFlushUnderTheLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	bounded := database.Bound(testdb.RuntimePool(t, url), database.Limits{LockTimeout: 200 * time.Millisecond, StatementTimeout: 2 * time.Second})
	l := front.NewBatchLimiter(bounded, flushOnDemand)
	t.Cleanup(func() { _ = l.Close(ctx) })
	if _, _, err := l.Hit(ctx, readBucket, 1000); err != nil {
		t.Fatal(err)
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE orangerail.rate_shares IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); !errors.Is(store.InterpretError(err), store.ErrLockNotAvailable) {
		t.Fatalf("a flush that met a lock: %v; want it refused at lock_timeout", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, admin); got != 1 {
		t.Fatalf("the store holds %d; want 1", got)
	}
}

// TestBatchClockBackKeepsTheCount: a replica whose clock, as it
// estimates the database's, moves back across a minute's start (its
// host's clock stepped, or a skew estimate swayed by a slow round trip)
// goes on counting the window it falls back into from what it counted
// there. Its count forgotten once the store held it, the window would
// start again at nothing — a second share of its limit, and hits the
// store, which keeps the highest count sent, would never hold.
func TestBatchClockBackKeepsTheCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	l := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	t.Cleanup(func() { _ = l.Close(ctx) })
	hit := func() (int, time.Time) {
		t.Helper()
		hits, end, err := l.Hit(ctx, readBucket, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return hits, end
	}
	for range 5 {
		hit()
	}
	if err := l.Flush(ctx); err != nil { // this minute's 5, stored
		t.Fatal(err)
	}
	// The clock a minute ahead: a hit counts in the next minute, and the
	// flush after it, past this minute's end by that clock, learns from
	// the database's that it is a minute ahead.
	front.SetClockForTest(l, func() time.Time { return time.Now().Add(time.Minute) })
	if hits, end := hit(); hits != 1 || time.Until(end) < time.Minute {
		t.Fatalf("a minute ahead: hit %d of a window ending %s; want the next minute's first", hits, end)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The window is this minute by the database's clock; its end is read
	// in the replica's, a minute ahead.
	if hits, end := hit(); hits != 6 || end.Sub(time.Now().Add(time.Minute)) > time.Minute {
		t.Fatalf("back in this minute: hit %d of a window ending %s; want its sixth", hits, end)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := admin.Query(ctx, `SELECT hits FROM orangerail.rate_shares ORDER BY window_start`)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := pgx.CollectRows(r, pgx.RowTo[int]); err != nil || len(rows) != 2 || rows[0] != 6 || rows[1] != 1 {
		t.Fatalf("the store holds %v (%v); want 6 hits in this minute, 1 in the next", rows, err)
	}
}

// TestBatchEndedWindowIsReadBeforeConfirmed: a replica reads the others'
// total of every window it sends, one its clock says has ended too, before
// it counts that window's hits as stored. Confirmed unread, a window the
// replica's skew estimate then moved back into was admitted on its stale
// view of the others: here a's hit as the 4th of 20 while b held 18. The
// total stays within limit + (N-1) × share (22 of 30) in this test; what
// it shows is the stale view, which the bound's proof rules out.
func TestBatchEndedWindowIsReadBeforeConfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	const limit = 20
	// A share of 10 kicks a flush at 5 hits unstored; a holds fewer
	// throughout, so that it flushes only when the test says.
	opts := front.BatchOptions{Share: func(int) int { return 10 }, FlushInterval: time.Hour}
	a := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	b := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	t.Cleanup(func() { _, _ = a.Close(ctx), b.Close(ctx) })
	awayFromMinute()
	hit := func(l *front.BatchLimiter) (int, time.Time) {
		t.Helper()
		hits, end, err := l.Hit(ctx, readBucket, limit)
		if err != nil {
			t.Fatal(err)
		}
		return hits, end
	}
	flush := func(l *front.BatchLimiter) {
		t.Helper()
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hit(a)
	hit(a)
	flush(a) // a: 2 stored, the others' 0 read
	admittedB := 0
	for {
		if hits, _ := hit(b); hits > limit {
			break
		}
		admittedB++
	}
	flush(b)
	if admittedB != limit-2 {
		t.Fatalf("b admitted %d; want %d, the limit less a's 2", admittedB, limit-2)
	}
	hit(a) // a's third, on its view of b's 0: within its share
	// a's clock runs a minute ahead: its next hit counts in the next
	// window, and the flush sends this one as ended by a's clock. The
	// flush learns a's skew from the database's clock, and a's hits count
	// in this window again.
	front.SetClockForTest(a, func() time.Time { return time.Now().Add(time.Minute) })
	if _, end := hit(a); time.Until(end) < time.Minute {
		t.Fatalf("a minute ahead, a hit in the window ending %s; want the next", end)
	}
	flush(a)
	// Its end is given in a's clock, where this window ends when the next
	// would have without the skew: the count tells them apart (a hit in
	// the next window is its first).
	hits, _ := hit(a)
	if hits <= limit {
		t.Fatalf("a admitted its hit as the %dth of %d: it confirmed its count of this window without reading b's %d", hits, limit, admittedB)
	}
}

// TestBatchLimiterTwoDoors runs two fronts, each with its own BatchLimiter
// and pool, on one database, under concurrent load: together they admit at
// least the limit and at most the documented bound, limit + (2-1) × share;
// every other request is refused X_MCP_RATE_LIMITED with a Retry-After;
// after both close, the store holds every admitted hit exactly once; and a
// closed replica's hits still count against the one that goes on.
func TestBatchLimiterTwoDoors(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	const limit = 100
	share := ontology.RateLimits{}.Share // the default percent
	opts := front.BatchOptions{Share: share, FlushInterval: 20 * time.Millisecond}
	la := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	lb := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	// Before the pools close, on every path (closing again is harmless).
	t.Cleanup(func() { _, _ = la.Close(context.Background()), lb.Close(context.Background()) })
	limits := func(c *ontology.Config) { c.HTTP.RateLimits.ReadsPerMinute = limit }
	a := newDoor(t, la, limits)
	b := newDoor(t, lb, limits)
	b.issuer, b.issuerAt = a.issuer, a.issuerAt
	bResolver, err := identity.NewResolver(ontology.OIDC{Issuer: a.issuerAt, Audience: "orangerail", TenantClaim: "org_id"}, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.resolver.Resolver = bResolver
	token := a.token(t, "agent")
	settle(t)
	awayFromMinute()

	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 16 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		wg.Go(func() {
			for range 20 {
				status, code, err := sendCall(srv.url, token, callGet)
				switch {
				case err != nil:
					errs <- err
					return
				case status == http.StatusOK:
					admitted.Add(1)
				case status == http.StatusTooManyRequests && code == "X_MCP_RATE_LIMITED":
					refused.Add(1)
				default:
					errs <- fmt.Errorf("status %d, code %s", status, code)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bound := limit + (2-1)*share(limit)
	n := int(admitted.Load())
	t.Logf("admitted %d of 320 (limit %d, bound %d), refused %d", n, limit, bound, refused.Load())
	if n < limit || n > bound {
		t.Fatalf("two doors admitted %d; want from %d to %d", n, limit, bound)
	}
	if n+int(refused.Load()) != 320 {
		t.Fatalf("%d admitted and %d refused of 320", n, refused.Load())
	}

	ctx := context.Background()
	if err := la.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Close(ctx); err != nil { // closing twice is harmless
		t.Fatal(err)
	}
	// The door still open learns the closed one's count: the window is spent.
	for range 3 {
		if status, code, err := sendCall(b.url, token, callGet); err != nil || status != http.StatusTooManyRequests {
			t.Fatalf("after the window was spent: %d %s %v", status, code, err)
		}
	}
	if err := lb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, admin); got != n {
		t.Fatalf("the store holds %d hits; the doors admitted %d", got, n)
	}
}

// TestBatchIdleWindowCostsAtMostAShare: a flush reads the others' totals
// only of the windows it sent hits of, so a replica that served a window
// and then none of it does not follow the others filling it — and when
// its hits resume, it admits at most its share before it learns: the
// bound, limit + (N-1) × share, holds, and the store holds every hit.
func TestBatchIdleWindowCostsAtMostAShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()
	const limit, share = 20, 2
	opts := front.BatchOptions{Share: func(int) int { return share }, FlushInterval: time.Hour}
	la := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	lb := front.NewBatchLimiter(testdb.RuntimePool(t, url), opts)
	t.Cleanup(func() { _, _ = la.Close(ctx), lb.Close(ctx) })
	// untilRefused hits l until it refuses, and returns how many it
	// admitted.
	untilRefused := func(l *front.BatchLimiter) int {
		t.Helper()
		for n := 0; ; n++ {
			hits, _, err := l.Hit(ctx, readBucket, limit)
			if err != nil {
				t.Fatal(err)
			}
			if hits > limit {
				return n
			}
		}
	}
	for range 5 {
		if _, _, err := la.Hit(ctx, readBucket, limit); err != nil {
			t.Fatal(err)
		}
	}
	if err := la.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b := untilRefused(lb)
	if err := la.Flush(ctx); err != nil { // nothing of the window to send
		t.Fatal(err)
	}
	resumed := untilRefused(la)
	total := 5 + b + resumed
	t.Logf("a admitted 5, b %d, a again %d: %d of a limit of %d", b, resumed, total, limit)
	if resumed > share || total < limit || total > limit+share {
		t.Fatalf("a resumed with %d (share %d), %d in all; want from %d to %d", resumed, share, total, limit, limit+share)
	}
	for _, l := range []*front.BatchLimiter{la, lb} {
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored(t, admin); got != total {
		t.Fatalf("the store holds %d hits; the replicas admitted %d", got, total)
	}
}

// TestBatchFlushKilled kills a flush's backend after its write committed,
// and while its write waits for a lock (the write never commits), once and
// twice. After the commit, the flush reads on another connection (its
// transaction begins again past the dead one) and succeeds; before it, the
// write runs again on another connection and succeeds, and killed on both
// tries the flush fails and the next sends the counts again. The store
// holds each hit exactly once.
func TestBatchFlushKilled(t *testing.T) {
	t.Parallel()
	if testdb.Bouncing() {
		t.Skip("kills the flush's backend by the pid its connection reports, which behind PgBouncer names no backend; the run without PgBouncer runs it")
	}
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	awayFromMinute()

	t.Run("after the write commits", func(t *testing.T) {
		var kill, killed atomic.Bool
		l := front.NewBatchLimiterForTest(testdb.RuntimePool(t, url), flushOnDemand, func(pid uint32) {
			if kill.CompareAndSwap(true, false) {
				var ok bool
				if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
					t.Errorf("terminate the flush's backend %d: %v %v", pid, ok, err)
				}
				killed.Store(ok)
			}
		})
		t.Cleanup(func() { _ = l.Close(ctx) })
		hitN(t, l, 10)
		kill.Store(true)
		if err := l.Flush(ctx); err != nil {
			t.Fatalf("a flush whose backend died after its write committed did not read on another connection: %v", err)
		}
		if !killed.Load() {
			t.Fatal("the flush's backend was never terminated: the fault never happened")
		}
		if got := stored(t, admin); got != 10 {
			t.Fatalf("after the killed flush the store holds %d; want the 10 its write committed", got)
		}
		hitN(t, l, 1)
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, admin); got != 11 {
			t.Fatalf("the store holds %d; want 11", got)
		}
	})

	t.Run("before the write commits", func(t *testing.T) {
		if _, err := admin.Exec(ctx, `DELETE FROM orangerail.rate_shares`); err != nil {
			t.Fatal(err)
		}
		l := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
		t.Cleanup(func() { _ = l.Close(ctx) })
		// flushKilled flushes while the flush's write waits for a lock the
		// test holds, kills its backend as often as deaths says (each time
		// once the flush waits again), releases the lock, and returns the
		// flush's error.
		flushKilled := func(deaths int) error {
			t.Helper()
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, `LOCK TABLE orangerail.rate_shares IN EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			flushed := make(chan error, 1)
			go func() { flushed <- l.Flush(ctx) }()
			for range deaths {
				deadline := time.Now().Add(10 * time.Second)
				for {
					var killed bool
					err := admin.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid, 5000)), false) FROM pg_stat_activity
						WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%RateShareFlush%'`).Scan(&killed)
					if err != nil {
						t.Fatal(err)
					}
					if killed {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the flush never waited for the lock")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			return <-flushed
		}
		hitN(t, l, 10)
		// Killed once, the write runs again on another connection: it
		// raises each row to a count, so running it twice is running it once.
		if err := flushKilled(1); err != nil {
			t.Fatalf("a flush whose backend died before its write committed was not run again: %v", err)
		}
		if got := stored(t, admin); got != 10 {
			t.Fatalf("the flush run again left %d; want 10", got)
		}
		// Killed twice, it fails, and the next flush sends the counts again.
		hitN(t, l, 5)
		if err := flushKilled(2); err == nil {
			t.Fatal("a flush whose backend was killed on both of its tries reported success")
		}
		if got := stored(t, admin); got != 10 {
			t.Fatalf("the twice-killed write left %d; want the 10 before it", got)
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, admin); got != 15 {
			t.Fatalf("the flush after the killed one left %d; want 15", got)
		}
		hitN(t, l, 1)
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, admin); got != 16 {
			t.Fatalf("the store holds %d; want 16", got)
		}
	})
}

// TestBatchStoreUnreachable: with the store unreachable a replica admits
// at most its share before its flush fails; from then on closed refuses
// every request X_MCP_LIMITS_UNAVAILABLE, and open serves.
func TestBatchStoreUnreachable(t *testing.T) {
	t.Parallel()
	dead, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", testdb.FreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	share := ontology.RateLimits{}.Share
	for _, mode := range ontology.FailureModes() {
		l := front.NewBatchLimiter(dead, front.BatchOptions{Share: share, FlushInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		f := newDoor(t, l, func(c *ontology.Config) { c.HTTP.RateLimits.OnStoreError = mode })
		token := f.token(t, "agent")
		var admitted, refused int
		for range share(ontology.ReadsPerMinuteDefault) + 5 {
			status, code, err := sendCall(f.url, token, callGet)
			switch {
			case err != nil:
				t.Fatal(err)
			case status == http.StatusOK && refused == 0:
				admitted++
			case status == http.StatusServiceUnavailable && code == "X_MCP_LIMITS_UNAVAILABLE" && mode == ontology.FailClosed:
				refused++
			default:
				t.Fatalf("%s: after %d admitted and %d refused: %d %s", mode, admitted, refused, status, code)
			}
		}
		if mode == ontology.FailClosed && (admitted < 1 || admitted > share(ontology.ReadsPerMinuteDefault) || refused < 5) {
			t.Fatalf("closed: %d admitted, then %d refused; want at most the share, %d, admitted", admitted, refused, share(ontology.ReadsPerMinuteDefault))
		}
	}
}
