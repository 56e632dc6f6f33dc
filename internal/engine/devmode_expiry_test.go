package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestExpiryInDevModeSaysSo: every audit record the development identity
// causes says dev_mode; an approval it staged that lapsed, expired by its
// own poll, was recorded expired without it, as if a production caller's
// call had caused it.
func TestExpiryInDevModeSaysSo(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	dev := support("acme")
	dev.DevMode = true
	staged := e.Call(ctx, dev, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	// It lapses (its staged call is guarded against change, so the guard
	// is set aside for the moment, in this test's own database).
	if err := pgx.BeginFunc(ctx, b.admin, func(tx pgx.Tx) error {
		for _, q := range []string{"ALTER TABLE orangerail.approvals DISABLE TRIGGER USER",
			"UPDATE orangerail.approvals SET created_at = now() - interval '2 seconds', expires_at = now() - interval '1 second' WHERE id = '" + staged.ApprovalID.String() + "'",
			"ALTER TABLE orangerail.approvals ENABLE TRIGGER USER"} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want(t, e.Check(ctx, dev, staged.ApprovalID.String()), engine.StatusExpired)
	var devMode []bool
	if err := b.admin.QueryRow(ctx, `SELECT array_agg(dev_mode ORDER BY seq) FROM orangerail.audit
		WHERE tenant_id = 'acme' AND approval_id = $1 AND phase = 'expired'`, staged.ApprovalID).Scan(&devMode); err != nil {
		t.Fatal(err)
	}
	if len(devMode) != 1 || !devMode[0] {
		t.Fatalf("the expiry a dev-mode poll caused is recorded with dev_mode %v; want [true]", devMode)
	}
}
