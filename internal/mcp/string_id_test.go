package mcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/logbuf"
)

// unanswerableIDs are string ids go-sdk decodes to another string — a lone
// surrogate, bytes that are not UTF-8, each read as U+FFFD — and so would
// answer under an id the client never sent: the client waits for ever,
// and two such calls in flight collide. Each is refused under the id as
// sent, as a number id the SDK would answer under another (1.5) is.
var unanswerableIDs = []string{`"\ud800"`, `"a\udc00b"`, "\"\xff\""}

func TestStringIDAnsweredUnderAnotherIsRefused(t *testing.T) {
	t.Parallel()
	_, _, srv := behindFront(t)
	for _, id := range unanswerableIDs {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(`"id":`+id)) || !bytes.Contains(body, []byte(`"X_MCP_INVALID_REQUEST"`)) {
			t.Errorf("HTTP, id %q: %d %s, want 400 X_MCP_INVALID_REQUEST under the id as sent", id, resp.StatusCode, body)
		}
	}

	b := setup(t)
	s, _ := b.server(t)
	lines := []string{
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for _, id := range unanswerableIDs {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	}
	var out logbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.ServeLines(ctx, agent("support"), nil, io.NopCloser(strings.NewReader(strings.Join(lines, "\n")+"\n")), &out); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("the session ended with %v", err)
	}
	for _, id := range unanswerableIDs {
		found := false
		for line := range strings.Lines(out.String()) {
			if strings.Contains(line, `"id":`+id) && strings.Contains(line, `"X_MCP_INVALID_REQUEST"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("stdio, id %q: no refusal under the id as sent; the output:\n%s", id, out.String())
		}
	}
	if strings.Contains(out.String(), `"result":{}`) {
		t.Errorf("stdio: a ping under an id the SDK rewrote was answered:\n%s", out.String())
	}
}
