package mcp_test

import (
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestBudgetRefusalOverMCP: a call over an action's budget reaches a real
// MCP client as an error result whose structured content, checked by the
// client against the tool's output schema, names the limit, the calls it
// allows and when to retry.
func TestBudgetRefusalOverMCP(t *testing.T) {
	t.Parallel()
	if s := time.Now().UTC().Second(); s >= 50 {
		time.Sleep(time.Duration(61-s) * time.Second) // one minute's count, not two
	}
	b := setup(t)
	s, _ := b.server(t, ontologytest.SetYAML("actions.add_order_note.budget", "{per_minute: 1}"))
	cs := connect(t, s, agent("support"))
	if res, body := call(t, cs, "add_order_note", `{"order_id": "o-1001", "note": "first"}`); res.IsError {
		t.Fatalf("first: %v", body)
	}
	res, body := call(t, cs, "add_order_note", `{"order_id": "o-1001", "note": "second"}`)
	retry, _ := body["retry_after_seconds"].(float64)
	if !res.IsError || body["status"] != "rate_limited" || body["code"] != string(errcode.RateLimited) || body["limit"] != "calls_per_minute" ||
		body["allowed"] != float64(1) || retry <= 0 || retry > 60 || body["detail"] == "" || body["correlationId"] == "" {
		t.Fatalf("second: %v", body)
	}
}
