package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestSealerRunsUnderTheLimits: the sealer's transactions carry the
// deployment's limits, as every transaction the server runs does. A
// sealer that meets a lock gives up at limits.lock_timeout (another round
// or replica seals later) instead of waiting, its tenant's head held, as
// long as whoever holds the lock — on a bare pool, until the caller's
// deadline, or for a hung host until TCP keepalive notices.
func TestSealerRunsUnderTheLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	var log logbuf.Buffer
	cfg := ontologytest.Parse(t, orders.Config,
		ontologytest.Set("limits", map[string]string{"lock_timeout": "200ms"}),
		ontologytest.Set("audit.seal_interval", "1m")) // only Close seals here
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			rt.Close()
		}
	})
	if err := database.InTenant(ctx, rt.Store, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: "c-1", Phase: engine.PhaseStaged,
			Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
	}); err != nil {
		t.Fatal(err)
	}
	// Someone holds the unsealed record's row while the runtime closes,
	// sealing what it leaves.
	holder, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT FROM orangerail.audit WHERE tenant_id = 'acme' AND seq IS NULL FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	closed = true
	got := log.String()
	if !strings.Contains(got, "the last audit records were not sealed") || !strings.Contains(got, "55P03") {
		t.Fatalf("the sealer did not give up at lock_timeout (SQLSTATE 55P03); the log:\n%s", got)
	}
}
