package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/ontology"
)

// tool is one governed tool: its MCP declaration and what a call does.
// Who may see and call it is the engine's to say (Engine.Sees, Admit).
type tool struct {
	def *sdk.Tool
	// served is def as the SDK is given it (servedDef): its schemas
	// encoded once.
	served  *sdk.Tool
	kind    ontology.ToolKind
	subject string // the object or action it serves
	// confirms: a person finishes each call (an action whose policy
	// requires approval), as the meta catalog says.
	confirms bool
	// brief is the tool's line in the meta catalog: what a get or list
	// does, else its description's first sentence (firstSentence).
	brief string
	// span names a call's span, and spanStart its attributes: made once,
	// not on every call.
	span      string
	spanStart []trace.SpanStartOption
}

// read reports whether the tool only reads: its failures are not audited.
func (t *tool) read() bool {
	return t.kind == ontology.ToolGet || t.kind == ontology.ToolList || t.kind.Describes() ||
		t.kind == ontology.ToolListResources || t.kind == ontology.ToolDescribeResource
}

// run answers a call of t (sql_query excepted: runSQL answers it) once
// the gates before the input have admitted it.
func (s *Server) run(ctx context.Context, t *tool, caller *engine.Caller, args json.RawMessage) *engine.Outcome {
	e := s.engine
	switch t.kind {
	case ontology.ToolDescribeObject, ontology.ToolDescribeAction, ontology.ToolListPolicies, ontology.ToolErrorsExplain:
		return s.describe(ctx, t, caller, args)
	case ontology.ToolDescribeResource:
		return s.describeResources(ctx, caller, args)
	case ontology.ToolGet:
		return e.Get(ctx, caller, t.subject, args)
	case ontology.ToolList:
		return e.List(ctx, caller, t.subject, args)
	case ontology.ToolAction:
		return e.Call(ctx, caller, t.subject, args)
	}
	id, issues := approvalIDOf(args)
	if issues != nil {
		// Correlated as every other tool's refusal is: the agent's answer
		// and the host log's line name one id.
		return &engine.Outcome{Status: engine.StatusInvalidInput, Issues: issues, CorrelationID: uuid.NewString()}
	}
	return e.Check(ctx, caller, id)
}

// approvalIDOf reads check_approval's arguments as its input schema
// (checkTool) says: an object holding approvalId, a UUID, and nothing
// else.
func approvalIDOf(args json.RawMessage) (string, []engine.Issue) {
	var id string
	issues := soleMember(args, "approvalId", "required: the approvalId a staged call returned", func(value json.RawMessage) string {
		if json.Unmarshal(value, &id) != nil || uuid.Validate(id) != nil || len(id) != 36 {
			return "must be the UUID a staged call returned as approvalId"
		}
		return ""
	})
	return id, issues
}

// soleMember holds a tool's input to a schema of one member: a JSON
// object holding name, given once, and nothing else. check reads the
// member's value, and returns what is wrong with it or "". required is
// the issue of an object without it.
func soleMember(args json.RawMessage, name, required string, check func(json.RawMessage) string) []engine.Issue {
	at := ontology.Pointer{name}.String()
	var (
		found  bool
		issues []engine.Issue
	)
	members := jsonmember.New(args)
	for members.Scan() {
		switch member := members.Name(); {
		case member != name:
			issues = append(issues, engine.Issue{Path: ontology.Pointer{display.Echo(member)}.String(), Message: "unknown property: the tool takes " + name + " alone"})
		case found:
			issues = append(issues, engine.Issue{Path: at, Message: fmt.Sprintf("duplicate member name %q", name)})
		default:
			found = true
			if problem := check(members.Value()); problem != "" {
				issues = append(issues, engine.Issue{Path: at, Message: problem})
			}
		}
	}
	switch {
	case !members.IsObject() || !members.Whole():
		return []engine.Issue{{Path: "", Message: fmt.Sprintf("the input must be one JSON object: {%q: …}", name)}}
	case !found:
		issues = append(issues, engine.Issue{Path: at, Message: required})
	}
	return issues
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
			schemas, _ := s.engine.ReadSchemas(subject)
			t.def = getTool(subject, cfg.Objects[subject], schemas)
		case ontology.ToolList:
			schemas, _ := s.engine.ReadSchemas(subject)
			t.def = listTool(subject, cfg.Objects[subject], schemas)
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
			t.def = actionTool(subject, a, cfg.Preset, s.engine.ActionResultSchema(subject))
			if hostPrompts(cfg.HostApprovalPrompt, a) {
				t.def.Meta = sdk.Meta{requiresUserInteraction: true}
			}
		case ontology.ToolCheckApproval:
			if cfg.Preset == ontology.PresetReadonly {
				continue
			}
			t.def = checkTool(cfg.Actions, cfg.Preset)
		case ontology.ToolDescribeObject, ontology.ToolDescribeAction, ontology.ToolListPolicies, ontology.ToolErrorsExplain:
			if t.def = describeTool(cfg, d.Kind); t.def == nil {
				continue
			}
		case ontology.ToolListResources, ontology.ToolDescribeResource, ontology.ToolManageResource:
			t.def = metaTool(d.Kind, cfg)
		}
		t.def.Name = d.Name
		switch d.Kind {
		case ontology.ToolGet:
			t.brief = getSentence(subject, cfg.Objects[subject])
		case ontology.ToolList:
			t.brief = listSentence(subject)
		default:
			t.brief = firstSentence(t.def.Description)
		}
		if a, ok := cfg.Actions[subject]; ok && d.Kind == ontology.ToolAction {
			t.confirms = a.Policy.Approval == ontology.ApprovalRequired
		}
		if scope := cfg.ToolScope(d.Name); scope != "" {
			// The agent learns which scope a call needs before it is
			// refused for lacking it.
			t.def.Description += fmt.Sprintf(" Needs the scope %s.", scope)
		}
		t.served = servedDef(t.def)
		t.span, t.spanStart = "tools/call "+d.Name, []trace.SpanStartOption{trace.WithAttributes(attribute.String("mcp.tool.name", d.Name))}
		tools[d.Name] = t
	}
	return tools
}

