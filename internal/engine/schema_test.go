package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// everyTypeSchema is a table with a column of each type a read's schema
// names, nullable and not, and rows that reach each type's awkward values.
const everyTypeSchema = `
CREATE DOMAIN code AS varchar(10) NOT NULL;
CREATE TABLE kinds (
	org_id text NOT NULL, id uuid PRIMARY KEY, label code, short varchar(5), fixed char(3), note text,
	n2 smallint NOT NULL, n4 integer, n8 bigint, amount numeric, ratio real, score double precision,
	ok boolean, at timestamptz NOT NULL, local_at timestamp, day date, doc jsonb, raw json, addr inet
);
INSERT INTO kinds VALUES
	('acme', '123e4567-e89b-12d3-a456-426614174000', 'one', 'abcde', 'xy', 'a note', 1, 2147483647, 9223372036854775807,
	 12345678901234567890.123456789, 'NaN', 'Infinity', true, '2024-05-01T12:00:00.123456Z', '2024-05-01T12:00:00',
	 '2024-05-01', '{"a": [1, 2]}', '[1, "two"]', '10.0.0.1'),
	('acme', '00000000-0000-0000-0000-000000000002', 'two', NULL, NULL, NULL, -32768, NULL, NULL,
	 9.5, NULL, NULL, NULL, '2024-06-01T12:00:00Z', NULL, NULL, NULL, NULL, NULL),
	('acme', '00000000-0000-0000-0000-000000000003', 'three', NULL, NULL, NULL, 3, NULL, NULL,
	 10.5, -1.5, 2.25, false, '2024-07-01T12:00:00Z', NULL, NULL, 'null', NULL, NULL);
GRANT SELECT ON kinds TO orangerail_runtime;
`

const everyTypeConfig = `service: kinds
objects:
  kind:
    title: Kind
    table: kinds
    key: id
    tenant_column: org_id
    fields: [id, label, short, fixed, note, n2, n4, n8, amount, ratio, score, ok, at, local_at, day, doc, raw, addr]
    list:
      filters: {id: [eq, in], n8: [eq], amount: [gt], ok: [eq], at: [gt], day: [eq], short: [eq]}
      sort: [amount, n2]
      max_limit: 2
`

