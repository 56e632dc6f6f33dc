package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// TestTargetKeyOfTheWrongFormIsTheCallersToFix: an action's target key is
// held to its key column's type before the target is read, as a get's key
// is. A key_from property declared {type: string} over a uuid (or integer)
// key took any string to Postgres, which refused it (22P02, 22003): the
// call was answered resolve_error — a datasource failure, logged at
// error, the agent told only a correlation id — where a get of the same
// key says invalid_input at its path.
func TestTargetKeyOfTheWrongFormIsTheCallersToFix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, typedSchema+`GRANT UPDATE (name) ON things TO orangerail_runtime;`); err != nil {
		t.Fatalf("schema: %v", err)
	}
	x := serve(t, b, []byte(typedConfig+`
actions:
  rename_thing:
    description: Rename a thing.
    target: {object: thing, key_from: thing_id}
    input: {type: object, required: [thing_id, name], additionalProperties: false,
            properties: {thing_id: {type: string, maxLength: 64}, name: {type: string}}}
    policy: {approval: none, roles: [support]}
    destructive: false
    execute: {sql: "UPDATE things SET name = :name WHERE id = :thing_id::uuid AND org_id = current_setting('orangerail.tenant_id')"}
  count_thing:
    description: Bump a thing's count.
    target: {object: thing, key_from: thing_id}
    input: {type: object, required: [thing_id], additionalProperties: false,
            properties: {thing_id: {type: string, maxLength: 64}}}
    policy: {approval: none, roles: [support]}
    destructive: false
    execute: {sql: "UPDATE things SET name = name WHERE id = :thing_id::uuid AND org_id = current_setting('orangerail.tenant_id')"}
`))
	for _, tt := range []struct{ action, input string }{
		{"rename_thing", `{"thing_id": "not-a-uuid", "name": "x"}`},
		{"count_thing", `{"thing_id": "123e4567-e89b-12d3-a456-42661417400"}`},
	} {
		out := x.engine.Call(ctx, agent("acme", "support"), tt.action, json.RawMessage(tt.input))
		if out.Status != engine.StatusInvalidInput || out.Code != errcode.InputInvalid || len(out.Issues) != 1 || out.Issues[0].Path != "/thing_id" {
			t.Errorf("%s %s = %s (code %q, diagnostic %q, err %v), want invalid_input at /thing_id",
				tt.action, tt.input, out.Status, out.Code, out.Diagnostic, out.Err)
		}
	}
	// A key of the right form still reaches its target.
	out := x.engine.Call(ctx, agent("acme", "support"), "rename_thing", json.RawMessage(`{"thing_id": "123e4567-e89b-12d3-a456-426614174000", "name": "uno"}`))
	if out.Status != engine.StatusOK {
		t.Fatalf("a UUID key: %s %v %v", out.Status, out.Issues, out.Err)
	}
}