// seenBy is t as a caller that may use the tools usable (sorted) is
// served it: a get names only the links it may include — those whose
// other end's tool it may use too (engine.LinksSeen) — and nothing of an
// object it cannot see. Every other tool is served as declared.
func (s *Server) seenBy(t *tool, usable []string) (def, served *sdk.Tool) {
	if t.kind != ontology.ToolGet {
		return t.def, t.served
	}
	links := s.engine.LinksSeen(t.subject, func(tool string) bool {
		_, ok := slices.BinarySearch(usable, tool)
		return ok
	})
	if len(links) == len(s.engine.LinksSeen(t.subject, nil)) {
		return t.def, t.served
	}
	d := *t.def
	d.InputSchema, d.OutputSchema = s.engine.GetSchemas(t.subject, links)
	return &d, servedDef(&d)
}

// servedDef is def with its schemas encoded as the SDK encodes them (no
// HTML escaping, map keys sorted), once: the SDK encodes a schema it holds
// as a Go value again wherever it reads one — each tools/list, and each
// tools/call, whose input schema it reads for x-mcp-header annotations.
// Encoded, each is sent as it is, byte for byte the same.
func servedDef(def *sdk.Tool) *sdk.Tool {
	t := *def
	t.InputSchema, t.OutputSchema = encodedSchema(def.InputSchema), encodedSchema(def.OutputSchema)
	return &t
}

// encodedSchema is schema encoded as JSON; nil stays nil, as the SDK
// leaves an absent output schema out.
func encodedSchema(schema any) any {
	if schema == nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema); err != nil {
		panic("mcp: a tool's schema does not encode: " + err.Error())
	}
	return json.RawMessage(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
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

// The tools' annotations. Reads are read-only and idempotent. A read is
// closed-world (openWorldHint false): it reads the service's own
// datasource, in the caller's tenant; so is an action whose effect acts on
// that datasource alone, and an action that calls an upstream's API is
// open-world (ExecuteKind.OpenWorld).
var closedWorld = new(false)

// getSentence and listSentence say what an object's get and list do; a
// declared description goes before them.
func getSentence(name string, o *ontology.Object) string {
	return fmt.Sprintf("Read one %s by its %s.", name, o.Key)
}

func listSentence(name string) string { return fmt.Sprintf("List %s rows, a page at a time.", name) }

func getTool(name string, o *ontology.Object, schemas engine.ReadSchemas) *sdk.Tool {
	noun := nounOf(name, o)
	title := "Get " + withArticle(noun)
	return &sdk.Tool{
		Title:        title,
		Description:  describe(o.Description, getSentence(name, o)),
		InputSchema:  schemas.GetInput,
		OutputSchema: schemas.GetOutput,
		Annotations:  &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld},
	}
}

