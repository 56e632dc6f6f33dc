package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// The meta surface of the example: support is served meta; everyone else
// flat. Every object and action tool is grouped; the built-ins stay flat.
var (
	metaSurface = ontologytest.SetYAML("surface", `{default: flat, audiences: [{roles: [support], surface: meta}]}`)
	metaGroups  = ontologytest.SetYAML("groups", `{
  orders: {title: Orders, description: "Orders, and what support does to them.",
    tools: [order_get, order_list, cancel_order, update_shipping_address, add_order_note, create_return_label]},
  customers: {description: "The customers who placed the orders.", tools: [customer_get, customer_list]},
  catalog: {title: Catalog, tools: [product_get, product_list]}}`)
	// metaScopes grants the example's tools as scopesMap does, and the
	// meta tools under orders:read: the tool manage_resource calls needs
	// its own scope besides.
	metaScopes = ontologytest.SetYAML("scopes", `{
  "orders:read": [check_approval, describe_object, describe_action, list_policies, errors_explain,
    list_resources, describe_resource, manage_resource,
    order_get, order_list, customer_get, customer_list, product_get, product_list],
  "orders:write": [cancel_order, update_shipping_address, add_order_note, create_return_label]}`)
)

// metaServer serves the example with the meta surface and edits, its
// ToolCalled events recorded.
func metaServer(t *testing.T, b *bundle, edits ...ontologytest.Edit) (*mcp.Server, func() []engine.ToolCalled) {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, append([]ontologytest.Edit{metaSurface, metaGroups, metaScopes}, edits...)...)
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	var mu sync.Mutex
	var events []engine.ToolCalled
	hooks.Subscribe(0, func(ev engine.Event) {
		if tc, ok := ev.(engine.ToolCalled); ok {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, tc)
		}
	})
	return b.hooked(t, cfg, hooks), func() []engine.ToolCalled {
		hooks.Close()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
}

// metaCaller is served meta (support); flatCaller, of the same tenant,
// flat.
func metaCaller(scopes ...string) *engine.Caller { return scoped("acme", scopes...) }

func flatCaller(scopes ...string) *engine.Caller {
	return &engine.Caller{Subject: "agent-8", Tenant: "acme", Scopes: scopes, Kind: engine.ActorAgent}
}

