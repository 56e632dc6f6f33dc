package mcp_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/testdb"
)

var quiet = slog.New(slog.DiscardHandler)

type bundle struct {
	url     string
	admin   *pgxpool.Pool
	runtime *pgxpool.Pool
	key     []byte
}

func setup(t testing.TB) *bundle {
	t.Helper()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	return &bundle{url: url, admin: admin, runtime: testdb.RuntimePool(t, url), key: key}
}

// server serves the example, with edits applied to its config's YAML
// tree, in the mode its preset names.
func (b *bundle) server(t testing.TB, edits ...ontologytest.Edit) (*mcp.Server, *engine.Engine) {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, edits...)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Mode: engine.ModeOf(cfg.Preset), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// sqlServer serves the demo's config — the example, with sql_query for
// auditors — its catalog read from real Postgres, and a querier logging in
// as the query role; opts' Logger and Hooks, when set, are the server's.
func (b *bundle) sqlServer(t testing.TB, opts mcp.Options) (*mcp.Server, *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	cfg, err := ontology.Parse(append(append([]byte{}, orders.Config...), "sql_query: {enabled: true, roles: [auditor]}\n"...))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: testdb.WithUser(t, b.url, sqlquery.QueryRole, ""), Store: b.runtime})
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine, opts.Ontology, opts.Querier, opts.Logger = e, cfg, q, cmp.Or(opts.Logger, quiet)
	s, err := mcp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// connect opens a real go-sdk client session to s as caller, in memory.
func connect(t *testing.T, s *mcp.Server, caller *engine.Caller) *sdk.ClientSession {
	t.Helper()
	return connectWith(t, s, caller, nil, "")
}

// hooked serves cfg, in the mode its preset names, with the engine and the
// server emitting into hooks.
func (b *bundle) hooked(t testing.TB, cfg *ontology.Config, hooks *engine.Hooks) *mcp.Server {
	t.Helper()
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key,
		Mode: engine.ModeOf(cfg.Preset), Logger: quiet, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Logger: quiet, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func agent(roles ...string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: roles, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func call(t *testing.T, cs *sdk.ClientSession, name, args string) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var body map[string]any
	switch sc := res.StructuredContent.(type) {
	case map[string]any:
		body = sc
	case nil:
		for _, c := range res.Content {
			if text, ok := c.(*sdk.TextContent); ok && strings.HasPrefix(text.Text, "{") {
				_ = json.Unmarshal([]byte(text.Text), &body)
			}
		}
	default:
		b, _ := json.Marshal(sc)
		_ = json.Unmarshal(b, &body)
	}
	return res, body
}

// issuePaths are the paths of the issues a call's answer body names, in
// order.
func issuePaths(body map[string]any) []string {
	issues, _ := body["issues"].([]any)
	paths := []string{}
	for _, issue := range issues {
		m, _ := issue.(map[string]any)
		path, _ := m["path"].(string)
		paths = append(paths, path)
	}
	return paths
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestCatalogPerCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	reads := []string{"order_get", "order_list", "product_get", "product_list"}
	describes := []string{"describe_action", "describe_object", "errors_explain", "list_policies"}
	tests := []struct {
		name   string
		caller *engine.Caller
		want   []string
	}{
		{"anonymous", &engine.Caller{Tenant: "acme"}, []string{"product_get", "product_list"}},
		// Deny by default: every action names who may call it, so an
		// agent without roles gets reads alone.
		// Every authenticated caller sees the describe tools, which
		// describe only what it sees.
		{"agent without roles", agent(), slices.Concat([]string{"check_approval"}, describes, reads)},
		{"support agent", agent("support"), slices.Concat([]string{"add_order_note", "cancel_order", "check_approval", "create_return_label", "customer_get", "customer_list", "update_shipping_address"}, describes, reads)},
	}
	for _, tt := range tests {
		got := toolNames(t, connect(t, s, tt.caller))
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", tt.name, got, want)
		}
	}

	// A catalog is the caller's own: no client or intermediary may share it.
	if res, err := connect(t, s, agent()).ListTools(context.Background(), nil); err != nil || res.CacheScope != "private" || res.TTLMs != 0 {
		t.Fatalf("tools/list cache hints: %+v %v", res, err)
	}

	// A hidden tool answers exactly as a tool that does not exist.
	cs := connect(t, s, agent())
	_, hiddenErr := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "o-1001", "reason": "x"}})
	_, missingErr := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if hiddenErr == nil || missingErr == nil ||
		strings.ReplaceAll(hiddenErr.Error(), "cancel_order", "X") != strings.ReplaceAll(missingErr.Error(), "no_such_tool", "X") {
		t.Fatalf("hidden: %v; missing: %v", hiddenErr, missingErr)
	}
}

