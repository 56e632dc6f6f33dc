package mcp

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The describe tools: describe_object, describe_action, list_policies and
// errors_explain. Each is gated like any tool (the engine's audience: any
// authenticated caller; the scopes map's scope), reads no row, and
// answers only of what the caller's catalog holds: an object or action the
// caller does not see answers not_found exactly as one that does not
// exist. Their answers are structured content matching their output
// schemas, and the same JSON as text.

// describeTool declares the describe tool of kind; nil when the server
// offers no such tool: a read-only server serves no action, so it
// describes none.
func describeTool(cfg *ontology.Config, kind ontology.ToolKind) *sdk.Tool {
	var t *sdk.Tool
	switch kind {
	case ontology.ToolDescribeObject:
		t = &sdk.Tool{
			Title: "Describe an object",
			Description: "Describe an object you may read: its fields with their column types, its key, the links a get may include, " +
				"and what its list may filter and sort by, with its largest page. An object you may not read answers not_found, as one that does not exist.",
			InputSchema:  nameInput("object", "The object's name: the NAME of its NAME_get and NAME_list tools."),
			OutputSchema: objectOutput(),
		}
	case ontology.ToolDescribeAction:
		if cfg.Preset == ontology.PresetReadonly {
			return nil
		}
		t = &sdk.Tool{
			Title: "Describe an action",
			Description: "Describe an action you may call: its input and output schemas, its policy in words (who may call it, whether a person approves " +
				"each call and who decides, the scope, destructive, idempotent), its precondition, effect and rollback. An action you may not call answers not_found, as one that does not exist.",
			InputSchema:  nameInput("action", "The action's name: the name of its tool."),
			OutputSchema: actionOutput(),
		}
	case ontology.ToolListPolicies:
		if cfg.Preset == ontology.PresetReadonly {
			return nil
		}
		t = &sdk.Tool{
			Title:        "List the policies",
			Description:  "List every action you may call, each with its policy in words: who may call it, whether a person approves each call, its scope, whether it is destructive or idempotent.",
			InputSchema:  map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
			OutputSchema: policiesOutput(),
		}
	case ontology.ToolErrorsExplain:
		t = &sdk.Tool{
			Title: "Explain an error code",
			Description: "Explain an error code an answer carried (such as X_FORBIDDEN): its cause, and what you can do about it. " +
				"A code only an operator meets says so, and to hand it to the operator.",
			InputSchema:  nameInput("code", "The code, such as X_INPUT_INVALID."),
			OutputSchema: explainOutput(),
		}
	default:
		return nil
	}
	// Closed world, said: an absent openWorldHint reads as true.
	t.Annotations = &sdk.ToolAnnotations{Title: t.Title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld}
	return t
}

// describe answers a describe tool's call: its data as a read's, or
// invalid_input, or not_found for a subject the caller does not see.
func (s *Server) describe(ctx context.Context, t *tool, caller *engine.Caller, args json.RawMessage) *engine.Outcome {
	var (
		answer any
		out    *engine.Outcome
	)
	switch t.kind {
	case ontology.ToolDescribeObject:
		name, issues := nameArg(args, "object")
		if issues != nil {
			return invalid(issues)
		}
		var d *engine.ObjectDescription
		if d, out = s.engine.DescribeObject(ctx, caller, name); d != nil {
			answer = d
		}
	case ontology.ToolDescribeAction:
		name, issues := nameArg(args, "action")
		if issues != nil {
			return invalid(issues)
		}
		var d *engine.ActionDescription
		if d, out = s.engine.DescribeAction(ctx, caller, name); d != nil {
			if served, ok := s.tools[name]; ok && served.kind == ontology.ToolAction {
				answer = actionAnswer{ActionDescription: d, InputSchema: served.def.InputSchema, OutputSchema: served.def.OutputSchema,
					Answers: answersWords(d)}
			}
		}
	case ontology.ToolListPolicies:
		if issues := noArgs(args); issues != nil {
			return invalid(issues)
		}
		var policies []engine.ActionPolicy
		if policies, out = s.engine.Policies(ctx, caller); out == nil {
			lines := []policyLine{}
			for _, p := range policies {
				if served, ok := s.tools[p.Action]; ok && served.kind == ontology.ToolAction {
					lines = append(lines, policyLine{Action: p.Action, Title: p.Title, Summary: p.Summary, ApprovalRequired: p.Approval.Required,
						Destructive: p.Destructive, Idempotent: p.Idempotent, Scope: p.Scope})
				}
			}
			answer = map[string]any{"policies": lines}
		}
	case ontology.ToolErrorsExplain:
		code, issues := nameArg(args, "code")
		if issues != nil {
			return invalid(issues)
		}
		e, ok := errcode.Explain(code)
		if !ok {
			return invalid([]engine.Issue{{Path: "/code", Message: "no error code of that name: a code is X_ and capitals, such as X_INPUT_INVALID, as an answer carried it"}})
		}
		answer = explainAnswer{Code: string(e.Code), Cause: e.Cause, Fix: e.ForAgent(), OperatorOnly: e.OperatorOnly()}
	}
	switch {
	case out != nil:
		return out
	case answer == nil:
		return &engine.Outcome{Status: engine.StatusNotFound}
	}
	data, err := json.Marshal(answer)
	if err != nil {
		panic("mcp: a description does not encode: " + err.Error()) // contained by the handler; a bug if reached
	}
	return &engine.Outcome{Status: engine.StatusOK, Data: data}
}

