package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestGoldenStdioAnswersAndServesOn serves the real server over stdio's framing
// through pipes, with http.max_body_bytes at 4096: a line longer than that
// is answered X_MCP_BODY_TOO_LARGE (with its id when the part read holds
// it, else null) and skipped, one of exactly 4096 bytes is read; a line
// that is not JSON is -32700, one that is no JSON-RPC message or a batch
// -32600, an unknown method -32601, params go-sdk cannot read -32602, a
// resource no one may read (its URI holding a control character) -32602
// X_MCP_RESOURCE_UNKNOWN — each with its data — and after every
// one the session serves the next message. The answers are held to
// testdata/jsonrpc/stdio.
func TestGoldenStdioAnswersAndServesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t, ontologytest.Set("http.max_body_bytes", 4096))
	serverIn, client := io.Pipe()
	answers, serverOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- s.ServeLines(ctx, agent("support"), nil, serverIn, serverOut) }()
	read := bufio.NewScanner(answers)
	read.Buffer(nil, 1<<20)
	// exchange sends line and returns the one answer it gets.
	exchange := func(name, line string) map[string]any {
		t.Helper()
		go func() { _, _ = io.WriteString(client, line) }()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if read.Scan() {
				_ = json.Unmarshal(read.Bytes(), &m)
			}
			got <- m
		}()
		select {
		case m := <-got:
			if m == nil {
				t.Fatalf("%s: no answer; the session ended: %v", name, read.Err())
			}
			return m
		case err := <-done:
			t.Fatalf("%s: the session ended: %v", name, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer", name)
		}
		return nil
	}
	refused := func(name, line string, rpcCode float64, code string, id any) {
		t.Helper()
		m := exchange(name, line)
		golden.JSON(t, filepath.Join("testdata", "jsonrpc", "stdio", name+".json"), m)
		e, _ := m["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e["code"] != rpcCode || m["id"] != id || data["code"] != code || data["cause"] == "" || data["fix"] == "" {
			t.Fatalf("%s: %v, want %v %s with id %v", name, m, rpcCode, code, id)
		}
	}
	served := func(name, line string, id float64) map[string]any {
		t.Helper()
		m := exchange(name, line)
		if m["id"] != id || m["error"] != nil {
			t.Fatalf("%s: %v", name, m)
		}
		return m
	}

	served("initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n", 1)
	if _, err := io.WriteString(client, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}

	call := func(id, pad int) string { // a tools/call line of pad x's
		return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"` + strings.Repeat("x", pad) + `"}}}`
	}
	short := len(call(2, 0))
	refused("too_long", call(2, 4097-short)+"\n", -32000, "X_MCP_BODY_TOO_LARGE", 2.0)
	// Exactly the limit is read, CRLF and all; the tool answers it.
	if m := served("at_the_limit", call(3, 4096-short)+"\r\n", 3); m["result"] == nil {
		t.Fatalf("a line of the limit: %v", m)
	}
	refused("too_long_id_unread", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"order_get","arguments":{"id":"`+strings.Repeat("x", 1<<20)+`"}},"id":4}`+"\n",
		-32000, "X_MCP_BODY_TOO_LARGE", nil)
	refused("not_json", "{oops\n", -32700, "X_MCP_PARSE_ERROR", nil)
	refused("no_jsonrpc", `{"id":5,"method":"tools/list"}`+"\n", -32600, "X_MCP_INVALID_REQUEST", 5.0)
	refused("batch", `[{"jsonrpc":"2.0","id":6,"method":"tools/list"}]`+"\n", -32600, "X_MCP_PROTOCOL", nil)
	refused("unknown_method", `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`+"\n", -32601, "X_MCP_METHOD_UNKNOWN", 7.0)
	refused("params_not_of_shape", `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":5}}`+"\n", -32602, "X_MCP_INVALID_PARAMS", 9.0)
	refused("completion_unserved", `{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}`+"\n",
		-32601, "X_MCP_METHOD_UNKNOWN", 10.0)
	refused("cursor_not_issued", `{"jsonrpc":"2.0","id":11,"method":"resources/list","params":{"cursor":"not-a-cursor"}}`+"\n", -32602, "X_MCP_INVALID_PARAMS", 11.0)
	refused("log_level_unknown", `{"jsonrpc":"2.0","id":12,"method":"logging/setLevel","params":{"level":"loud"}}`+"\n", -32602, "X_MCP_INVALID_PARAMS", 12.0)
	// A URI no resource matches, with a control character: the SDK's own
	// not-found quoted it as no JSON can, and the session ended.
	refused("resource_unknown_control", `{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":"orangerail://x\u0001"}}`+"\n",
		-32602, "X_MCP_RESOURCE_UNKNOWN", 14.0)
	refused("resource_unknown_subscribe", `{"jsonrpc":"2.0","id":15,"method":"resources/subscribe","params":{"uri":"orangerail://objects/order\u007f"}}`+"\n",
		-32602, "X_MCP_RESOURCE_UNKNOWN", 15.0)
	// A request of protocol 2026-07-28 says its version and the client's
	// capabilities in params._meta: one without them the SDK refuses with
	// an error of its own, data and all missing.
	refused("meta_capabilities_missing", `{"jsonrpc":"2.0","id":16,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`+"\n",
		-32602, "X_MCP_INVALID_PARAMS", 16.0)
	// A version the server does not serve: the SDK's data (the versions
	// served and the one asked for) kept, with the code HTTP gives it.
	refused("protocol_version_unsupported", `{"jsonrpc":"2.0","id":17,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`+"\n",
		-32022, "X_MCP_INVALID_REQUEST", 17.0)
	// A request whose id is null was read as a notification: run, and
	// never answered.
	refused("id_null", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`+"\n", -32600, "X_MCP_INVALID_REQUEST", nil)
	served("log_level_known", `{"jsonrpc":"2.0","id":13,"method":"logging/setLevel","params":{"level":"warning"}}`+"\n", 13)
	if m := served("tools/list after them", "\n"+`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`+"\n", 8); m["result"] == nil {
		t.Fatalf("tools/list: %v", m)
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
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestStdioAnswersEveryCallBeforeTheInputEnds: a client that writes its
// calls and closes its end at once — a pipe, as the specification's
// shutdown has it — is answered every one of them before the session
// ends: the end of the input waits for them, where the SDK cancelled the
// calls still running and wrote no answer (a read, and an action that may
// have staged).
func TestStdioAnswersEveryCallBeforeTheInputEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001"}}}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"cancel_order","arguments":{"order_id":"o-1002","reason":"piped"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
	}, "\n") + "\n"
	var out logbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.ServeLines(ctx, agent("support"), nil, io.NopCloser(strings.NewReader(in)), &out); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("the session ended with %v", err)
	}
	answered := map[string]bool{}
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID     any             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
			t.Fatalf("an answer that is no result: %s (%v)", line, err)
		}
		answered[fmt.Sprint(m.ID)] = true
	}
	for _, id := range []string{"1", "2", "three", "4"} {
		if !answered[id] {
			t.Errorf("call %s was not answered; the output:\n%s", id, out.String())
		}
	}
}

// TestStdioRefusesOutOfOrderWithACode: over stdio, a request before the
// initialize handshake and a second initialize are refused -32600
// X_MCP_INVALID_REQUEST with the data every refusal carries, where the SDK
// answered code 0, which JSON-RPC gives no meaning; the session serves on.
func TestStdioRefusesOutOfOrderWithACode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.server(t)
	initialize := `{"jsonrpc":"2.0","id":%q,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`,
		fmt.Sprintf(initialize, "first"),
		fmt.Sprintf(initialize, "again"),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"after","method":"tools/list"}`,
	}, "\n") + "\n"
	var out logbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.ServeLines(ctx, agent("support"), nil, io.NopCloser(strings.NewReader(in)), &out)
	answers := map[string]map[string]any{}
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		answers[fmt.Sprint(m["id"])] = m
	}
	for _, id := range []string{"early", "again"} {
		e, _ := answers[id]["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e["code"] != float64(-32600) || data["code"] != "X_MCP_INVALID_REQUEST" || data["fix"] == "" {
			t.Errorf("%s: %v", id, answers[id])
		}
	}
	for _, id := range []string{"first", "after"} {
		if answers[id]["result"] == nil {
			t.Errorf("%s: %v", id, answers[id])
		}
	}
}
