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
// in the host log; a coded one is left as it is.
func TestUncodedErrorIsWithheld(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	c := &lineConn{log: slog.New(slog.NewTextHandler(&log, nil))}
	id, err := jsonrpc.MakeID("q-1")
	if err != nil {
		t.Fatal(err)
	}
	r := &jsonrpc.Response{ID: id, Error: errors.New(`reading "orders": password authentication failed for user "app"`)}
	if !uncoded(r) {
		t.Fatal("a plain error reads as coded")
	}
	answer := c.coded(r)
	b, _ := json.Marshal(answer)
	if answer.Error.Code != -32603 || answer.Error.Data.Code != "X_INTERNAL_ERROR" || answer.Error.Data.CorrelationID == "" ||
		string(answer.ID) != `"q-1"` || strings.Contains(string(b), "password") {
		t.Fatalf("answered %s", b)
	}
	if !strings.Contains(log.String(), "password authentication failed") || !strings.Contains(log.String(), answer.Error.Data.CorrelationID) {
		t.Fatalf("the host log: %s", log.String())
	}
	if uncoded(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32602, Message: "x"}}) || uncoded(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}) {
		t.Fatal("a coded error or a result reads as uncoded")
	}
}