// TestMetaSurfaceCatalog: a meta caller's tools/list holds the three meta
// tools beside the tools no group holds, and no grouped tool; a flat
// caller's is what it was without the meta surface, without a meta tool.
func TestMetaSurfaceCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b)
	got := toolNames(t, connect(t, s, metaCaller("orders:read")))
	want := []string{"check_approval", "describe_action", "describe_object", "describe_resource", "errors_explain", "list_policies", "list_resources", "manage_resource"}
	if !slices.Equal(got, want) {
		t.Fatalf("a meta caller sees %v, want %v", got, want)
	}
	plain, _ := b.server(t, scopesMap)
	flat := toolNames(t, connect(t, s, flatCaller("orders:read")))
	if was := toolNames(t, connect(t, plain, flatCaller("orders:read"))); !slices.Equal(flat, was) {
		t.Fatalf("a flat caller sees %v; without the meta surface, %v", flat, was)
	}
	for _, name := range []string{"list_resources", "describe_resource", "manage_resource"} {
		if slices.Contains(flat, name) {
			t.Fatalf("a flat caller sees %s", name)
		}
	}
	// A rule's audience predicate chooses too, and the first rule that
	// matches wins; one that fails to evaluate does not match.
	byTenant, _ := metaServer(t, b, ontologytest.SetYAML("surface", `{default: flat, audiences: [
  {audience: 'caller.team == "x"', surface: meta}, {audience: 'caller.tenant == "globex"', surface: meta}, {roles: [support], surface: flat}]}`))
	if got := toolNames(t, connect(t, byTenant, scoped("globex", "orders:read"))); !slices.Contains(got, "manage_resource") {
		t.Fatalf("globex, chosen by a predicate, sees %v", got)
	}
	if got := toolNames(t, connect(t, byTenant, scoped("acme", "orders:read"))); slices.Contains(got, "manage_resource") {
		t.Fatalf("acme's support, served flat by the third rule, sees %v", got)
	}
	// The instructions and resources speak of the tools behind
	// manage_resource too; a flat caller's say nothing of the meta tools.
	meta := connect(t, s, metaCaller("orders:read"))
	if got := meta.InitializeResult().Instructions; !strings.Contains(got, "list_resources lists them") || !strings.Contains(got, "cancel_order") ||
		!strings.Contains(got, "NAME_get and NAME_list tools: customer, order, product") {
		t.Fatalf("a meta caller's instructions: %s", got)
	}
	// The grouped tools it names are said to be called through
	// manage_resource: by name they answer as for no such tool.
	grouped := regexp.MustCompile(`Call these through manage_resource, never by name: ([^.]*)\.`).FindStringSubmatch(meta.InitializeResult().Instructions)
	if got := meta.InitializeResult().Instructions; grouped == nil || !slices.Contains(strings.Split(grouped[1], ", "), "order_get") ||
		!slices.Contains(strings.Split(grouped[1], ", "), "cancel_order") {
		t.Fatalf("a meta caller's instructions do not say which tools to call through manage_resource: %s", got)
	}
	if got := connect(t, s, flatCaller("orders:read")).InitializeResult().Instructions; strings.Contains(got, "list_resources") {
		t.Fatalf("a flat caller's instructions: %s", got)
	}
	resources, err := meta.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(resources.Resources, func(r *sdk.Resource) bool { return r.URI == mcp.ObjectURI("order") }) {
		t.Fatalf("a meta caller's resources: %v", resources.Resources)
	}
	doc, err := meta.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: mcp.OntologyURI})
	if err != nil || len(doc.Contents) != 1 || !strings.Contains(doc.Contents[0].Text, `"cancel_order"`) {
		t.Fatalf("a meta caller's ontology resource: %v %v", doc, err)
	}
	// The meta tools' hints: two read, manage_resource writes.
	res, err := meta.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if strings.HasSuffix(tool.Name, "_resources") || strings.HasSuffix(tool.Name, "_resource") {
			if ro := tool.Annotations.ReadOnlyHint; ro != (tool.Name != "manage_resource") {
				t.Errorf("%s readOnlyHint %v", tool.Name, ro)
			}
		}
	}
	// manage_resource reaches create_return_label, which calls the
	// carrier: open-world; with no upstream action grouped, it is not.
	openWorld := func(s *mcp.Server) bool {
		res, err := connect(t, s, metaCaller("orders:read")).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "manage_resource" })
		return i >= 0 && res.Tools[i].Annotations.OpenWorldHint != nil && *res.Tools[i].Annotations.OpenWorldHint
	}
	closed, _ := metaServer(t, b, ontologytest.SetYAML("groups", `{
  orders: {title: Orders, description: "Orders.", tools: [order_get, order_list, cancel_order]},
  catalog: {title: Catalog, tools: [product_get, product_list]}}`))
	if !openWorld(s) || openWorld(closed) {
		t.Errorf("manage_resource's openWorldHint: %v with the carrier's action grouped, %v without", openWorld(s), openWorld(closed))
	}
}

// TestListResourcesText: list_resources answers the caller's catalog as
// plain text (golden), of the tools the caller sees only: a customer
// reader without the role sees no customers resource.
func TestListResourcesText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b)
	res, _ := call(t, connect(t, s, metaCaller("orders:read")), "list_resources", `{}`)
	if res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
		t.Fatalf("list_resources answered %+v", res)
	}
	golden.Bytes(t, "testdata/meta/list_resources.txt", []byte(text(res)))

	// Audited by the surface's rule, not the group: an audience rule
	// serves globex's support meta; product_* are public, customers are
	// support's.
	s2, _ := metaServer(t, b, ontologytest.SetYAML("surface", `{default: meta}`))
	anon := connect(t, s2, &engine.Caller{Tenant: "acme", Scopes: []string{"orders:read"}})
	res, _ = call(t, anon, "list_resources", `{}`)
	if got := text(res); !strings.Contains(got, "\ncatalog (Catalog)") || strings.Contains(got, "customers") || strings.Contains(got, "cancel_order") {
		t.Fatalf("an unauthenticated meta caller's catalog:\n%s", got)
	}
	if res, body := call(t, connect(t, s, metaCaller("orders:read")), "list_resources", `{"x": 1}`); !res.IsError || body["code"] != string(errcode.InputInvalid) {
		t.Fatalf("list_resources with an argument: %v", body)
	}
}

