package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestUnservedAction: an action whose environments leave out the
// config's is not served — a call answers as an unknown tool's, nothing
// staged or recorded — and an approval of it staged while it was served
// (before the environment changed) fails closed when polled: refused
// with X_ACTION_NOT_SERVED, the refusal in the audit log, the approval
// neither consumed nor executed.
func TestUnservedAction(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	in := func(env string) *engine.Engine {
		return newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
			ontologytest.Set("environment", env), ontologytest.Set("actions.cancel_order.environments", []string{"demo"}))
	}
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "customer asked"}`)
	demo := in("demo")
	staged := demo.Call(ctx, support("acme"), "cancel_order", args)
	want(t, staged, engine.StatusApprovalPending)
	approve(t, demo, "acme", staged.ApprovalID.String())

	production := in("production")
	out := production.Call(ctx, support("acme"), "cancel_order", args)
	if out.Status != engine.StatusNotFound || out.Code != errcode.MCPToolUnknown || out.CorrelationID == "" {
		t.Fatalf("a call in production: %s %s %q", out.Status, out.Code, out.CorrelationID)
	}
	// Its approval's resource does not mention it, as describe does not:
	// read as one of no approval, where it said to poll.
	if a, err := production.ReadApproval(ctx, support("acme"), staged.ApprovalID.String()); !errors.Is(err, engine.ErrApprovalUnseen) {
		t.Fatalf("the approval's resource in production: %+v %v", a, err)
	}
	if _, err := demo.ReadApproval(ctx, support("acme"), staged.ApprovalID.String()); err != nil {
		t.Fatalf("the approval's resource where it is served: %v", err)
	}
	out = production.Check(ctx, support("acme"), staged.ApprovalID.String())
	if out.Status != engine.StatusDenied || out.Code != errcode.ActionNotServed {
		t.Fatalf("polling in production: %s %s %v", out.Status, out.Code, out.Err)
	}
	var status, phases, refusal string
	if err := b.admin.QueryRow(ctx, "SELECT status FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&status); err != nil || status != "approved" {
		t.Fatalf("the approval is %q (%v)", status, err)
	}
	if err := b.admin.QueryRow(ctx, `SELECT string_agg(phase, ',' ORDER BY seq), coalesce(max(convert_from(entry, 'UTF8')) FILTER (WHERE phase = 'refused'), '')
		FROM orangerail.audit WHERE action = 'cancel_order'`).Scan(&phases, &refusal); err != nil {
		t.Fatal(err)
	}
	if phases != "staged,approved,refused" || !strings.Contains(refusal, string(errcode.ActionNotServed)) || !strings.Contains(refusal, `\"production\"`) {
		t.Fatalf("audit phases %s, refusal %s", phases, refusal)
	}
	var orderStatus string
	if err := b.admin.QueryRow(ctx, "SELECT status FROM orders WHERE id = 'o-1001'").Scan(&orderStatus); err != nil || orderStatus == "cancelled" {
		t.Fatalf("the order is %q (%v)", orderStatus, err)
	}

	// Served again, the approval executes as approved.
	want(t, in("demo").Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")
}
