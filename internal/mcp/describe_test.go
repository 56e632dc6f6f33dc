package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// describeTools are the built-in describe tools.
var describeTools = []string{"describe_action", "describe_object", "errors_explain", "list_policies"}

// described calls a describe tool that must answer, checks its
// structured content against the tool's output schema as tools/list
// declares it, and returns the structured content as indented JSON.
func described(t *testing.T, cs *sdk.ClientSession, tool, args string) []byte {
	t.Helper()
	res, body := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %s: %s", tool, args, text(res))
	}
	schema := outputSchema(t, cs, tool)
	raw, _ := json.Marshal(res.StructuredContent)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("%s's answer does not match its output schema: %v\n%s", tool, err, raw)
	}
	// The text is the same answer, for clients that read text alone.
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || !equalJSON(fromText, body) {
		t.Fatalf("%s: text %q is not the structured content", tool, text(res))
	}
	out, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
	return append(out, '\n')
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// outputSchema compiles the output schema tools/list declares for tool.
func outputSchema(t *testing.T, cs *sdk.ClientSession, tool string) *jsonschema.Schema {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Tools, func(d *sdk.Tool) bool { return d.Name == tool })
	if i < 0 || list.Tools[i].OutputSchema == nil {
		t.Fatalf("%s is not listed with an output schema", tool)
	}
	return compileOutputSchema(t, list.Tools[i])
}

// rawResult is a tool call's response as the wire carried it, over a
// session of its own (so two answers' JSON-RPC ids are alike).
func rawResult(t *testing.T, s *mcp.Server, caller *engine.Caller, tool, args string) []byte {
	t.Helper()
	ctx := context.Background()
	serverT, clientT := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, caller, serverT)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	rec := &recording{Transport: clientT}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last
}

// notFound checks that a describe of a subject the caller does not see
// (hidden) answers byte for byte what a describe of one that does not
// exist answers, and that the answer is not_found.
func notFound(t *testing.T, s *mcp.Server, caller *engine.Caller, tool, key, hidden string) {
	t.Helper()
	got := rawResult(t, s, caller, tool, `{"`+key+`": "`+hidden+`"}`)
	absent := rawResult(t, s, caller, tool, `{"`+key+`": "no_such_thing"}`)
	if !bytes.Equal(got, absent) || !bytes.Contains(got, []byte(`\"status\":\"not_found\"`)) || !bytes.Contains(got, []byte(`"isError":true`)) {
		t.Fatalf("%s of hidden %s answered\n%s\nof a nonexistent one\n%s", tool, hidden, got, absent)
	}
	if bytes.Contains(got, []byte(hidden)) {
		t.Fatalf("the not_found answer names %s: %s", hidden, got)
	}
}

// TestDescribeObject: an object the caller may read is described with
// its fields' types from the live catalog, its key, its links to objects
// the caller may read, and its list's filters, sorts and largest page; an
// object it may not read answers as one that does not exist.
func TestDescribeObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	support := connect(t, s, agent("support"))
	golden.Bytes(t, filepath.Join("testdata", "describe", "object_order_support.json"), described(t, support, "describe_object", `{"object": "order"}`))
	golden.Bytes(t, filepath.Join("testdata", "describe", "object_customer_support.json"), described(t, support, "describe_object", `{"object": "customer"}`))
	// An agent without roles reads orders but not customers: the order's
	// link to its customer is left out.
	plain := connect(t, s, agent())
	golden.Bytes(t, filepath.Join("testdata", "describe", "object_order_agent.json"), described(t, plain, "describe_object", `{"object": "order"}`))
	notFound(t, s, agent(), "describe_object", "object", "customer")

	// An audience predicate hides an object as roles do.
	hiding, _ := b.server(t, ontologytest.Set("objects.product.audience", `caller.tenant == "globex"`))
	notFound(t, hiding, agent("support"), "describe_object", "object", "product")
	described(t, connect(t, hiding, &engine.Caller{Subject: "agent-9", Tenant: "globex", Kind: engine.ActorAgent}), "describe_object", `{"object": "product"}`)
}