// TestDescribeResourceBatched: one call describes every tool of each named
// resource, with its schemas, and an action's policy in words; a resource
// the caller may not use is refused as one that does not exist.
func TestDescribeResourceBatched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b, ontologytest.Set("objects.customer.read_access", map[string]any{"roles": []string{"approver"}}),
		ontologytest.SetYAML("surface", `{default: meta}`))
	cs := connect(t, s, metaCaller("orders:read"))
	res, body := call(t, cs, "describe_resource", `{"resources": ["orders", "catalog"]}`)
	if res.IsError {
		t.Fatalf("describe_resource: %v", body)
	}
	var answer struct {
		Resources []struct {
			Resource string
			Tools    []struct {
				Name, Kind   string
				Confirms     bool
				InputSchema  map[string]any
				OutputSchema map[string]any
				Action       *struct {
					Policy  struct{ Approval struct{ Required bool } }
					Answers string
				}
			}
		}
	}
	raw, _ := json.Marshal(body)
	if err := json.Unmarshal(raw, &answer); err != nil || len(answer.Resources) != 2 || answer.Resources[0].Resource != "orders" || answer.Resources[1].Resource != "catalog" {
		t.Fatalf("describe_resource answered %s (%v)", raw, err)
	}
	var names []string
	for _, r := range answer.Resources {
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
			if tool.InputSchema["type"] != "object" || tool.OutputSchema == nil {
				t.Errorf("%s: schemas %v / %v", tool.Name, tool.InputSchema, tool.OutputSchema)
			}
			if (tool.Kind == "action") != (tool.Action != nil) {
				t.Errorf("%s: kind %s, action %v", tool.Name, tool.Kind, tool.Action)
			}
		}
	}
	if want := []string{"order_get", "order_list", "cancel_order", "update_shipping_address", "add_order_note", "create_return_label", "product_get", "product_list"}; !slices.Equal(names, want) {
		t.Fatalf("described %v, want %v", names, want)
	}
	cancel := answer.Resources[0].Tools[2]
	if !cancel.Confirms || !cancel.Action.Policy.Approval.Required || !strings.Contains(cancel.Action.Answers, "approval_pending") {
		t.Fatalf("cancel_order described %+v", cancel)
	}
	// Each resource once, as the schema's uniqueItems says.
	if res, body := call(t, cs, "describe_resource", `{"resources": ["orders", "orders"]}`); !res.IsError || !slices.Equal(issuePaths(body), []string{"/resources/1"}) {
		t.Fatalf("describe_resource of orders twice: error %v, issues %v", res.IsError, body["issues"])
	}
	// customers is hidden from support here: refused as nonsense is.
	hidden := rawResult(t, s, metaCaller("orders:read"), "describe_resource", `{"resources": ["customers"]}`)
	absent := rawResult(t, s, metaCaller("orders:read"), "describe_resource", `{"resources": ["nonsense"]}`)
	if !bytes.Equal(hidden, absent) || !bytes.Contains(hidden, []byte("no resource of that name")) {
		t.Fatalf("hidden answered\n%s\nabsent answered\n%s", hidden, absent)
	}
}

// manageArgs is manage_resource's arguments for tool of resource.
func manageArgs(resource, tool, arguments string) string {
	return `{"resource": "` + resource + `", "tool": "` + tool + `", "arguments": ` + arguments + `}`
}

