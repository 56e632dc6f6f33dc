package mcp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
)

// httpAnswer is what a client receives over HTTP, for the golden files.
type httpAnswer struct {
	Status      int            `json:"status"`
	ContentType string         `json:"content_type"`
	Allow       string         `json:"allow,omitempty"`
	Body        map[string]any `json:"body"`
}

// rawPost sends one request to the MCP endpoint at u with the headers an
// MCP client sends (and a bearer token), then header's name-value pairs
// over them; a "Host" pair sets the Host.
func rawPost(t *testing.T, method, u, body string, header ...string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		switch {
		case header[i] == "Host":
			req.Host = header[i+1]
		case header[i+1] == "":
			req.Header.Del(header[i])
		default:
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := httpAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Allow: resp.Header.Get("Allow")}
	if len(b) > 0 && json.Unmarshal(b, &a.Body) != nil {
		a.Body = map[string]any{"not JSON": string(b)}
	}
	return a
}

// behindFront serves the orders example's MCP server behind the front, as
// the app mounts it, at /mcp of the server it returns; the token "t" is a
// support agent's.
func behindFront(t *testing.T) (*mcp.Server, *ontology.Config, *httptest.Server) {
	t.Helper()
	b := setup(t)
	s, _ := b.server(t)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(byToken{"t": agent("support")}),
		Limiter: front.NewMemoryLimiter(), Logger: quiet})
	f.Mount("/mcp", s.HTTPHandler(), front.Policy{Auth: front.AuthBearer, Resource: "/mcp", CheckOrigin: true,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, OneMessage: true})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return s, cfg, srv
}