// TestDescribeAction: an action the caller may call is described with
// its tool's schemas, its policy in words and its effect and rollback —
// never its execute statement; one it may not call answers as one that
// does not exist.
func TestDescribeAction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	support := connect(t, s, agent("support"))
	cfg := ontologytest.Parse(t, orders.Config)
	list, err := support.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range cfg.Actions {
		got := described(t, support, "describe_action", `{"action": "`+name+`"}`)
		golden.Bytes(t, filepath.Join("testdata", "describe", "action_"+name+".json"), got)
		// The statement, or the call, is the operator's: no part of it is
		// shown.
		hidden := []string{"UPDATE", "INSERT", `"execute"`, "current_setting"}
		switch x := a.Execute; {
		case x.SQL != "":
			hidden = append(hidden, x.SQL)
		case x.HTTP != nil:
			hidden = append(hidden, x.HTTP.Upstream, x.HTTP.Path, x.HTTP.BaseURL().Host, x.HTTP.IdempotencyHeader(), `"POST"`)
		default:
			t.Errorf("%s: an execute this test does not know", name)
		}
		for _, h := range hidden {
			if bytes.Contains(got, []byte(h)) {
				t.Errorf("describe_action %s shows its execute (%q): %s", name, h, got)
			}
		}
		// The input schema is the one tools/list shows.
		var answer struct{ InputSchema any }
		_ = json.Unmarshal(got, &answer)
		i := slices.IndexFunc(list.Tools, func(d *sdk.Tool) bool { return d.Name == name })
		if i < 0 || !equalJSON(answer.InputSchema, list.Tools[i].InputSchema) {
			t.Errorf("describe_action %s: input schema %v, tools/list shows %v", name, answer.InputSchema, list.Tools[i].InputSchema)
		}
	}
	// An agent without roles may call no action of the example.
	notFound(t, s, agent(), "describe_action", "action", "cancel_order")

	// The caller's token decides what the scope line says.
	scopedServer, _ := b.server(t, scopesMap)
	reader := connect(t, scopedServer, scoped("acme", "orders:read"))
	var answer struct {
		Policy engine.ActionPolicy
	}
	if err := json.Unmarshal(described(t, reader, "describe_action", `{"action": "cancel_order"}`), &answer); err != nil {
		t.Fatal(err)
	}
	if s := answer.Policy.Scope; s == nil || s.Name != "orders:write" || s.Held ||
		!strings.Contains(answer.Policy.Summary, "A call needs the scope orders:write; this connection's token does not carry it") {
		t.Fatalf("a reader's description of cancel_order: %+v", answer.Policy)
	}
	// Sandbox mode and an action without an effect say what a call does.
	sandbox, _ := b.server(t, ontologytest.Set("preset", "sandbox"), ontologytest.SetYAML("actions.add_order_note.execute", "{not_implemented: true}"))
	var told struct {
		Policy      engine.ActionPolicy
		Implemented bool
		Answers     string
	}
	if err := json.Unmarshal(described(t, connect(t, sandbox, agent("support")), "describe_action", `{"action": "cancel_order"}`), &told); err != nil {
		t.Fatal(err)
	}
	if !told.Policy.DryRun || !told.Implemented || !strings.HasPrefix(told.Answers, "A call answers dry_run") || !strings.Contains(told.Policy.Summary, "sandbox mode") {
		t.Fatalf("cancel_order in sandbox mode: %+v", told)
	}
	// The sandbox answers dry_run before it asks for an effect.
	if err := json.Unmarshal(described(t, connect(t, sandbox, agent("support")), "describe_action", `{"action": "add_order_note"}`), &told); err != nil {
		t.Fatal(err)
	}
	if told.Implemented || !strings.HasPrefix(told.Answers, "A call answers dry_run") {
		t.Fatalf("an action without an effect in sandbox mode: %+v", told)
	}
	unimplemented, _ := b.server(t, ontologytest.SetYAML("actions.add_order_note.execute", "{not_implemented: true}"))
	if err := json.Unmarshal(described(t, connect(t, unimplemented, agent("support")), "describe_action", `{"action": "add_order_note"}`), &told); err != nil {
		t.Fatal(err)
	}
	if told.Implemented || !strings.Contains(told.Answers, "not_implemented") {
		t.Fatalf("an action without an effect: %+v", told)
	}
	// A waiver is told with its reason.
	waived, _ := b.server(t, ontologytest.Set("actions.cancel_order.policy.approval", "none"),
		ontologytest.Set("actions.cancel_order.approval_waived", "support cancels unshipped orders on the phone"))
	if err := json.Unmarshal(described(t, connect(t, waived, agent("support")), "describe_action", `{"action": "cancel_order"}`), &answer); err != nil {
		t.Fatal(err)
	}
	if p := answer.Policy; p.Approval.Required || !p.Destructive || !strings.Contains(p.Summary, "runs without approval because: support cancels unshipped orders on the phone.") {
		t.Fatalf("a waived action's policy: %+v", p)
	}
}

