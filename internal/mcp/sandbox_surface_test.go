package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestSandboxSurfaceSaysWhatACallAnswers: under preset sandbox every
// action call answers dry_run, an action without an effect and one that
// needs approval included. What the surface says a call answers —
// the tool's description in tools/list, describe_action's answers and
// list_policies' summary — says dry_run too, never approval_pending or
// not_implemented, which the engine never answers there.
func TestSandboxSurfaceSaysWhatACallAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t, ontologytest.Set("preset", "sandbox"), ontologytest.SetYAML("actions.add_order_note.execute", "{not_implemented: true}"))
	cs := connect(t, s, agent("support"))

	// What the engine answers.
	for tool, args := range map[string]string{
		"cancel_order":   `{"order_id": "o-1001", "reason": "x"}`,
		"add_order_note": `{"order_id": "o-1001", "note": "x"}`,
	} {
		if _, body := call(t, cs, tool, args); body["status"] != "dry_run" {
			t.Fatalf("%s in the sandbox: %v", tool, body)
		}
	}

	// What the surface says.
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name == "cancel_order" && strings.Contains(tool.Description, "approval_pending") {
			t.Errorf("tools/list tells the sandbox's cancel_order answers approval_pending: %q", tool.Description)
		}
		// A poll of an approved approval answers dry_run there too, and
		// leaves it approved: check_approval's description said it
		// executes now.
		if tool.Name == "check_approval" && (strings.Contains(tool.Description, "executes now") || !strings.Contains(tool.Description, "dry_run")) {
			t.Errorf("tools/list tells the sandbox's check_approval executes an approved approval: %q", tool.Description)
		}
	}
	var told struct{ Answers string }
	if err := json.Unmarshal(described(t, cs, "describe_action", `{"action": "add_order_note"}`), &told); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(told.Answers, "A call answers dry_run") || strings.Contains(told.Answers, "answers not_implemented") {
		t.Errorf("describe_action add_order_note in the sandbox: %q", told.Answers)
	}
	var policies struct {
		Policies []struct{ Action, Summary string }
	}
	if err := json.Unmarshal(described(t, cs, "list_policies", `{}`), &policies); err != nil {
		t.Fatal(err)
	}
	for _, p := range policies.Policies {
		if strings.Contains(p.Summary, "answers approval_pending") {
			t.Errorf("list_policies tells the sandbox's %s answers approval_pending: %q", p.Action, p.Summary)
		}
	}
}
