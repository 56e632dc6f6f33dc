package mcp_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/testdb"
)

// The demo's audiences (internal/cli/demo.go): its agent token and its
// auditor token, in tenant acme.
var (
	demoAgent   = &engine.Caller{Subject: "demo-agent@acme", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	demoAuditor = &engine.Caller{Subject: "demo-auditor@acme", Tenant: "acme", Roles: []string{"auditor"}, Kind: engine.ActorAgent}
)

// served is a server with its engine and the hooks both emit into.
type served struct {
	s     *mcp.Server
	e     *engine.Engine
	hooks *engine.Hooks
}

// serve serves the example with edits, hooks shared by engine and server,
// approvals re-read every poll (negative: never), and sql_query answered
// when the config enables it.
func (b *bundle) serve(t *testing.T, poll time.Duration, edits ...ontologytest.Edit) *served {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, edits...)
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: b.key, Mode: engine.ModeOf(cfg.Preset), Logger: quiet, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	opts := mcp.Options{Engine: e, Ontology: cfg, Logger: quiet, Hooks: hooks, ApprovalPoll: poll}
	if cfg.SQLQuery.Enabled {
		if opts.Querier, err = sqlquery.New(context.Background(), sqlquery.Config{URL: testdb.WithUser(t, b.url, sqlquery.QueryRole, ""), Store: b.runtime}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := mcp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &served{s: s, e: e, hooks: hooks}
}

// demoSQL is the demo's sql_query setting.
var demoSQL = ontologytest.SetYAML("sql_query", "{enabled: true, roles: [auditor]}")

// connectWith is connect with client options (a notification handler)
// and a protocol version ("" for the latest).
func connectWith(t *testing.T, s *mcp.Server, caller *engine.Caller, opts *sdk.ClientOptions, version string) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	serverT, clientT := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, caller, serverT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, clientT, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func instructions(cs *sdk.ClientSession) string { return cs.InitializeResult().Instructions }

// TestInstructionsPerCaller: initialize.instructions say what the service
// governs and how approvals work, from the caller's own catalog: the
// objects it reads, the actions it may call split by approval, never a
// tool it does not see; bounded in length however large the catalog.
func TestInstructionsPerCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sv := b.serve(t, -1, demoSQL)

	support := instructions(connect(t, sv.s, agent("support")))
	for _, want := range []string{"acme-orders is governed by orangerail", "customer, order, product",
		"These actions run when called, without approval: add_order_note.",
		"These actions need a person's approval: cancel_order, create_return_label, update_shipping_address.",
		"approval_pending with an approvalId", "check_approval", "exactly once", "orangerail://approvals/{approvalId}",
		"subscribe to it", "orangerail://ontology"} {
		if !strings.Contains(support, want) {
			t.Errorf("support's instructions lack %q:\n%s", want, support)
		}
	}
	tests := []struct {
		name        string
		caller      *engine.Caller
		want, never []string
	}{
		{"agent without roles", agent(), []string{"order, product"},
			[]string{"customer", "add_order_note", "cancel_order", "create_return_label", "update_shipping_address", "approval_pending", "sql_query"}},
		{"auditor", demoAuditor, []string{"order, product", "sql_query runs one read-only SELECT"},
			[]string{"customer", "cancel_order", "add_order_note", "create_return_label", "approval_pending"}},
		{"anonymous", &engine.Caller{Tenant: "acme"}, []string{"objects, each with its NAME_get and NAME_list tools: product."},
			[]string{"customer", "order,", "order_", "check_approval", "approvals/"}},
	}
	for _, tt := range tests {
		got := instructions(connect(t, sv.s, tt.caller))
		for _, want := range tt.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: lacks %q:\n%s", tt.name, want, got)
			}
		}
		for _, never := range tt.never {
			if strings.Contains(got, never) {
				t.Errorf("%s: names %q, which it does not see:\n%s", tt.name, never, got)
			}
		}
	}

	// A sandbox stages nothing: its instructions say so, and describe no
	// approval to poll.
	sandbox := instructions(connect(t, b.serve(t, -1, ontologytest.Set("preset", "sandbox")).s, agent("support")))
	if !strings.Contains(sandbox, "sandbox: an action call answers dry_run") || strings.Contains(sandbox, "approval_pending") {
		t.Errorf("the sandbox's instructions:\n%s", sandbox)
	}

	// A large catalog: every list is cut by count, the instructions stay
	// within their bound, and no object is named twice.
	var edits []ontologytest.Edit
	for i := range 200 {
		edits = append(edits, ontologytest.SetYAML(fmt.Sprintf("objects.product_%03d_with_a_rather_long_name", i),
			"{table: products, key: sku, tenant_column: org_id, fields: [sku], read_access: public}"))
	}
	big := b.serve(t, -1, edits...)
	got := instructions(connect(t, big.s, agent("support")))
	if len(got) > mcp.MaxInstructionsChars || !strings.Contains(got, "more") || strings.Contains(got, "product_199") {
		t.Fatalf("%d characters (bound %d):\n%s", len(got), mcp.MaxInstructionsChars, got)
	}
}