// TestGoldenJSONRPCOverHTTP: behind the front, as the app mounts it, every
// answer to a message go-sdk cannot take is a JSON-RPC error
// (application/json) carrying the request's id when one could be read —
// an unknown method -32601 (200 to a request), a body that is not JSON
// -32700, one that is no JSON-RPC request -32600, a batch -32600, params
// absent or null where required -32600, params go-sdk cannot read -32602
// (200, as the SDK answered) — with
// data naming the stable code, its cause and fix; the SDK's other plain
// refusals (Accept, Content-Type, method) are JSON-RPC too. A loopback
// Origin and Host reach the SDK and are served. The bodies are held to
// testdata/jsonrpc/http.
func TestGoldenJSONRPCOverHTTP(t *testing.T) {
	t.Parallel()
	s, cfg, srv := behindFront(t)
	endpoint := srv.URL + "/mcp"
	self, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	cases := []struct {
		name, method, body string
		header             []string
		status             int
		rpcCode            float64
		id                 any
	}{
		{name: "unknown_method", body: `{"jsonrpc":"2.0","id":5,"method":"no/such/method"}`, status: 200, rpcCode: -32601, id: 5.0},
		{name: "unknown_method_string_id", body: `{"jsonrpc":"2.0","id":"q-1","method":"tools/lists","params":{}}`, status: 200, rpcCode: -32601, id: "q-1"},
		{name: "unknown_notification", body: `{"jsonrpc":"2.0","method":"notifications/no_such"}`, status: 400, rpcCode: -32601},
		{name: "not_json", body: `this is not json`, status: 400, rpcCode: -32700},
		{name: "broken_json_after_id", body: `{"jsonrpc":"2.0","id":6,"method":"tools/list",`, status: 400, rpcCode: -32700, id: 6.0},
		{name: "empty_body", body: ``, status: 400, rpcCode: -32700},
		{name: "no_jsonrpc", body: `{"id":7,"method":"tools/list"}`, status: 400, rpcCode: -32600, id: 7.0},
		{name: "no_method", body: `{"jsonrpc":"2.0","id":8}`, status: 400, rpcCode: -32600, id: 8.0},
		{name: "method_not_string", body: `{"jsonrpc":"2.0","id":9,"method":42}`, status: 400, rpcCode: -32600, id: 9.0},
		{name: "id_not_string_or_number", body: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, status: 400, rpcCode: -32600},
		{name: "not_an_object", body: `"tools/list"`, status: 400, rpcCode: -32600},
		{name: "request_without_id", body: `{"jsonrpc":"2.0","method":"tools/list"}`, status: 400, rpcCode: -32600},
		{name: "notification_with_id", body: `{"jsonrpc":"2.0","id":10,"method":"notifications/initialized"}`, status: 400, rpcCode: -32600, id: 10.0},
		{name: "params_missing", body: `{"jsonrpc":"2.0","id":11,"method":"tools/call"}`, status: 400, rpcCode: -32600, id: 11.0},
		{name: "params_null", body: `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":null}`, status: 400, rpcCode: -32600, id: 16.0},
		{name: "params_not_of_shape", body: `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":{}}}`, status: 200, rpcCode: -32602, id: 17.0},
		// Answered in-band by the SDK or a middleware, coded as the rest.
		{name: "subscribe_without_session", body: `{"jsonrpc":"2.0","id":18,"method":"resources/subscribe","params":{"uri":"orangerail://approvals"}}`, status: 200, rpcCode: -32601, id: 18.0},
		{name: "completion_unserved", body: `{"jsonrpc":"2.0","id":19,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}`, status: 200, rpcCode: -32601, id: 19.0},
		{name: "cursor_not_issued", body: `{"jsonrpc":"2.0","id":20,"method":"tools/list","params":{"cursor":"not-a-cursor"}}`, status: 200, rpcCode: -32602, id: 20.0},
		{name: "log_level_unknown", body: `{"jsonrpc":"2.0","id":21,"method":"logging/setLevel","params":{"level":"loud"}}`, status: 200, rpcCode: -32602, id: 21.0},
		{name: "batch", body: `[{"jsonrpc":"2.0","id":12,"method":"tools/list"}]`, status: 400, rpcCode: -32600},
		{name: "accept_missing", body: `{"jsonrpc":"2.0","id":13,"method":"tools/list"}`, header: []string{"Accept", ""}, status: 400, rpcCode: -32600, id: 13.0},
		{name: "content_type_not_json", body: `{"jsonrpc":"2.0","id":14,"method":"tools/list"}`, header: []string{"Content-Type", "text/plain"}, status: 415, rpcCode: -32600, id: 14.0},
		{name: "get", method: http.MethodGet, status: 405, rpcCode: -32600},
		{name: "protocol_version_unsupported", body: `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`, header: []string{"MCP-Protocol-Version", "1999-01-01"}, status: 400, rpcCode: -32600, id: 15.0},
		{name: "dns_rebinding", body: initialize, header: []string{"Host", "evil.example.com", "Origin", "http://evil.example.com"}, status: 403, rpcCode: -32000},
	}
	for _, c := range cases {
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		got := rawPost(t, method, endpoint, c.body, c.header...)
		golden.JSON(t, filepath.Join("testdata", "jsonrpc", "http", c.name+".json"), got)
		e, _ := got.Body["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if got.Status != c.status || got.ContentType != "application/json" || got.Body["jsonrpc"] != "2.0" ||
			e["code"] != c.rpcCode || got.Body["id"] != c.id || data["code"] == nil || data["cause"] == "" || data["fix"] == "" {
			t.Errorf("%s: %d %s %v, want %d, JSON-RPC %v, id %v, data with code, cause and fix", c.name, got.Status, got.ContentType, got.Body, c.status, c.rpcCode, c.id)
		}
	}

	// The conformance suite's DNS-rebinding scenario, accepted: a loopback
	// Origin and Host initialize, then notify.
	loopback := []string{"Host", self.Host, "Origin", "http://" + self.Host}
	if got := rawPost(t, http.MethodPost, endpoint, initialize, loopback...); got.Status != http.StatusOK || got.Body["result"] == nil {
		t.Fatalf("initialize with a loopback Origin and Host: %+v", got)
	}
	if got := rawPost(t, http.MethodPost, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, loopback...); got.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized with a loopback Origin and Host: %+v", got)
	}
	if got := rawPost(t, http.MethodPost, endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); got.Status != http.StatusOK || got.Body["result"] == nil {
		t.Fatalf("tools/list: %+v", got)
	}

	// Served without the front, the handler caps a body at
	// http.max_body_bytes itself, and answers a longer one 413 in JSON-RPC
	// with the id read before the cut.
	bare := httptest.NewServer(mcp.NewAuthenticator(byToken{"t": agent("support")}).Require(s.HTTPHandler()))
	t.Cleanup(bare.Close)
	got := rawPost(t, http.MethodPost, bare.URL, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"`+
		strings.Repeat("x", int(cfg.HTTP.MaxBodyBytes))+`"}}}`)
	golden.JSON(t, filepath.Join("testdata", "jsonrpc", "http", "body_too_large_without_the_front.json"), got)
	if e, _ := got.Body["error"].(map[string]any); got.Status != http.StatusRequestEntityTooLarge || got.Body["id"] != 99.0 ||
		e["data"].(map[string]any)["limit"] != float64(cfg.HTTP.MaxBodyBytes) {
		t.Fatalf("a body too large without the front: %+v", got)
	}
}

