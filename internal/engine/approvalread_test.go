package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
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

// TestApprovalIsItsRequestersOfItsIssuer: an approval is its requester's —
// the same subject of the same issuer. A same-named subject of another
// issuer does not read it (the resource, check_approval), cannot execute
// it once approved, and its identical call stages an approval of its own,
// not the other's.
func TestApprovalIsItsRequestersOfItsIssuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil)
	owner, namesake := support("acme"), support("acme")
	owner.Issuer, namesake.Issuer = "https://one.example", "https://two.example"
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "mine"}`)

	staged := e.Call(ctx, owner, "cancel_order", args)
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	if _, err := e.ReadApproval(ctx, namesake, id); !errors.Is(err, engine.ErrApprovalUnseen) {
		t.Fatalf("the namesake reads the approval: %v", err)
	}
	if _, err := e.ReadApproval(ctx, owner, id); err != nil {
		t.Fatalf("the requester reads the approval: %v", err)
	}
	if out := e.Call(ctx, owner, "cancel_order", args); out.Status != engine.StatusApprovalPending || out.ApprovalID.String() != id {
		t.Fatalf("the requester's identical call: %s %v, want its open approval %s", out.Status, out.ApprovalID, id)
	}
	own := e.Call(ctx, namesake, "cancel_order", args)
	if own.Status != engine.StatusApprovalPending || own.ApprovalID == nil || own.ApprovalID.String() == id {
		t.Fatalf("the namesake's identical call: %s %v, want an approval of its own", own.Status, own.ApprovalID)
	}
	stored := issuers(t, b.admin, "SELECT id::text, requested_issuer FROM orangerail.approvals WHERE tenant_id = 'acme'")
	if want := map[string]string{id: owner.Issuer, own.ApprovalID.String(): namesake.Issuer}; !maps.Equal(stored, want) {
		t.Fatalf("stored issuers %v, want %v", stored, want)
	}

	v, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if v.RequestedIssuer != owner.Issuer {
		t.Fatalf("the approver is shown the requester's issuer as %q", v.RequestedIssuer)
	}
	want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest}), engine.StatusOK)
	want(t, e.Check(ctx, namesake, id), engine.StatusNotFound)
	if v, err := e.ShowApproval(ctx, "acme", id); err != nil || v.Status != store.ApprovalApproved {
		t.Fatalf("after the namesake's poll the approval is %v (%v), want approved", v, err)
	}
	want(t, e.Check(ctx, owner, id), engine.StatusOK)
	verifyClean(t, b, "acme")
}
