package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
)

// demoAudiences are the callers the demo mints a token for (internal/cli
// demo.go): the agent, the auditor and the approver.
var demoAudiences = map[string]*engine.Caller{
	"agent":    {Subject: "demo-agent@acme", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent},
	"auditor":  {Subject: "demo-auditor@acme", Tenant: "acme", Roles: []string{"auditor"}, Kind: engine.ActorAgent},
	"approver": {Subject: "demo-approver@acme", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman},
}

// demoServer serves the demo's config — the orders example with sql_query
// for auditors — over the example's tables in real Postgres, its catalog
// read from them.
func demoServer(t *testing.T, b *bundle) (*mcp.Server, *engine.Engine) {
	t.Helper()
	return b.sqlServer(t, mcp.Options{})
}

// TestGoldenToolsList holds each demo audience's tools/list — names,
// titles, descriptions, input and output schemas, annotations — to the
// files under testdata/tools_list, through the real go-sdk client.
func TestGoldenToolsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := demoServer(t, b)
	for audience, caller := range demoAudiences {
		res, err := connect(t, s, caller).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		golden.JSON(t, filepath.Join("testdata", "tools_list", audience+".json"), res.Tools)
	}
}

// outputSchemas compiles each listed tool's output schema as a strict
// client would, formats asserted; every tool but sql_query has one.
func outputSchemas(t *testing.T, cs *sdk.ClientSession) map[string]*jsonschema.Schema {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	compiled := map[string]*jsonschema.Schema{}
	for _, tool := range res.Tools {
		if tool.OutputSchema == nil {
			if tool.Name != "sql_query" {
				t.Errorf("%s has no output schema", tool.Name)
			}
			continue
		}
		raw, _ := json.Marshal(tool.OutputSchema)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource("urn:"+tool.Name, doc); err != nil {
			t.Fatal(err)
		}
		if compiled[tool.Name], err = c.Compile("urn:" + tool.Name); err != nil {
			t.Fatalf("%s: the output schema does not compile: %v", tool.Name, err)
		}
	}
	return compiled
}

// TestStructuredContentMatchesOutputSchema calls every kind of tool
// through the real go-sdk client — which does not check a result against
// its tool's output schema — and checks each structured answer against
// the output schema the server listed for it: every read, a get with its
// link, a page with its cursor, an action that executes, one staged, one
// refused, and check_approval pending, executed and consumed.
func TestStructuredContentMatchesOutputSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, e := demoServer(t, b)
	cs := connect(t, s, demoAudiences["agent"])
	schemas := outputSchemas(t, cs)

	checked := map[string]int{}
	check := func(name, args string, isError bool) map[string]any {
		t.Helper()
		res, body := call(t, cs, name, args)
		if res.IsError != isError {
			t.Fatalf("%s %s: isError %v: %s", name, args, res.IsError, text(res))
		}
		if res.StructuredContent == nil {
			if !isError {
				t.Fatalf("%s %s: no structured content", name, args)
			}
			return body
		}
		raw, _ := json.Marshal(res.StructuredContent)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[name].Validate(doc); err != nil {
			t.Errorf("%s %s: %s does not match the output schema: %v", name, args, raw, err)
		}
		checked[name]++
		return body
	}

	check("order_get", `{"id": "o-1001"}`, false)
	check("order_get", `{"id": "o-1001", "include": ["order_customer"]}`, false)
	check("customer_get", `{"id": "c-1", "include": ["order_customer"]}`, false)
	check("product_get", `{"sku": "anvil"}`, false)
	page := check("order_list", `{"limit": 1, "sort": "-total_cents"}`, false)
	check("order_list", `{"limit": 1, "sort": "-total_cents", "cursor": "`+page["nextCursor"].(string)+`"}`, false)
	check("order_list", `{"filters": {"status": {"in": ["paid", "pending"]}, "created_at": {"gt": "2000-01-01T00:00:00Z"}}}`, false)
	check("customer_list", `{"filters": {"name": {"eq": "Ada Lovelace"}}}`, false)
	check("product_list", `{"sort": "price_cents"}`, false)

	check("add_order_note", `{"order_id": "o-1001", "note": "checked the schema"}`, false)
	check("add_order_note", `{"order_id": "o-1001"}`, true)
	check("add_order_note", `{"order_id": "o-nope", "note": "no such order"}`, true)
	staged := check("cancel_order", `{"order_id": "o-1002", "reason": "the customer asked"}`, false)
	id := staged["approvalId"].(string)
	check("update_shipping_address", `{"order_id": "o-1001", "address": "1 Schema Street", "idempotencyKey": "k-1"}`, false)
	check("create_return_label", `{"order_id": "o-1003", "reason": "damaged", "weight_grams": 1200}`, false)
	check("create_return_label", `{"order_id": "o-1003", "reason": "damaged", "weight_grams": 30001}`, true)
	check("check_approval", `{"approvalId": "`+id+`"}`, false)
	view, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	if out := e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
		t.Fatal(out.Status)
	}
	if executed := check("check_approval", `{"approvalId": "`+id+`"}`, false); executed["status"] != "executed" {
		t.Fatalf("the approved poll: %v", executed)
	}
	check("check_approval", `{"approvalId": "`+id+`"}`, false)
	check("check_approval", `{}`, true)

	check("describe_object", `{"object": "order"}`, false)
	check("describe_action", `{"action": "cancel_order"}`, false)
	check("list_policies", `{}`, false)
	check("errors_explain", `{"code": "X_FORBIDDEN"}`, false)

	for name := range schemas {
		if checked[name] == 0 {
			t.Errorf("%s: no answer was checked against its output schema", name)
		}
	}
}

// TestReadInputsEnforcedAsAdvertised: a read's argument beyond what its
// advertised schema allows — order_list's limit past its maximum, a key of
// the wrong type — is refused as X_INPUT_INVALID at its path, through the
// real client.
func TestReadInputsEnforcedAsAdvertised(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	cs := connect(t, s, agent("support"))
	for _, tt := range []struct{ tool, args, path string }{
		{"order_list", `{"limit": 1000}`, "/limit"},
		{"order_list", `{"limit": 101}`, "/limit"},
		{"order_list", `{"sort": "status"}`, "/sort"},
		{"order_list", `{"filters": {"status": {"eq": 1}}}`, "/filters/status/eq"},
		{"order_get", `{"id": 1001}`, "/id"},
		{"order_get", `{"id": "o-1001", "include": ["order_customer", "order_customer"]}`, "/include/1"},
	} {
		res, body := call(t, cs, tt.tool, tt.args)
		if !res.IsError || body["code"] != string(errcode.InputInvalid) || !strings.Contains(string(mustJSON(body["issues"])), `"path":"`+tt.path+`"`) {
			t.Errorf("%s %s: %s, want X_INPUT_INVALID at %s", tt.tool, tt.args, text(res), tt.path)
		}
	}
	if res, _ := call(t, cs, "order_list", `{"limit": 100}`); res.IsError {
		t.Errorf("order_list at its maximum limit: %s", text(res))
	}
}
