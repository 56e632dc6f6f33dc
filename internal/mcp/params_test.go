package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/mcp"
)

// paramsCase is one request's params (absent when params is ""): refused
// with want (a path's problem, in the message) under rpcCode, or, when
// want is "", served — answered with a result, or with the JSON-RPC
// error served names (its code) carrying code — and never
// X_MCP_INVALID_PARAMS.
type paramsCase struct {
	method, params string
	want           string
	rpcCode        float64
	served         float64 // 0: a result
	code           string  // the stable code of the error served
}

// paramsCases hold, for every request method the SDK decodes params of,
// shapes it accepts — optional members absent and null, members it does
// not know, names in another case (it matches them exactly), _meta — and
// shapes it refuses.
var paramsCases = []paramsCase{
	{method: "initialize", params: `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`},
	{method: "initialize", params: `{"protocolVersion":"2025-11-25","capabilities":{"roots":null,"sampling":{}},"clientInfo":{"name":"t","version":"1","icons":null},"_meta":{"x":1},"Capabilities":5,"extra":[1]}`},
	{method: "initialize", params: `{"protocolVersion":5}`, want: "params.protocolVersion must be a string"},
	{method: "initialize", params: `{"protocolVersion":"2025-11-25","capabilities":{"roots":5}}`, want: "params.capabilities.roots must be an object"},
	{method: "initialize", params: `{"capabilities":{"roots":{"listChanged":"yes"}}}`, want: "params.capabilities.roots.listChanged must be true or false"},
	{method: "initialize", params: `{"clientInfo":{"name":1}}`, want: "params.clientInfo.name must be a string"},
	{method: "initialize", params: `{"clientInfo":{"name":"t","icons":{}}}`, want: "params.clientInfo.icons must be an array"},
	{method: "initialize", params: `null`, want: `initialize requires "params"`, rpcCode: -32600},

	{method: "ping"},
	{method: "ping", params: `null`},
	{method: "ping", params: `{"_meta":{"progressToken":{}}}`},
	{method: "ping", params: `{"_meta":5}`, want: "params._meta must be an object"},
	{method: "ping", params: `"x"`, want: "params must be an object"},

	{method: "tools/list"},
	{method: "tools/list", params: `null`},
	{method: "tools/list", params: `{}`},
	{method: "tools/list", params: `{"cursor":null,"_meta":null}`},
	{method: "tools/list", params: `{"Cursor":5}`},
	{method: "tools/list", params: `{"cursor":5}`, want: "params.cursor must be a string"},
	{method: "tools/list", params: `[]`, want: "params must be an object"},
	{method: "tools/list", params: `{"_meta":5}`, want: "params._meta must be an object"},

	{method: "tools/call", params: `{"name":"order_get","arguments":{"id":"o-1001"}}`},
	{method: "tools/call", params: `{"name":"order_get","arguments":{"id":"o-1001"},"_meta":{"progressToken":"p"},"requestState":"","inputResponses":null,"Name":5}`},
	{method: "tools/call", params: `{"name":"list_policies"}`},
	{method: "tools/call", params: `{"name":"list_policies","arguments":null}`},
	// The arguments are the tool's to judge: it answers a result.
	{method: "tools/call", params: `{"name":"order_get","arguments":[1]}`},
	{method: "tools/call", params: `{"name":"x","arguments":[1]}`, served: -32602, code: "X_MCP_TOOL_UNKNOWN"},
	{method: "tools/call", params: `{"name":null}`, served: -32602, code: "X_MCP_TOOL_UNKNOWN"},
	{method: "tools/call", params: `{"name":{}}`, want: "params.name must be a string"},
	{method: "tools/call", params: `5`, want: "params must be an object"},
	{method: "tools/call", params: `{"name":"order_get","_meta":[]}`, want: "params._meta must be an object"},
	{method: "tools/call", params: `{"name":"order_get","requestState":1}`, want: "params.requestState must be a string"},
	{method: "tools/call", params: `{"name":"order_get","inputResponses":5}`, want: "params.inputResponses must be an object"},
	{method: "tools/call", params: `{"name":"order_get","inputResponses":{"a":5}}`, want: "params.inputResponses.a is not valid"},
	{method: "tools/call", params: `null`, want: `tools/call requires "params"`, rpcCode: -32600},
	{method: "tools/call", want: `tools/call requires "params"`, rpcCode: -32600},

	{method: "prompts/list"},
	{method: "prompts/list", params: `{"cursor":""}`},
	{method: "prompts/list", params: `{"cursor":true}`, want: "params.cursor must be a string"},

	{method: "prompts/get", params: `{"name":"request_cancellation","arguments":{"order_id":"o-1001","reason":"r"}}`},
	{method: "prompts/get", params: `{"name":"request_cancellation","arguments":{"order_id":"o-1001","reason":"r"},"_meta":{},"requestState":null}`},
	{method: "prompts/get", params: `{"name":"request_cancellation","arguments":{"order_id":null,"reason":"r"}}`, served: -32602, code: "X_MCP_PROMPT_ARGUMENTS_INVALID"},
	{method: "prompts/get", params: `{"name":"nope"}`, served: -32602, code: "X_MCP_PROMPT_UNKNOWN"},
	{method: "prompts/get", params: `{"name":"request_cancellation","arguments":{"order_id":1}}`, want: "params.arguments.order_id must be a string"},
	{method: "prompts/get", params: `{"name":"x","arguments":{"a b":[]}}`, want: `params.arguments["a b"] must be a string`},
	{method: "prompts/get", params: `{"name":"x","arguments":[]}`, want: "params.arguments must be an object"},
	{method: "prompts/get", params: `{"name":5}`, want: "params.name must be a string"},
	{method: "prompts/get", params: `null`, want: `prompts/get requires "params"`, rpcCode: -32600},

	{method: "resources/list"},
	{method: "resources/list", params: `{"cursor":null}`},
	{method: "resources/list", params: `{"cursor":{}}`, want: "params.cursor must be a string"},
	{method: "resources/templates/list"},
	{method: "resources/templates/list", params: `{}`},
	{method: "resources/templates/list", params: `{"cursor":1}`, want: "params.cursor must be a string"},
	{method: "resources/read", params: `{"uri":"` + mcp.OntologyURI + `"}`},
	{method: "resources/read", params: `{"uri":"` + mcp.OntologyURI + `","_meta":null,"URI":5}`},
	{method: "resources/read", params: `{"uri":5}`, want: "params.uri must be a string"},
	{method: "resources/read", params: `null`, want: `resources/read requires "params"`, rpcCode: -32600},
	{method: "resources/read", params: `{"uri":"x","inputResponses":[]}`, want: "params.inputResponses must be an object"},

	{method: "logging/setLevel", params: `{"level":"info"}`},
	{method: "logging/setLevel", params: `{"level":5}`, want: "params.level must be a string"},
	{method: "logging/setLevel", params: `null`, want: `logging/setLevel requires "params"`, rpcCode: -32600},

	// Not served (no completions capability), but its params are read
	// first.
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"request_cancellation"},"argument":{"name":"order_id","value":"o"}}`, served: -32601},
	{method: "completion/complete", params: `{"ref":5,"argument":{"name":"a","value":"b"}}`, want: "params.ref must be an object"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":1}}`, want: "params.argument.name must be a string"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"x"},"context":{"arguments":{"a":2}}}`, want: "params.context.arguments.a must be a string"},
	{method: "completion/complete", params: `{"ref":{"type":"ref/nope"},"argument":{"name":"a","value":"b"}}`, want: "params.ref is not valid"},
	{method: "completion/complete", params: `null`, want: `completion/complete requires "params"`, rpcCode: -32600},
	{method: "resources/subscribe", params: `{"uri":[]}`, want: "params.uri must be a string"},
	{method: "resources/subscribe", params: `null`, want: `resources/subscribe requires "params"`, rpcCode: -32600},
	{method: "resources/unsubscribe", params: `{"uri":false}`, want: "params.uri must be a string"},
	{method: "resources/unsubscribe", want: `resources/unsubscribe requires "params"`, rpcCode: -32600},
	// Not served, but read first; its params may be absent.
	{method: "server/discover", served: -32601},
	{method: "server/discover", params: `{"_meta":null}`, served: -32601},
	{method: "server/discover", params: `{"_meta":[]}`, want: "params._meta must be an object"},
}

// goTypeWords are what an answer naming the SDK's Go types holds.
var goTypeWords = []string{"mcp.", "Go struct", "Go value", "unmarshal", "map[", "interface {", "json:"}

// checkParamsAnswer checks the answer m to c's request of id over a
// transport: refused as c wants, or served.
func checkParamsAnswer(t *testing.T, transport string, c paramsCase, id float64, m map[string]any, strict bool) {
	t.Helper()
	raw, _ := json.Marshal(m)
	name := transport + " " + c.method + " " + c.params
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if c.want != "" {
		rpcCode, code := c.rpcCode, "X_MCP_INVALID_REQUEST"
		if rpcCode == 0 {
			rpcCode, code = -32602, "X_MCP_INVALID_PARAMS"
		}
		msg, _ := e["message"].(string)
		if m["id"] != id || e["code"] != rpcCode || data["code"] != code || data["fix"] == nil ||
			!strings.HasPrefix(msg, code+": ") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s, want %v %s %q with id %v", name, raw, rpcCode, code, c.want, id)
		}
		for _, w := range goTypeWords {
			if strings.Contains(string(raw), w) {
				t.Errorf("%s: the answer names a Go type (%q): %s", name, w, raw)
			}
		}
		return
	}
	if m["id"] != id || data["code"] == "X_MCP_INVALID_PARAMS" || data["code"] == "X_MCP_INVALID_REQUEST" {
		t.Errorf("%s: refused, but the SDK serves it: %s", name, raw)
	}
	if !strict {
		return
	}
	switch {
	case c.served == 0 && m["result"] == nil:
		t.Errorf("%s: %s, want a result", name, raw)
	case c.served != 0 && (e == nil || e["code"] != c.served || (c.code != "" && data["code"] != c.code)):
		t.Errorf("%s: %s, want the error %v %s", name, raw, c.served, c.code)
	}
}

func paramsBody(id float64, c paramsCase) string {
	body := `{"jsonrpc":"2.0","id":` + itoa(int(id)) + `,"method":"` + c.method + `"`
	if c.params != "" {
		body += `,"params":` + c.params
	}
	return body + "}"
}

// TestParamsOverHTTP: over Streamable HTTP, every request whose params go-sdk
// cannot read is refused before it — -32602 X_MCP_INVALID_PARAMS, its
// message naming the member's path in the protocol's terms and no Go type,
// 200 as the SDK answered; params absent or null where required -32600
// X_MCP_INVALID_REQUEST, 400 — with the request's id; and every shape the
// SDK reads is served as it was.
func TestParamsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken{"t": agent("support")}).Require(s.HTTPHandler()))
	t.Cleanup(srv.Close)
	for i, c := range paramsCases {
		id := float64(100 + i)
		got := rawPost(t, http.MethodPost, srv.URL, paramsBody(id, c))
		status := http.StatusOK
		if c.want != "" && c.rpcCode == -32600 {
			status = http.StatusBadRequest
		}
		if got.Status != status || got.ContentType != "application/json" {
			t.Errorf("HTTP %s %s: %d %s, want %d", c.method, c.params, got.Status, got.ContentType, status)
		}
		checkParamsAnswer(t, "HTTP", c, id, got.Body, true)
	}
}

// TestParamsOverStdio: over stdio's framing, the same requests are
// answered the same — the refused ones by the same check — and the session
// serves on after each.
func TestParamsOverStdio(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	serverIn, client := io.Pipe()
	answers, serverOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- s.ServeLines(ctx, agent("support"), nil, serverIn, serverOut) }()
	lines := make(chan map[string]any)
	go func() {
		read := bufio.NewScanner(answers)
		read.Buffer(nil, 1<<20)
		for read.Scan() {
			var m map[string]any
			_ = json.Unmarshal(read.Bytes(), &m)
			if m["method"] != nil { // a notification the server sends
				continue
			}
			lines <- m
		}
		close(lines)
	}()
	exchange := func(body string) map[string]any {
		t.Helper()
		go func() { _, _ = io.WriteString(client, body+"\n") }()
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the session ended", body)
			}
			return m
		case err := <-done:
			t.Fatalf("%s: the session ended: %v", body, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer", body)
		}
		return nil
	}
	if m := exchange(paramsBody(1, paramsCases[0])); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	if _, err := io.WriteString(client, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for i, c := range paramsCases {
		id := float64(100 + i)
		m := exchange(paramsBody(id, c))
		if c.method == "initialize" && c.want == "" {
			// A session is initialized once: a second initialize, whose
			// params are well formed, is refused as out of order.
			e, _ := m["error"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			if msg, _ := e["message"].(string); m["id"] != id || e["code"] != float64(-32600) || data["code"] != "X_MCP_INVALID_REQUEST" || !strings.Contains(msg, `duplicate "initialize"`) {
				t.Errorf("stdio: a second initialize %s: %v", c.params, m)
			}
			continue
		}
		checkParamsAnswer(t, "stdio", c, id, m, c.method != "initialize" && !strings.HasPrefix(c.method, "resources/"))
	}
	_ = client.Close()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("the session ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end at the end of its input")
	}
	_ = answers.Close()
	for range lines { //nolint:revive // drained until the reader ends
	}
}

// TestUnknownPromptHasItsCode: a prompt that does not exist and one the
// caller is outside the audience of are answered alike — the SDK's -32602
// and message, with X_MCP_PROMPT_UNKNOWN in the data — to a go-sdk client.
func TestUnknownPromptHasItsCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	var answers []string
	for _, c := range []struct {
		role, prompt string
	}{{"support", "nope"}, {"auditor", "request_cancellation"}} {
		cs := connect(t, s, agent(c.role))
		_, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: c.prompt, Arguments: map[string]string{"order_id": "o-1001", "reason": "r"}})
		e := wireError(t, err)
		var data map[string]string
		if e.Code != jsonrpc.CodeInvalidParams || e.Message != `unknown prompt "`+c.prompt+`"` || json.Unmarshal(e.Data, &data) != nil || data["code"] != "X_MCP_PROMPT_UNKNOWN" {
			t.Fatalf("%s, %s: %+v", c.role, c.prompt, e)
		}
		answers = append(answers, strings.ReplaceAll(string(mustJSON(e)), c.prompt, "NAME"))
	}
	if answers[0] != answers[1] {
		t.Fatalf("a hidden prompt is answered otherwise than one that does not exist:\n%s\n%s", answers[0], answers[1])
	}
}