// TestManageResourceGates: manage_resource calls a grouped tool through
// the gates a tools/call of it passes, and answers what that call answers;
// each ToolCalled names the tool called, never manage_resource.
func TestManageResourceGates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, events := metaServer(t, b, ontologytest.Set("actions.add_order_note.policy.audience", `caller.tenant == "acme"`))

	// A read: byte for byte the flat tool's answer.
	read := rawResult(t, s, metaCaller("orders:read"), "manage_resource", manageArgs("orders", "order_get", `{"id": "o-1001"}`))
	direct := rawResult(t, s, flatCaller("orders:read"), "order_get", `{"id": "o-1001"}`)
	if !bytes.Equal(read, direct) || !bytes.Contains(read, []byte("o-1001")) {
		t.Fatalf("manage_resource read answered\n%s\nthe flat call\n%s", read, direct)
	}

	// Audience: hidden (globex does not see add_order_note), misaddressed
	// (under another resource) and absent (a server without it) answer
	// alike.
	globex := scoped("globex", "orders:read", "orders:write")
	without, _ := metaServer(t, b, ontologytest.Delete("actions.add_order_note"),
		ontologytest.SetYAML("scopes.orders:write", "[cancel_order, update_shipping_address, create_return_label]"),
		ontologytest.SetYAML("groups.orders.tools", "[order_get, order_list, cancel_order, update_shipping_address, create_return_label]"))
	noteArgs := `{"order_id": "o-1001", "note": "hello"}`
	hidden := rawResult(t, s, globex, "manage_resource", manageArgs("orders", "add_order_note", noteArgs))
	misaddressed := rawResult(t, s, metaCaller("orders:read", "orders:write"), "manage_resource", manageArgs("catalog", "add_order_note", noteArgs))
	absent := rawResult(t, without, globex, "manage_resource", manageArgs("orders", "add_order_note", noteArgs))
	if !bytes.Equal(hidden, absent) || !bytes.Equal(misaddressed, absent) || !bytes.Contains(absent, []byte(errcode.MCPToolUnknown)) {
		t.Fatalf("hidden\n%s\nmisaddressed\n%s\nabsent\n%s", hidden, misaddressed, absent)
	}

	// Scope: refused naming the scope, recorded under cancel_order.
	reader := connect(t, s, metaCaller("orders:read"))
	_, err := reader.CallTool(ctx, &sdk.CallToolParams{Name: "manage_resource",
		Arguments: json.RawMessage(manageArgs("orders", "cancel_order", `{"order_id": 7}`))})
	werr := wireError(t, err)
	var data struct{ Code, Scope, CorrelationID string }
	if err := json.Unmarshal(werr.Data, &data); err != nil || data.Code != string(errcode.MCPScopeDenied) || data.Scope != "orders:write" ||
		!strings.Contains(werr.Message, `"cancel_order"`) {
		t.Fatalf("scope refusal: %q %+v (%v)", werr.Message, data, err)
	}
	var phase, action string
	if err := b.admin.QueryRow(ctx, "SELECT phase, action FROM orangerail.audit WHERE tenant_id = 'acme' AND correlation_id = $1",
		data.CorrelationID).Scan(&phase, &action); err != nil || phase != "refused" || action != "cancel_order" {
		t.Fatalf("the scope refusal's record: %s %s (%v)", phase, action, err)
	}

	writer := connect(t, s, metaCaller("orders:read", "orders:write"))
	// Input: the tool's own refusal, naming the tool.
	res, body := call(t, writer, "manage_resource", manageArgs("orders", "cancel_order", `{"order_id": "o-1001"}`))
	if !res.IsError || body["status"] != "invalid_input" || !strings.Contains(text(res), `Tool "cancel_order" refused its arguments`) {
		t.Fatalf("invalid input: %v", body)
	}
	// Policy: the precondition refuses a shipped order.
	res, body = call(t, writer, "manage_resource", manageArgs("orders", "cancel_order", `{"order_id": "o-1003", "reason": "shipped already"}`))
	if !res.IsError || body["code"] != string(errcode.Forbidden) || body["status"] != "precondition_failed" {
		t.Fatalf("policy refusal: %v", body)
	}
	// A staged approval, of cancel_order.
	res, body = call(t, writer, "manage_resource", manageArgs("orders", "cancel_order", `{"order_id": "o-1001", "reason": "customer asked"}`))
	if res.IsError || body["status"] != "approval_pending" {
		t.Fatalf("staging: %v", body)
	}
	var staged string
	if err := b.admin.QueryRow(ctx, "SELECT action FROM orangerail.approvals WHERE id = $1", body["approvalId"]).Scan(&staged); err != nil || staged != "cancel_order" {
		t.Fatalf("the staged approval's action: %q (%v)", staged, err)
	}
	// manage_resource's own arguments.
	res, body = call(t, writer, "manage_resource", `{"tool": "order_get", "extra": 1}`)
	if !res.IsError || body["code"] != string(errcode.InputInvalid) {
		t.Fatalf("manage_resource without a resource: %v", body)
	}
	// Each held to its schema at its own path: a tool that is no string,
	// arguments that are no object (null is none).
	for args, path := range map[string]string{
		`{"resource": "orders", "tool": 5}`:       "/tool",
		manageArgs("orders", "order_get", `null`): "/arguments",
	} {
		res, body = call(t, writer, "manage_resource", args)
		if !res.IsError || body["code"] != string(errcode.InputInvalid) || !slices.Equal(issuePaths(body), []string{path}) {
			t.Fatalf("manage_resource %s: %v, want one issue at %s", args, body, path)
		}
	}

	type line struct{ tool, outcome, refusal string }
	var got []line
	for _, ev := range events() {
		got = append(got, line{ev.Tool, string(ev.Outcome), string(ev.Refusal)})
	}
	want := []line{
		{"order_get", "ok", ""}, {"order_get", "ok", ""},
		{"add_order_note", "not_found", "hidden"}, {"add_order_note", "not_found", "hidden"},
		{"cancel_order", "denied", "scope"},
		{"cancel_order", "invalid_input", ""}, {"cancel_order", "precondition_failed", "policy"}, {"cancel_order", "approval_pending", ""},
		{"manage_resource", "invalid_input", ""}, {"manage_resource", "invalid_input", ""}, {"manage_resource", "invalid_input", ""},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
}