// TestDemoAuditorCannotCallAnyAction: the demo's auditor token (roles
// [auditor], no scope) sees no action, and a call to each answers as an
// unknown tool and writes nothing, over the demo's config (the example
// with sql_query for auditors).
func TestDemoAuditorCannotCallAnyAction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := b.server(t, ontologytest.SetYAML("sql_query", "{enabled: true, roles: [auditor]}"))
	auditor := &engine.Caller{Subject: "demo-auditor@acme", Tenant: "acme", Roles: []string{"auditor"}, Kind: engine.ActorAgent}
	cs := connect(t, s, auditor)
	cfg := ontologytest.Parse(t, orders.Config)
	names := toolNames(t, cs)
	args := map[string]string{
		"add_order_note":          `{"order_id": "o-1001", "note": "written by the auditor"}`,
		"cancel_order":            `{"order_id": "o-1001", "reason": "the auditor cancels"}`,
		"update_shipping_address": `{"order_id": "o-1001", "address": "1 Auditor Lane"}`,
		"create_return_label":     `{"order_id": "o-1003", "reason": "the auditor asks", "weight_grams": 500}`,
	}
	if got, want := slices.Sorted(maps.Keys(args)), slices.Sorted(maps.Keys(cfg.Actions)); !slices.Equal(got, want) {
		t.Fatalf("the test calls %v; the example declares %v", got, want)
	}
	// Everything a call could write: notes, approvals, audit records and
	// the order the calls name.
	const writesQuery = "SELECT (SELECT count(*) FROM order_notes)::text || (SELECT count(*) FROM orangerail.approvals) || (SELECT count(*) FROM orangerail.audit) || " +
		"(SELECT status || shipping_address FROM orders WHERE org_id = 'acme' AND id = 'o-1001')"
	var before string
	if err := b.admin.QueryRow(ctx, writesQuery).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for name, input := range args {
		if slices.Contains(names, name) {
			t.Errorf("the auditor sees %s", name)
		}
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(input)})
		_, missingErr := cs.CallTool(ctx, &sdk.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
		if err == nil || missingErr == nil || strings.ReplaceAll(err.Error(), name, "X") != strings.ReplaceAll(missingErr.Error(), "no_such_tool", "X") {
			t.Errorf("the auditor's call to %s: %v, want it answered as an unknown tool (%v)", name, err, missingErr)
		}
	}
	var after string
	if err := b.admin.QueryRow(ctx, writesQuery).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the auditor's calls wrote: %q before, %q after", before, after)
	}
}

// TestWaiverInToolDescription: a destructive action that runs without
// approval says so, with the config's reason, in its tool's description.
func TestWaiverInToolDescription(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t, ontologytest.Set("actions.cancel_order.policy.approval", "none"),
		ontologytest.Set("actions.cancel_order.approval_waived", "support cancels unshipped orders on the phone"))
	res, err := connect(t, s, agent("support")).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "cancel_order" })
	if i < 0 {
		t.Fatal("support does not see cancel_order")
	}
	d := res.Tools[i].Description
	if !strings.Contains(d, " Destructive, and runs without approval: support cancels unshipped orders on the phone.") || strings.Contains(d, "A person must approve") {
		t.Fatalf("cancel_order description %q lacks the waiver", d)
	}
}

func TestAnnotationsAndSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// update_shipping_address with destructive unset; add_order_note
	// declared destructive: false, as the example declares both.
	s, _ := b.server(t, ontologytest.Delete("actions.update_shipping_address.destructive"))
	res, err := connect(t, s, agent("support")).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	// Reads are read-only, idempotent and closed-world, titled as people
	// would title them.
	titles := map[string]string{"order_get": "Get an order", "order_list": "List orders", "customer_get": "Get a customer", "product_list": "List products"}
	for name, title := range titles {
		tool := byName[name]
		if a := tool.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint ||
			tool.OutputSchema == nil || tool.Title != title || a.Title != title {
			t.Errorf("%s: title %q, annotations %+v, output schema %v", name, tool.Title, tool.Annotations, tool.OutputSchema)
		}
	}
	cancel := byName["cancel_order"]
	// An action that calls an upstream's API is open-world, and so is
	// check_approval, which may execute it.
	for _, name := range []string{"create_return_label", "check_approval"} {
		if a := byName[name].Annotations; a == nil || a.OpenWorldHint == nil || !*a.OpenWorldHint {
			t.Errorf("%s annotations %+v: an upstream call is open-world", name, a)
		}
	}
	if a := cancel.Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("cancel_order annotations %+v", cancel.Annotations)
	}
	// An action that does not say destructive: false is assumed
	// destructive (seed 004); one that says so is not.
	update := byName["update_shipping_address"]
	if a := update.Annotations; a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint {
		t.Errorf("update_shipping_address annotations %+v", a)
	}
	if a := byName["add_order_note"].Annotations; a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("add_order_note, declared destructive: false: annotations %+v", a)
	}
	// check_approval may execute any approved action: destructive, as the
	// actions may be; polling again never runs one twice.
	if a := byName["check_approval"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint || byName["check_approval"].OutputSchema == nil {
		t.Errorf("check_approval annotations %+v", a)
	}
	if cancel.Title != "Cancel an order" || !strings.Contains(cancel.Description, "Cancel an order that has not shipped.") {
		t.Errorf("cancel_order title %q description %q", cancel.Title, cancel.Description)
	}
	schema, _ := json.Marshal(cancel.InputSchema)
	if !strings.Contains(string(schema), `"maxLength":500`) {
		t.Errorf("cancel_order input schema %s", schema)
	}
	for name, tool := range byName {
		if tool.Meta != nil {
			t.Errorf("%s carries _meta with host_approval_prompt off: %v", name, tool.Meta)
		}
	}
}

