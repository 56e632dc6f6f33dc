package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// auditEntry returns the entry of the one record of a correlation id in a
// phase, as the audit table holds it.
func auditEntry(t *testing.T, b *exampleBundle, correlation string, phase engine.Phase) map[string]any {
	t.Helper()
	var raw []byte
	if err := b.admin.QueryRow(context.Background(), "SELECT entry FROM orangerail.audit WHERE correlation_id = $1 AND phase = $2",
		correlation, string(phase)).Scan(&raw); err != nil {
		t.Fatalf("%s record: %v", phase, err)
	}
	var entry map[string]any
	if err := json.Unmarshal(raw, &entry); err != nil {
		t.Fatal(err)
	}
	return entry
}

// at follows a path of member names and indexes through a decoded value.
func at(v any, path ...any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			a, _ := v.([]any)
			if s >= len(a) {
				return nil
			}
			v = a[s]
		}
	}
	return v
}

// TestMaskNestedPaths: redact_audit, redact_prior and redact_result take
// JSON pointers into nested members and array elements, escapes included,
// and mask those values in the input, prior and result audit records keep,
// leaving their siblings; the approval keeps the input exactly; and the
// masked records stay canonical, their chain verifying.
func TestMaskNestedPaths(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	for _, stmt := range []string{
		`ALTER TABLE orders ADD COLUMN payment jsonb NOT NULL DEFAULT '{"card": {"number": "4000 0000", "brand": "visa"}}'`,
		"GRANT UPDATE (payment) ON orders TO orangerail_runtime",
	} {
		if _, err := b.admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("objects.order.fields", []string{"id", "status", "total_cents", "customer_id", "shipping_address", "created_at", "payment"}),
		ontologytest.SetYAML("actions.pay_order", `
description: Record the card an order is paid with.
target: {object: order, key_from: order_id}
input:
  type: object
  required: [order_id, card, items]
  properties:
    order_id: {type: string}
    card: {type: object, properties: {number: {type: string}, brand: {type: string}, a/b: {type: string}}}
    items: {type: array, items: {type: object, properties: {sku: {type: string}, qty: {type: integer}}}}
policy: {approval: required}
execute: {sql: "UPDATE orders SET payment = jsonb_build_object('card', CAST(:card AS jsonb)) WHERE id = :order_id AND org_id = current_setting('orangerail.tenant_id') RETURNING id, payment"}
redact_audit: [/card/number, /card/a~1b, /items/1/sku, /items/9/sku]
redact_prior: [/payment/card/number]
redact_result: [/rows/0/payment/card/number, /rows/0/payment/card/a~1b]`))

	input := `{"order_id": "o-1001", "card": {"number": "4111 1111", "brand": "amex", "a/b": "slash secret"}, "items": [{"sku": "SKU-SEEN", "qty": 1}, {"sku": "SKU-HIDDEN", "qty": 2}]}`
	staged := e.Call(ctx, support("acme"), "pay_order", json.RawMessage(input))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	id := staged.ApprovalID.String()

	for _, r := range []struct {
		correlation string
		phase       engine.Phase
	}{{staged.CorrelationID, engine.PhaseStaged}, {id, engine.PhaseExecutionStarted}, {id, engine.PhaseExecutionSucceeded}} {
		phase := r.phase
		in := auditEntry(t, b, r.correlation, phase)["input"]
		if at(in, "card", "number") != "[redacted]" || at(in, "card", "a/b") != "[redacted]" || at(in, "items", 1, "sku") != "[redacted]" ||
			at(in, "card", "brand") != "amex" || at(in, "items", 0, "sku") != "SKU-SEEN" || at(in, "items", 1, "qty") != float64(2) {
			t.Fatalf("%s input %v", phase, in)
		}
	}
	prior := auditEntry(t, b, id, engine.PhaseExecutionStarted)["prior"]
	if at(prior, "payment", "card", "number") != "[redacted]" || at(prior, "payment", "card", "brand") != "visa" || at(prior, "id") != "o-1001" {
		t.Fatalf("prior %v", prior)
	}
	result := auditEntry(t, b, id, engine.PhaseExecutionSucceeded)["result"]
	if at(result, "rows", 0, "payment", "card", "number") != "[redacted]" || at(result, "rows", 0, "payment", "card", "a/b") != "[redacted]" ||
		at(result, "rows", 0, "payment", "card", "brand") != "amex" {
		t.Fatalf("result %v", result)
	}
	var entries string
	if err := b.admin.QueryRow(ctx, "SELECT string_agg(convert_from(entry, 'UTF8'), ' ') FROM orangerail.audit WHERE correlation_id IN ($1, $2)", id, staged.CorrelationID).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	// Each secret whole, space included: digits alone, such as 4111, can
	// stand in a record's time or a uuid by chance.
	for _, secret := range []string{"4111 1111", "4000 0000", "slash secret", "SKU-HIDDEN"} {
		if strings.Contains(entries, secret) {
			t.Fatalf("the audit log holds %q: %s", secret, entries)
		}
	}
	var kept string
	if err := b.admin.QueryRow(ctx, "SELECT input::text FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&kept); err != nil ||
		!strings.Contains(kept, "4111 1111") || !strings.Contains(kept, "slash secret") || !strings.Contains(kept, "SKU-HIDDEN") {
		t.Fatalf("approval input %q (%v)", kept, err)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestRedactAuditAloneWithholdsPrior: an action that masks only its input
// records no prior state at all, rather than the row half masked by the
// input's names; one that masks nothing keeps the row.
func TestRedactAuditAloneWithholdsPrior(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.add_order_note.redact_audit", []string{"note"}))
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "card 4111"}`))
	want(t, out, engine.StatusOK)
	started := auditEntry(t, b, out.CorrelationID, engine.PhaseExecutionStarted)
	if prior, ok := started["prior"]; ok {
		t.Fatalf("redact_audit alone kept the prior state %v", prior)
	}
	if at(started, "input", "note") != "[redacted]" {
		t.Fatalf("input %v", started["input"])
	}
	out = b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "plain"}`))
	want(t, out, engine.StatusOK)
	if at(auditEntry(t, b, out.CorrelationID, engine.PhaseExecutionStarted), "prior", "id") != "o-1001" {
		t.Fatal("an action without masks lost its prior state")
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestRedactAuditMasksTheIssuesOfARefusedInput: the record of an input
// refused for a masked value keeps where the issue is, never its message,
// which quotes the value (a pattern's), nor the message of an issue of
// the whole input (a parse error may quote what stands anywhere); an
// issue elsewhere keeps its message, and the agent is told every issue
// whole.
func TestRedactAuditMasksTheIssuesOfARefusedInput(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.add_order_note.redact_audit", []string{"note"}),
		ontologytest.Set("actions.add_order_note.input.properties.note.pattern", "^[a-z ]+$"))
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "`+strings.Repeat("x", 65)+`", "note": "SECRET-4111111111111111"}`))
	want(t, out, engine.StatusInvalidInput)
	var told []string
	for _, is := range out.Issues {
		told = append(told, is.Path+": "+is.Message)
	}
	if !strings.Contains(strings.Join(told, "; "), "SECRET-4111") {
		t.Fatalf("the agent was not told its issue whole: %v", told)
	}
	recorded, _ := auditEntry(t, b, out.CorrelationID, engine.PhaseInvalidInput)["error"].(string)
	if strings.Contains(recorded, "SECRET") || strings.Contains(recorded, "4111") ||
		!strings.Contains(recorded, "/note: withheld: the value is masked (redact_audit)") ||
		!strings.Contains(recorded, "/order_id: maxLength") {
		t.Fatalf("the refusal's record: %q", recorded)
	}
	// An input that is no I-JSON is refused at the value that is not: the
	// record withholds a masked one's message too.
	out = e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": 98765432109876543210}`))
	want(t, out, engine.StatusInvalidInput)
	recorded, _ = auditEntry(t, b, out.CorrelationID, engine.PhaseInvalidInput)["error"].(string)
	if strings.Contains(recorded, "98765") || !strings.Contains(recorded, "/note: withheld: the value is masked (redact_audit)") {
		t.Fatalf("the record of an input that is no I-JSON: %q", recorded)
	}
	// One that does not parse at all is refused as a whole: its message is
	// withheld, as it may quote a masked value.
	out = e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": 98765 "x"}`))
	want(t, out, engine.StatusInvalidInput)
	recorded, _ = auditEntry(t, b, out.CorrelationID, engine.PhaseInvalidInput)["error"].(string)
	if strings.Contains(recorded, "98765") || !strings.Contains(recorded, "(input): withheld: it may quote a value that is masked (redact_audit)") {
		t.Fatalf("the record of an input that does not parse: %q", recorded)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestMaskEveryElement: a "*" token where a masked value is an array
// names every element — through nested arrays and arrays of arrays, in
// the input, the prior state and the result audit records keep — while on
// an object it names the member literally called "*", leaving the rest;
// the approval keeps the input whole.
func TestMaskEveryElement(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	for _, stmt := range []string{
		`ALTER TABLE orders ADD COLUMN payment jsonb NOT NULL DEFAULT '{"cards": [{"number": "4000 0001", "brand": "visa"}, {"number": "4000 0002", "brand": "amex"}]}'`,
		"GRANT UPDATE (payment) ON orders TO orangerail_runtime",
	} {
		if _, err := b.admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("objects.order.fields", []string{"id", "status", "total_cents", "customer_id", "shipping_address", "created_at", "payment"}),
		ontologytest.SetYAML("actions.share_order", `
description: Share an order with its members.
target: {object: order, key_from: order_id}
input:
  type: object
  required: [order_id, members]
  properties:
    order_id: {type: string}
    members:
      type: array
      items:
        type: object
        properties:
          email: {type: string}
          name: {type: string}
          phones: {type: array, items: {type: object, properties: {number: {type: string}, kind: {type: string}}}}
    grid: {type: array, items: {type: array, items: {type: string}}}
    odd: {type: object, properties: {"*": {type: string}, plain: {type: string}}}
policy: {approval: required}
execute: {sql: "UPDATE orders SET payment = jsonb_build_object('members', CAST(:members AS jsonb)) WHERE id = :order_id AND org_id = current_setting('orangerail.tenant_id') RETURNING id, payment"}
redact_audit: [/members/*/email, /members/*/phones/*/number, /grid/*/*, /odd/*]
redact_prior: [/payment/cards/*/number]
redact_result: [/rows/*/payment/members/*/email, /rows/*/payment/members/*/phones/*/number]`))

	input := `{"order_id": "o-1001", "members": [{"email": "ann@SECRET.example", "name": "Ann", "phones": [{"number": "555-SECRET-1", "kind": "cell"}, {"number": "555-SECRET-2", "kind": "home"}]}, {"email": "bob@SECRET.example", "name": "Bob"}],` +
		` "grid": [["GRID-SECRET-A", "GRID-SECRET-B"], [], ["GRID-SECRET-C"]], "odd": {"*": "STAR-SECRET", "plain": "kept"}}`
	staged := e.Call(ctx, support("acme"), "share_order", json.RawMessage(input))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	id := staged.ApprovalID.String()

	for _, r := range []struct {
		correlation string
		phase       engine.Phase
	}{{staged.CorrelationID, engine.PhaseStaged}, {id, engine.PhaseExecutionStarted}, {id, engine.PhaseExecutionSucceeded}} {
		in := auditEntry(t, b, r.correlation, r.phase)["input"]
		for _, path := range [][]any{{"members", 0, "email"}, {"members", 1, "email"}, {"members", 0, "phones", 0, "number"}, {"members", 0, "phones", 1, "number"},
			{"grid", 0, 0}, {"grid", 0, 1}, {"grid", 2, 0}, {"odd", "*"}} {
			if at(in, path...) != "[redacted]" {
				t.Errorf("%s input at %v: %v", r.phase, path, at(in, path...))
			}
		}
		if at(in, "members", 0, "name") != "Ann" || at(in, "members", 1, "name") != "Bob" || at(in, "members", 0, "phones", 1, "kind") != "home" ||
			at(in, "odd", "plain") != "kept" || len(at(in, "grid", 1).([]any)) != 0 {
			t.Errorf("%s input lost a value no mask names: %v", r.phase, in)
		}
	}
	prior := auditEntry(t, b, id, engine.PhaseExecutionStarted)["prior"]
	if at(prior, "payment", "cards", 0, "number") != "[redacted]" || at(prior, "payment", "cards", 1, "number") != "[redacted]" ||
		at(prior, "payment", "cards", 1, "brand") != "amex" {
		t.Fatalf("prior %v", prior)
	}
	result := auditEntry(t, b, id, engine.PhaseExecutionSucceeded)["result"]
	if at(result, "rows", 0, "payment", "members", 0, "email") != "[redacted]" || at(result, "rows", 0, "payment", "members", 1, "email") != "[redacted]" ||
		at(result, "rows", 0, "payment", "members", 1, "name") != "Bob" {
		t.Fatalf("result %v", result)
	}
	var entries string
	if err := b.admin.QueryRow(ctx, "SELECT string_agg(convert_from(entry, 'UTF8'), ' ') FROM orangerail.audit WHERE correlation_id IN ($1, $2)", id, staged.CorrelationID).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(entries, "SECRET") {
		t.Fatalf("the audit log holds a masked value: %s", entries)
	}
	var kept string
	if err := b.admin.QueryRow(ctx, "SELECT input::text FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&kept); err != nil ||
		!strings.Contains(kept, "555-SECRET-2") || !strings.Contains(kept, "STAR-SECRET") || !strings.Contains(kept, "GRID-SECRET-C") {
		t.Fatalf("approval input %q (%v)", kept, err)
	}
	verifyClean(t, b.testBundle, "acme")
}
