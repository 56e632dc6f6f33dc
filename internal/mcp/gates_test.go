package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// scopesMap grants every tool of the example: reads and polls under
// orders:read, actions under orders:write.
var scopesMap = ontologytest.SetYAML("scopes", `{
  "orders:read": [check_approval, describe_object, describe_action, list_policies, errors_explain,
    order_get, order_list, customer_get, customer_list, product_get, product_list],
  "orders:write": [cancel_order, create_return_label, update_shipping_address, add_order_note]}`)

func scoped(tenant string, scopes ...string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: []string{"support"}, Scopes: scopes, Kind: engine.ActorAgent}
}

// wireError is the JSON-RPC error a tools/call answered with.
func wireError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("the call answered %v, want a JSON-RPC error", err)
	}
	return werr
}

// TestThreeOutcomes: hidden ≠ forbidden. A tool outside the caller's
// audience is absent and answers as a tool that does not exist; a tool
// whose scope the token lacks is listed and refused, naming the scope,
// before its input is read, and the refusal is in the tenant's chain; a
// policy's refusal is a tool result with isError and X_FORBIDDEN. Both
// verifiers pass over the refusal records.
func TestThreeOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := b.server(t, scopesMap, ontologytest.Set("actions.add_order_note.policy.audience", `caller.tenant == "acme"`))

	// Scope: listed, refused by name, recorded, nothing staged.
	reader := connect(t, s, scoped("acme", "orders:read"))
	if got := toolNames(t, reader); !slices.Contains(got, "cancel_order") || !slices.Contains(got, "add_order_note") {
		t.Fatalf("a reader sees %v: a tool whose scope it lacks must be listed", got)
	}
	var approvalsBefore int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&approvalsBefore); err != nil {
		t.Fatal(err)
	}
	// The input is not even valid: the scope is decided without reading it.
	_, err := reader.CallTool(ctx, &sdk.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": 7}})
	werr := wireError(t, err)
	var data struct{ Code, Scope, CorrelationID string }
	if err := json.Unmarshal(werr.Data, &data); err != nil {
		t.Fatal(err)
	}
	if werr.Code != jsonrpc.CodeInvalidRequest || data.Code != string(errcode.MCPScopeDenied) || data.Scope != "orders:write" ||
		!strings.Contains(werr.Message, `"orders:write"`) || !strings.Contains(werr.Message, "Request a token with the scope") {
		t.Fatalf("scope refusal: %d %q %+v", werr.Code, werr.Message, data)
	}
	var phase, action, text string
	if err := b.admin.QueryRow(ctx, "SELECT phase, action, convert_from(entry, 'UTF8')::jsonb->>'error' FROM orangerail.audit WHERE tenant_id = 'acme' AND correlation_id = $1",
		data.CorrelationID).Scan(&phase, &action, &text); err != nil {
		t.Fatalf("the scope refusal's record: %v", err)
	}
	if phase != "refused" || action != "cancel_order" || !strings.HasPrefix(text, "X_MCP_SCOPE_DENIED: ") || !strings.Contains(text, "orders:write") {
		t.Fatalf("the scope refusal's record: %s %s %q", phase, action, text)
	}
	var approvalsAfter int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&approvalsAfter); err != nil || approvalsAfter != approvalsBefore {
		t.Fatalf("a refused call staged: %d approvals before, %d after (%v)", approvalsBefore, approvalsAfter, err)
	}
	// The reader's own scope admits its reads.
	if res, body := call(t, reader, "order_get", `{"id": "o-1001"}`); res.IsError {
		t.Fatalf("a reader's read: %v", body)
	}

	// Policy: the writer is admitted, and the precondition refuses.
	writer := connect(t, s, scoped("acme", "orders:read", "orders:write"))
	res, body := call(t, writer, "cancel_order", `{"order_id": "o-1003", "reason": "shipped already"}`)
	if !res.IsError || body["code"] != string(errcode.Forbidden) || body["status"] != "precondition_failed" {
		t.Fatalf("policy refusal: isError %v, %v", res.IsError, body)
	}

	// Audience: the predicate hides add_order_note from globex's support
	// agent, who holds every scope; its call answers, byte for byte, what
	// a server without the tool answers.
	globex := scoped("globex", "orders:read", "orders:write")
	if got := toolNames(t, connect(t, s, globex)); slices.Contains(got, "add_order_note") || !slices.Contains(got, "cancel_order") {
		t.Fatalf("globex sees %v", got)
	}
	without, _ := b.server(t, scopesMap, ontologytest.Delete("actions.add_order_note"),
		ontologytest.SetYAML("scopes.orders:write", "[cancel_order, create_return_label, update_shipping_address]"))
	args := `{"order_id": "o-1001", "note": "hello"}`
	hidden := rawResult(t, s, globex, "add_order_note", args)
	absent := rawResult(t, without, globex, "add_order_note", args)
	if !bytes.Equal(hidden, absent) || !bytes.Contains(hidden, []byte(errcode.MCPToolUnknown)) {
		t.Fatalf("hidden answered\n%s\nabsent answered\n%s", hidden, absent)
	}

	// globex was answered as if its tools did not exist, and wrote no
	// record: both verifiers say they checked nothing.
	for tenant, want := range map[string]string{"acme": "", "globex": "nothing_visible"} {
		r, err := engine.VerifyTenant(ctx, b.runtime, tenant, engine.VerifyOptions{})
		if err != nil || r.NothingVisible != (want != "") || (want == "" && !r.OK()) {
			t.Fatalf("Go verifier, %s: %+v %v", tenant, r, err)
		}
		var problems string
		if err := b.admin.QueryRow(ctx, "SELECT coalesce(string_agg(problem, ','), '') FROM orangerail.audit_verify($1)", tenant).Scan(&problems); err != nil || problems != want {
			t.Fatalf("SQL verifier, %s: %q (%v), want %q", tenant, problems, err, want)
		}
	}
}