// TestCapabilitiesExact: a server declares what it serves and nothing
// else: tools without listChanged (none is ever sent), resources,
// subscribable over a session only, prompts only when the config declares
// any (for anyone), and logging (TestToolCallsAreLoggedToTheSession); a
// method of an undeclared capability is one the server does not have.
func TestCapabilitiesExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	none := b.serve(t, -1, ontologytest.Delete("prompts"))
	cs := connect(t, none.s, agent("support"))
	caps := cs.InitializeResult().Capabilities
	want := `{"logging":{},"resources":{"subscribe":true},"tools":{}}`
	if got, _ := json.Marshal(caps); string(got) != want {
		t.Fatalf("capabilities without prompts = %s, want %s", got, want)
	}
	var rpcErr *jsonrpc.Error
	if _, err := cs.ListPrompts(ctx, nil); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("prompts/list without the capability: %v", err)
	}

	// Prompts configured for support only: the capability is declared for
	// every caller, and one outside the audience lists none.
	some := b.serve(t, -1)
	plain := connect(t, some.s, agent())
	if got, _ := json.Marshal(plain.InitializeResult().Capabilities); string(got) != `{"logging":{},"prompts":{},"resources":{"subscribe":true},"tools":{}}` {
		t.Fatalf("capabilities with prompts = %s", got)
	}
	if res, err := plain.ListPrompts(ctx, nil); err != nil || len(res.Prompts) != 0 {
		t.Fatalf("prompts/list of a caller outside every audience: %+v %v", res, err)
	}

	// Stateless Streamable HTTP keeps no session to notify: resources
	// without subscribe, and resources/subscribe is not served.
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken{"t": agent("support")}).Require(some.s.HTTPHandler()))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: bearer{token: "t", next: http.DefaultTransport}}
	hs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	if got, _ := json.Marshal(hs.InitializeResult().Capabilities); string(got) != `{"logging":{},"prompts":{},"resources":{},"tools":{}}` {
		t.Fatalf("capabilities over HTTP = %s", got)
	}
	if ins := hs.InitializeResult().Instructions; !strings.Contains(ins, "orangerail://approvals/") || strings.Contains(ins, "subscribe") {
		t.Fatalf("instructions over HTTP offer a subscription it cannot serve:\n%s", ins)
	}
	if res, err := hs.ListResources(ctx, nil); err != nil || len(res.Resources) != 4 {
		t.Fatalf("resources/list over HTTP: %+v %v", res, err)
	}
	// Each request's handlers read its own caller, from its token.
	if doc, text := readJSON(t, hs, mcp.OntologyURI); len(doc["actions"].(map[string]any)) != 4 {
		t.Fatalf("the ontology over HTTP: %s", text)
	}
	if res, err := hs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "request_cancellation", Arguments: map[string]string{"order_id": "o-1", "reason": "r"}}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("prompts/get over HTTP: %+v %v", res, err)
	}
}