// TestListPolicies: every action the caller may call, with its policy in
// words, and nothing of the others.
func TestListPolicies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	golden.Bytes(t, filepath.Join("testdata", "describe", "policies_support.json"), described(t, connect(t, s, agent("support")), "list_policies", `{}`))
	if got := described(t, connect(t, s, agent()), "list_policies", `null`); string(got) != "{\n  \"policies\": []\n}\n" {
		t.Fatalf("an agent without roles is told of policies: %s", got)
	}
	// An audience predicate hides an action from its policies, too.
	hiding, _ := b.server(t, ontologytest.Set("actions.add_order_note.policy.audience", `caller.tenant == "globex"`))
	got := described(t, connect(t, hiding, agent("support")), "list_policies", `{}`)
	if bytes.Contains(got, []byte("add_order_note")) || !bytes.Contains(got, []byte("cancel_order")) {
		t.Fatalf("policies with add_order_note hidden: %s", got)
	}
	// The tool takes no argument.
	res, body := call(t, connect(t, s, agent("support")), "list_policies", `{"action": "cancel_order"}`)
	if !res.IsError || body["code"] != string(errcode.InputInvalid) || !strings.Contains(text(res), `/action`) {
		t.Fatalf("list_policies with an argument: %s", text(res))
	}
}

// TestErrorsExplain: one table, two audiences. errors_explain tells an
// agent a code's cause and the agent's fix — never the operator's, which
// `orangerail errors explain` prints; an operator-only code tells the
// agent to hand it over; an unknown code is X_INPUT_INVALID at /code.
func TestErrorsExplain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	cs := connect(t, s, agent())
	got := described(t, cs, "errors_explain", `{"code": "x_forbidden"}`)
	golden.Bytes(t, filepath.Join("testdata", "describe", "explain_forbidden.json"), got)
	entry, _ := errcode.Explain("X_FORBIDDEN")
	var answer struct {
		Code, Cause, Fix string
		OperatorOnly     bool
	}
	if err := json.Unmarshal(got, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Code != "X_FORBIDDEN" || answer.Cause != entry.Cause || answer.Fix != entry.AgentFix || answer.Fix == entry.Fix || answer.OperatorOnly {
		t.Fatalf("X_FORBIDDEN explained %+v; the table's agent fix %q, operator fix %q", answer, entry.AgentFix, entry.Fix)
	}
	// An operator's code: its cause, and no operator's fix.
	entry, _ = errcode.Explain("X_DATABASE_UNREACHABLE")
	if err := json.Unmarshal(described(t, cs, "errors_explain", `{"code": "X_DATABASE_UNREACHABLE"}`), &answer); err != nil {
		t.Fatal(err)
	}
	if !answer.OperatorOnly || answer.Cause != entry.Cause || answer.Fix == entry.Fix || !strings.Contains(answer.Fix, "operator") {
		t.Fatalf("X_DATABASE_UNREACHABLE explained %+v", answer)
	}
	for args, path := range map[string]string{
		`{"code": "X_NO_SUCH_CODE"}`: "/code",
		`{"code": 7}`:                "/code",
		`{}`:                         "/code",
		`{"code": "X_FORBIDDEN", "verbose": true}`: "/verbose",
		`[1]`: "",
	} {
		res, body := call(t, cs, "errors_explain", args)
		if !res.IsError || body["status"] != "invalid_input" || body["code"] != string(errcode.InputInvalid) || !slices.Equal(issuePaths(body), []string{path}) {
			t.Errorf("errors_explain %s: %s", args, text(res))
		}
	}
}

// TestDescribeToolsAreGated: the describe tools are tools like any other.
// Any authenticated caller sees them, read-only and idempotent, each with
// an output schema; an anonymous caller does not, and a call answers as an
// unknown tool; a scopes map grants them, and a token without the scope is
// refused by name before the input is read.
func TestDescribeToolsAreGated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	list, err := connect(t, s, agent()).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range describeTools {
		i := slices.IndexFunc(list.Tools, func(d *sdk.Tool) bool { return d.Name == name })
		if i < 0 {
			t.Fatalf("an agent does not see %s", name)
		}
		d := list.Tools[i]
		if a := d.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint || d.OutputSchema == nil || d.Title == "" || d.Meta != nil {
			t.Errorf("%s: annotations %+v, output schema %v, title %q", name, d.Annotations, d.OutputSchema, d.Title)
		}
		if !s.ReadOnly(name) {
			t.Errorf("%s is not counted as a read", name)
		}
	}
	anonymous := &engine.Caller{Tenant: "acme"}
	anon := connect(t, s, anonymous)
	names := toolNames(t, anon)
	for _, name := range describeTools {
		if slices.Contains(names, name) {
			t.Errorf("an anonymous caller sees %s", name)
		}
		if got, unknown := rawResult(t, s, anonymous, name, `{}`), rawResult(t, s, anonymous, "no_such_tool", `{}`); !bytes.Equal(
			bytes.ReplaceAll(got, []byte(name), []byte("X")), bytes.ReplaceAll(unknown, []byte("no_such_tool"), []byte("X"))) {
			t.Errorf("an anonymous call of %s answered\n%s\nnot as an unknown tool's\n%s", name, got, unknown)
		}
	}

	// A read-only server serves no action, and describes none.
	readonly, _ := b.server(t, ontologytest.Set("preset", "readonly"))
	names = toolNames(t, connect(t, readonly, agent("support")))
	if slices.Contains(names, "describe_action") || slices.Contains(names, "list_policies") ||
		!slices.Contains(names, "describe_object") || !slices.Contains(names, "errors_explain") {
		t.Fatalf("a read-only server offers %v", names)
	}

	// Scope: granted by the map like every tool.
	scopedServer, _ := b.server(t, scopesMap)
	writer := connect(t, scopedServer, scoped("acme", "orders:write"))
	if !slices.Contains(toolNames(t, writer), "describe_object") {
		t.Fatal("a tool whose scope the token lacks must be listed")
	}
	_, err = writer.CallTool(context.Background(), &sdk.CallToolParams{Name: "describe_object", Arguments: map[string]any{"object": 7}})
	werr := wireError(t, err)
	var data struct{ Code, Scope string }
	if err := json.Unmarshal(werr.Data, &data); err != nil {
		t.Fatal(err)
	}
	if werr.Code != jsonrpc.CodeInvalidRequest || data.Code != string(errcode.MCPScopeDenied) || data.Scope != "orders:read" {
		t.Fatalf("describe_object without its scope: %d %q %+v", werr.Code, werr.Message, data)
	}
	described(t, connect(t, scopedServer, scoped("acme", "orders:read")), "describe_object", `{"object": "order"}`)
}

