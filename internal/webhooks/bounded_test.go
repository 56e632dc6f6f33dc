package webhooks_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServingWorkerIsBoundedByTheLimits: the serving runtime's delivery
// worker runs its transactions under the config's limits, as the engine's
// do. A session holding the message's row locked while the worker marks
// it makes the mark fail at lock_timeout, and the round fail and be
// retried, where it waited as long as that session held the lock.
func TestServingWorkerIsBoundedByTheLimits(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	var (
		holder pgx.Tx
		once   sync.Once
	)
	t.Cleanup(func() {
		if holder != nil {
			_ = holder.Rollback(context.Background())
		}
	})
	r := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// The message is sent: before the worker marks it, another
		// session locks its row.
		once.Do(func() {
			tx, err := admin.Begin(context.Background())
			if err == nil {
				_, err = tx.Exec(context.Background(), "SELECT FROM orangerail.webhook_outbox FOR UPDATE")
			}
			if err != nil {
				t.Error(err)
			}
			holder = tx
		})
	}))
	t.Cleanup(r.Close)
	cfg := ontologytest.Parse(t, orders.Config,
		hooks(endpoint(t, r.URL, false)),
		ontologytest.SetYAML("limits", "{lock_timeout: 200ms, statement_timeout: 1s}"))
	t.Setenv("ORANGERAIL_TEST_WEBHOOK_SECRET", secret)
	var log logbuf.Buffer
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: url, Serve: true, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	out := rt.Engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "bounded"}`))
	if out.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s", out.Status)
	}
	// The mark gives up at lock_timeout (200ms); the lock is held ten
	// seconds, fifty times that.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), `"msg":"webhook delivery failed; it is retried"`) || !strings.Contains(log.String(), "55P03") {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's mark waited on the row lock past the config's lock_timeout; the log:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
