package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// tool is one governed tool: its MCP declaration and what a call does.
// Who may see and call it is the engine's to say (Engine.Sees, Admit).
type tool struct {
	def     *sdk.Tool
	kind    ontology.ToolKind
	subject string // the object or action it serves
}

// read reports whether the tool only reads: its failures are not audited.
func (t *tool) read() bool {
	return t.kind == ontology.ToolGet || t.kind == ontology.ToolList || t.kind.Describes()
}

// run answers a call of t (sql_query excepted: runSQL answers it) once
// the gates before the input have admitted it.
func (s *Server) run(ctx context.Context, t *tool, caller *engine.Caller, args json.RawMessage) *engine.Outcome {
	e := s.engine
	switch t.kind {
	case ontology.ToolDescribeObject, ontology.ToolDescribeAction, ontology.ToolListPolicies, ontology.ToolErrorsExplain:
		return s.describe(ctx, t, caller, args)
	case ontology.ToolGet:
		return e.Get(ctx, caller, t.subject, args)
	case ontology.ToolList:
		return e.List(ctx, caller, t.subject, args)
	case ontology.ToolAction:
		return e.Call(ctx, caller, t.subject, args)
	}
	var in struct {
		ApprovalID string `json:"approvalId"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.ApprovalID == "" {
		return &engine.Outcome{Status: engine.StatusInvalidInput, Issues: []engine.Issue{{Path: "/approvalId", Message: "required: the approvalId a staged call returned"}}}
	}
	return e.Check(ctx, caller, in.ApprovalID)
}

// unknownTool is the answer to a call of a tool the caller has not been
// offered — none of the name exists, or the caller is outside its
// audience — byte for byte the same for both: the SDK's answer for a tool
// it does not hold, with the stable code in the error's data.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name), Data: unknownToolData}
}

var unknownToolData = mustJSON(map[string]string{"code": string(errcode.MCPToolUnknown)})

// scopeDenied is the answer to a call of a tool the caller was offered
// but whose scope its connection's token lacks: a protocol error, not a
// tool result — the tool never ran, and the client can fix it by asking
// for a token with the scope, which the error names (the agent's fix, not
// the operator's).
func scopeDenied(name string, out *engine.Outcome) error {
	entry, _ := errcode.Explain(string(errcode.MCPScopeDenied))
	return &jsonrpc.Error{
		Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("%s: the tool %q needs the scope %q, which this connection's token does not carry. Fix: %s",
			errcode.MCPScopeDenied, name, out.Scope, entry.ForAgent()),
		Data: mustJSON(map[string]string{"code": string(errcode.MCPScopeDenied), "scope": out.Scope, "correlationId": out.CorrelationID}),
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mcp: " + err.Error())
	}
	return b
}

// requiresUserInteraction is the _meta key asking a host for its own
// confirmation prompt before each call of a tool.
const requiresUserInteraction = "anthropic/requiresUserInteraction"

// declare makes every tool the config declares, under the name the config
// validated. A read-only server offers no action tools and no
// check_approval; sql_query needs a querier.
func (s *Server) declare() map[string]*tool {
	tools := map[string]*tool{}
	cfg := s.cfg
	for _, d := range cfg.Tools() {
		subject := d.Subject
		t := &tool{kind: d.Kind, subject: subject}
		switch d.Kind {
		case ontology.ToolGet:
			t.def = getTool(subject, cfg.Objects[subject], s.linksOf(subject))
		case ontology.ToolList:
			t.def = listTool(subject, cfg.Objects[subject])
		case ontology.ToolSQLQuery:
			if s.querier == nil {
				continue
			}
			t.def = sqlTool(s.querier)
		case ontology.ToolAction:
			if cfg.Preset == ontology.PresetReadonly {
				continue
			}
			a := cfg.Actions[subject]
			t.def = actionTool(subject, a)
			if hostPrompts(cfg.HostApprovalPrompt, a) {
				t.def.Meta = sdk.Meta{requiresUserInteraction: true}
			}
		case ontology.ToolCheckApproval:
			if cfg.Preset == ontology.PresetReadonly {
				continue
			}
			t.def = checkTool()
		case ontology.ToolDescribeObject, ontology.ToolDescribeAction, ontology.ToolListPolicies, ontology.ToolErrorsExplain:
			if t.def = describeTool(cfg, d.Kind); t.def == nil {
				continue
			}
		}
		t.def.Name = d.Name
		if scope := cfg.ToolScope(d.Name); scope != "" {
			// The agent learns which scope a call needs before it is
			// refused for lacking it.
			t.def.Description += fmt.Sprintf(" Needs the scope %s.", scope)
		}
		tools[d.Name] = t
	}
	return tools
}

// hostPrompts reports whether an action's tool asks the host to prompt,
// as host_approval_prompt says. Reads and check_approval never do.
func hostPrompts(setting ontology.HostPrompt, a *ontology.Action) bool {
	switch setting {
	case ontology.HostPromptAllActions:
		return true
	case ontology.HostPromptUngovernedActions:
		return a.Policy.Approval != ontology.ApprovalRequired
	}
	return false
}

// linksOf lists the links a get of object may include.
func (s *Server) linksOf(object string) []string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Links)) {
		l := s.cfg.Links[name]
		if strings.HasPrefix(l.From, object+".") || strings.HasPrefix(l.To, object+".") {
			names = append(names, name)
		}
	}
	return names
}

var scalar = map[string]any{"type": []string{"string", "number", "boolean"}}

func fieldsSchema(o *ontology.Object) map[string]any {
	props := map[string]any{}
	for _, f := range o.Fields {
		props[f] = map[string]any{}
	}
	return map[string]any{"type": "object", "properties": props}
}

func getTool(name string, o *ontology.Object, links []string) *sdk.Tool {
	props := map[string]any{o.Key: scalar}
	if len(links) > 0 {
		props["include"] = map[string]any{"type": "array", "items": map[string]any{"enum": links}, "uniqueItems": true,
			"description": "Links whose objects to return beside this one."}
	}
	output := map[string]any{"item": fieldsSchema(o)}
	if len(links) > 0 {
		output["links"] = map[string]any{"type": "object"}
	}
	return &sdk.Tool{
		Title:        cmp.Or(o.Title, "Get "+name),
		Description:  describe(o.Description, fmt.Sprintf("Read one %s by its %s.", name, o.Key)),
		InputSchema:  map[string]any{"type": "object", "properties": props, "required": []string{o.Key}, "additionalProperties": false},
		OutputSchema: map[string]any{"type": "object", "properties": output, "required": []string{"item"}},
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, Title: cmp.Or(o.Title, "Get "+name)},
	}
}

func listTool(name string, o *ontology.Object) *sdk.Tool {
	filters := map[string]any{}
	for _, field := range slices.Sorted(maps.Keys(o.List.Filters)) {
		ops := map[string]any{}
		for _, op := range o.List.Filters[field] {
			if op == ontology.FilterIn {
				ops[string(op)] = map[string]any{"type": "array", "items": scalar, "minItems": 1, "maxItems": engine.MaxInValues}
				continue
			}
			ops[string(op)] = scalar
		}
		filters[field] = map[string]any{"type": "object", "properties": ops, "additionalProperties": false}
	}
	props := map[string]any{
		"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": o.List.MaxLimit},
		"cursor": map[string]any{"type": "string", "description": "The nextCursor of the previous page."},
	}
	if len(filters) > 0 {
		props["filters"] = map[string]any{"type": "object", "properties": filters, "additionalProperties": false}
	}
	if len(o.List.Sort) > 0 {
		var sorts []string
		for _, f := range o.List.Sort {
			sorts = append(sorts, f, "-"+f)
		}
		props["sort"] = map[string]any{"enum": sorts, "description": "A field to sort by; -field sorts descending."}
	}
	title := cmp.Or(o.Title, name)
	return &sdk.Tool{
		Title:       "List " + title,
		Description: describe(o.Description, fmt.Sprintf("List %s rows, a page at a time.", name)),
		InputSchema: map[string]any{"type": "object", "properties": props, "additionalProperties": false},
		OutputSchema: map[string]any{"type": "object", "required": []string{"items"}, "properties": map[string]any{
			"items":      map[string]any{"type": "array", "items": fieldsSchema(o)},
			"nextCursor": map[string]any{"type": "string"},
		}},
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, Title: "List " + title},
	}
}

func actionTool(name string, a *ontology.Action) *sdk.Tool {
	desc := a.Description
	if a.Effect != "" {
		desc += " Effect: " + a.Effect
	}
	if a.Policy.Approval == ontology.ApprovalRequired {
		desc += " A person must approve each call: the call answers approval_pending with an approvalId; poll check_approval with it."
	}
	if a.ApprovalWaived != "" {
		// The host and the agent see that this destructive action runs
		// without a person, and why the config says that is fine.
		desc += " Destructive, and runs without approval: " + strings.TrimRight(a.ApprovalWaived, ".") + "."
	}
	destructive := a.Destructive
	title := cmp.Or(a.Title, name)
	return &sdk.Tool{
		Title:       title,
		Description: desc,
		InputSchema: actionSchema(a),
		Annotations: &sdk.ToolAnnotations{Title: title, DestructiveHint: &destructive, IdempotentHint: a.Idempotent},
	}
}

// actionSchema is an action's input schema as its tool shows it: an
// idempotent action's carries the reserved, optional idempotencyKey, which
// the engine takes out before the input is checked (the config cannot
// declare it: ontology refuses the shadowing at load).
func actionSchema(a *ontology.Action) map[string]any {
	schema := schemaOf(a.Input)
	if !a.Idempotent || schema == nil {
		return schema
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		schema["properties"] = props
	}
	props[ontology.IdempotencyKeyArg] = map[string]any{"type": "string", "minLength": 1, "maxLength": 255,
		"description": "Optional. A retry with the same key and input gets the first call's result instead of running again; the same key with another input is refused."}
	return schema
}

func checkTool() *sdk.Tool {
	return &sdk.Tool{
		Title: "Check an approval",
		Description: "Poll an approval a governed action returned. Pending, rejected and expired approvals report their status; " +
			"an approved one executes now and returns its result; an approval that executed already reports consumed.",
		InputSchema: map[string]any{"type": "object", "required": []string{"approvalId"}, "additionalProperties": false,
			"properties": map[string]any{"approvalId": map[string]any{"type": "string", "format": "uuid"}}},
	}
}

func describe(declared, generated string) string {
	if declared == "" {
		return generated
	}
	return declared + " " + generated
}
