package webhooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestPruneCatchesUpWithABacklog: a prune deletes at most ten batches; one
// that found more waiting prunes again at the next round rather than an
// hour later. It waited the hour whatever was left, so the loop deleted at
// most 10,000 finished messages an hour a replica: an outbox upgraded to
// retention with the years it had kept (00045) took weeks to trim, and one
// finishing more than that an hour grew for good.
func TestPruneCatchesUpWithABacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}})
	b.stage(t, "one approval")
	b.runOnce(t, w)
	// Ten batches and a half of messages delivered long ago, of that
	// approval (the clock never moves: the hour never passes).
	old := b.clock.Now().Add(-webhooks.RetentionDefault - time.Hour)
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.webhook_outbox
		(tenant_id, approval_id, event, action, requested_by, expires_at, state, delivered_at)
		SELECT o.tenant_id, o.approval_id, o.event, o.action, o.requested_by, o.expires_at, 'delivered', $1
		FROM orangerail.webhook_outbox o, generate_series(1, 10500)`, old); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.webhook_outbox").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	loop := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, Poll: time.Millisecond})
	loop.Start()
	defer loop.Stop()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := count()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop left %d messages past their retention, waiting for the next hour", n-1)
		}
	}
}