func TestPresetsAndHostPrompt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ungoverned := []string{"add_order_note"}
	all := []string{"add_order_note", "cancel_order", "create_return_label", "update_shipping_address"}
	tests := []struct {
		preset, prompt string
		actions        bool
		flagged        []string
	}{
		{"approval-for-writes", "off", true, nil},
		{"approval-for-writes", "ungoverned-actions", true, ungoverned},
		{"approval-for-writes", "all-actions", true, all},
		{"sandbox", "off", true, nil},
		{"sandbox", "ungoverned-actions", true, ungoverned},
		{"sandbox", "all-actions", true, all},
		{"readonly", "off", false, nil},
		{"readonly", "ungoverned-actions", false, nil},
		{"readonly", "all-actions", false, nil},
	}
	for _, tt := range tests {
		s, _ := b.server(t, ontologytest.Set("preset", tt.preset), ontologytest.Set("host_approval_prompt", tt.prompt))
		res, err := connect(t, s, agent("support")).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var flagged []string
		hasActions, hasCheck := false, false
		for _, tool := range res.Tools {
			if v, ok := tool.Meta["anthropic/requiresUserInteraction"]; ok {
				if v != true {
					t.Errorf("%s/%s: %s _meta value %v", tt.preset, tt.prompt, tool.Name, v)
				}
				flagged = append(flagged, tool.Name)
			} else if tool.Meta != nil {
				t.Errorf("%s/%s: %s carries _meta %v", tt.preset, tt.prompt, tool.Name, tool.Meta)
			}
			hasActions = hasActions || slices.Contains(all, tool.Name)
			hasCheck = hasCheck || tool.Name == "check_approval"
		}
		slices.Sort(flagged)
		if !slices.Equal(flagged, tt.flagged) || hasActions != tt.actions || hasCheck != tt.actions {
			t.Errorf("%s/%s: flagged %v (want %v), actions %v, check_approval %v", tt.preset, tt.prompt, flagged, tt.flagged, hasActions, hasCheck)
		}
	}
}

// driverWords are words of the datasource's own: a table, a constraint,
// a column, SQL. None may reach an agent in a failure.
var driverWords = []string{"order_notes", `\"orders\"`, "SQLSTATE", "permission denied for", `relation \"`, "INSERT INTO", "UPDATE orders", "audit_append", "orangerail_runtime", "ERROR:"}

func assertRedacted(t *testing.T, res *sdk.CallToolResult) {
	t.Helper()
	all, _ := json.Marshal([]any{res.Content, res.StructuredContent})
	for _, w := range driverWords {
		if strings.Contains(string(all), w) {
			t.Fatalf("the agent received %q: %s", w, all)
		}
	}
}

