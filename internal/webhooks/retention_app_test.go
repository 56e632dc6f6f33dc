package webhooks_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestConfiguredRetentionReachesTheWorker: the config's webhook_retention
// is the retention of the worker app.Open starts — a message delivered
// three days ago is pruned under webhook_retention: 2d, one delivered a
// day ago kept — not the worker's default of 30 days, under which both
// would be kept. Not parallel: it sets the webhook secret's variable.
func TestConfiguredRetentionReachesTheWorker(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	r := newReceiver(t)
	t.Setenv("ORANGERAIL_TEST_WEBHOOK_SECRET", secret)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}})
	b.stage(t, "delivered three days ago")
	b.stage(t, "delivered a day ago")
	if n := b.runOnce(t, w); n != 2 {
		t.Fatalf("delivered %d, want 2", n)
	}
	ids := func() []string {
		t.Helper()
		rows, err := b.admin.Query(ctx, "SELECT id::text FROM orangerail.webhook_outbox ORDER BY seq")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := ids()
	if len(all) != 2 {
		t.Fatalf("%d messages, want 2", len(all))
	}
	for i, ago := range []time.Duration{72 * time.Hour, 24 * time.Hour} {
		if _, err := b.admin.Exec(ctx, "UPDATE orangerail.webhook_outbox SET delivered_at = $2 WHERE id = $1", all[i], time.Now().Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}

	cfg := ontologytest.Parse(t, orders.Config,
		ontologytest.SetYAML("webhooks", fmt.Sprintf("[{url: %q, secret_env: ORANGERAIL_TEST_WEBHOOK_SECRET}]", r.URL)),
		ontologytest.SetYAML("webhook_retention", "2d"))
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: b.url, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// The worker prunes in its first round.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if left := ids(); slices.Equal(left, all[1:]) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("kept %v, want %v: the worker did not prune under the config's webhook_retention of 2d", left, all[1:])
		}
	}
}