func resourceURIs(t *testing.T, cs *sdk.ClientSession) (uris, templates []string) {
	t.Helper()
	ctx := context.Background()
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	tres, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range tres.ResourceTemplates {
		templates = append(templates, r.URITemplate)
	}
	slices.Sort(uris)
	return uris, templates
}

func readJSON(t *testing.T, cs *sdk.ClientSession, uri string) (map[string]any, string) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" || res.Contents[0].URI != uri {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc, res.Contents[0].Text
}

// readErr reads uri expecting a refusal, and returns its text with the URI
// taken out, so that two refusals of different URIs compare.
func readErr(t *testing.T, cs *sdk.ClientSession, uri string) string {
	t.Helper()
	_, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err == nil {
		t.Fatalf("read %s: no error", uri)
	}
	return strings.ReplaceAll(err.Error(), uri, "URI")
}

// TestResources: the ontology, each readable object's schema and the
// approvals template, per caller; a hidden object is absent from the list
// and reads exactly as one that does not exist; the ontology names
// nothing the caller does not see, and no table, statement or tenancy
// column.
func TestResources(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sv := b.serve(t, -1, demoSQL)

	support := connect(t, sv.s, agent("support"))
	uris, templates := resourceURIs(t, support)
	if want := []string{"orangerail://objects/customer", "orangerail://objects/order", "orangerail://objects/product", "orangerail://ontology"}; !slices.Equal(uris, want) ||
		!slices.Equal(templates, []string{"orangerail://approvals/{approvalId}"}) {
		t.Fatalf("support lists %v %v", uris, templates)
	}
	doc, text := readJSON(t, support, mcp.OntologyURI)
	actions, _ := doc["actions"].(map[string]any)
	cancel, _ := actions["cancel_order"].(map[string]any)
	if len(actions) != 4 || cancel["approval"] != "required" || cancel["scope"] != "orders:write" ||
		!strings.Contains(fmt.Sprint(cancel["policy"]), "approves each call") || doc["links"].(map[string]any)["order_customer"] == nil {
		t.Fatalf("support's ontology: %s", text)
	}
	for _, secret := range []string{"UPDATE", "INSERT", "org_id", "\"orders\"", "order_notes", "current_setting", "url_env", "redact"} {
		if strings.Contains(text, secret) {
			t.Errorf("the ontology shows %q:\n%s", secret, text)
		}
	}
	object, text := readJSON(t, support, "orangerail://objects/order")
	schema, _ := object["schema"].(map[string]any)
	if object["key"] != "id" || object["tools"].(map[string]any)["list"] != "order_list" || schema["properties"] == nil ||
		object["links"].(map[string]any)["order_customer"] == nil {
		t.Fatalf("order's schema: %s", text)
	}

	plain := connect(t, sv.s, agent())
	uris, _ = resourceURIs(t, plain)
	if slices.Contains(uris, "orangerail://objects/customer") || len(uris) != 3 {
		t.Fatalf("an agent without roles lists %v", uris)
	}
	doc, text = readJSON(t, plain, mcp.OntologyURI)
	if len(doc["actions"].(map[string]any)) != 0 || len(doc["links"].(map[string]any)) != 0 || doc["objects"].(map[string]any)["customer"] != nil ||
		strings.Contains(text, `"customer"`) || strings.Contains(text, "customer.id") || doc["approvals"] != nil {
		t.Fatalf("an agent without roles reads an ontology with what it does not see: %s", text)
	}
	if hidden, missing := readErr(t, plain, "orangerail://objects/customer"), readErr(t, plain, "orangerail://objects/no_such"); hidden != missing {
		t.Fatalf("a hidden object reads %q, a missing one %q", hidden, missing)
	}
	if hidden, missing := readErr(t, plain, "orangerail://objects/customer"), readErr(t, plain, "orangerail://nothing"); hidden != missing {
		t.Fatalf("a hidden object reads %q, a URI of nothing %q", hidden, missing)
	}

	// What sql_query may read is a resource for its callers only: the
	// relations and columns its role may read, named as in its answers.
	auditor := connect(t, sv.s, &engine.Caller{Subject: "demo-auditor@acme", Tenant: "acme", Roles: []string{"auditor"}, Kind: engine.ActorAgent})
	if uris, _ = resourceURIs(t, auditor); !slices.Contains(uris, mcp.SQLRelationsURI) {
		t.Fatalf("the auditor lists %v", uris)
	}
	relations, text := readJSON(t, auditor, mcp.SQLRelationsURI)
	if !strings.Contains(text, `"name": "audit"`) || !strings.Contains(text, `"name": "seq"`) || relations["schemas"] == nil {
		t.Fatalf("what sql_query may read: %s", text)
	}
	if uris, _ = resourceURIs(t, support); slices.Contains(uris, mcp.SQLRelationsURI) {
		t.Fatalf("support, who may not query, lists %v", uris)
	}
	if hidden, missing := readErr(t, support, mcp.SQLRelationsURI), readErr(t, support, "orangerail://objects/no_such"); hidden != missing {
		t.Fatalf("sql_query's relations read %q to support, a missing resource %q", hidden, missing)
	}

	anonymous := connect(t, sv.s, &engine.Caller{Tenant: "acme"})
	if uris, templates = resourceURIs(t, anonymous); !slices.Equal(uris, []string{"orangerail://objects/product", "orangerail://ontology"}) || len(templates) != 0 {
		t.Fatalf("anonymous lists %v %v", uris, templates)
	}
}