func TestFailuresAreRedacted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	cs := connect(t, s, agent("support"))
	ctx := context.Background()

	// failed: the datasource refuses the effect.
	if _, err := b.admin.Exec(ctx, "REVOKE INSERT ON order_notes FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	res, body := call(t, cs, "add_order_note", `{"order_id": "o-1001", "note": "x"}`)
	assertRedacted(t, res)
	if !res.IsError || body["status"] != "failed" || body["correlationId"] == nil || body["diagnostic"] != "datasource_permission_denied" ||
		!strings.Contains(text(res), "The datasource error is withheld; an operator can read it in the audit log or host log under correlationId") {
		t.Fatalf("failed: %s %v", text(res), body)
	}

	// resolve_error on a read: host log only.
	if _, err := b.admin.Exec(ctx, "REVOKE SELECT ON orders FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	res, body = call(t, cs, "order_get", `{"id": "o-1001"}`)
	assertRedacted(t, res)
	if !res.IsError || body["status"] != "resolve_error" || !strings.Contains(text(res), "in the host log under correlationId") ||
		strings.Contains(text(res), "audit log") {
		t.Fatalf("read resolve_error: %s", text(res))
	}
	// resolve_error on an action: audited.
	res, body = call(t, cs, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`)
	assertRedacted(t, res)
	if !res.IsError || body["status"] != "resolve_error" || !strings.Contains(text(res), "audit log or host log") {
		t.Fatalf("action resolve_error: %s", text(res))
	}
	if _, err := b.admin.Exec(ctx, "GRANT SELECT ON orders TO orangerail_runtime"); err != nil {
		t.Fatal(err)
	}

	// invalid_input: every issue at its path, with the code; an action's
	// refusal is recorded under the correlation id it carries.
	res, body = call(t, cs, "cancel_order", `{"order_id": 5, "extra": true}`)
	issues, _ := body["issues"].([]any)
	if !res.IsError || body["code"] != string(errcode.InputInvalid) || len(issues) < 2 || body["correlationId"] == nil {
		t.Fatalf("invalid_input: %v", body)
	}
	// JSON that is no I-JSON reaches the engine as sent, and is refused at
	// the value it refuses.
	for args, path := range map[string]string{
		`{"order_id": 1e400, "reason": "x"}`:                       "/order_id",
		`{"order_id": "o-1001", "reason": "\ud800"}`:               "/reason",
		`{"order_id": "o-1001", "reason": "x", "reason": "again"}`: "/reason",
	} {
		res, body = call(t, cs, "cancel_order", args)
		if !res.IsError || body["code"] != string(errcode.InputInvalid) || !slices.Equal(issuePaths(body), []string{path}) {
			t.Fatalf("%s: %v", args, body)
		}
	}
	res, body = call(t, cs, "cancel_order", `{"order_id": "o-1001", "reason": "`+strings.Repeat("x", 70_000)+`"}`)
	if !res.IsError || body["code"] != string(errcode.InputTooLarge) {
		t.Fatalf("input too large: %v", body)
	}
	res, body = call(t, cs, "order_list", `{"sort": "org_id; DROP TABLE orders"}`)
	if !res.IsError || body["code"] != string(errcode.InputInvalid) || !strings.Contains(string(mustJSON(body["issues"])), `"/sort"`) {
		t.Fatalf("list invalid_input: %v", body)
	}

	// audit_blocked: a store error, host log only.
	if _, err := b.admin.Exec(ctx, "GRANT INSERT (org_id, order_id, note) ON order_notes TO orangerail_runtime; REVOKE EXECUTE ON FUNCTION orangerail.audit_append(bytea) FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	res, body = call(t, cs, "add_order_note", `{"order_id": "o-1001", "note": "x"}`)
	assertRedacted(t, res)
	if !res.IsError || body["status"] != "audit_blocked" || !strings.Contains(text(res), "The store error is withheld; an operator can read it in the host log") {
		t.Fatalf("audit_blocked: %s", text(res))
	}

	// A filter value its column's type cannot hold is refused at its path.
	res, body = call(t, cs, "order_list", `{"filters": {"created_at": {"gt": "not-a-time"}}}`)
	if !res.IsError || body["code"] != string(errcode.InputInvalid) || !strings.Contains(string(mustJSON(body["issues"])), `"/filters/created_at/gt"`) {
		t.Fatalf("list filter value invalid_input: %v", body)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestCheckApprovalCycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, e := b.server(t)
	cs := connect(t, s, agent("support"))
	ctx := context.Background()

	res, body := call(t, cs, "order_get", `{"id": "o-1001"}`)
	if res.IsError || body["item"].(map[string]any)["status"] != "paid" {
		t.Fatalf("order_get: %v", body)
	}
	res, body = call(t, cs, "cancel_order", `{"order_id": "o-1001", "reason": "asked"}`)
	id, _ := body["approvalId"].(string)
	if res.IsError || body["status"] != "approval_pending" || id == "" || body["expiresAt"] == nil {
		t.Fatalf("stage: %v", body)
	}
	if _, body = call(t, cs, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "pending" {
		t.Fatalf("poll: %v", body)
	}
	view, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	if out := e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
		t.Fatal(out.Status)
	}
	res, body = call(t, cs, "check_approval", `{"approvalId": "`+id+`"}`)
	if res.IsError || body["status"] != "executed" || body["approvalId"] != id || body["result"] == nil {
		t.Fatalf("execute: %v", body)
	}
	if _, body = call(t, cs, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "consumed" {
		t.Fatalf("re-poll: %v", body)
	}
	// The input is held to the schema check_approval advertises: a UUID,
	// and nothing beside it; an id of no approval is not found.
	if res, body = call(t, cs, "check_approval", `{"approvalId": "6f1d0d2e-0000-4000-8000-000000000009"}`); !res.IsError || body["status"] != "not_found" || body["code"] != "X_APPROVAL_NOT_FOUND" {
		t.Fatalf("unknown id: %v", body)
	}
	for _, args := range []string{`{}`, `{"approvalId": "not-an-id"}`, `{"approvalId": 7}`, `{"approvalId": "` + id + `", "force": true}`, `[]`,
		`{"approvalId": "6f1d0d2e-0000-4000-8000-000000000009", "approvalId": "` + id + `"}`} {
		// Correlated, as every tool's refusal is.
		if res, body = call(t, cs, "check_approval", args); !res.IsError || body["code"] != string(errcode.InputInvalid) || body["correlationId"] == nil {
			t.Fatalf("check_approval %s: %v", args, body)
		}
	}
}

func TestSandboxBesideLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	live, e := b.server(t)
	sandbox, _ := b.server(t, ontologytest.Set("preset", "sandbox"))
	ctx := context.Background()
	liveCS, sandboxCS := connect(t, live, agent("support")), connect(t, sandbox, agent("support"))

	if _, body := call(t, sandboxCS, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`); body["status"] != "dry_run" {
		t.Fatalf("sandbox call: %v", body)
	}
	_, body := call(t, liveCS, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`)
	id := body["approvalId"].(string)
	view, _ := e.ShowApproval(ctx, "acme", id)
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest})
	if _, body = call(t, sandboxCS, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "dry_run" {
		t.Fatalf("sandbox poll: %v", body)
	}
	if _, body = call(t, liveCS, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "executed" {
		t.Fatalf("live poll after the sandbox: %v", body)
	}
}

// TestStreamableHTTP serves the same catalogs over Streamable HTTP, one
// caller per bearer token.
func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	callers := map[string]*engine.Caller{"support-token": agent("support"), "plain-token": agent()}
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken(callers)).Require(s.HTTPHandler()))
	t.Cleanup(srv.Close)

	session := func(token string) (*sdk.ClientSession, error) {
		client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, MaxRetries: -1}, nil)
	}
	support, err := session("support-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = support.Close() })
	plain, err := session("plain-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	if got := toolNames(t, support); !slices.Contains(got, "cancel_order") {
		t.Fatalf("support over HTTP sees %v", got)
	}
	if got := toolNames(t, plain); slices.Contains(got, "cancel_order") || !slices.Contains(got, "order_get") {
		t.Fatalf("plain over HTTP sees %v", got)
	}
	if _, err := plain.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "o-1001", "reason": "x"}}); err == nil {
		t.Fatal("a hidden tool answered over HTTP")
	}
	res, body := call(t, support, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`)
	if res.IsError || body["status"] != "approval_pending" {
		t.Fatalf("stage over HTTP: %v", body)
	}
	if _, err := session("wrong-token"); err == nil {
		t.Fatal("an unknown token connected")
	}
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
}

// TestCatalogPerCallerOverHTTP: each HTTP request is answered by the
// server of its own caller's catalog, whoever called before — callers of
// the same roles in other tenants too, whom an audience predicate tells
// apart — and the servers remembered by caller stay bounded.
func TestCatalogPerCallerOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t, ontologytest.Set("actions.add_order_note.policy.audience", `caller.tenant == "acme"`))
	acme, globex := agent("support"), agent("support")
	globex.Tenant = "globex"
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken{"acme": acme, "globex": globex, "plain": agent()}).Require(s.HTTPHandler()))
	t.Cleanup(srv.Close)
	lists := func(token string) []string {
		client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		return toolNames(t, cs)
	}
	for range 2 { // the second round is answered by what the first remembered
		for _, tc := range []struct {
			token       string
			note, stage bool
		}{{"acme", true, true}, {"globex", false, true}, {"plain", false, false}} {
			got := lists(tc.token)
			if slices.Contains(got, "add_order_note") != tc.note || slices.Contains(got, "cancel_order") != tc.stage || !slices.Contains(got, "order_get") {
				t.Fatalf("%s sees %v", tc.token, got)
			}
		}
	}
	if mcp.ForCaller(s, acme) != mcp.ForCaller(s, agent("support")) || mcp.ForCaller(s, acme) == mcp.ForCaller(s, globex) {
		t.Fatal("callers of one catalog are not answered by one server, or callers of two by one")
	}
	for i := range mcp.MaxRememberedCallers + 10 {
		c := agent("support")
		c.Subject = fmt.Sprintf("agent-%d", i)
		if mcp.ForCaller(s, c) != mcp.ForCaller(s, acme) {
			t.Fatalf("%s is answered by another catalog's server", c.Subject)
		}
	}
	if n := mcp.RememberedCallers(s); n > mcp.MaxRememberedCallers || n == 0 {
		t.Fatalf("%d callers remembered, want 1 to %d", n, mcp.MaxRememberedCallers)
	}
}