func setupEveryType(t *testing.T) *exampleBundle {
	t.Helper()
	b := setup(t)
	if _, err := b.admin.Exec(context.Background(), everyTypeSchema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return serve(t, b, []byte(everyTypeConfig))
}

// compileOutput compiles an advertised schema as a strict client would:
// formats asserted.
func compileOutput(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("urn:test", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validates(t *testing.T, s *jsonschema.Schema, data json.RawMessage) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Errorf("%s does not match its output schema: %v", data, err)
	}
}

// TestReadSchemasFollowTheCatalog holds each field's schema to its
// column's type in the live catalog, and every read's answer to the
// output schema advertised for it: each type's values, nulls where the
// column allows them, and a numeric with more digits than a double holds,
// returned whole as a string and still sorted as a number.
func TestReadSchemasFollowTheCatalog(t *testing.T) {
	t.Parallel()
	b := setupEveryType(t)
	ctx := context.Background()
	e := b.engine
	s, ok := e.ReadSchemas("kind")
	if !ok {
		t.Fatal("no schemas for kind")
	}
	item := s.GetOutput["properties"].(map[string]any)["item"].(map[string]any)
	fields := item["properties"].(map[string]any)
	want := map[string]string{
		"id":       `{"format":"uuid","type":"string"}`,
		"label":    `{"maxLength":10,"type":"string"}`, // NOT NULL through its domain
		"short":    `{"maxLength":5,"type":["string","null"]}`,
		"fixed":    `{"maxLength":3,"type":["string","null"]}`,
		"note":     `{"type":["string","null"]}`,
		"n2":       `{"maximum":32767,"minimum":-32768,"type":"integer"}`,
		"n4":       `{"maximum":2147483647,"minimum":-2147483648,"type":["integer","null"]}`,
		"n8":       `{"maximum":9223372036854775807,"minimum":-9223372036854775808,"type":["integer","null"]}`,
		"at":       `{"format":"date-time","type":"string"}`,
		"day":      `{"format":"date","type":["string","null"]}`,
		"ok":       `{"type":["boolean","null"]}`,
		"doc":      `{}`,
		"raw":      `{}`,
		"addr":     `{}`,
		"ratio":    `{"anyOf":[{"type":"number"},{"enum":["NaN","Infinity","-Infinity"]},{"type":"null"}]}`,
		"local_at": `{"description":"A date and time without an offset.","type":["string","null"]}`,
	}
	for field, w := range want {
		if got, _ := json.Marshal(fields[field]); string(got) != w {
			t.Errorf("%s: %s, want %s", field, got, w)
		}
	}
	if amount := fields["amount"].(map[string]any); !reflect.DeepEqual(amount["type"], []string{"string", "null"}) {
		t.Errorf("amount: %v, want a string or null", amount)
	}
	if got, _ := json.Marshal(item["required"]); !strings.Contains(string(got), `"addr"`) || item["additionalProperties"] != false {
		t.Errorf("item: %v", item)
	}

	getOut, listOut := compileOutput(t, s.GetOutput), compileOutput(t, s.ListOutput)
	for _, id := range []string{"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000002", "00000000-0000-0000-0000-000000000003"} {
		out := e.Get(ctx, agent("acme"), "kind", json.RawMessage(`{"id": "`+id+`"}`))
		if out.Status != engine.StatusOK {
			t.Fatalf("get %s: %s %v %v", id, out.Status, out.Issues, out.Err)
		}
		validates(t, getOut, out.Data)
	}
	one := e.Get(ctx, agent("acme"), "kind", json.RawMessage(`{"id": "123e4567-e89b-12d3-a456-426614174000"}`))
	for _, part := range []string{`"amount":"12345678901234567890.123456789"`, `"n8":9223372036854775807`, `"ratio":"NaN"`, `"doc":{"a":[1,2]}`} {
		if !strings.Contains(string(one.Data), part) {
			t.Errorf("get: %s lacks %s", one.Data, part)
		}
	}

	// Pages, sorted by the numeric: 9.5 before 10.5, as numbers sort (as
	// text, "10.5" would come first), each page as advertised.
	var amounts []string
	cursor := ""
	for range 3 {
		args := `{"sort": "amount"}`
		if cursor != "" {
			args = `{"sort": "amount", "cursor": "` + cursor + `"}`
		}
		out := e.List(ctx, agent("acme"), "kind", json.RawMessage(args))
		if out.Status != engine.StatusOK {
			t.Fatalf("list: %s %v %v", out.Status, out.Issues, out.Err)
		}
		validates(t, listOut, out.Data)
		var page struct {
			Items []struct {
				Amount string `json:"amount"`
			} `json:"items"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(out.Data, &page); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			amounts = append(amounts, it.Amount)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(amounts, " ") != "9.5 10.5 12345678901234567890.123456789" {
		t.Errorf("sorted by amount: %v", amounts)
	}
}

// TestReadInputsHeldToTheirSchemas: every constraint a read's advertised
// input schema states is enforced, at its path — the limit's bounds, the
// sort's enum, the operators a field allows, each filter value's type by
// its column, unknown members — and a value that fits the schema is still
// checked against its column's range.
func TestReadInputsHeldToTheirSchemas(t *testing.T) {
	t.Parallel()
	b := setupEveryType(t)
	ctx := context.Background()
	e := b.engine
	invalid := []struct{ args, path string }{
		{`{"limit": 3}`, "/limit"}, // max_limit is 2
		{`{"limit": 0}`, "/limit"},
		{`{"sort": "label"}`, "/sort"},
		{`{"sort": ["amount"]}`, "/sort"},
		{`{"filters": {"short": {"eq": "abcdef"}}}`, "/filters/short/eq"}, // varchar(5)
		{`{"filters": {"short": {"eq": 12345}}}`, "/filters/short/eq"},
		{`{"filters": {"n8": {"eq": 9223372036854775808}}}`, "/filters/n8/eq"},
		{`{"filters": {"n8": {"eq": "9223372036854775808"}}}`, "/filters/n8/eq"}, // in the schema's form, past the column's range
		{`{"filters": {"n8": {"eq": "12x"}}}`, "/filters/n8/eq"},
		{`{"filters": {"ok": {"eq": "yes"}}}`, "/filters/ok/eq"},
		{`{"filters": {"at": {"gt": "2024-05-01"}}}`, "/filters/at/gt"},
		{`{"filters": {"day": {"eq": "2024-13-01"}}}`, "/filters/day/eq"},
		{`{"filters": {"id": {"in": []}}}`, "/filters/id/in"},
		{`{"filters": {"id": {"eq": "123e4567"}}}`, "/filters/id/eq"},
		{`{"filters": {"amount": {"lt": 1}}}`, "/filters/amount/lt"},
		{`{"filters": {"label": {"eq": "one"}}}`, "/filters/label"},
		{`{"page": 2}`, "/page"},
	}
	for _, tt := range invalid {
		out := e.List(ctx, agent("acme"), "kind", json.RawMessage(tt.args))
		if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != tt.path {
			t.Errorf("List(%s) = %s %v, want one issue at %s", tt.args, out.Status, out.Issues, tt.path)
		}
	}
	for _, args := range []string{`{"limit": 2}`, `{"filters": {"n8": {"eq": "9223372036854775807"}}}`, `{"filters": {"ok": {"eq": "true"}}}`,
		`{"filters": {"short": {"eq": "abcde"}}}`, `{"filters": {"amount": {"gt": "9.5"}}, "sort": "-n2"}`} {
		if out := e.List(ctx, agent("acme"), "kind", json.RawMessage(args)); out.Status != engine.StatusOK {
			t.Errorf("List(%s) = %s %v", args, out.Status, out.Issues)
		}
	}
	if out := e.Get(ctx, agent("acme"), "kind", json.RawMessage(`{"id": 7}`)); out.Status != engine.StatusInvalidInput || out.Issues[0].Path != "/id" {
		t.Errorf("get by a number for a uuid key = %s %v", out.Status, out.Issues)
	}
}

// TestActionInputDefaults: the defaults an action's input schema declares
// are part of the input before it is staged — the approval, its digest and
// what executes all hold them — and a value sent is never replaced.
func TestActionInputDefaults(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.cancel_order.input.required", []string{"order_id"}),
		ontologytest.Set("actions.cancel_order.input.properties.reason.default", "the customer asked"),
		ontologytest.SetYAML("actions.cancel_order.input.properties.meta", `{type: object, properties: {channel: {type: string, default: phone}, urgent: {type: boolean, default: false}}}`))

	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "meta": {"urgent": true}}`))
	want(t, staged, engine.StatusApprovalPending)
	view, err := e.ShowApproval(ctx, "acme", staged.ApprovalID.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(view.Input); got != `{"meta":{"channel":"phone","urgent":true},"order_id":"o-1001","reason":"the customer asked"}` {
		t.Fatalf("staged input %s, want the defaults filled in", got)
	}
	// The call with the defaults written out is the same call.
	again := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "the customer asked", "meta": {"channel": "phone", "urgent": true}}`))
	if again.Status != engine.StatusApprovalPending || *again.ApprovalID != *staged.ApprovalID {
		t.Fatalf("the same call with its defaults written: %s %v", again.Status, again.ApprovalID)
	}
	// A value sent is kept.
	other := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "damaged"}`))
	want(t, other, engine.StatusApprovalPending)
	if view, _ := e.ShowApproval(ctx, "acme", other.ApprovalID.String()); string(view.Input) != `{"order_id":"o-1002","reason":"damaged"}` {
		t.Fatalf("staged input %s, want reason kept", view.Input)
	}
	// What executes is what was staged: the execution's audit record
	// holds the input with its defaults.
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	var entry string
	if err := b.admin.QueryRow(ctx, `SELECT convert_from(entry, 'UTF8') FROM orangerail.audit WHERE tenant_id = 'acme' AND phase = 'execution_started' AND approval_id = $1`,
		*staged.ApprovalID).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(entry, `"reason":"the customer asked"`) || !strings.Contains(entry, `"channel":"phone"`) {
		t.Fatalf("the execution's record %s, want the defaults", entry)
	}
}