// TestGoldenSDKJSONRefusalsOverHTTP: what go-sdk refuses in JSON-RPC
// itself, to a request of protocol 2026-07-28, carries a stable code in
// its data as every other refusal does — the SDK's JSON-RPC code, words,
// status and the request's id kept: a header unlike the body -32020
// X_MCP_HEADER_MISMATCH, a params._meta without what that version asks
// -32602 X_MCP_INVALID_PARAMS, a protocol version the server does not
// serve -32022 X_MCP_INVALID_REQUEST (its supported and requested
// versions kept), a method it does not serve -32601 X_MCP_METHOD_UNKNOWN,
// 404 as that version asks. A refusal whose data names a code already (a
// tool the caller is not offered) passes as the server wrote it, and a
// success is served. The bodies are held to testdata/jsonrpc/http.
func TestGoldenSDKJSONRefusalsOverHTTP(t *testing.T) {
	t.Parallel()
	_, _, srv := behindFront(t)
	endpoint := srv.URL + "/mcp"
	const version = "2026-07-28"
	meta := func(v string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}}`
	}
	headers := func(method string, more ...string) []string {
		return append([]string{"MCP-Protocol-Version", version, "Mcp-Method", method}, more...)
	}
	call := func(id int, name string) string {
		return `{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{"id":"o-1001"},` + meta(version) + `}}`
	}
	list := func(id int, params string) string {
		return `{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/list","params":{` + params + `}}`
	}

	cases := []struct {
		name, body string
		header     []string
		status     int
		rpcCode    float64
		code       string
		id         any
	}{
		{name: "v2026_mcp_method_missing", body: list(1, meta(version)), header: []string{"MCP-Protocol-Version", version},
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 1.0},
		{name: "v2026_mcp_method_mismatch", body: list(2, meta(version)), header: headers("prompts/list"),
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 2.0},
		{name: "v2026_mcp_name_missing", body: call(3, "order_get"), header: headers("tools/call"),
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 3.0},
		{name: "v2026_mcp_name_mismatch", body: call(4, "order_get"), header: headers("tools/call", "Mcp-Name", "order_note"),
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 4.0},
		{name: "v2026_protocol_version_header_missing", body: list(5, meta(version)),
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 5.0},
		{name: "v2026_protocol_version_header_unlike_meta", body: list(6, meta("2025-11-25")), header: headers("tools/list"),
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH", id: 6.0},
		{name: "v2026_notification_mcp_method_missing", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, header: []string{"MCP-Protocol-Version", version},
			status: 400, rpcCode: -32020, code: "X_MCP_HEADER_MISMATCH"},
		{name: "v2026_meta_protocol_version_missing", body: `{"jsonrpc":"2.0","id":"m-7","method":"tools/list"}`, header: headers("tools/list"),
			status: 400, rpcCode: -32602, code: "X_MCP_INVALID_PARAMS", id: "m-7"},
		{name: "v2026_meta_client_capabilities_missing", body: list(8, `"_meta":{"io.modelcontextprotocol/protocolVersion":"`+version+`"}`), header: headers("tools/list"),
			status: 400, rpcCode: -32602, code: "X_MCP_INVALID_PARAMS", id: 8.0},
		{name: "v2026_meta_client_info_invalid", body: list(9, `"_meta":{"io.modelcontextprotocol/protocolVersion":"`+version+`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":5}`), header: headers("tools/list"),
			status: 400, rpcCode: -32602, code: "X_MCP_INVALID_PARAMS", id: 9.0},
		{name: "v2026_protocol_version_unsupported", body: list(10, meta("2099-01-01")), header: []string{"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"},
			status: 400, rpcCode: -32022, code: "X_MCP_INVALID_REQUEST", id: 10.0},
		{name: "v2026_unknown_method", body: `{"jsonrpc":"2.0","id":11,"method":"no/such/method","params":{` + meta(version) + `}}`, header: headers("no/such/method"),
			status: 404, rpcCode: -32601, code: "X_MCP_METHOD_UNKNOWN", id: 11.0},
		{name: "v2026_method_removed", body: `{"jsonrpc":"2.0","id":12,"method":"ping","params":{` + meta(version) + `}}`, header: headers("ping"),
			status: 404, rpcCode: -32601, code: "X_MCP_METHOD_UNKNOWN", id: 12.0},
		{name: "v2026_tool_unknown", body: call(13, "no_such_tool"), header: headers("tools/call", "Mcp-Name", "no_such_tool"),
			status: 400, rpcCode: -32602, code: "X_MCP_TOOL_UNKNOWN", id: 13.0},
		// A method the server does not serve, refused before the SDK reads
		// it: 404 to a request of that version too, as the SDK answers one.
		{name: "v2026_completion_unserved", body: `{"jsonrpc":"2.0","id":16,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"},` + meta(version) + `}}`,
			header: headers("completion/complete"), status: 404, rpcCode: -32601, code: "X_MCP_METHOD_UNKNOWN", id: 16.0},
		// server/discover is of that version: to a request of an earlier
		// one the SDK answered -32601 with no data.
		{name: "discover_before_2026", body: `{"jsonrpc":"2.0","id":17,"method":"server/discover"}`, header: []string{"MCP-Protocol-Version", "2025-11-25"},
			status: 200, rpcCode: -32601, code: "X_MCP_METHOD_UNKNOWN", id: 17.0},
	}
	for _, c := range cases {
		got := rawPost(t, http.MethodPost, endpoint, c.body, c.header...)
		golden.JSON(t, filepath.Join("testdata", "jsonrpc", "http", c.name+".json"), got)
		e, _ := got.Body["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if got.Status != c.status || got.ContentType != "application/json" || got.Body["jsonrpc"] != "2.0" ||
			e["code"] != c.rpcCode || got.Body["id"] != c.id || data["code"] != c.code {
			t.Errorf("%s: %d %s %v, want %d, JSON-RPC %v, id %v, data.code %s", c.name, got.Status, got.ContentType, got.Body, c.status, c.rpcCode, c.id, c.code)
		}
		if msg, _ := e["message"].(string); c.code != "X_MCP_TOOL_UNKNOWN" && (!strings.HasPrefix(msg, c.code+": ") || data["cause"] == nil || data["fix"] == nil) {
			t.Errorf("%s: message %q and data %v, want the code, then the SDK's words, and the code's cause and fix", c.name, msg, data)
		}
	}
	unsupported := rawPost(t, http.MethodPost, endpoint, list(14, meta("2099-01-01")), "MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list")
	data, _ := unsupported.Body["error"].(map[string]any)["data"].(map[string]any)
	if supported, _ := data["supported"].([]any); data["requested"] != "2099-01-01" || !slices.Contains(supported, any(version)) {
		t.Errorf("an unsupported protocol version's data: %v, want the versions supported and the one requested", data)
	}

	if got := rawPost(t, http.MethodPost, endpoint, list(15, meta(version)), headers("tools/list")...); got.Status != http.StatusOK || got.Body["result"] == nil {
		t.Fatalf("tools/list of protocol %s: %+v", version, got)
	}
}