// byToken resolves each token it holds to its caller, and refuses any
// other.
type byToken map[string]*engine.Caller

func (b byToken) Resolve(_ context.Context, token string) (*identity.Caller, error) {
	if c, ok := b[token]; ok {
		return &identity.Caller{Caller: *c}, nil
	}
	return nil, fmt.Errorf("%w: unknown token", identity.ErrInvalidToken)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestHostLogKeepsTheFullText: what the agent is refused, the host log
// holds, under the same correlation id; the gate line never holds the
// arguments.
func TestHostLogKeepsTheFullText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var logBuf logbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hooks := engine.NewHooks()
	hooks.Subscribe(0, engine.HostLog(log))
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Logger: log, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, "REVOKE INSERT ON order_notes FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	_, body := call(t, connect(t, s, agent("support")), "add_order_note", `{"order_id": "o-1001", "note": "a private remark"}`)
	correlation, _ := body["correlationId"].(string)
	hooks.Close() // every line emitted so far is written
	logged := logBuf.String()
	var full, gate bool
	for _, line := range strings.Split(strings.TrimSpace(logged), "\n") {
		if !strings.Contains(line, correlation) {
			continue
		}
		full = full || strings.Contains(line, "permission denied for table order_notes")
		gate = gate || (strings.Contains(line, `"tool":"add_order_note"`) && strings.Contains(line, `"outcome":"failed"`))
	}
	if correlation == "" || !full || !gate {
		t.Fatalf("host log lacks the failure under %q:\n%s", correlation, logged)
	}
	if strings.Contains(logged, "a private remark") {
		t.Fatalf("the host log holds the call's arguments:\n%s", logged)
	}
}

func TestSQLQueryTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var logBuf logbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	hooks := engine.NewHooks()
	hooks.Subscribe(0, engine.HostLog(log))
	s, e := b.sqlServer(t, mcp.Options{Logger: log, Hooks: hooks})
	if slices.Contains(toolNames(t, connect(t, s, agent("support"))), "sql_query") {
		t.Fatal("a caller without the auditor role sees sql_query")
	}
	auditor := agent("auditor")
	cs := connect(t, s, auditor)
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(listed.Tools, func(tool *sdk.Tool) bool { return tool.Name == "sql_query" })
	if i < 0 {
		t.Fatal("an auditor does not see sql_query")
	}
	// The description names the search path the querier sets: the default.
	if d := listed.Tools[i].Description; !strings.Contains(d, "(schemas: orangerail, the only relations it may read;") {
		t.Fatalf("sql_query description %q does not name its schemas", d)
	}
	// Something in the audit log to read.
	if out := e.Call(ctx, agent("support"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "n"}`)); out.Status != engine.StatusOK {
		t.Fatal(out.Status)
	}
	res, body := call(t, cs, "sql_query", `{"sql": "SELECT phase FROM audit ORDER BY seq"}`)
	if res.IsError || body["rowCount"] != float64(2) || fmt.Sprint(body["guards"]) != "[role transaction parse catalog limits]" {
		t.Fatalf("query: %v", body)
	}
	// Its input is held to the schema it advertises, as every tool's is.
	for _, c := range []struct{ args, issue string }{
		{`{"sql": "SELECT 1", "x": 1}`, "/x: unknown property"},
		{`{"sql": "SELECT 1", "sql": "SELECT 2"}`, `/sql: duplicate member name "sql"`},
		{`{"sql": "SELECT 1 -- \u0000"}`, "/sql: contains a NUL character"},
		{`{"sql": 5}`, "/sql: must be a string"},
		{`{"sql": null}`, "/sql: must be a string"},
		{`{}`, "/sql: required"},
	} {
		res, body := call(t, cs, "sql_query", c.args)
		var told []string
		issues, _ := body["issues"].([]any)
		for _, is := range issues {
			m, _ := is.(map[string]any)
			told = append(told, fmt.Sprintf("%v: %v", m["path"], m["message"]))
		}
		if !res.IsError || body["status"] != "invalid_input" || body["code"] != "X_INPUT_INVALID" || !strings.Contains(strings.Join(told, "; "), c.issue) {
			t.Fatalf("%s: %v", c.args, body)
		}
	}
	if !strings.Contains(logBuf.String(), `"outcome":"invalid_input"`) || !strings.Contains(logBuf.String(), `"code":"X_INPUT_INVALID"`) {
		t.Fatalf("the host log of a refused input: %s", logBuf.String())
	}
	res, body = call(t, cs, "sql_query", `{"sql": "SELECT 1; DELETE FROM audit"}`)
	rejected, _ := errcode.Explain(string(errcode.MCPQueryRejected))
	if !res.IsError || body["code"] != "X_MCP_QUERY_REJECTED" || body["rule"] != "one_statement" || !strings.HasSuffix(body["message"].(string), rejected.Fix) {
		t.Fatalf("refusal: %v", body)
	}
	res, body = call(t, cs, "sql_query", `{"sql": "SELECT * FROM orangerail.tenants"}`)
	assertRedacted(t, res)
	if !res.IsError || body["status"] != "failed" || body["sqlstate"] != "42501" || body["correlationId"] == nil ||
		!strings.Contains(body["message"].(string), "name only the columns this tool's description lists") {
		t.Fatalf("failure: %v", body)
	}
	if strings.Contains(text(res), "tenants") {
		t.Fatalf("the database's words reached the agent: %s", text(res))
	}
	res, body = call(t, cs, "sql_query", `{"sql": "SELECT * FROM generate_series(1, 2000)"}`)
	if res.IsError || body["truncatedBy"] != "rows" || body["rowCount"] != float64(1000) {
		t.Fatalf("truncation: %v %v", body["truncatedBy"], body["rowCount"])
	}
	// A long value comes back cut, and listed; NaN comes back as a string.
	res, body = call(t, cs, "sql_query", `{"sql": "SELECT repeat('x', 1000000) AS big, 'NaN'::float8 AS n"}`)
	if res.IsError || fmt.Sprint(body["cutValues"]) != "[map[column:0 row:0]]" || body["cutChars"] != float64(sqlquery.RowChars) ||
		body["rows"].([]any)[0].([]any)[1] != "NaN" || !strings.Contains(text(res), "1 value(s) cut to their first") {
		t.Fatalf("cut values: %.300v", body)
	}
	// A message over the connection's limit ends the query, and says so
	// without the database's words.
	res, body = call(t, cs, "sql_query", `{"sql": "SELECT repeat('1x', 1000000)::int"}`)
	assertRedacted(t, res)
	tooLarge, _ := errcode.Explain(string(errcode.MCPQueryTooLarge))
	if !res.IsError || body["code"] != "X_MCP_QUERY_TOO_LARGE" || !strings.HasSuffix(body["message"].(string), tooLarge.Fix) || strings.Contains(text(res), "1x1x") {
		t.Fatalf("too large: %.300v", body)
	}
	if res, body = call(t, cs, "sql_query", `{}`); !res.IsError || body["code"] != string(errcode.InputInvalid) {
		t.Fatalf("no sql: %v", body)
	}
	// Every call leaves its line in the host log, a refused input too.
	hooks.Close() // every line emitted so far is written
	for _, outcome := range []string{"ok", "rejected", "failed", "invalid_input"} {
		if !strings.Contains(logBuf.String(), `"tool":"sql_query","outcome":"`+outcome+`"`) {
			t.Errorf("the host log has no sql_query call with outcome %s:\n%s", outcome, logBuf.String())
		}
	}
}

// TestDevModeIsStamped: every audit record the development identity causes
// says dev_mode.
func TestDevModeIsStamped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	dev := agent("support")
	dev.DevMode = true
	cs := connect(t, s, dev)
	if res, body := call(t, cs, "add_order_note", `{"order_id": "o-1001", "note": "from a laptop"}`); res.IsError {
		t.Fatalf("call: %v", body)
	}
	var total, stamped int
	if err := b.admin.QueryRow(context.Background(), "SELECT count(*), count(*) FILTER (WHERE dev_mode) FROM orangerail.audit").Scan(&total, &stamped); err != nil {
		t.Fatal(err)
	}
	if total != 2 || stamped != 2 {
		t.Fatalf("%d of %d records stamped dev_mode", stamped, total)
	}
}

// readCatalog reads cfg's tables from the live catalog of the datasource
// pool, as serve does.
func readCatalog(t testing.TB, cfg *ontology.Config, pool *pgxpool.Pool) *ontology.Catalog {
	t.Helper()
	catalog, err := cfg.ReadCatalog(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return catalog
}

// counted counts the tokens it is asked to verify.
type counted struct {
	Resolver mcp.Resolver
	calls    atomic.Int32
}

func (c *counted) Resolve(ctx context.Context, token string) (*identity.Caller, error) {
	c.calls.Add(1)
	return c.Resolver.Resolve(ctx, token)
}

// TestOneVerificationPerRequest: behind the front, each HTTP request's
// token is verified exactly once, and the tool handlers authorize on the
// TokenInfo that one verification produced: each caller's catalog and
// calls are its own. The MCP handler mounted without bearer auth serves
// no one, whatever token a request carries.
func TestOneVerificationPerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &counted{Resolver: byToken{"support-token": agent("support"), "plain-token": agent()}}
	f := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(resolver), Limiter: front.NewMemoryLimiter(), Logger: quiet})
	f.Mount("/mcp", s.HTTPHandler(), front.Policy{Auth: front.AuthBearer, Resource: "/mcp", MaxBodyBytes: 1 << 20, OneMessage: true})
	f.Mount("/bare", s.HTTPHandler(), front.Policy{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	session := func(token string) *sdk.ClientSession {
		t.Helper()
		client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	support, plain := session("support-token"), session("plain-token")
	if got := toolNames(t, support); !slices.Contains(got, "cancel_order") {
		t.Fatalf("support sees %v", got)
	}
	if got := toolNames(t, plain); slices.Contains(got, "cancel_order") {
		t.Fatalf("plain sees %v", got)
	}
	if _, err := plain.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "o-1001", "reason": "x"}}); err == nil {
		t.Fatal("a hidden tool answered")
	}
	if res, body := call(t, support, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`); res.IsError || body["status"] != "approval_pending" {
		t.Fatalf("stage: %v", body)
	}
	if n, verified := requests.Load(), resolver.calls.Load(); n == 0 || verified != n {
		t.Fatalf("%d requests, %d verifications", n, verified)
	}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/bare", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer support-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the MCP handler without bearer auth: %d", resp.StatusCode)
	}
}