// stage stages cancel_order as cs's caller and returns the approval id.
func stage(t *testing.T, cs *sdk.ClientSession, order string) string {
	t.Helper()
	// Each call its own reason: the same call again would answer the
	// approval it staged before.
	res, body := call(t, cs, "cancel_order", `{"order_id": "`+order+`", "reason": "`+rand.Text()+`"}`)
	id, _ := body["approvalId"].(string)
	if res.IsError || body["status"] != "approval_pending" || id == "" {
		t.Fatalf("stage: %v", body)
	}
	return id
}

func approve(t *testing.T, e *engine.Engine, id string) {
	t.Helper()
	ctx := context.Background()
	view, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	if out := e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
		t.Fatal(out.Status)
	}
}

// TestApprovalResource: an approval reads as its requester's only (the
// rule check_approval follows): another caller of the tenant, the same
// subject in another tenant, an unknown id and a malformed one all read
// as a URI naming nothing. Reading an approved approval executes nothing;
// check_approval does.
func TestApprovalResource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sv := b.serve(t, -1)
	cs := connect(t, sv.s, agent("support"))
	id := stage(t, cs, "o-1001")
	uri := mcp.ApprovalURI(id)

	doc, text := readJSON(t, cs, uri)
	if doc["approvalId"] != id || doc["action"] != "cancel_order" || doc["status"] != "pending" || doc["expiresAt"] == nil ||
		!strings.Contains(fmt.Sprint(doc["message"]), "check_approval") || strings.Contains(text, "digest") || strings.Contains(text, "input") {
		t.Fatalf("pending: %s", text)
	}
	missing := readErr(t, cs, mcp.ApprovalURI("6f1d0d2e-0000-4000-8000-000000000009"))
	other := &engine.Caller{Subject: "agent-8", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	elsewhere := &engine.Caller{Subject: "agent-7", Tenant: "globex", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	for name, caller := range map[string]*engine.Caller{"another caller": other, "another tenant": elsewhere} {
		if got := readErr(t, connect(t, sv.s, caller), uri); got != missing {
			t.Errorf("%s reads %q, want %q", name, got, missing)
		}
	}
	if got := readErr(t, cs, mcp.ApprovalURI("not-an-id")); got != missing {
		t.Errorf("a malformed id reads %q, want %q", got, missing)
	}
	// A resource has one URI, the one its notifications name: the id's
	// other spellings, which a UUID parser takes, are not it.
	for _, spelling := range []string{strings.ToUpper(id), "{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", "")} {
		if got := readErr(t, cs, mcp.ApprovalURI(spelling)); got != missing {
			t.Errorf("the approval as %s reads %q, want it not found", spelling, got)
		}
	}

	approve(t, sv.e, id)
	for range 2 { // reading twice executes nothing
		if doc, text = readJSON(t, cs, uri); doc["status"] != "approved" || doc["decidedAt"] == nil {
			t.Fatalf("approved: %s", text)
		}
	}
	var status string
	if err := b.admin.QueryRow(context.Background(), "SELECT status FROM orders WHERE id = 'o-1001'").Scan(&status); err != nil || status != "paid" {
		t.Fatalf("the order after reading its approved approval: %q %v", status, err)
	}
	if _, body := call(t, cs, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "executed" {
		t.Fatalf("poll: %v", body)
	}
	if doc, text = readJSON(t, cs, uri); doc["status"] != "consumed" || doc["consumedAt"] == nil {
		t.Fatalf("consumed: %s", text)
	}
}

// updates collects the resources/updated notifications a client receives.
func updates() (*sdk.ClientOptions, chan string) {
	ch := make(chan string, 16)
	return &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
		ch <- req.Params.URI
	}}, ch
}