func listTool(name string, o *ontology.Object, schemas engine.ReadSchemas) *sdk.Tool {
	title := "List " + plural(nounOf(name, o))
	return &sdk.Tool{
		Title:        title,
		Description:  describe(o.Description, listSentence(name)),
		InputSchema:  schemas.ListInput,
		OutputSchema: schemas.ListOutput,
		Annotations:  &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld},
	}
}

// actionTool declares an action's tool. result is the schema of what its
// effect returns (engine.ActionResultSchema); nil for an action without
// one. Under preset sandbox a call answers dry_run, whatever the policy.
func actionTool(name string, a *ontology.Action, preset ontology.Preset, result map[string]any) *sdk.Tool {
	desc := a.Description
	if a.Effect != "" {
		desc += " Effect: " + a.Effect
	}
	switch {
	case preset == ontology.PresetSandbox:
		// A sandbox stages nothing: every call answers dry_run.
		desc += " This deployment is a sandbox: a call answers dry_run; it is recorded, and nothing is staged or executed."
	case a.Policy.Approval == ontology.ApprovalRequired:
		desc += " A person must approve each call: the call answers approval_pending with an approvalId; poll check_approval with it."
	}
	if a.ApprovalWaived != "" {
		// The host and the agent see that this destructive action runs
		// without a person, and why the config says that is fine.
		desc += " Destructive, and runs without approval: " + strings.TrimRight(a.ApprovalWaived, ".") + "."
	}
	// Unless the config says destructive: false, the host is told to
	// assume the worst: an action nobody described may destroy.
	destructive := a.DestructiveHint()
	title := cmp.Or(a.Title, humanize(name))
	return &sdk.Tool{
		Title:        title,
		Description:  desc,
		InputSchema:  actionSchema(a),
		OutputSchema: answerSchema(result),
		Annotations:  &sdk.ToolAnnotations{Title: title, DestructiveHint: &destructive, IdempotentHint: a.Idempotent, OpenWorldHint: new(a.Execute.Kind().OpenWorld())},
	}
}

