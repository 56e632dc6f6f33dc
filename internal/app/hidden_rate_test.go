package app

import (
	"net/http"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestAHiddenToolIsBilledAsAnAbsentOne: hidden ≠ forbidden holds at the
// front's allowances too. A tools/call of a tool the caller does not see
// must be billed as a call of a tool that does not exist (a write), or
// the caller learns which names are real tools kept from it: once its
// writes are spent, an absent tool answers 429 and a hidden read tool
// answers as unknown.
func TestAHiddenToolIsBilledAsAnAbsentOne(t *testing.T) {
	t.Parallel()
	s := serve(t, func(cfg *ontology.Config) {
		r := &cfg.HTTP.RateLimits
		r.ReadsPerMinute, r.WritesPerMinute, r.FailedAuthPerMinute = 1000, 1, 1000
	}, nil)
	// An agent without the roles customer is read with: customer_get is
	// hidden from it.
	token := s.token("agent-9", false, "orders:read")
	callTool := func(name string) (int, string) {
		code, body := s.do(t, http.MethodPost, MCPPath, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": map[string]any{"id": "c-1"}}})
		return code, string(body)
	}
	// The one write of the minute, spent on a tool that does not exist.
	if code, body := callTool("no_such_tool"); code != http.StatusOK {
		t.Fatalf("the first call: %d %s", code, body)
	}
	absentCode, absent := callTool("no_such_tool")
	hiddenCode, hidden := callTool("customer_get")
	if absentCode != http.StatusTooManyRequests || hiddenCode != absentCode {
		t.Fatalf("an absent tool answered %d %s\na hidden one %d %s", absentCode, absent, hiddenCode, hidden)
	}
}