func await(t *testing.T, ch chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("notified of %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification of %s", want)
	}
}

func quiet1s(t *testing.T, ch chan string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("notified of %s", got)
	case <-time.After(time.Second):
	}
}

// legacy is the protocol before 2026-07-28, where resources/subscribe is a
// request whose refusal the client reads; after it, a subscription rides
// subscriptions/listen, and a refused one is simply never told anything.
const legacy = "2025-11-25"

// watched waits until n sessions are subscribed to the approval.
func watched(t *testing.T, s *mcp.Server, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); mcp.Watching(s, id) != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions watch %s, want %d", mcp.Watching(s, id), id, n)
		}
	}
}

// TestApprovalSubscribe: a session subscribed to its approval is told when
// a person decides it (this process's engine, through Hooks) and when the
// poll that executes it consumes it; another caller's subscription is
// refused as a resource that does not exist, and tells it nothing; an
// unsubscribed session is told nothing.
func TestApprovalSubscribe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sv := b.serve(t, -1) // no poll: only the hooks tell
	opts, ch := updates()
	cs := connectWith(t, sv.s, agent("support"), opts, "")
	id := stage(t, cs, "o-1001")
	uri := mcp.ApprovalURI(id)

	other := &engine.Caller{Subject: "agent-8", Tenant: "acme", Roles: []string{"support"}, Kind: engine.ActorAgent}
	var rpcErr *jsonrpc.Error
	if err := connectWith(t, sv.s, other, nil, legacy).Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams ||
		rpcErr.Message != "X_MCP_RESOURCE_UNKNOWN: Resource not found" || !strings.Contains(string(rpcErr.Data), `"code":"X_MCP_RESOURCE_UNKNOWN"`) {
		t.Fatalf("another caller subscribes: %v", err)
	}
	otherOpts, otherCh := updates()
	if err := connectWith(t, sv.s, other, otherOpts, "").Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	watched(t, sv.s, id, 1)
	approve(t, sv.e, id)
	await(t, ch, uri)
	if _, body := call(t, cs, "check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "executed" {
		t.Fatalf("poll: %v", body)
	}
	await(t, ch, uri)
	quiet1s(t, otherCh)

	// Unsubscribed, a session hears nothing of its next approval.
	id2 := stage(t, cs, "o-1002")
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ApprovalURI(id2)}); err != nil {
		t.Fatal(err)
	}
	watched(t, sv.s, id2, 1)
	if err := cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: mcp.ApprovalURI(id2)}); err != nil {
		t.Fatal(err)
	}
	watched(t, sv.s, id2, 0)
	approve(t, sv.e, id2)
	quiet1s(t, ch)

	// The legacy protocol's resources/subscribe is served the same way.
	lopts, lch := updates()
	lcs := connectWith(t, sv.s, agent("support"), lopts, legacy)
	id3 := stage(t, lcs, "o-1002") // o-1003 has shipped
	if err := lcs.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ApprovalURI(id3)}); err != nil {
		t.Fatal(err)
	}
	approve(t, sv.e, id3)
	await(t, lch, mcp.ApprovalURI(id3))
}