// TestMetaCallerCannotCallGroupedTool: by name, a grouped tool answers a
// meta caller as a tool that does not exist; an ungrouped one answers.
func TestMetaCallerCannotCallGroupedTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b)
	cs := connect(t, s, metaCaller("orders:read"))
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}})
	werr := wireError(t, err)
	if werr.Message != `unknown tool "order_get"` || !bytes.Contains(werr.Data, []byte(errcode.MCPToolUnknown)) {
		t.Fatalf("a grouped tool by name: %q %s", werr.Message, werr.Data)
	}
	if res, body := call(t, cs, "errors_explain", `{"code": "X_FORBIDDEN"}`); res.IsError {
		t.Fatalf("an ungrouped tool: %v", body)
	}
	if res, _ := call(t, connect(t, s, flatCaller("orders:read")), "order_get", `{"id": "o-1001"}`); res.IsError {
		t.Fatal("a flat caller's order_get refused")
	}

	// Over HTTP too, where each request is served by the server of its
	// caller's catalog.
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken{"meta": metaCaller("orders:read"), "flat": flatCaller("orders:read")}).Require(s.HTTPHandler()))
	t.Cleanup(srv.Close)
	session := func(token string) *sdk.ClientSession {
		client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	metaHTTP, flatHTTP := session("meta"), session("flat")
	if got := toolNames(t, metaHTTP); !slices.Contains(got, "manage_resource") || slices.Contains(got, "order_get") {
		t.Fatalf("a meta caller over HTTP sees %v", got)
	}
	if got := toolNames(t, flatHTTP); slices.Contains(got, "manage_resource") || !slices.Contains(got, "order_get") {
		t.Fatalf("a flat caller over HTTP sees %v", got)
	}
	if _, err := metaHTTP.CallTool(context.Background(), &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}); err == nil {
		t.Fatal("a meta caller called a grouped tool by name over HTTP")
	}
	if _, err := flatHTTP.CallTool(context.Background(), &sdk.CallToolParams{Name: "manage_resource",
		Arguments: json.RawMessage(manageArgs("orders", "order_get", `{"id": "o-1001"}`))}); err == nil {
		t.Fatal("a flat caller called manage_resource over HTTP")
	}
	if res, _ := call(t, metaHTTP, "manage_resource", manageArgs("orders", "order_get", `{"id": "o-1001"}`)); res.IsError {
		t.Fatal("manage_resource over HTTP refused")
	}
}

// TestManageResourceBilledAsItsTool: the front bills a manage_resource
// call in the bucket of the tool it calls, read or write.
func TestManageResourceBilledAsItsTool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b)
	rate := front.ToolCalls(func(tool string, arguments map[string]any) front.Class {
		if s.ReadOnlyCall(metaCaller("orders:read"), tool, arguments) {
			return front.ClassRead
		}
		return front.ClassWrite
	})
	for body, want := range map[string]front.Class{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"manage_resource","arguments":{"resource":"orders","tool":"order_get","arguments":{"id":"o-1"}}}}`: front.ClassRead,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"manage_resource","arguments":{"resource":"orders","tool":"cancel_order","arguments":{}}}}`:        front.ClassWrite,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"manage_resource","arguments":{"resource":"orders","tool":"no_such_tool"}}}`:                       front.ClassWrite,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_resources","arguments":{}}}`:                                                                 front.ClassRead,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1"}}}`:                                                            front.ClassRead,
	} {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		if got := rate(r, []byte(body)); got != want {
			t.Errorf("%s billed %s, want %s", body, got, want)
		}
	}
}

// TestManageResourceShortensAnUnknownName: an unknown tool named through
// manage_resource reaches the ToolCalled event (and so the host log's line
// and the session's log message) shortened, as a tools/call of an unknown
// name does: an agent may send any name, of any length.
func TestManageResourceShortensAnUnknownName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, events := metaServer(t, b)
	cs := connect(t, s, metaCaller("orders:read"))
	long := strings.Repeat("y", 100_000)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "manage_resource",
		Arguments: map[string]any{"resource": "orders", "tool": long}}); err == nil {
		t.Fatal("an unknown tool answered")
	}
	evs := events()
	if len(evs) == 0 {
		t.Fatal("no ToolCalled")
	}
	for _, ev := range evs {
		if ev.Tool != display.Echo(long) {
			t.Fatalf("a ToolCalled names a tool of %d bytes, want the %d of display.Echo", len(ev.Tool), len(display.Echo(long)))
		}
	}
}