// actionAnswer is describe_action's answer: the engine's description with
// the schemas the action's tool declares (what tools/list shows), and what
// a call answers, in words.
type actionAnswer struct {
	*engine.ActionDescription
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema,omitempty"`
	Answers      string `json:"answers"`
}

// policyLine is one action in list_policies' compact answer.
type policyLine struct {
	Action           string            `json:"action"`
	Title            string            `json:"title,omitempty"`
	Summary          string            `json:"summary"`
	ApprovalRequired bool              `json:"approvalRequired"`
	Scope            *engine.ScopeNeed `json:"scope,omitempty"`
	Destructive      bool              `json:"destructive"`
	Idempotent       bool              `json:"idempotent"`
}

// explainAnswer is errors_explain's answer: the cause, and the fix an
// agent can carry out (never the operator's, which the CLI prints).
type explainAnswer struct {
	Code         string `json:"code"`
	Cause        string `json:"cause"`
	Fix          string `json:"fix"`
	OperatorOnly bool   `json:"operatorOnly"`
}

// answersWords says what a call of the action answers.
func answersWords(d *engine.ActionDescription) string {
	var w []string
	switch p := d.Policy; {
	case p.DryRun:
		// The engine answers dry_run before it asks whether the action
		// has an effect: so does this.
		w = append(w, "A call answers dry_run with a correlationId: it is recorded and nothing executes.")
	case !d.Implemented:
		w = append(w, "A call is recorded and answers not_implemented: the action has no effect yet.")
	case p.Approval.Required:
		w = append(w, "A call answers approval_pending with an approvalId and expiresAt. Poll check_approval with the approvalId: it answers pending, rejected (with the person's note) or expired, "+
			"and once a person approved, runs the call and answers executed with its result (or failed), then consumed on a later poll.")
	default:
		w = append(w, "A call answers executed with its result and a correlationId, or failed.")
	}
	w = append(w, "An input its schema refuses answers invalid_input with each issue at its path (X_INPUT_INVALID).")
	if d.Precondition != "" {
		w = append(w, "A call whose precondition does not hold for the target as it is answers precondition_failed (X_FORBIDDEN).")
	}
	if d.Implemented && !d.Policy.DryRun {
		w = append(w, "An execution past the action's call budget, which your tenant's callers share, answers rate_limited (X_RATE_LIMITED) with the limit, "+
			"the calls it allows and retry_after_seconds: nothing ran, and an approved approval stays approved for a later poll.")
	}
	return strings.Join(w, " ")
}

// invalid is a describe tool's refusal of its arguments.
func invalid(issues []engine.Issue) *engine.Outcome {
	return &engine.Outcome{Status: engine.StatusInvalidInput, Code: errcode.InputInvalid, Issues: issues}
}

// nameArg reads the one argument a describe tool takes, a string named
// name; the issues refuse anything else. A value is never echoed: an
// answer says nothing of a name it was sent.
func nameArg(args json.RawMessage, name string) (string, []engine.Issue) {
	in, issues := argsObject(args)
	if issues != nil {
		return "", issues
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if k != name {
			issues = append(issues, engine.Issue{Path: pointer(k), Message: "is not an argument of this tool; it takes " + name + " alone"})
		}
	}
	v, ok := in[name]
	var value string
	switch {
	case !ok:
		issues = append(issues, engine.Issue{Path: pointer(name), Message: "required"})
	case json.Unmarshal(v, &value) != nil:
		issues = append(issues, engine.Issue{Path: pointer(name), Message: "must be a string"})
	}
	return value, issues
}

