package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestRedactAuditMasksTheDatasourcesError: an effect that fails on a
// masked input value is recorded without the value. Postgres's message of
// a data exception quotes the value it refused (value "…" is out of range
// for type integer), and execution_failed kept that message whole as its
// error: the card number redact_audit masks in the record's input stood
// in plaintext beside it, in the append-only chain.
func TestRedactAuditMasksTheDatasourcesError(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.SetYAML("actions.mark_paid", `
description: Mark an order paid by the card that paid it.
target: {object: order, key_from: order_id}
input:
  type: object
  required: [order_id, card]
  additionalProperties: false
  properties:
    order_id: {type: string}
    card: {type: string, pattern: "^[0-9]+$"}
policy: {approval: none, roles: [support]}
destructive: false
execute: {sql: "UPDATE orders SET status = 'paid' WHERE id = :order_id AND org_id = current_setting('orangerail.tenant_id') AND total_cents <> :card"}
redact_audit: [card]`))
	out := e.Call(ctx, support("acme"), "mark_paid", json.RawMessage(`{"order_id": "o-1002", "card": "4111111111111111"}`))
	want(t, out, engine.StatusFailed)
	entry := auditEntry(t, b, out.CorrelationID, engine.PhaseExecutionFailed)
	if in := at(entry, "input", "card"); in != "[redacted]" {
		t.Fatalf("the record's input card: %v", in)
	}
	recorded, _ := json.Marshal(entry)
	if strings.Contains(string(recorded), "4111111111111111") {
		t.Fatalf("execution_failed keeps the masked card in plaintext: %s", recorded)
	}
	// The rest of the datasource's words are kept for operators, the
	// value in its place; the host log reads the same.
	if msg, _ := at(entry, "error").(string); !strings.Contains(msg, `"[redacted]" is out of range for type`) {
		t.Fatalf("the record's error: %q", msg)
	}
	if strings.Contains(out.Err.Error(), "4111111111111111") {
		t.Fatalf("the outcome's error, which the host log writes, keeps the card: %v", out.Err)
	}
	verifyClean(t, b.testBundle, "acme")
}