// answerSchema is the schema of what render answers an action or
// check_approval call with, whatever its status; result is the schema of
// an executed call's result.
func answerSchema(result map[string]any) map[string]any {
	statuses := []string{}
	for _, st := range engine.Statuses() {
		if st == engine.StatusOK {
			statuses = append(statuses, statusExecuted)
			continue
		}
		statuses = append(statuses, string(st))
	}
	props := map[string]any{
		"status":        map[string]any{"enum": statuses},
		"message":       map[string]any{"type": "string", "description": "What happened, and what to do next, in words."},
		"approvalId":    map[string]any{"type": "string", "format": "uuid", "description": "The approval to poll with check_approval."},
		"expiresAt":     map[string]any{"type": "string", "format": "date-time", "description": "When a pending approval lapses."},
		"correlationId": map[string]any{"type": "string", "description": "Finds this call in the audit log."},
		"code":          map[string]any{"type": "string", "description": "A stable error code, such as X_INPUT_INVALID: its cause and fix are documented."},
		"issues": map[string]any{"type": "array", "items": map[string]any{"type": "object", "required": []string{"path", "message"}, "additionalProperties": false,
			"properties": map[string]any{"path": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"}}},
			"description": "Each problem of the arguments, at its JSON pointer."},
		"note":       map[string]any{"type": "string", "description": "The decider's note on a rejection."},
		"diagnostic": map[string]any{"type": "string", "description": "What kind of failure this was, where the details are withheld."},
		// A call budget's refusal (status rate_limited, X_RATE_LIMITED).
		"limit":               map[string]any{"enum": budgetLimits(), "description": "Which of the action's call budgets refused it."},
		"allowed":             map[string]any{"type": "integer", "description": "The calls that budget allows: per minute, at once, or per day."},
		"retry_after_seconds": map[string]any{"type": "number", "description": "When a call (or a poll of its approval) may succeed again."},
		"detail":              map[string]any{"type": "string", "description": "Why the budget refused the call, in words."},
	}
	if result != nil {
		r := maps.Clone(result)
		r["description"] = "What the executed call returned."
		props["result"] = map[string]any{"anyOf": []any{r, map[string]any{"type": "null"}}}
	}
	return map[string]any{"type": "object", "required": []string{"status", "message"}, "additionalProperties": false, "properties": props}
}

// budgetLimits are the engine's budget limits, as an answer names them.
func budgetLimits() []string {
	var names []string
	for _, l := range engine.BudgetLimits() {
		names = append(names, string(l))
	}
	return names
}

// statusExecuted is the status an executed action answers with (the
// engine's ok).
const statusExecuted = "executed"

// nounOf is what an object is called in its tools' titles: its title,
// else its name in words, lower-cased unless it is an acronym ("SKU").
func nounOf(name string, o *ontology.Object) string {
	noun := cmp.Or(strings.TrimSpace(o.Title), strings.ReplaceAll(name, "_", " "))
	if r := []rune(noun); len(r) > 1 && unicode.IsUpper(r[0]) && !unicode.IsUpper(r[1]) {
		r[0] = unicode.ToLower(r[0])
		noun = string(r)
	}
	return noun
}

// humanize writes a name in words, capitalized: cancel_order → Cancel order.
func humanize(name string) string {
	r := []rune(strings.ReplaceAll(name, "_", " "))
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return string(r)
}

// withArticle puts a or an before a noun, by how it is said: "an order", "a
// user", "an hour", "an SKU".
func withArticle(noun string) string {
	lower := strings.ToLower(noun)
	an := strings.ContainsRune("aeiou", rune(lower[0]))
	for _, p := range []string{"uni", "use", "usu", "ura", "ure", "uti", "eu", "one", "once"} {
		if strings.HasPrefix(lower, p) {
			an = false
		}
	}
	for _, p := range []string{"hour", "honest", "honor", "honour", "heir"} {
		if strings.HasPrefix(lower, p) {
			an = true
		}
	}
	if first, _, _ := strings.Cut(noun, " "); len(first) > 1 && strings.ToUpper(first) == first {
		// An acronym is said letter by letter: an SKU, a URL.
		an = strings.ContainsRune("AEFHILMNORSX", rune(first[0]))
	}
	if an {
		return "an " + noun
	}
	return "a " + noun
}

// plural makes a noun phrase's last word plural, by English's regular
// rules: orders, addresses, statuses, categories, boxes; a word ending in
// any other s is taken to be plural already ("series", "news").
func plural(noun string) string {
	lower := strings.ToLower(noun)
	vowel := func(b byte) bool { return strings.IndexByte("aeiou", b) >= 0 }
	switch n := len(lower); {
	case strings.HasSuffix(lower, "ss"), strings.HasSuffix(lower, "us"), strings.HasSuffix(lower, "sh"), strings.HasSuffix(lower, "ch"),
		strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"):
		return noun + "es"
	case strings.HasSuffix(lower, "s"):
		return noun
	case n > 1 && lower[n-1] == 'y' && !vowel(lower[n-2]):
		return noun[:n-1] + "ies"
	}
	return noun + "s"
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

// checkTool declares check_approval. Polling is idempotent — an approval
// executes once, and a poll after that reports consumed — but a poll can
// execute whichever action was approved, so it is destructive when any
// action may be, and open-world when any action is. Under preset sandbox
// a poll of an approved approval answers dry_run, as every action call
// there does, and leaves it approved (a live deployment sharing the
// database executes it): the description says so, not that it executes.
func checkTool(actions map[string]*ontology.Action, preset ontology.Preset) *sdk.Tool {
	destructive, openWorld := false, false
	for _, a := range actions {
		destructive = destructive || a.DestructiveHint()
		openWorld = openWorld || a.Execute.Kind().OpenWorld()
	}
	desc := "Poll an approval a governed action returned. Pending, rejected and expired approvals report their status; " +
		"an approved one executes now and returns its result; an approval used already (executed, or refused when it came to run) reports consumed, " +
		"executing while its execution runs (poll again), or outcome_unknown when its execution stopped with no recorded end (do not stage it again)."
	if preset == ontology.PresetSandbox {
		desc = "Poll an approval a governed action returned. Pending, rejected and expired approvals report their status. " +
			"This deployment is a sandbox: a poll of an approved one answers dry_run; it is recorded, and the approval is neither executed nor used up here. " +
			"An approval used already reports consumed, executing while its execution runs (poll again), or outcome_unknown when its execution stopped with no recorded end (do not stage it again)."
	}
	return &sdk.Tool{
		Title:       "Check an approval",
		Description: desc,
		InputSchema: map[string]any{"type": "object", "required": []string{"approvalId"}, "additionalProperties": false,
			"properties": map[string]any{"approvalId": map[string]any{"type": "string", "format": "uuid"}}},
		// The result is the approved action's, of whichever action it is.
		OutputSchema: answerSchema(map[string]any{"type": "object"}),
		Annotations:  &sdk.ToolAnnotations{Title: "Check an approval", DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &openWorld},
	}
}

func describe(declared, generated string) string {
	if declared == "" {
		return generated
	}
	return declared + " " + generated
}
