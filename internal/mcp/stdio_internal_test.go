package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestUncodedErrorIsWithheld: an error the SDK answers with no JSON-RPC
// code, other than a request out of the session's order, reaches the
// client as -32603 X_INTERNAL_ERROR with a correlation id, its text only
// in the host log; one with a code and no data is given its stable code,
// its code and words kept; one with data, and a result, are left as they
// are.
func TestUncodedErrorIsWithheld(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	c := &lineConn{log: slog.New(slog.NewTextHandler(&log, nil))}
	id, err := jsonrpc.MakeID("q-1")
	if err != nil {
		t.Fatal(err)
	}
	answer := c.answer(&jsonrpc.Response{ID: id, Error: errors.New(`reading "orders": password authentication failed for user "app"`)})
	b, _ := json.Marshal(answer)
	if answer == nil || answer.Error.Code != -32603 || answer.Error.Data.Code != "X_INTERNAL_ERROR" || answer.Error.Data.CorrelationID == "" ||
		string(answer.ID) != `"q-1"` || strings.Contains(string(b), "password") {
		t.Fatalf("answered %s", b)
	}
	if !strings.Contains(log.String(), "password authentication failed") || !strings.Contains(log.String(), answer.Error.Data.CorrelationID) {
		t.Fatalf("the host log: %s", log.String())
	}
	answer = c.answer(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32602, Message: "x is missing"}})
	if answer == nil || answer.Error.Code != -32602 || answer.Error.Data.Code != "X_MCP_INVALID_PARAMS" || !strings.Contains(answer.Error.Message, "x is missing") ||
		string(answer.ID) != `"q-1"` {
		t.Fatalf("a coded error without data: %+v", answer)
	}
	for _, r := range []*jsonrpc.Response{
		{ID: id, Error: &jsonrpc.Error{Code: -32602, Message: "x", Data: json.RawMessage(`{"code":"X_MCP_TOOL_UNKNOWN"}`)}},
		{ID: id, Error: &jsonrpc.Error{Code: -32099, Message: "x"}},
		{ID: id, Result: json.RawMessage(`{}`)},
	} {
		if answer := c.answer(r); answer != nil {
			t.Fatalf("%+v was rewritten: %+v", r, answer)
		}
	}
}