// noArgs refuses every argument of a tool that takes none.
func noArgs(args json.RawMessage) []engine.Issue {
	in, issues := argsObject(args)
	for _, k := range slices.Sorted(maps.Keys(in)) {
		issues = append(issues, engine.Issue{Path: pointer(k), Message: "is not an argument of this tool; it takes none"})
	}
	return issues
}

// argsObject decodes a call's arguments, absent or an object naming no
// member twice (engine.RepeatedMember).
func argsObject(args json.RawMessage) (map[string]json.RawMessage, []engine.Issue) {
	var in map[string]json.RawMessage
	if len(args) == 0 {
		return in, nil
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, []engine.Issue{{Path: "", Message: "must be an object"}}
	}
	if issue := engine.RepeatedMember(args); issue != nil {
		return nil, []engine.Issue{*issue}
	}
	return in, nil
}

// pointer is the JSON pointer (RFC 6901) of a top-level member.
func pointer(name string) string {
	return "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// nameInput is the input schema of a tool taking one string argument.
func nameInput(name, description string) map[string]any {
	return map[string]any{"type": "object", "required": []string{name}, "additionalProperties": false,
		"properties": map[string]any{name: map[string]any{"type": "string", "description": description}}}
}

// The output schemas say structure only: types and required members, no
// bounds or patterns, so that no answer a client checks misses them.
var (
	outString = map[string]any{"type": "string"}
	outBool   = map[string]any{"type": "boolean"}
	outInt    = map[string]any{"type": "integer"}
)

func outObject(required []string, props map[string]any) map[string]any {
	if required == nil {
		required = []string{}
	}
	return map[string]any{"type": "object", "required": required, "properties": props}
}

func outArray(items any) map[string]any { return map[string]any{"type": "array", "items": items} }

func scopeOutput() map[string]any {
	return outObject([]string{"name", "held"}, map[string]any{"name": outString, "held": outBool})
}

func objectOutput() map[string]any {
	return outObject([]string{"object", "key", "fields", "links", "list", "tools"}, map[string]any{
		"object": outString, "title": outString, "description": outString, "key": outString,
		"fields": outArray(outObject([]string{"name", "type"}, map[string]any{"name": outString, "type": outString, "bits": outInt})),
		"links": outArray(outObject([]string{"name", "object", "from", "to", "many"}, map[string]any{
			"name": outString, "title": outString, "object": outString, "from": outString, "to": outString, "many": outBool})),
		"list": outObject([]string{"filters", "sort", "maxLimit"}, map[string]any{
			"filters":  map[string]any{"type": "object", "additionalProperties": outArray(outString)},
			"sort":     outArray(outString),
			"maxLimit": outInt,
		}),
		"tools": outArray(outObject([]string{"name"}, map[string]any{"name": outString, "scope": scopeOutput()})),
	})
}

func policyOutput() map[string]any {
	return outObject([]string{"action", "summary", "roles", "audience", "approval", "destructive", "idempotent", "dryRun"}, map[string]any{
		"action": outString, "title": outString, "summary": outString, "roles": outArray(outString), "audience": outBool,
		"approval": outObject([]string{"required"}, map[string]any{
			"required": outBool, "deciders": outArray(outString), "fourEyes": outBool, "ttl": outString}),
		"scope": scopeOutput(), "destructive": outBool, "approvalWaived": outString, "idempotent": outBool, "dryRun": outBool,
	})
}

func actionOutput() map[string]any {
	return outObject([]string{"action", "policy", "implemented", "inputSchema", "answers"}, map[string]any{
		"action": outString, "title": outString, "description": outString,
		"target":       outObject([]string{"keyFrom"}, map[string]any{"object": outString, "keyFrom": outString}),
		"precondition": outString, "policy": policyOutput(), "effect": outString, "rollback": outString, "implemented": outBool,
		"inputSchema": map[string]any{"type": "object"}, "outputSchema": map[string]any{"type": "object"}, "answers": outString,
	})
}

func policiesOutput() map[string]any {
	return outObject([]string{"policies"}, map[string]any{"policies": outArray(outObject(
		[]string{"action", "summary", "approvalRequired", "destructive", "idempotent"}, map[string]any{
			"action": outString, "title": outString, "summary": outString, "approvalRequired": outBool, "scope": scopeOutput(),
			"destructive": outBool, "idempotent": outBool,
		}))})
}

func explainOutput() map[string]any {
	return outObject([]string{"code", "cause", "fix", "operatorOnly"}, map[string]any{
		"code": outString, "cause": outString, "fix": outString, "operatorOnly": outBool})
}
