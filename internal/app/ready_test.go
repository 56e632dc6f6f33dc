package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestReadinessProbesHoldOneConnection: /readyz answers anyone, unthrottled,
// and README's sizing counts one connection per replica for its schema
// check. Probes that arrive together while the check is slow (its table
// locked, a database under load) must not open a connection each: a flood
// of them would spend the server's max_connections, which every replica
// and tenant share.
func TestReadinessProbesHoldOneConnection(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	cfg, err := ontology.Parse(append(append([]byte{}, orders.Config...),
		"identity:\n  oidc: {issuer: \"http://127.0.0.1:1\", audience: orangerail, tenant_claim: org_id, human: {claim: kind, values: [human]}}\n"...))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.routes(resolver)
	if err != nil {
		t.Fatal(err)
	}

	admin := testdb.Pool(t, url)
	lock, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, "LOCK TABLE public.orangerail_schema_version IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	const probes = 10
	var wg sync.WaitGroup
	for range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probeCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(probeCtx))
		}()
	}
	waiting := func() (n int) {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Every probe has reached the check (or waits for its turn) well
	// within this.
	deadline := time.Now().Add(3 * time.Second)
	most := 0
	for time.Now().Before(deadline) {
		most = max(most, waiting())
		time.Sleep(50 * time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if most == 0 {
		t.Fatal("no probe reached the schema check: the test proves nothing")
	}
	if most > 1 {
		t.Fatalf("%d concurrent /readyz probes held %d database connections at once, want 1", probes, most)
	}
}
