package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// waitForLockWaiter waits until a backend waits on a lock while running a
// statement containing fragment.
func waitForLockWaiter(t *testing.T, b *testBundle, fragment string) {
	t.Helper()
	ctx := context.Background()
	for range 500 {
		var n int
		if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, fragment).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no backend waits on a lock running %q", fragment)
}

// TestNoConsumeAfterExpiryAcrossALockWait: a poll whose transaction
// began before the approval lapsed, and whose consume waited on the
// approval's row lock (held by another transaction that then rolled back:
// another replica's poll whose target read failed, say) until after it
// lapsed, does not consume and execute it: the consume reads the clock
// once it holds the row (it compared expires_at with now(), the
// transaction's start, judged before the wait).
func TestNoConsumeAfterExpiryAcrossALockWait(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	short := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("approvals.ttl", "3s"))
	staged := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, short, "acme", id)

	// Another transaction holds the approval's row, as a racing poll's
	// consume does until its transaction ends.
	holder, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT 1 FROM orangerail.approvals WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	done := make(chan *engine.Outcome, 1)
	go func() { done <- short.Check(ctx, support("acme"), id) }()
	waitForLockWaiter(t, b.testBundle, "approval_consume")
	time.Sleep(time.Until(*staged.ExpiresAt) + 300*time.Millisecond) // let it lapse while the consume waits
	var lapsed bool
	if err := b.admin.QueryRow(ctx, "SELECT expires_at <= clock_timestamp() FROM orangerail.approvals WHERE id = $1", id).Scan(&lapsed); err != nil || !lapsed {
		t.Fatalf("the approval has not lapsed by the database's clock (%v)", err)
	}
	if err := holder.Rollback(ctx); err != nil { // the other poll rolled back
		t.Fatal(err)
	}
	out := <-done
	if out.Status == engine.StatusOK || orderStatus(t, b.testBundle, "acme", "o-1001") == "cancelled" {
		t.Fatalf("an approval consumed and executed after it lapsed (poll %s, order %s)", out.Status, orderStatus(t, b.testBundle, "acme", "o-1001"))
	}
}

// TestNoDecisionAfterExpiryAcrossALockWait: as the consume's, for a
// decision: one that waited on the approval's row lock past its expiry
// does not approve the lapsed approval (it did, decided_at its
// transaction's start).
func TestNoDecisionAfterExpiryAcrossALockWait(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	short := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("approvals.ttl", "3s"))
	staged := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	v, err := short.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT 1 FROM orangerail.approvals WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	done := make(chan *engine.Outcome, 1)
	go func() {
		done <- short.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest})
	}()
	waitForLockWaiter(t, b.testBundle, "approval_decide")
	time.Sleep(time.Until(*staged.ExpiresAt) + 300*time.Millisecond)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	out := <-done
	var late bool
	if err := b.admin.QueryRow(ctx, "SELECT coalesce(decided_at > expires_at OR clock_timestamp() > expires_at AND status = 'approved', false) FROM orangerail.approvals WHERE id = $1", id).Scan(&late); err != nil {
		t.Fatal(err)
	}
	if out.Status == engine.StatusOK || late {
		t.Fatalf("a lapsed approval was approved (decision %s)", out.Status)
	}
}

// TestAKeyedRepeatPollsItsApproval: the agent polls by check_approval or
// by repeating the identical call (DESIGN's lifecycle; answerOpen), and a
// repeat under the first call's idempotency key does too: it was answered
// from the key, approval_pending replayed, for an approval approved since,
// so an agent repeating its keyed call was told it still waits.
func TestAKeyedRepeatPollsItsApproval(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.cancel_order.idempotent", true))
	keyed := json.RawMessage(`{"order_id": "o-1001", "reason": "x", "idempotencyKey": "k-1"}`)
	staged := e.Call(ctx, support("acme"), "cancel_order", keyed)
	want(t, staged, engine.StatusApprovalPending)
	approve(t, e, "acme", staged.ApprovalID.String())
	again := e.Call(ctx, support("acme"), "cancel_order", keyed)
	if again.Status != engine.StatusOK || orderStatus(t, b.testBundle, "acme", "o-1001") != "cancelled" {
		t.Fatalf("the keyed repeat of an approved call answered %s (replayed %v) for approval %s: it did not poll it into its execution",
			again.Status, again.Replayed, staged.ApprovalID)
	}
}
