package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestExpiryIsDevModeAsItsStaging: an approval's expired record says
// dev_mode as its staged record does, whoever expires it. One the
// development identity staged was recorded expired without it, as if a
// production caller's call had caused it (by its own poll, and always by
// the sweeper); one a production agent staged was recorded dev_mode when
// a development caller's call happened to expire it.
func TestExpiryIsDevModeAsItsStaging(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	dev := support("acme")
	dev.DevMode = true
	stage := func(caller *engine.Caller, order, reason string) uuid.UUID {
		t.Helper()
		out := e.Call(ctx, caller, "cancel_order", json.RawMessage(`{"order_id": "`+order+`", "reason": "`+reason+`"}`))
		want(t, out, engine.StatusApprovalPending)
		return *out.ApprovalID
	}
	polled, swept, production := stage(dev, "o-1001", "x"), stage(dev, "o-1001", "y"), stage(support("acme"), "o-1002", "x")
	// Each lapses when the test says (a staged call is guarded against
	// change, so the guard is set aside for the moment, in this test's own
	// database).
	lapse := func(ids ...uuid.UUID) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, b.admin, func(tx pgx.Tx) error {
			for _, q := range []string{"ALTER TABLE orangerail.approvals DISABLE TRIGGER USER",
				"UPDATE orangerail.approvals SET created_at = now() - interval '2 seconds', expires_at = now() - interval '1 second' WHERE id = ANY($1)",
				"ALTER TABLE orangerail.approvals ENABLE TRIGGER USER"} {
				var args []any
				if strings.Contains(q, "$1") {
					args = append(args, ids)
				}
				if _, err := tx.Exec(ctx, q, args...); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	lapse(polled, swept)
	want(t, e.Check(ctx, dev, polled.String()), engine.StatusExpired)
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// A person in development mode lists the approvals, which expires
	// the production agent's lapsed one.
	lapse(production)
	person := approver("acme")
	person.DevMode = true
	if _, err := e.PageApprovals(ctx, person, engine.ApprovalQuery{}); err != nil {
		t.Fatal(err)
	}
	for id, wantDev := range map[uuid.UUID]bool{polled: true, swept: true, production: false} {
		var devMode []bool
		if err := b.admin.QueryRow(ctx, `SELECT array_agg(dev_mode) FROM orangerail.audit
			WHERE tenant_id = 'acme' AND approval_id = $1 AND phase = 'expired'`, id).Scan(&devMode); err != nil {
			t.Fatal(err)
		}
		if len(devMode) != 1 || devMode[0] != wantDev {
			t.Errorf("approval %s (staged dev_mode %v) is recorded expired with dev_mode %v", id, wantDev, devMode)
		}
	}
}
