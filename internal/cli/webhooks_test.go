package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestWebhooksCommands lists a tenant's webhook messages, by state, and
// queues one again; the states and the ids are checked where the command
// takes them.
func TestWebhooksCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	// An instance naming a webhook queues a message for each staging.
	e := exampleEngine(t, url, make([]byte, engine.KeySize),
		ontologytest.SetYAML("webhooks", "[{url: 'https://hooks.example.com/h', secret_env: ORANGERAIL_TEST_WEBHOOK_SECRET}]"))
	agent := &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	if out := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "asked"}`)); out.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s", out.Status)
	}
	run := func(args ...string) (int, string, string) {
		return cli(t, append(append([]string{"webhooks"}, args...), "--database-url", url, "--tenant", "acme")...)
	}
	code, out, stderr := run("list")
	if code != exitOK || strings.Count(out, "approval.pending") != 1 || !strings.Contains(out, "queued") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ = run("list", "--status", "failed"); code != exitOK || strings.Contains(out, "approval.pending") {
		t.Fatalf("list --status failed: exit %d\n%s", code, out)
	}
	code, _, stderr = run("list", "--status", "lost")
	if code != exitError {
		t.Fatalf("list of an unknown state: exit %d", code)
	}
	oneLine(t, stderr, "X_WEBHOOK_STATE_INVALID")
	// A mistyped tenant is refused, not listed as one with nothing.
	code, out, stderr = cli(t, "webhooks", "list", "--database-url", url, "--tenant", "acmee")
	if code != exitError || out != "" {
		t.Fatalf("list of an unknown tenant: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")

	_, out, _ = run("list", "--json")
	var msgs []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &msgs); err != nil || len(msgs) != 1 {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	// Its members are named as every other --json's, in snake_case.
	var members []map[string]any
	if err := json.Unmarshal([]byte(out), &members); err != nil || members[0]["id"] == nil || members[0]["tenant_id"] != "acme" || members[0]["state"] == nil || members[0]["ID"] != nil {
		t.Fatalf("list --json members: %v\n%s", err, out)
	}
	if code, out, stderr = run("redeliver", msgs[0].ID); code != exitOK || !strings.Contains(out, "queued again") {
		t.Fatalf("redeliver: exit %d %q %q", code, out, stderr)
	}
	for _, id := range []string{"not-an-id", "11111111-2222-3333-4444-555555555555"} {
		code, _, stderr = run("redeliver", id)
		if code != exitError {
			t.Fatalf("redeliver %s: exit %d", id, code)
		}
		oneLine(t, stderr, "X_WEBHOOK_NOT_FOUND")
	}
	// Another tenant's message is not found either.
	if _, err := testdb.Pool(t, url).Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('globex')"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cli(t, "webhooks", "redeliver", msgs[0].ID, "--database-url", url, "--tenant", "globex")
	if code != exitError {
		t.Fatalf("redeliver of another tenant's message: exit %d", code)
	}
	oneLine(t, stderr, "X_WEBHOOK_NOT_FOUND")
}
