package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestPreconditionHoldsForEveryRowTheKeyNames: an object whose key does
// not name one row per tenant (nothing at load can check that it does: no
// primary key, no unique index, a view) had its first row alone judged by
// the precondition, and the effect acted on every row the key names:
// acme's customer c-1 has o-1001 (paid) and o-1003 (shipped), and
// "cancel the customer's orders" cancelled the shipped one too. A key
// naming two rows is now a resolve_error: nothing runs.
func TestPreconditionHoldsForEveryRowTheKeyNames(t *testing.T) {
	t.Parallel()
	x := setupExample(t)
	b := x.testBundle
	ctx := context.Background()
	e := newEngine(t, b, x.key, engine.ModeLive, nil,
		ontologytest.SetYAML("objects.customer_order", `{table: orders, key: customer_id, tenant_column: org_id,
		  fields: [id, status, customer_id], read_access: authenticated}`),
		ontologytest.SetYAML("actions.cancel_customer_orders", `{description: Cancel every open order of a customer.,
		  target: {object: customer_order, key_from: customer_id},
		  input: {type: object, required: [customer_id], additionalProperties: false,
		          properties: {customer_id: {type: string, maxLength: 64}}},
		  where: 'target.status in ["pending", "paid"]',
		  policy: {approval: none, roles: [support]},
		  destructive: false,
		  execute: {sql: "UPDATE orders SET status = 'cancelled' WHERE customer_id = :customer_id AND org_id = current_setting('orangerail.tenant_id')"}}`),
	)
	out := e.Call(ctx, support("acme"), "cancel_customer_orders", json.RawMessage(`{"customer_id": "c-1"}`))
	if out.Status != engine.StatusResolveError || out.Err == nil || !strings.Contains(out.Err.Error(), "more than one row") {
		t.Errorf("a key naming two rows answered %s (%v), want resolve_error", out.Status, out.Err)
	}
	if got := orderStatus(t, b, "acme", "o-1003"); got != "shipped" {
		t.Fatalf("the precondition target.status in [pending, paid] was checked against one of the key's rows only: "+
			"the call answered %s and the shipped order o-1003 is now %q", out.Status, got)
	}
}

// TestTargetKeyLeftOutIsTheCallersToFix: an action whose key_from names
// an optional input property loads; a call that leaves the property out
// has no target to read, which is the input's fault: it is refused as
// invalid_input at the property's path, not answered as a datasource
// failure (resolve_error, logged at error, the agent told only a
// correlation id).
func TestTargetKeyLeftOutIsTheCallersToFix(t *testing.T) {
	t.Parallel()
	x := setupExample(t)
	b := x.testBundle
	ctx := context.Background()
	e := newEngine(t, b, x.key, engine.ModeLive, nil, ontologytest.SetYAML("actions.add_order_note.input.required", `[note]`))
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"note": "hello"}`))
	if out.Status != engine.StatusInvalidInput || out.Code != errcode.InputInvalid || len(out.Issues) != 1 || out.Issues[0].Path != "/order_id" {
		t.Fatalf("a call without the target's key answered %s (code %q, diagnostic %q, err %v), want invalid_input at /order_id",
			out.Status, out.Code, out.Diagnostic, out.Err)
	}
}
