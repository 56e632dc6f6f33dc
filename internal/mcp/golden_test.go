package mcp

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestGoldenAnswers holds what an agent receives for every status of
// every kind of tool to the files under testdata/answers: the content,
// the structured content and isError, byte for byte.
func TestGoldenAnswers(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("6f1d0d2e-0000-4000-8000-000000000001")
	expires := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	action := actionTool("cancel_order", actionFixture(), "", nil)
	action.Name = "cancel_order" // as the server names each tool it builds
	tools := map[string]*tool{
		"action":         {def: action, kind: ontology.ToolAction},
		"read":           {def: &readDef, kind: ontology.ToolGet},
		"check_approval": {def: &sdk.Tool{Name: "check_approval"}, kind: ontology.ToolCheckApproval},
	}
	for kind, tl := range tools {
		for _, status := range engine.Statuses() {
			out := &engine.Outcome{Status: status, CorrelationID: id.String(), ApprovalID: &id, ExpiresAt: &expires,
				Err: errors.New(`ERROR: permission denied for table "orders_secret" (SQLSTATE 42501)`)}
			switch status {
			case engine.StatusOK:
				out.Err = nil
				out.Data = json.RawMessage(`{"id":"o-1001","status":"paid"}`)
				if tl.kind == ontology.ToolAction {
					out.ApprovalID = nil // executed at once, without an approval
				}
			case engine.StatusInvalidInput:
				out.Issues = []engine.Issue{{Path: "/reason", Message: "minLength: got 0, want 1"}}
				out.Code = errcode.InputInvalid
			case engine.StatusFailed, engine.StatusResolveError:
				out.Diagnostic = engine.DiagnosticDatasourcePermission
			case engine.StatusDenied, engine.StatusPreconditionFailed:
				out.Code = errcode.Forbidden
			case engine.StatusRejected:
				out.Note = "The customer withdrew the request."
			case engine.StatusRateLimited:
				out.Err, out.Code = nil, errcode.RateLimited
				out.RateLimit = &engine.RateLimit{Limit: engine.LimitPerMinute, Allowed: 2, RetryAfter: 41163 * time.Millisecond,
					Detail: "cancel_order has executed 2 times this minute in this tenant, as many as a minute allows"}
			}
			if out.OK() {
				out.Err = nil
			}
			golden.JSON(t, filepath.Join("testdata", "answers", kind, string(status)+".json"), render(tl, out))
		}
	}
	// An unknown outcome given back to a retry under the call's key.
	replayed := &engine.Outcome{Status: engine.StatusOutcomeUnknown, CorrelationID: id.String(), Replayed: true, Err: errors.New("filed")}
	golden.JSON(t, filepath.Join("testdata", "answers", "action", "outcome_unknown_replayed.json"), render(tools["action"], replayed))
}

// TestGoldenGateErrors holds the protocol errors of the gates before a
// tool's input to files: a tool the caller is not offered (hidden or
// nonexistent, one answer) and a scope the connection's token lacks.
func TestGoldenGateErrors(t *testing.T) {
	t.Parallel()
	golden.JSON(t, filepath.Join("testdata", "errors", "tool_unknown.json"), unknownTool("cancel_order"))
	out := &engine.Outcome{Status: engine.StatusDenied, Code: errcode.MCPScopeDenied, Scope: "orders:write",
		CorrelationID: "6f1d0d2e-0000-4000-8000-000000000002"}
	golden.JSON(t, filepath.Join("testdata", "errors", "scope_denied.json"), scopeDenied("cancel_order", out))
}