// TestToolCallsAreEvents: each tool call is a ToolCalled event with its
// tool, outcome, caller and correlation id — the host log's "tool call"
// line is one subscriber — beside the engine's gate outcome of it.
func TestToolCallsAreEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	var mu sync.Mutex
	var events []engine.Event
	hooks.Subscribe(0, func(ev engine.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	cs := connect(t, b.hooked(t, cfg, hooks), agent("support"))
	call(t, cs, "order_get", `{"id": "o-1001"}`)
	_, body := call(t, cs, "cancel_order", `{"order_id": "o-1001", "reason": "x"}`)
	call(t, cs, "order_list", `{"limit": 0}`)
	_, missing := call(t, cs, "order_get", `{"id": "o-none"}`)
	hooks.Close()

	var got []string
	for _, ev := range events {
		switch ev := ev.(type) {
		case engine.ToolCalled:
			got = append(got, fmt.Sprintf("tool %s %s %s %s %s correlated:%v", ev.Tool, ev.Outcome, ev.Actor, ev.Tenant, ev.Code, ev.CorrelationID != ""))
			if ev.Tool == "cancel_order" && ev.CorrelationID != body["approvalId"] {
				t.Errorf("the stage's event names %q, the agent was told %v", ev.CorrelationID, body["approvalId"])
			}
			if ev.Tool == "order_get" && ev.Outcome == engine.StatusNotFound && ev.CorrelationID != missing["correlationId"] {
				t.Errorf("the unknown row's event names %q, the agent was told %v", ev.CorrelationID, missing["correlationId"])
			}
		case engine.Gate:
			got = append(got, fmt.Sprintf("gate %s %s %s", ev.Op, ev.Subject, ev.Status))
		}
	}
	want := []string{
		"gate get order ok", "tool order_get ok agent-7 acme  correlated:false",
		"gate call cancel_order approval_pending", "tool cancel_order approval_pending agent-7 acme  correlated:true",
		"gate list order invalid_input", "tool order_list invalid_input agent-7 acme X_INPUT_INVALID correlated:true",
		"gate get order not_found", "tool order_get not_found agent-7 acme  correlated:true",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant:\n%q", got, want)
	}
}

// TestToolPanicIsContained: a tool handler that panics answers
// internal_error with a correlation id — never the panic's text — logs
// the panic and its stack under that id, and the same session serves on:
// in memory, over stdio's framing, and over Streamable HTTP behind the
// front, where the connection is not dropped either.
func TestToolPanicIsContained(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf logbuf.Buffer
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Logger: slog.New(slog.NewJSONHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	mcp.SetBeforeTool(s, func(string) {
		if armed.CompareAndSwap(true, false) {
			panic("the secret panic text")
		}
	})
	survives := func(t *testing.T, cs *sdk.ClientSession) {
		t.Helper()
		armed.Store(true)
		res, body := call(t, cs, "order_get", `{"id": "o-1001"}`)
		correlation, _ := body["correlationId"].(string)
		if !res.IsError || body["status"] != "internal_error" || correlation == "" || strings.Contains(text(res), "secret") {
			t.Fatalf("the panicking call: %v %s", body, text(res))
		}
		var logged bool
		for _, line := range strings.Split(logBuf.String(), "\n") {
			logged = logged || (strings.Contains(line, `"msg":"tool handler panic"`) && strings.Contains(line, correlation) &&
				strings.Contains(line, "the secret panic text") && strings.Contains(line, `"stack":"goroutine`))
		}
		if !logged {
			t.Fatalf("no panic line under %s:\n%s", correlation, logBuf.String())
		}
		if res, body := call(t, cs, "order_get", `{"id": "o-1001"}`); res.IsError || body["item"] == nil {
			t.Fatalf("the next call on the session: %v", body)
		}
		if names := toolNames(t, cs); !slices.Contains(names, "order_get") {
			t.Fatalf("the session lists %v", names)
		}
	}

	t.Run("in memory", func(t *testing.T) { survives(t, connect(t, s, agent("support"))) })

	t.Run("stdio framing", func(t *testing.T) {
		ctx := context.Background()
		clientIn, serverOut := io.Pipe()
		serverIn, clientOut := io.Pipe()
		ss, err := s.Connect(ctx, agent("support"), &sdk.IOTransport{Reader: serverIn, Writer: serverOut})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(ctx, &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		survives(t, cs)
	})

	t.Run("streamable HTTP", func(t *testing.T) {
		f := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(byToken{"t": agent("support")}),
			Limiter: front.NewMemoryLimiter(), Logger: quiet})
		f.Mount("/mcp", s.HTTPHandler(), front.Policy{Auth: front.AuthBearer, Resource: "/mcp", MaxBodyBytes: 1 << 20, OneMessage: true})
		srv := httptest.NewUnstartedServer(f)
		var closed atomic.Int32
		srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
			if state == http.StateClosed || state == http.StateHijacked {
				closed.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		client := &http.Client{Transport: bearer{token: "t", next: &http.Transport{}}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		survives(t, cs)
		if n := closed.Load(); n != 0 {
			t.Fatalf("the server closed %d connections", n)
		}
	})
}
