package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/logbuf"
)

// repeatedMembers are messages that name a member of the envelope, or of
// params, twice. go-sdk keeps the last of two; a log, a proxy or a
// gateway's policy reading the first sees another message: the first
// names order_get, and the SDK ran cancel_order. Each is refused, as the
// engine refuses arguments that repeat a member, and nothing runs.
var repeatedMembers = []struct {
	name, body string
	rpcCode    float64
	code       string
	status     int // over HTTP
}{
	{name: "params.name", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001"},"name":"cancel_order"}}`,
		rpcCode: -32602, code: "X_MCP_INVALID_PARAMS", status: http.StatusOK},
	{name: "params", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001"}},"params":{"name":"product_list"}}`,
		rpcCode: -32600, code: "X_MCP_INVALID_REQUEST", status: http.StatusBadRequest},
	{name: "method", body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call","params":{"name":"product_list"}}`,
		rpcCode: -32600, code: "X_MCP_INVALID_REQUEST", status: http.StatusBadRequest},
}

func TestRepeatedEnvelopeMemberIsRefused(t *testing.T) {
	t.Parallel()
	_, _, srv := behindFront(t)
	for _, c := range repeatedMembers {
		got := rawPost(t, http.MethodPost, srv.URL+"/mcp", c.body)
		e, _ := got.Body["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if got.Status != c.status || got.Body["result"] != nil || e["code"] != c.rpcCode || data["code"] != c.code {
			t.Errorf("HTTP, %s repeated: %d %v, want %d, JSON-RPC %v %s, nothing run", c.name, got.Status, got.Body, c.status, c.rpcCode, c.code)
		}
	}

	b := setup(t)
	s, _ := b.server(t)
	lines := []string{
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for _, c := range repeatedMembers {
		lines = append(lines, c.body)
	}
	var out logbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.ServeLines(ctx, agent("support"), nil, io.NopCloser(strings.NewReader(strings.Join(lines, "\n")+"\n")), &out); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("the session ended with %v", err)
	}
	answers := map[float64]map[string]any{}
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if id, ok := m["id"].(float64); ok {
				answers[id] = m
			}
		}
	}
	for i, c := range repeatedMembers {
		m := answers[float64(i+1)]
		e, _ := m["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if m == nil || m["result"] != nil || e["code"] != c.rpcCode || data["code"] != c.code {
			t.Errorf("stdio, %s repeated: %v, want JSON-RPC %v %s, nothing run", c.name, m, c.rpcCode, c.code)
		}
	}
}