// TestApprovalSubscribeAcrossReplicas: a decision another process makes —
// another replica's engine, whose events this server never sees — reaches
// a subscribed session through the poll.
func TestApprovalSubscribeAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sv := b.serve(t, 50*time.Millisecond)
	replica := b.serve(t, -1)
	opts, ch := updates()
	cs := connectWith(t, sv.s, agent("support"), opts, "")
	id := stage(t, cs, "o-1001")
	if err := cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: mcp.ApprovalURI(id)}); err != nil {
		t.Fatal(err)
	}
	watched(t, sv.s, id, 1)
	quiet1s(t, ch) // polled, unchanged: nothing sent
	approve(t, replica.e, id)
	await(t, ch, mcp.ApprovalURI(id))
}

// TestPrompts: prompts are listed per audience (roles and a CEL audience,
// the engine's gate); prompts/get renders the message from the arguments;
// a hidden prompt answers exactly as one that does not exist; bad
// arguments are refused with their code, each named.
func TestPrompts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sv := b.serve(t, -1, ontologytest.SetYAML("prompts.globex_only",
		`{description: d, message: "Hello {{name}}", arguments: [{name: name}], audience: 'caller.tenant == "globex"'}`))
	names := func(cs *sdk.ClientSession) []string {
		res, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range res.Prompts {
			out = append(out, p.Name)
		}
		return out
	}
	support := connect(t, sv.s, agent("support"))
	globex := connect(t, sv.s, &engine.Caller{Subject: "g", Tenant: "globex", Roles: []string{"support"}, Kind: engine.ActorAgent})
	auditor := connect(t, sv.s, demoAuditor)
	if got := names(support); !slices.Equal(got, []string{"request_cancellation"}) {
		t.Errorf("support lists %v", got)
	}
	if got := names(globex); !slices.Equal(got, []string{"globex_only", "request_cancellation"}) {
		t.Errorf("globex lists %v", got)
	}
	if got := names(auditor); len(got) != 0 {
		t.Errorf("the auditor lists %v", got)
	}

	res, err := support.GetPrompt(ctx, &sdk.GetPromptParams{Name: "request_cancellation", Arguments: map[string]string{"order_id": "o-1001", "reason": "{{order_id}}"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := res.Messages[0].Content.(*sdk.TextContent).Text
	if len(res.Messages) != 1 || res.Messages[0].Role != "user" || !strings.HasPrefix(msg, "A customer asked to cancel order o-1001 because: {{order_id}}.") {
		t.Fatalf("prompts/get: %+v %q", res, msg)
	}

	get := func(cs *sdk.ClientSession, name string, args map[string]string) error {
		_, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
		return err
	}
	hidden := get(auditor, "request_cancellation", map[string]string{"order_id": "o-1", "reason": "r"})
	missing := get(auditor, "no_such_prompt", map[string]string{"order_id": "o-1", "reason": "r"})
	if hidden == nil || missing == nil || strings.ReplaceAll(hidden.Error(), "request_cancellation", "X") != strings.ReplaceAll(missing.Error(), "no_such_prompt", "X") {
		t.Fatalf("hidden: %v; missing: %v", hidden, missing)
	}
	var rpcErr *jsonrpc.Error
	long := strings.Repeat("n", 10_000) + "\n"
	err = get(support, "request_cancellation", map[string]string{"order_id": "o-1", "extra": "x", long: "x", "reason": strings.Repeat("r", mcp.MaxPromptArgumentChars+1)})
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, string(errcode.MCPPromptArgumentsInvalid)) ||
		!strings.Contains(rpcErr.Message, `"extra" is not an argument`) || !strings.Contains(rpcErr.Message, "reason is longer than") {
		t.Fatalf("bad arguments: %v", err)
	}
	// An unknown argument's name is echoed bounded, quoted.
	if len(rpcErr.Message) > 1000 || strings.Contains(rpcErr.Message, "\n") || !strings.Contains(rpcErr.Message, `"nnnn`) {
		t.Fatalf("an unknown argument of 10,000 characters and a newline, echoed: %d bytes: %.300q", len(rpcErr.Message), rpcErr.Message)
	}
	if err := get(support, "request_cancellation", map[string]string{"order_id": "o-1"}); err == nil || !strings.Contains(err.Error(), "reason is required") {
		t.Fatalf("a required argument missing: %v", err)
	}
}

// TestGoldenSurface holds what each demo audience is told before its
// first call to files: initialize (capabilities, instructions) over a
// session and over Streamable HTTP,
// resources/list with its templates, prompts/list, and the ontology
// resource.
func TestGoldenSurface(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sv := b.serve(t, -1, demoSQL)
	for name, caller := range map[string]*engine.Caller{"agent": demoAgent, "auditor": demoAuditor} {
		cs := connect(t, sv.s, caller)
		ini := cs.InitializeResult()
		dir := filepath.Join("testdata", "surface", name)
		golden.JSON(t, filepath.Join(dir, "initialize.json"), map[string]any{
			"serverInfo": ini.ServerInfo, "capabilities": ini.Capabilities, "instructions": ini.Instructions})
		resources, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		templates, err := cs.ListResourceTemplates(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		golden.JSON(t, filepath.Join(dir, "resources.json"), map[string]any{"resources": resources.Resources, "resourceTemplates": templates.ResourceTemplates})
		prompts, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		golden.JSON(t, filepath.Join(dir, "prompts.json"), prompts.Prompts)
		doc, _ := readJSON(t, cs, mcp.OntologyURI)
		golden.JSON(t, filepath.Join(dir, "ontology.json"), doc)

		// Over Streamable HTTP, the demo's door, nothing is subscribable.
		srv := httptest.NewServer(mcp.NewAuthenticator(byToken{"t": caller}).Require(sv.s.HTTPHandler()))
		t.Cleanup(srv.Close)
		client := &http.Client{Transport: bearer{token: "t", next: http.DefaultTransport}}
		hs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hs.Close() })
		ini = hs.InitializeResult()
		golden.JSON(t, filepath.Join(dir, "initialize_http.json"), map[string]any{
			"serverInfo": ini.ServerInfo, "capabilities": ini.Capabilities, "instructions": ini.Instructions})
	}
}

