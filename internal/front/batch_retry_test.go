package front_test

import (
	"context"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestBatchWindowEndIsInTheReplicasClock: a BatchLimiter counts windows by
// the database's clock, but the end of the window it returns is what the
// front measures Retry-After from with its own clock (time.Until) and keeps
// a failed-auth flood refused until. On a replica whose clock is 40s ahead
// of the database's, a caller refused 10s into a window was told to retry
// after 10s, not 50s (and one 30s behind, at the window's last seconds, to
// wait a minute): the end must be given in the replica's clock.
func TestBatchWindowEndIsInTheReplicasClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	awayFromMinute()
	l := front.NewBatchLimiter(testdb.RuntimePool(t, url), flushOnDemand)
	t.Cleanup(func() { _ = l.Close(ctx) })
	const ahead = 40 * time.Second
	local := func() time.Time { return time.Now().Add(ahead) } // the replica's clock; the database's is time.Now
	front.SetClockForTest(l, local)
	// One hit and a flush: the replica learns it is 40s ahead.
	if _, _, err := l.Hit(ctx, "call \"acme\" \"other\" \"read\"", 1000); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const limit = 3
	for i := range limit {
		if hits, _, err := l.Hit(ctx, readBucket, limit); err != nil || hits != i+1 {
			t.Fatalf("hit %d: %d, %v", i+1, hits, err)
		}
	}
	hits, end, err := l.Hit(ctx, readBucket, limit)
	if err != nil || hits <= limit {
		t.Fatalf("the hit past the limit: %d, %v; want refused", hits, err)
	}
	dbNow := time.Now()
	left := dbNow.Truncate(time.Minute).Add(time.Minute).Sub(dbNow) // what is left of the database's window
	told := end.Sub(local())                                        // what the front, on the replica's clock, tells
	if d := told - left; d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("the window ends in %s by the database's clock; the replica's clock reads %s left", left.Round(time.Second), told.Round(time.Second))
	}
}
