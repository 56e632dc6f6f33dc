package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestSweepDrainsABacklog: a tenant whose lapsed approvals piled up (the
// sweepers were down a while, or an agent staged calls nobody decided)
// is swept all the same. The sweep expired every lapsed approval of a
// tenant in one transaction, one round trip each, under the store's
// transaction bound: a backlog longer than the bound rolled back whole,
// every round, so the sweeper never expired anything again, and each
// desk page of the tenant (which expires the same way) failed with it.
func TestSweepDrainsABacklog(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	// Valid limits: a transaction is bounded by lock_timeout + 2 ×
	// statement_timeout + 5s, here 6.1s.
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("limits", map[string]string{"lock_timeout": "100ms", "statement_timeout": "500ms"}))
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	// A backlog of lapsed approvals, copies of the staged one, each of
	// whose expiries takes at least 2ms (a trigger sleeps): expiring all
	// of them takes 7s at least, on any machine, past the bound.
	const backlog = 3500
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, requested_issuer, input,
			input_digest, definition_hash, status, created_at, expires_at, input_key_id, input_sealed, input_data_key)
		SELECT gen_random_uuid(), tenant_id, action, requested_by, requested_issuer, input,
			sha256(g::text::bytea), definition_hash, status, now() - interval '2 hours', now() - interval '1 hour', input_key_id, input_sealed, input_data_key
		FROM orangerail.approvals, generate_series(1, $1) g WHERE id = $2`, backlog, staged.ApprovalID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `CREATE FUNCTION public.slow_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$;
		CREATE TRIGGER slow_expiry BEFORE UPDATE ON orangerail.approvals
			FOR EACH ROW WHEN (NEW.status = 'expired') EXECUTE FUNCTION public.slow_expiry()`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := e.Sweep(ctx)
	t.Logf("first sweep: expired %d in %s (%v)", n, time.Since(start), err)
	for round := 0; round < 5 && err == nil && n > 0; round++ {
		var more int
		more, err = e.Sweep(ctx)
		n += more
		if more == 0 {
			break
		}
	}
	var left int
	if qerr := b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.approvals WHERE status IN ('pending', 'approved') AND expires_at <= now()`).Scan(&left); qerr != nil {
		t.Fatal(qerr)
	}
	if err != nil || left > 0 {
		t.Fatalf("sweeping a backlog of %d lapsed approvals: expired %d, %d still open past their expiry (%v)", backlog, n, left, err)
	}
}
