package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	answer = c.answer(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32022, Message: "unsupported protocol version",
		Data: json.RawMessage(`{"supported":["2025-11-25"],"requested":"2099-01-01"}`)}})
	if answer == nil || answer.Error.Code != -32022 || answer.Error.Data.Code != "X_MCP_INVALID_REQUEST" ||
		!slices.Equal(answer.Error.Data.Supported, []string{"2025-11-25"}) || answer.Error.Data.Requested != "2099-01-01" {
		t.Fatalf("an unsupported version's error with the SDK's data: %+v", answer)
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

// TestSecondCallUnderARunningCallsIdIsRefused: a call read while another
// under its id is still running is refused -32600 X_MCP_INVALID_REQUEST,
// never handed to the SDK (which answered one of the two, leaving the
// other waiting, and the end of the input waiting for it); once the first
// is answered, its id is free again.
func TestSecondCallUnderARunningCallsIdIsRefused(t *testing.T) {
	t.Parallel()
	in, feed := io.Pipe()
	answers, out := io.Pipe()
	lines := make(chan string, 4)
	go func() {
		read := bufio.NewScanner(answers)
		for read.Scan() {
			lines <- read.Text()
		}
	}()
	tr := &lineTransport{in: in, out: out, max: 1 << 20, caps: &sdk.ServerCapabilities{}, log: slog.New(slog.DiscardHandler)}
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := conn.(*lineConn)
	t.Cleanup(func() { _ = c.Close(); _ = feed.Close(); _ = out.Close() })
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n"
	go func() { _, _ = io.WriteString(feed, ping+ping) }()
	first, err := c.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The second line is read while the first call runs: refused.
	var line string
	select {
	case line = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatal("the second call under id 7 was neither refused nor answered")
	}
	var refusal struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &refusal); err != nil || string(refusal.ID) != "7" || refusal.Error.Code != -32600 {
		t.Fatalf("the second call under id 7: %q (%v)", line, err)
	}
	// Answered, the first frees its id.
	if err := c.Write(t.Context(), &jsonrpc.Response{ID: first.(*jsonrpc.Request).ID, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(feed, ping) }()
	if again, err := c.Read(t.Context()); err != nil || again.(*jsonrpc.Request).ID != first.(*jsonrpc.Request).ID {
		t.Fatalf("a call under id 7 after the first was answered: %v %v", again, err)
	}
}
