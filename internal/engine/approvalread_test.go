package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestPendingApprovalsAcrossTenants: the approvals waiting for a person are
// counted across tenants through the runtime's pool, which reads one
// tenant at a time; decided and lapsed ones are not, and the age is the
// oldest waiting one's.
func TestPendingApprovalsAcrossTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil)
	// An engine whose approvals lapse after a second, on the same database.
	brief := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil, ontologytest.Set("approvals.ttl", "1s"))
	if n, age, err := engine.PendingApprovals(ctx, b.runtime); err != nil || n != 0 || age != 0 {
		t.Fatalf("none staged: %d, %s (%v)", n, age, err)
	}
	stage := func(e *engine.Engine, tenant, order, reason string) string {
		out := e.Call(ctx, support(tenant), "cancel_order", json.RawMessage(`{"order_id": "`+order+`", "reason": "`+reason+`"}`))
		if out.Status != engine.StatusApprovalPending {
			t.Fatalf("stage %s %s: %s (%v)", tenant, order, out.Status, out.Err)
		}
		return out.ApprovalID.String()
	}
	first := time.Now()
	stage(e, "acme", "o-1001", "one")
	stage(e, "globex", "o-1001", "two")
	decided := stage(e, "acme", "o-1002", "three")
	stage(brief, "globex", "o-1001", "four") // lapses before any sweeper comes by
	v, err := e.ShowApproval(ctx, "acme", decided)
	if err != nil {
		t.Fatal(err)
	}
	if out := e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: decided, Approve: false, Digest: v.Digest}); out.Status != engine.StatusOK {
		t.Fatalf("reject: %s (%v)", out.Status, out.Err)
	}
	for {
		n, age, err := engine.PendingApprovals(ctx, b.runtime)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			if age <= 0 || age > time.Since(first)+time.Second {
				t.Fatalf("the oldest waiting approval has waited %s; it was staged %s ago", age, time.Since(first))
			}
			return
		}
		if n != 3 || time.Since(first) > time.Minute {
			t.Fatalf("pending %d, want 3 until the brief one lapses, then 2", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
