package mcp_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestHiddenToolLogsAsAnAbsentOne: hidden ≠ forbidden holds for the log
// message a session is sent too. A call of a tool outside the caller's
// audience must tell the session exactly what a call of a tool that does
// not exist tells it; otherwise an agent that sets a log level learns
// which of the names it guesses are real tools kept from it.
func TestHiddenToolLogsAsAnAbsentOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	with, _ := b.server(t)
	without, _ := b.server(t, ontologytest.Delete("actions.cancel_order"))
	logged := func(s *mcp.Server) string {
		var mu sync.Mutex
		var got []string
		cs := connectWith(t, s, agent(), &sdk.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) { //nolint:staticcheck // SA1019: the deprecated logging feature is what the test holds
				raw, _ := json.Marshal(req.Params.Data)
				mu.Lock()
				defer mu.Unlock()
				got = append(got, string(req.Params.Level)+" "+string(raw))
			}}, "")
		level := sdk.Meta{"io.modelcontextprotocol/logLevel": "info"}
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Meta: level, Name: "cancel_order", Arguments: map[string]any{"order_id": "o-1001"}}); err == nil {
			t.Fatal("cancel_order answered an agent without the role")
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n > 0 {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("log messages %q, want one", got)
		}
		return got[0]
	}
	hidden, absent := logged(with), logged(without)
	if hidden != absent {
		t.Fatalf("a hidden tool's call told the session\n%s\nand an absent tool's\n%s", hidden, absent)
	}
}
