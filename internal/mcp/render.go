package mcp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/redact"
)

// render turns an engine outcome into what the agent receives. Nothing of
// Outcome.Err reaches it: failing statuses carry the correlation id and
// the redact package's sentence instead.
func render(t *tool, out *engine.Outcome) *sdk.CallToolResult {
	body := map[string]any{"status": string(out.Status)}
	if out.ApprovalID != nil {
		body["approvalId"] = out.ApprovalID.String()
	}
	if out.ExpiresAt != nil && (out.Status == engine.StatusApprovalPending || out.Status == engine.StatusPending) {
		body["expiresAt"] = out.ExpiresAt.UTC()
	}
	name := t.def.Name
	var message string
	isError := false

	switch out.Status {
	case engine.StatusOK:
		if t.read() {
			// Data is compact JSON already: sent as is, it is encoded once.
			return &sdk.CallToolResult{StructuredContent: out.Data, Content: []sdk.Content{&sdk.TextContent{Text: string(out.Data)}}}
		}
		body["status"] = statusExecuted
		body["result"] = out.Data
		if out.ApprovalID == nil {
			body["correlationId"] = out.CorrelationID
		}
		message = fmt.Sprintf("Tool %q executed.", name)
		if len(out.Data) > 0 {
			// The text says what happened, for clients that show only text.
			message = fmt.Sprintf("Tool %q executed. Its result: %s", name, out.Data)
		}
	case engine.StatusApprovalPending:
		message = fmt.Sprintf("Tool %q is waiting for a person to approve it. Poll check_approval with approvalId %q.", name, out.ApprovalID)
	case engine.StatusPending:
		message = "The approval is still waiting for a person. Poll again later."
	case engine.StatusRejected:
		message = "A person rejected this approval; it will not run."
		if out.Note != "" {
			body["note"] = out.Note
			message = fmt.Sprintf("A person rejected this approval; it will not run. Their note: %q", out.Note)
		}
	case engine.StatusExpired:
		message = "The approval lapsed before it executed; it will not run. Stage the call again if it is still wanted."
	case engine.StatusConsumed:
		message = "The approval was used already: its one execution ran, or was refused when it came to run (the poll that used it said which). This poll changes nothing."
	case engine.StatusExecuting:
		message = "The approval's one execution is running now (another poll started it) and has not ended yet. Poll again in a few seconds: " +
			"once it ends the poll answers consumed. This poll changes nothing, and nothing runs twice."
	case engine.StatusDryRun:
		body["correlationId"] = out.CorrelationID
		message = fmt.Sprintf("Tool %q ran in dry-run mode: the call was recorded and nothing executed.", name)
	case engine.StatusInvalidInput:
		isError, message = true, invalidInput(name, out, body)
	case engine.StatusRateLimited:
		isError, message = true, rateLimited(name, out, body)
	default:
		isError, message = true, failure(t, out, body)
	}
	body["message"] = message
	res := &sdk.CallToolResult{IsError: isError, Content: []sdk.Content{&sdk.TextContent{Text: message}}}
	if t.read() || t.kind == ontology.ToolSQLQuery {
		// A read's structured content must match its output schema, so a
		// refusal travels as text.
		text, _ := json.Marshal(body)
		res.Content = append(res.Content, &sdk.TextContent{Text: string(text)})
		return res
	}
	res.StructuredContent = body
	return res
}

// outcomeCode is the stable code an outcome is answered and logged with:
// its own, or X_INPUT_INVALID for a refused input that names none (a
// read's), so the host log says what the agent was told.
func outcomeCode(out *engine.Outcome) errcode.Code {
	if out.Status == engine.StatusInvalidInput {
		return cmp.Or(out.Code, errcode.InputInvalid)
	}
	return out.Code
}

// invalidInput fills body with a refused input's code and issues, and
// returns the message.
func invalidInput(name string, out *engine.Outcome, body map[string]any) string {
	code := outcomeCode(out)
	body["code"] = string(code)
	if out.CorrelationID != "" {
		body["correlationId"] = out.CorrelationID
	}
	issues := out.Issues
	if issues == nil {
		issues = []engine.Issue{}
	}
	body["issues"] = issues
	return fmt.Sprintf("Tool %q refused its arguments (%s): fix each issue at its path and call again.", name, code)
}

// rateLimited fills body with a budget's refusal — the limit, the calls
// it allows, when to retry (in seconds, rounded up to a tenth, so that a
// retry at that time is never early) and why — and returns the message.
func rateLimited(name string, out *engine.Outcome, body map[string]any) string {
	body["code"] = string(cmp.Or(out.Code, errcode.RateLimited))
	body["correlationId"] = out.CorrelationID
	r := out.RateLimit
	if r == nil {
		return fmt.Sprintf("Tool %q refused: its call budget is spent; nothing ran. Retry later.", name)
	}
	retry := math.Ceil(r.RetryAfter.Seconds()*10) / 10
	body["limit"], body["allowed"], body["retry_after_seconds"], body["detail"] = string(r.Limit), r.Allowed, retry, r.Detail
	then := "call again"
	if out.ApprovalID != nil {
		then = "poll again: the approval stays approved"
	}
	return fmt.Sprintf("Tool %q refused: %s (%s: %d), so nothing ran. Wait %.1f seconds, then %s.",
		name, r.Detail, r.Limit, r.Allowed, retry, then)
}

// failure fills body with what a failing status may say — its correlation
// id, its diagnostic where the status withholds an error, its code — and
// returns the message, redact's sentence where something is withheld.
func failure(t *tool, out *engine.Outcome, body map[string]any) string {
	name := t.def.Name
	if out.CorrelationID != "" {
		body["correlationId"] = out.CorrelationID
	}
	withholds := redact.Withholds(string(out.Status))
	if d := redact.Diagnostic(string(out.Diagnostic)); d != "" && withholds {
		body["diagnostic"] = d
	}
	if out.Code != "" {
		body["code"] = string(out.Code)
	}
	switch refusal, known := refusals[out.Status]; {
	case withholds:
		message := redact.Message(name, string(out.Status), out.CorrelationID, string(out.Diagnostic), t.read())
		if out.Replayed && out.Status == engine.StatusOutcomeUnknown {
			// An unknown outcome filed under the call's key — when the
			// first call under it ended, or when that call's claim ran out
			// with no outcome — so the sentence names no moment: a retry
			// under the key gets this again, and runs nothing, until the
			// key lapses.
			message += " This is the answer filed under its idempotencyKey: a retry under the same key answers it again; once an operator has checked, call with a new key."
		}
		return message
	case known:
		return fmt.Sprintf("Tool %q refused: %s", name, refusal)
	}
	return fmt.Sprintf("Tool %q did not complete: %s.", name, out.Status)
}

// refusals explain the statuses that withhold nothing.
var refusals = map[engine.Status]string{
	engine.StatusDenied:             "the caller may not do this.",
	engine.StatusNotFound:           "nothing of that id or key exists for this caller.",
	engine.StatusPreconditionFailed: "the action's precondition does not hold for the target as it is now.",
	engine.StatusNotImplemented:     "the action is declared but has no effect yet; the call was recorded.",
	engine.StatusSignatureMismatch:  "the approval no longer matches the action's declaration or the input that was approved, so it will not run. Stage the call again.",
}