// TestEveryToolRefusesARepeatedMember: arguments naming a member twice in
// one object, at any depth, are refused X_INPUT_INVALID at the second's
// path by every tool — the describe tools, the reads, errors_explain and
// manage_resource as check_approval and the actions are — never served on
// the one a decoder keeps (describe_object answering for "customer" where
// the first member named "order"; manage_resource running order_get where
// a log may show order_list).
func TestEveryToolRefusesARepeatedMember(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	meta, _ := metaServer(t, b)
	// refused reads the answer's payload (its structured content, else its
	// last text block) for one issue: a duplicate member at path.
	refused := func(got []byte, path string) bool {
		var answer struct {
			Result struct {
				IsError    bool            `json:"isError"`
				Structured json.RawMessage `json:"structuredContent"`
				Content    []struct{ Text string }
			}
		}
		if json.Unmarshal(got, &answer) != nil || !answer.Result.IsError || len(answer.Result.Content) == 0 {
			return false
		}
		raw := answer.Result.Structured
		if raw == nil {
			raw = json.RawMessage(answer.Result.Content[len(answer.Result.Content)-1].Text)
		}
		var payload struct {
			Code   string
			Issues []engine.Issue
		}
		return json.Unmarshal(raw, &payload) == nil && payload.Code == "X_INPUT_INVALID" && len(payload.Issues) == 1 &&
			payload.Issues[0].Path == path && strings.Contains(payload.Issues[0].Message, "duplicate member name")
	}
	for _, c := range []struct{ tool, args, path string }{
		{"check_approval", `{"approvalId":"00000000-0000-0000-0000-000000000001","approvalId":"00000000-0000-0000-0000-000000000002"}`, "/approvalId"},
		{"describe_object", `{"object":"order","object":"customer"}`, "/object"},
		{"describe_action", `{"action":"cancel_order","action":"add_order_note"}`, "/action"},
		{"errors_explain", `{"code":"X_FORBIDDEN","code":"X_INPUT_INVALID"}`, "/code"},
		{"order_get", `{"id":"o-1001","id":"o-1002"}`, "/id"},
		{"order_list", `{"limit":1,"limit":2}`, "/limit"},
		{"cancel_order", `{"order_id":"o-1001","reason":"a","reason":"b"}`, "/reason"},
	} {
		if got := rawResult(t, s, agent("support"), c.tool, c.args); !refused(got, c.path) {
			t.Errorf("%s %s answered\n%s\nwant X_INPUT_INVALID, a duplicate member at %s", c.tool, c.args, got, c.path)
		}
	}
	for _, c := range []struct{ args, path string }{
		{`{"resource":"orders","tool":"order_list","tool":"order_get","arguments":{"id":"o-1001"}}`, "/tool"},
		{`{"resource":"orders","tool":"order_get","arguments":{"id":"o-1001","id":"o-1002"}}`, "/arguments/id"},
	} {
		if got := rawResult(t, meta, metaCaller("orders:read"), "manage_resource", c.args); !refused(got, c.path) {
			t.Errorf("manage_resource %s answered\n%s\nwant X_INPUT_INVALID, a duplicate member at %s", c.args, got, c.path)
		}
	}
}