// TestAudiencePredicate: an audience sees the caller alone; one that
// cannot be evaluated hides the tool rather than showing it.
func TestAudiencePredicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		audience string
		caller   *engine.Caller
		sees     bool
	}{
		{`"orders:write" in caller.scopes`, scoped("acme", "orders:write"), true},
		{`"orders:write" in caller.scopes`, scoped("acme"), false},
		{`caller.subject.startsWith("agent-")`, scoped("acme", "orders:write"), true},
		{`caller.kind == "human"`, scoped("acme", "orders:write"), false},
		// caller has no member "team": the evaluation fails, and hides.
		{`caller.team == "ops"`, scoped("acme", "orders:write"), false},
	}
	for _, tt := range tests {
		s, _ := b.server(t, ontologytest.Set("actions.add_order_note.policy.audience", tt.audience),
			ontologytest.Set("objects.product.audience", tt.audience))
		got := toolNames(t, connect(t, s, tt.caller))
		for _, name := range []string{"add_order_note", "product_get", "product_list"} {
			if slices.Contains(got, name) != tt.sees {
				t.Errorf("audience %s, caller %+v: sees %v, want %s seen: %v", tt.audience, tt.caller, got, name, tt.sees)
			}
		}
	}
}

// TestEveryToolCallIsAnEvent: each tools/call — answered, refused by
// input, unknown, hidden, refused by scope or by policy — is one
// ToolCalled naming the gate that refused it, and one host log line:
// warn for a refusal, info otherwise. No line holds the arguments.
func TestEveryToolCallIsAnEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := ontologytest.Parse(t, orders.Config, scopesMap)
	hooks := engine.NewHooks()
	var logged logbuf.Buffer
	hooks.Subscribe(0, engine.HostLog(slog.New(slog.NewJSONHandler(&logged, nil))))
	var mu sync.Mutex
	var events []engine.ToolCalled
	hooks.Subscribe(0, func(ev engine.Event) {
		if tc, ok := ev.(engine.ToolCalled); ok {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, tc)
		}
	})
	s := b.hooked(t, cfg, hooks)
	const secret = "secret-argument-7"
	cs := connect(t, s, &engine.Caller{Subject: "agent-7", Tenant: "acme", Scopes: []string{"orders:read"}, Kind: engine.ActorAgent})
	call(t, cs, "order_get", `{"id": "o-1001"}`)
	call(t, cs, "order_list", `{"limit": 0, "cursor": "`+secret+`"}`)
	long := strings.Repeat("y", 5000)                                     // an unknown name any length: logged shortened
	for _, name := range []string{"no_such_tool", "cancel_order", long} { // unknown; hidden: the caller has no role
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"note": secret}}); err == nil {
			t.Fatalf("%s answered", name)
		}
	}
	supportReader := connect(t, s, scoped("acme", "orders:read"))
	if _, err := supportReader.CallTool(ctx, &sdk.CallToolParams{Name: "add_order_note", Arguments: map[string]any{"order_id": "o-1001", "note": secret}}); err == nil {
		t.Fatal("add_order_note answered without its scope")
	}
	writer := connect(t, s, scoped("acme", "orders:read", "orders:write"))
	call(t, writer, "cancel_order", `{"order_id": "o-1003", "reason": "`+secret+`"}`)
	hooks.Close()

	type line struct{ tool, outcome, refusal, code, level string }
	want := []line{
		{"order_get", "ok", "", "", "INFO"},
		{"order_list", "invalid_input", "", "X_INPUT_INVALID", "INFO"},
		{"no_such_tool", "not_found", "unknown", "X_MCP_TOOL_UNKNOWN", "WARN"},
		{"cancel_order", "not_found", "hidden", "X_MCP_TOOL_UNKNOWN", "WARN"},
		{long[:64] + "…", "not_found", "unknown", "X_MCP_TOOL_UNKNOWN", "WARN"},
		{"add_order_note", "denied", "scope", "X_MCP_SCOPE_DENIED", "WARN"},
		{"cancel_order", "precondition_failed", "policy", "X_FORBIDDEN", "WARN"},
	}
	var got []line
	for _, ev := range events {
		got = append(got, line{ev.Tool, string(ev.Outcome), string(ev.Refusal), string(ev.Code), ev.Level().String()})
	}
	var fromLog []line
	for _, l := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "tool call" {
			fromLog = append(fromLog, line{m["tool"].(string), m["outcome"].(string), m["refusal"].(string), m["code"].(string), m["level"].(string)})
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(fromLog, want) {
		t.Fatalf("events %v\nlog lines %v\nwant %v", got, fromLog, want)
	}
	if i := slices.IndexFunc(events, func(ev engine.ToolCalled) bool { return ev.Refusal == engine.RefusalScope }); events[i].Scope != "orders:write" {
		t.Fatalf("the scope refusal's event names %q", events[i].Scope)
	}
	if strings.Contains(logged.String(), secret) {
		t.Fatal("the host log holds an argument")
	}
}

// recording is a client transport that keeps the last response it read,
// encoded as on the wire.
type recording struct {
	sdk.Transport
	mu   sync.Mutex
	last []byte
}

func (r *recording) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	return &recordingConn{Connection: c, r: r}, err
}

type recordingConn struct {
	sdk.Connection
	r *recording
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		b, encErr := jsonrpc.EncodeMessage(resp)
		if encErr != nil {
			return nil, encErr
		}
		c.r.mu.Lock()
		c.r.last = b
		c.r.mu.Unlock()
	}
	return msg, err
}