// TestToolCallsAreLoggedToTheSession: a call whose client asked for log
// messages — a level in the request's _meta, as protocol 2026-07-28 asks
// (logging/setLevel, for a session, under earlier versions) — is sent the
// call's outcome as a log message, as the host log's line says it — a
// refusal at warning with its gate and code, an answer at info — and
// never the arguments; a call that asked for none, nothing.
func TestToolCallsAreLoggedToTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := b.server(t)
	var mu sync.Mutex
	var logged []*sdk.LoggingMessageParams //nolint:staticcheck // SA1019: the deprecated logging feature is what the test holds
	cs := connectWith(t, s, agent(), &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) { //nolint:staticcheck // SA1019: as above
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, req.Params)
		}}, "")
	const secret = "o-secret-argument"
	call(t, cs, "order_get", `{"id": "`+secret+`"}`) // no level asked: not sent
	level := sdk.Meta{"io.modelcontextprotocol/logLevel": "info"}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Meta: level, Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Meta: level, Name: "cancel_order", Arguments: map[string]any{"order_id": secret}}); err == nil {
		t.Fatal("a hidden tool answered")
	}
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		mu.Lock()
		got = got[:0]
		for _, m := range logged {
			raw, _ := json.Marshal(m.Data)
			got = append(got, string(m.Level)+" "+m.Logger+" "+string(raw))
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	want := []string{
		`info orangerail {"outcome":"ok","tool":"order_get"}`,
		`warning orangerail {"code":"X_MCP_TOOL_UNKNOWN","outcome":"not_found","refusal":"unknown","tool":"cancel_order"}`,
	}
	if !slices.Equal(got, want) || strings.Contains(strings.Join(got, ""), secret) {
		t.Fatalf("log messages %q, want %q", got, want)
	}
}
