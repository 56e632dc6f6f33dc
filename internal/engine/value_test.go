package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// typedSchema is a table with a column of every type the engine checks
// values against, and a view whose rows fail at run time: boom() raises for
// the row named boom.
const typedSchema = `
CREATE DOMAIN count AS integer CHECK (VALUE >= 0);
CREATE DOMAIN small_count AS count;
CREATE TABLE things (
	org_id text NOT NULL, id uuid PRIMARY KEY, name text NOT NULL,
	n2 smallint, n4 integer, n8 bigint, d small_count, amount numeric(12, 2), ratio real, score double precision,
	ok boolean, at timestamptz, local_at timestamp, day date, addr inet
);
INSERT INTO things VALUES
	('acme', '123e4567-e89b-12d3-a456-426614174000', 'one', 1, 1, 1, 1, 1.50, 0.5, 0.25, true,
	 '2024-05-01T12:00:00Z', '2024-05-01T12:00:00', '2024-05-01', '10.0.0.1'),
	('acme', '00000000-0000-0000-0000-000000000002', 'two', 2, 2, 9007199254740993, 2, 2.50, 1.5, 2.25, false,
	 '2024-06-01T12:00:00Z', '2024-06-01T12:00:00', '2024-06-01', '10.0.0.2'),
	('acme', '00000000-0000-0000-0000-000000000003', 'boom', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL);
CREATE FUNCTION boom(t text) RETURNS text LANGUAGE plpgsql AS
	$$ BEGIN IF t = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN t; END $$;
CREATE VIEW checked_things AS SELECT org_id, id, name, boom(name) AS checked FROM things;
GRANT SELECT ON things, checked_things TO orangerail_runtime;
`

const typedConfig = `service: typed
objects:
  thing:
    table: things
    key: id
    tenant_column: org_id
    fields: [id, name, n2, n4, n8, d, amount, ratio, score, ok, at, local_at, day, addr]
    list:
      filters: {id: [eq, in], n2: [eq], n4: [eq, gt], n8: [eq], d: [eq], amount: [eq, gt, lt], ratio: [gt],
                score: [gt], ok: [eq], at: [gt, lt, in], local_at: [gt], day: [eq, gt], addr: [eq]}
  checked_thing:
    table: checked_things
    key: name
    tenant_column: org_id
    fields: [id, name, checked]
    list: {filters: {name: [eq]}}
links:
  checked: {from: checked_thing.id, to: thing.id}
`

