package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestRenderEveryStatus renders each status with a driver's error attached
// and checks what the agent would receive: the status, the correlation id
// where there is one, the sentence for the status, and none of the error.
func TestRenderEveryStatus(t *testing.T) {
	t.Parallel()
	driverText := `ERROR: permission denied for table "orders_secret" (SQLSTATE 42501)`
	id := uuid.New()
	action := &tool{def: actionTool("cancel_order", actionFixture(), "", nil), kind: ontology.ToolAction}
	read := &tool{def: &readDef, kind: ontology.ToolGet}
	tests := []struct {
		status  engine.Status
		isError bool
		want    string // a phrase of the message
	}{
		{engine.StatusApprovalPending, false, "waiting for a person"},
		{engine.StatusPending, false, "still waiting"},
		{engine.StatusRejected, false, "rejected"},
		{engine.StatusExpired, false, "lapsed"},
		{engine.StatusConsumed, false, "was used already"},
		{engine.StatusDryRun, false, "dry-run"},
		{engine.StatusNotImplemented, true, "no effect yet"},
		{engine.StatusDenied, true, "may not"},
		{engine.StatusNotFound, true, "nothing of that id"},
		{engine.StatusPreconditionFailed, true, "precondition"},
		{engine.StatusSignatureMismatch, true, "no longer matches the action's declaration or the input that was approved"},
		{engine.StatusFailed, true, "the datasource rejected the action. The datasource error is withheld; an operator can read it in the audit log or host log under correlationId"},
		{engine.StatusResolveError, true, "the target could not be read from the datasource. The datasource error is withheld; an operator can read it in the audit log or host log"},
		{engine.StatusAuditBlocked, true, "the audit record could not be written, so nothing ran. The store error is withheld; an operator can read it in the host log"},
		{engine.StatusInternalError, true, "an unexpected internal error. The underlying error is withheld; an operator can read it in the host log"},
		{engine.StatusOutcomeUnknown, true, "may have run, but its outcome could not be confirmed or recorded; do not call it again"},
	}
	for _, tt := range tests {
		out := &engine.Outcome{Status: tt.status, CorrelationID: id.String(), ApprovalID: &id, Err: errors.New(driverText)}
		res := render(action, out)
		all, _ := json.Marshal([]any{res.Content, res.StructuredContent})
		body := res.StructuredContent.(map[string]any)
		if res.IsError != tt.isError || body["status"] != string(tt.status) || !strings.Contains(string(all), tt.want) {
			t.Errorf("%s: isError %v, body %v", tt.status, res.IsError, body)
		}
		if strings.Contains(string(all), "orders_secret") || strings.Contains(string(all), "SQLSTATE") {
			t.Errorf("%s leaked the driver's text: %s", tt.status, all)
		}
		if tt.isError && body["correlationId"] != id.String() {
			t.Errorf("%s: no correlationId in %v", tt.status, body)
		}
	}
	// A read's resolve_error names the host log only: reads are not audited.
	res := render(read, &engine.Outcome{Status: engine.StatusResolveError, CorrelationID: id.String(), Diagnostic: engine.DiagnosticDatasourceUnavailable, Err: errors.New(driverText)})
	all, _ := json.Marshal(res.Content)
	if !res.IsError || res.StructuredContent != nil || strings.Contains(string(all), "audit log") || !strings.Contains(string(all), "could not be reached") ||
		!strings.Contains(string(all), `\"diagnostic\":\"datasource_unavailable\"`) {
		t.Errorf("read resolve_error: %s", all)
	}
	// Every diagnostic the engine can classify has its own sentence.
	for _, d := range []engine.Diagnostic{engine.DiagnosticDatasourceNotConfigured, engine.DiagnosticDatasourceUnavailable, engine.DiagnosticDatasourceSchema,
		engine.DiagnosticDatasourcePermission, engine.DiagnosticDatasourceConstraint, engine.DiagnosticDatasourceTimeout} {
		res := render(action, &engine.Outcome{Status: engine.StatusFailed, CorrelationID: "c", Diagnostic: d})
		if res.StructuredContent.(map[string]any)["diagnostic"] != string(d) || strings.Contains(text0(res), "the datasource rejected the action.") {
			t.Errorf("diagnostic %s has no sentence of its own: %s", d, text0(res))
		}
	}
}

var readDef = sdk.Tool{Name: "order_get"}

func actionFixture() *ontology.Action {
	return &ontology.Action{Description: "Cancel an order.", Input: map[string]any{"type": "object"}, Destructive: new(true)}
}

func text0(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	t, _ := res.Content[0].(*sdk.TextContent)
	if t == nil {
		return ""
	}
	return t.Text
}

// TestToolTitles: reads are titled as people write them, from the
// object's title (else its name), with the right article and plural.
func TestToolTitles(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, title, get, list string }{
		{"order", "Order", "Get an order", "List orders"},
		{"customer", "", "Get a customer", "List customers"},
		{"address", "Shipping address", "Get a shipping address", "List shipping addresses"},
		{"category", "Category", "Get a category", "List categories"},
		{"user", "User", "Get a user", "List users"},
		{"unit", "", "Get a unit", "List units"},
		{"umbrella", "", "Get an umbrella", "List umbrellas"},
		{"hour_log", "", "Get an hour log", "List hour logs"},
		{"box", "Box", "Get a box", "List boxes"},
		{"day", "Day", "Get a day", "List days"},
		{"sku", "SKU", "Get an SKU", "List SKUs"},
		{"link", "URL", "Get a URL", "List URLs"},
		{"item", "Item", "Get an item", "List items"},
		{"status", "Status", "Get a status", "List statuses"},
		{"series", "Series", "Get a series", "List series"},
	}
	for _, tt := range tests {
		o := &ontology.Object{Title: tt.title, Key: "id"}
		if got := getTool(tt.name, o, engine.ReadSchemas{}).Title; got != tt.get {
			t.Errorf("%s/%q: get titled %q, want %q", tt.name, tt.title, got, tt.get)
		}
		if got := listTool(tt.name, o, engine.ReadSchemas{}).Title; got != tt.list {
			t.Errorf("%s/%q: list titled %q, want %q", tt.name, tt.title, got, tt.list)
		}
	}
	if got := actionTool("cancel_order", &ontology.Action{Input: map[string]any{"type": "object"}}, "", nil).Title; got != "Cancel order" {
		t.Errorf("an untitled action is titled %q", got)
	}
}
