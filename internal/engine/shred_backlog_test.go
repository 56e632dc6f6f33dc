package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestSweepShredsABacklog: a sweep shreds every sealed input whose
// retention is over, as the README says, however many there are. It
// shredded at most shredBatch a tenant, once per sweep (the sweep went
// on to another batch only while lapsed approvals were left to expire),
// so a backlog past it (retention turned on, or shortened, over a full
// table) stayed readable for as many more sweeps, every 15s, unreported.
func TestSweepShredsABacklog(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
	e := sealedEngine(t, b, later)
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	// Ended approvals past their retention, copies of the staged one.
	backlog := engine.ShredBatch + 10
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, requested_issuer, input,
			input_digest, definition_hash, status, created_at, expires_at, input_key_id, input_sealed, input_data_key)
		SELECT gen_random_uuid(), tenant_id, action, requested_by, requested_issuer, input,
			sha256(g::text::bytea), definition_hash, 'expired', now() - interval '2 hours', now() - interval '1 hour', input_key_id, input_sealed, input_data_key
		FROM orangerail.approvals, generate_series(1, $1) g WHERE id = $2`, backlog, staged.ApprovalID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.approvals WHERE status = 'expired' AND input_data_key IS NOT NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left > 0 {
		t.Fatalf("after a sweep, %d of %d sealed inputs past their retention keep their data keys", left, backlog+1)
	}
}
