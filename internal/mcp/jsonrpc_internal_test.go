package mcp

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestJSONRefusalsHeld: of what the SDK answers in JSON, answerJSONRPC
// holds a 4xx or 5xx only — a success passes as written — and answers
// one it cannot code as it answers a plain refusal: a 4xx that is no
// JSON-RPC error, or of a JSON-RPC code codeOfRPC does not hold,
// -32600 X_MCP_INVALID_REQUEST in the SDK's words; a 5xx -32603
// X_INTERNAL_ERROR, its words withheld. Each keeps the SDK's status.
func TestJSONRefusalsHeld(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: &ontology.Config{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const request = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	for _, c := range []struct {
		name, written    string
		status, wantCode int
		code             string
	}{
		{name: "success", written: `{"jsonrpc":"2.0","id":3,"result":{}}`, status: 200},
		{name: "not JSON-RPC", written: `{"oops":1}`, status: 400, wantCode: -32600, code: "X_MCP_INVALID_REQUEST"},
		{name: "not JSON", written: `oops`, status: 400, wantCode: -32600, code: "X_MCP_INVALID_REQUEST"},
		{name: "a code not held", written: `{"jsonrpc":"2.0","id":3,"error":{"code":-32021,"message":"missing capability"}}`, status: 400, wantCode: -32600, code: "X_MCP_INVALID_REQUEST"},
		{name: "a failure", written: `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"secret detail"}}`, status: 500, wantCode: -32603, code: "X_INTERNAL_ERROR"},
	} {
		h := s.answerJSONRPC(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.written))
		}))
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(request))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if c.code == "" {
			if rec.Code != c.status || rec.Body.String() != c.written {
				t.Errorf("%s: %d %s, want it as written", c.name, rec.Code, rec.Body)
			}
			continue
		}
		var got struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    struct {
					Code string `json:"code"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != c.status || got.Error.Code != c.wantCode ||
			got.Error.Data.Code != c.code || string(got.ID) != "3" || strings.Contains(got.Error.Message, "secret") {
			t.Errorf("%s: %d %s, want %d, JSON-RPC %d %s, id 3", c.name, rec.Code, rec.Body, c.status, c.wantCode, c.code)
		}
	}
}