func setupTyped(t *testing.T) *exampleBundle {
	t.Helper()
	b := setup(t)
	if _, err := b.admin.Exec(context.Background(), typedSchema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return serve(t, b, []byte(typedConfig))
}

// unchecked is the issue a value gets only when Postgres refused it: a
// value the engine checked is refused with a message of its own.
const unchecked = "not a valid value for this field"

// TestListChecksValuesByColumnType holds each filter value to its column's
// type before any SQL runs: every value of the right form is answered (at
// the ends of each type's range too, so the checks refuse nothing Postgres
// takes), and every other is refused at its path with the form it must
// take.
func TestListChecksValuesByColumnType(t *testing.T) {
	t.Parallel()
	b := setupTyped(t)
	ctx := context.Background()
	caller := agent("acme")
	count := func(t *testing.T, filters string) int {
		t.Helper()
		out := b.engine.List(ctx, caller, "thing", json.RawMessage(`{"filters": `+filters+`}`))
		if out.Status != engine.StatusOK {
			t.Fatalf("filters %s: %s %v %v", filters, out.Status, out.Issues, out.Err)
		}
		var body struct{ Items []json.RawMessage }
		if err := json.Unmarshal(out.Data, &body); err != nil {
			t.Fatal(err)
		}
		return len(body.Items)
	}

	valid := []struct {
		filters string
		rows    int
	}{
		{`{"id": {"eq": "123e4567-e89b-12d3-a456-426614174000"}}`, 1},
		{`{"id": {"eq": "123E4567-E89B-12D3-A456-426614174000"}}`, 1},
		{`{"id": {"in": ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000002"]}}`, 2},
		{`{"n2": {"eq": 1}}`, 1},
		{`{"n2": {"eq": "2"}}`, 1},
		{`{"n2": {"eq": -32768}}`, 0},
		{`{"n4": {"gt": 1}}`, 1},
		{`{"n4": {"eq": 2147483647}}`, 0},
		{`{"n4": {"eq": -2147483648}}`, 0},
		{`{"n8": {"eq": "9007199254740993"}}`, 1}, // beyond a double's integers: exact
		{`{"n8": {"eq": 9007199254740993}}`, 1},
		{`{"n8": {"eq": -9223372036854775808}}`, 0},
		{`{"d": {"eq": 2}}`, 1}, // a domain over a domain over integer
		{`{"amount": {"eq": 1.5}}`, 1},
		{`{"amount": {"gt": "2"}}`, 1},
		{`{"amount": {"lt": 1e1000}}`, 2},
		{`{"amount": {"gt": -1e-1000}}`, 2},
		{`{"amount": {"gt": 0.` + "0000000000000000000000000000000000000000000000000001" + `e-1000}}`, 2},
		{`{"ratio": {"gt": 1}}`, 1},
		{`{"ratio": {"gt": -3.4e38}}`, 2},
		{`{"score": {"gt": 2}}`, 1},
		{`{"score": {"gt": -1.7e308}}`, 2},
		{`{"ok": {"eq": true}}`, 1},
		{`{"ok": {"eq": "false"}}`, 1},
		{`{"at": {"gt": "2024-05-15T00:00:00+02:00"}}`, 1},
		{`{"at": {"gt": "2024-05-01T11:59:59.9999999Z"}}`, 1}, // rounds up to 12:00:00, as Postgres rounds text (truncating would match one more)
		{`{"at": {"in": ["2024-05-01T12:00:00Z", "2024-06-01T14:00:00+02:00"]}}`, 2},
		{`{"at": {"gt": "0000-01-01T00:00:00Z"}}`, 2},
		{`{"at": {"in": ["2024-05-01t12:00:00z"]}}`, 1}, // RFC 3339 §5.6: t and z may be lower case
		{`{"at": {"in": ["2024-06-01t14:00:00+02:00"]}}`, 1},
		{`{"at": {"gt": "2024-05-31T23:59:60Z"}}`, 1}, // a leap second: the next day's first second, as Postgres reads it
		{`{"at": {"in": ["2024-05-31T23:59:60Z", "2024-06-01T11:59:59Z"]}}`, 0},
		{`{"at": {"lt": "2024-06-01T13:59:60.5+14:00"}}`, 1}, // 23:59:60.5 in UTC: after 2024-05-01's row, before 2024-06-01 12:00
		{`{"at": {"lt": "9999-12-31T23:59:59.9999999Z"}}`, 2},
		{`{"local_at": {"gt": "2024-05-15T00:00:00"}}`, 1},
		{`{"local_at": {"gt": "2024-05-01T11:59:59.5"}}`, 2},
		{`{"day": {"eq": "2024-05-01"}}`, 1},
		{`{"day": {"gt": "0000-01-01"}}`, 2},
		{`{"addr": {"eq": "10.0.0.1"}}`, 1}, // a type the engine does not model: Postgres parses it
	}
	for _, tt := range valid {
		if got := count(t, tt.filters); got != tt.rows {
			t.Errorf("filters %s: %d rows, want %d", tt.filters, got, tt.rows)
		}
	}

	invalid := []struct{ filters, path string }{
		{`{"id": {"eq": "not-a-uuid"}}`, "/filters/id/eq"},
		{`{"id": {"eq": "{123e4567-e89b-12d3-a456-426614174000}"}}`, "/filters/id/eq"},
		{`{"id": {"eq": 1}}`, "/filters/id/eq"},
		{`{"id": {"in": ["123e4567-e89b-12d3-a456-426614174000", "nope"]}}`, "/filters/id/in/1"},
		{`{"n2": {"eq": 32768}}`, "/filters/n2/eq"},
		{`{"n4": {"eq": 2147483648}}`, "/filters/n4/eq"},
		{`{"n4": {"gt": 1.5}}`, "/filters/n4/gt"},
		{`{"n4": {"gt": 1e2}}`, "/filters/n4/gt"},
		{`{"n4": {"eq": "1.0"}}`, "/filters/n4/eq"},
		{`{"n4": {"eq": "+1"}}`, "/filters/n4/eq"},
		{`{"n4": {"eq": " 1"}}`, "/filters/n4/eq"},
		{`{"n4": {"eq": true}}`, "/filters/n4/eq"},
		{`{"n8": {"eq": 9223372036854775808}}`, "/filters/n8/eq"},
		{`{"d": {"eq": "12abc"}}`, "/filters/d/eq"},
		{`{"amount": {"eq": 1e1001}}`, "/filters/amount/eq"},
		{`{"amount": {"eq": "1e-1001"}}`, "/filters/amount/eq"},
		{`{"amount": {"eq": "NaN"}}`, "/filters/amount/eq"},
		{`{"amount": {"eq": "1,5"}}`, "/filters/amount/eq"},
		{`{"amount": {"eq": true}}`, "/filters/amount/eq"},
		{`{"ratio": {"gt": 4e38}}`, "/filters/ratio/gt"},
		{`{"score": {"gt": 1e400}}`, "/filters/score/gt"},
		{`{"score": {"gt": "Infinity"}}`, "/filters/score/gt"},
		{`{"ok": {"eq": "yes"}}`, "/filters/ok/eq"},
		{`{"ok": {"eq": 1}}`, "/filters/ok/eq"},
		{`{"at": {"gt": "not-a-time"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "2024-05-01 12:00:00Z"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "2024-05-01T12:00:00"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "2024-05-01T24:00:00Z"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "2024-05-01T11:59:60Z"}}`, "/filters/at/gt"}, // a leap second on a minute no leap second ends
		{`{"at": {"gt": "2024-05-01T23:59:61Z"}}`, "/filters/at/gt"},
		{`{"at": {"in": ["2024-05-01T12:00:00Z", "2024-06-01T11:59:60Z"]}}`, "/filters/at/in/1"},
		{`{"at": {"gt": "2024-05-01X12:00:00Z"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "2024-05-01T12:00:00+24:00"}}`, "/filters/at/gt"},
		{`{"at": {"gt": "infinity"}}`, "/filters/at/gt"},
		{`{"at": {"gt": 1714560000}}`, "/filters/at/gt"},
		{`{"at": {"in": ["2024-05-01T12:00:00Z", "yesterday"]}}`, "/filters/at/in/1"},
		{`{"local_at": {"gt": "2024-05-01T12:00:00Z"}}`, "/filters/local_at/gt"},
		{`{"day": {"eq": "2024-02-30"}}`, "/filters/day/eq"},
		{`{"day": {"eq": "2024-05-01T00:00:00Z"}}`, "/filters/day/eq"},
	}
	for _, tt := range invalid {
		out := b.engine.List(ctx, caller, "thing", json.RawMessage(`{"filters": `+tt.filters+`}`))
		if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != tt.path || out.Issues[0].Message == unchecked {
			t.Errorf("filters %s = %s %v, want invalid_input at %s, checked before SQL", tt.filters, out.Status, out.Issues, tt.path)
		}
	}

	// A get's key is checked the same way.
	out := b.engine.Get(ctx, caller, "thing", json.RawMessage(`{"id": "not-a-uuid"}`))
	if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != "/id" || out.Issues[0].Message == unchecked {
		t.Errorf("get by a key that is not a UUID = %s %v, want invalid_input at /id, checked before SQL", out.Status, out.Issues)
	}
	if out := b.engine.Get(ctx, caller, "thing", json.RawMessage(`{"id": "00000000-0000-0000-0000-000000000002"}`)); out.Status != engine.StatusOK {
		t.Errorf("get by a UUID key = %s %v", out.Status, out.Issues)
	}
	// A value the engine does not model still reaches Postgres, which
	// refuses it: the caller's mistake all the same.
	out = b.engine.List(ctx, caller, "thing", json.RawMessage(`{"filters": {"addr": {"eq": "not-an-address"}}}`))
	if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != "/filters" {
		t.Errorf("an address Postgres refuses = %s %v, want invalid_input at /filters", out.Status, out.Issues)
	}
}

// TestReadFailuresKeepConnections holds every failed read to leaving the
// datasource's pooled connection reusable: ten rounds of refused values
// (caught before SQL), values Postgres refuses, and statements that fail
// while they run, each beside reads that succeed, open no connection
// beyond the pool's first.
func TestReadFailuresKeepConnections(t *testing.T) {
	t.Parallel()
	b := setupTyped(t)
	ctx := context.Background()
	caller := agent("acme")
	before := b.runtime.Stat().NewConnsCount()

	failing := []struct {
		name, object, args string
		list               bool
		status             engine.Status
	}{
		{"a time that is not one", "thing", `{"filters": {"at": {"gt": "not-a-time"}}}`, true, engine.StatusInvalidInput},
		{"an address Postgres refuses", "thing", `{"filters": {"addr": {"eq": "not-an-address"}}}`, true, engine.StatusInvalidInput},
		{"a list whose row raises", "checked_thing", `{"filters": {"name": {"eq": "boom"}}}`, true, engine.StatusResolveError},
		{"a get whose row raises", "checked_thing", `{"name": "boom"}`, false, engine.StatusResolveError},
		{"a get whose row raises, with a link", "checked_thing", `{"name": "boom", "include": ["checked"]}`, false, engine.StatusResolveError},
	}
	for range 10 {
		for _, f := range failing {
			var out *engine.Outcome
			if f.list {
				out = b.engine.List(ctx, caller, f.object, json.RawMessage(f.args))
			} else {
				out = b.engine.Get(ctx, caller, f.object, json.RawMessage(f.args))
			}
			if out.Status != f.status {
				t.Fatalf("%s: %s %v %v, want %s", f.name, out.Status, out.Issues, out.Err, f.status)
			}
			if out := b.engine.List(ctx, caller, "thing", json.RawMessage(`{"filters": {"at": {"gt": "2024-01-01T00:00:00Z"}}}`)); out.Status != engine.StatusOK {
				t.Fatalf("the list after %s: %s %v", f.name, out.Status, out.Err)
			}
			if out := b.engine.Get(ctx, caller, "checked_thing", json.RawMessage(`{"name": "one"}`)); out.Status != engine.StatusOK {
				t.Fatalf("the get after %s: %s %v", f.name, out.Status, out.Err)
			}
		}
	}
	if n := b.runtime.Stat().NewConnsCount() - before; n != 0 {
		t.Fatalf("failed reads opened %d new connections, want none", n)
	}
}
