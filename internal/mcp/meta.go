package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The meta surface: a caller whose surface is meta (Engine.Surface) is
// offered list_resources, describe_resource and manage_resource in place
// of every grouped tool, and each tool named in no group stays flat beside
// them. manage_resource is a tools/call through another door: the inner
// tool's audience (a hidden tool, or one named under another resource,
// answers as one that does not exist), its scope, its input and its
// policy, audited and reported under the inner tool's name (Server.call).

// behindMeta reports whether caller reaches the named tool through
// manage_resource only: a grouped tool, for a caller served meta.
func (s *Server) behindMeta(caller *engine.Caller, name string) bool {
	return caller != nil && s.cfg.GroupOf(name) != "" && s.engine.Surface(caller) == ontology.SurfaceMeta
}

// metaTool declares a meta tool of cfg. list_resources and
// describe_resource only read; manage_resource may call an action, so it
// is a write, and open-world when any action it reaches (one in a group)
// calls an upstream. When it reaches no action — none is grouped, or the
// readonly preset serves none — it only reads, and says so.
func metaTool(kind ontology.ToolKind, cfg *ontology.Config) *sdk.Tool {
	destructive, openWorld, writes := true, false, false
	for name, a := range cfg.Actions {
		if cfg.GroupOf(name) == "" || cfg.Preset == ontology.PresetReadonly {
			continue
		}
		writes = true
		openWorld = openWorld || a.Execute.Kind().OpenWorld()
	}
	manage := &sdk.ToolAnnotations{Title: "Manage a resource", DestructiveHint: &destructive, OpenWorldHint: &openWorld}
	if !writes {
		manage = &sdk.ToolAnnotations{Title: "Manage a resource", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld}
	}
	switch kind {
	case ontology.ToolListResources:
		return &sdk.Tool{
			Title: "List resources",
			Description: "List the resources you may use, as plain text: each resource, and under it each of its tools with its parameters " +
				"({name: type}, ? marks an optional one) and what it does. (action) marks a tool that changes something, confirms one a person approves. " +
				"Get a tool's full schemas with describe_resource; call it with manage_resource.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
			Annotations: &sdk.ToolAnnotations{Title: "List resources", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld},
		}
	case ontology.ToolDescribeResource:
		return &sdk.Tool{
			Title: "Describe resources",
			Description: "Describe the tools of the named resources, in one call: each tool's input and output schemas, and an action's policy in words " +
				"(who may call it, whether a person approves each call, its scope, effect and rollback). A resource you may not use answers as one that does not exist.",
			InputSchema: map[string]any{"type": "object", "required": []string{"resources"}, "additionalProperties": false,
				"properties": map[string]any{"resources": map[string]any{"type": "array", "minItems": 1, "uniqueItems": true,
					"items": map[string]any{"type": "string"}, "description": "Resource names, as list_resources shows them."}}},
			OutputSchema: outObject([]string{"resources"}, map[string]any{"resources": outArray(outObject([]string{"resource", "tools"}, map[string]any{
				"resource": outString, "title": outString, "description": outString,
				"tools": outArray(outObject([]string{"name", "kind", "inputSchema"}, map[string]any{
					"name": outString, "title": outString, "description": outString, "kind": outString, "confirms": outBool,
					"scope": scopeOutput(), "inputSchema": map[string]any{"type": "object"}, "outputSchema": map[string]any{"type": "object"},
					"action": map[string]any{"type": "object"}})),
			}))}),
			Annotations: &sdk.ToolAnnotations{Title: "Describe resources", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld},
		}
	case ontology.ToolManageResource:
		return &sdk.Tool{
			Title: "Manage a resource",
			Description: "Call one tool of a resource with its arguments, as list_resources and describe_resource show them. " +
				"It answers exactly what the tool answers, through the same checks: a tool you may not use answers as one that does not exist, " +
				"a missing scope is named, an action that needs a person answers approval_pending (poll check_approval).",
			InputSchema: map[string]any{"type": "object", "required": []string{"resource", "tool"}, "additionalProperties": false,
				"properties": map[string]any{
					"resource":  map[string]any{"type": "string", "description": "The resource, as list_resources names it."},
					"tool":      map[string]any{"type": "string", "description": "The tool of that resource to call."},
					"arguments": map[string]any{"type": "object", "description": "The tool's arguments, as its input schema says."},
				}},
			Annotations: manage,
		}
	}
	return nil
}

// resource is one group as a caller sees it: the tools of it the caller
// sees, in the group's order.
type resource struct {
	name  string
	group *ontology.Group
	tools []*tool
}

// catalog lists the resources caller may use, by name: a group none of
// whose tools the caller sees is left out, as one that does not exist.
func (s *Server) catalog(caller *engine.Caller) []resource {
	var out []resource
	for _, name := range s.cfg.GroupNames() {
		g := s.cfg.Groups[name]
		r := resource{name: name, group: g}
		for _, tn := range g.Tools {
			if t, ok := s.tools[tn]; ok && s.engine.Sees(caller, tn) {
				r.tools = append(r.tools, t)
			}
		}
		if len(r.tools) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// listResources answers list_resources: the caller's catalog as plain
// text (renderCatalog).
func (s *Server) listResources(ctx context.Context, session *sdk.ServerSession, t *tool, caller *engine.Caller, args json.RawMessage) *sdk.CallToolResult {
	if issues := noArgs(args); issues != nil {
		out := invalid(issues)
		s.emit(ctx, session, t.def.Name, caller, out, "")
		return render(t, out)
	}
	text := renderCatalog(s.catalog(caller), s.cfg.ToolScope)
	s.emit(ctx, session, t.def.Name, caller, &engine.Outcome{Status: engine.StatusOK}, "")
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// The compact catalog's bounds: every required parameter is named, then
// optional ones while at most maxOptional are and the list stays within
// maxParamsChars, then …; an enum shows maxEnum literals, then |….
const (
	maxOptional    = 4
	maxParamsChars = 100
	maxEnum        = 8
)

// renderCatalog writes resources as list_resources' plain text: one line
// per resource, and under it one line per tool — name, (action) or
// (action; confirms) for a tool that is not read-only, its parameters on
// one line, and its brief: what a get or list does, else the first
// sentence of its description. It is compact by
// rule, never by a character cut: a scope every tool of a resource shares
// (or every read, or every action) is said once on the resource line.
func renderCatalog(resources []resource, scopeOf func(tool string) string) string {
	var b strings.Builder
	b.WriteString("Resources you may use. Get a tool's full schemas with describe_resource {resources: [...]}; " +
		"call it with manage_resource {resource, tool, arguments}.\n")
	if len(resources) == 0 {
		b.WriteString("(none)\n")
	}
	for _, r := range resources {
		shared := sharedScopes(r.tools, scopeOf)
		b.WriteString(r.name)
		if r.group.Title != "" {
			b.WriteString(" (" + oneLine(r.group.Title) + ")")
		}
		if r.group.Description != "" {
			b.WriteString(" — " + oneLine(r.group.Description))
		}
		if said := shared.words(); said != "" {
			b.WriteString(" [" + said + "]")
		}
		b.WriteByte('\n')
		for _, t := range r.tools {
			b.WriteString("  " + t.def.Name)
			if tag := kindTag(t); tag != "" {
				b.WriteString(" (" + tag + ")")
			}
			b.WriteString(" " + oneLineParams(t.def.InputSchema))
			if t.brief != "" {
				b.WriteString(" — " + t.brief)
			}
			if scope := scopeOf(t.def.Name); scope != "" && !shared.covers(t) {
				b.WriteString(" [scope " + scope + "]")
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// isAction reports whether a tool changes something: whatever its name,
// a tool not declared read-only.
func isAction(t *tool) bool { return t.def.Annotations == nil || !t.def.Annotations.ReadOnlyHint }

// kindTag is a tool's tag in the catalog: "" for a read.
func kindTag(t *tool) string {
	switch {
	case !isAction(t):
		return ""
	case t.confirms:
		return "action; confirms"
	}
	return "action"
}

// scopesSaid is what a resource line says of its tools' scopes: one
// scope for all, or one for the reads and one for the actions.
type scopesSaid struct{ all, reads, actions string }

// sharedScopes finds the scopes the tools share: all of them, else all
// the reads and all the actions, each when that set is not empty.
func sharedScopes(tools []*tool, scopeOf func(string) string) scopesSaid {
	one := func(pick func(*tool) bool) string {
		scope, n := "", 0
		for _, t := range tools {
			if !pick(t) {
				continue
			}
			s := scopeOf(t.def.Name)
			if s == "" || (n > 0 && s != scope) {
				return ""
			}
			scope, n = s, n+1
		}
		return scope
	}
	if all := one(func(*tool) bool { return true }); all != "" {
		return scopesSaid{all: all}
	}
	return scopesSaid{reads: one(func(t *tool) bool { return !isAction(t) }), actions: one(isAction)}
}

func (s scopesSaid) words() string {
	if s.all != "" {
		return "scope " + s.all
	}
	var w []string
	if s.reads != "" {
		w = append(w, "query scope "+s.reads)
	}
	if s.actions != "" {
		w = append(w, "action scope "+s.actions)
	}
	return strings.Join(w, "; ")
}

// covers reports whether the resource line said t's scope.
func (s scopesSaid) covers(t *tool) bool {
	return s.all != "" || (isAction(t) && s.actions != "") || (!isAction(t) && s.reads != "")
}

// oneLineParams writes an input schema's parameters on one line:
// {name: type, optional?: type, …}.
func oneLineParams(schema any) string {
	var m struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	raw, _ := json.Marshal(schema)
	_ = json.Unmarshal(raw, &m)
	var parts []string
	for _, name := range m.Required {
		if p, ok := m.Properties[name]; ok {
			parts = append(parts, name+": "+typeWords(p))
		}
	}
	cut := false
	optional := 0
	for _, name := range slices.Sorted(maps.Keys(m.Properties)) {
		if slices.Contains(m.Required, name) {
			continue
		}
		part := name + "?: " + typeWords(m.Properties[name])
		if optional >= maxOptional || len(strings.Join(append(parts, part), ", ")) > maxParamsChars {
			cut = true
			break
		}
		parts, optional = append(parts, part), optional+1
	}
	if cut {
		parts = append(parts, "…")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// typeWords says a property schema's type: its enum's literals (at most
// maxEnum, then |…), its type or types, an array's items as T[]; any when
// the schema names none.
func typeWords(raw json.RawMessage) string {
	var p struct {
		Type  any               `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		Items json.RawMessage   `json:"items"`
		AllOf []json.RawMessage `json:"allOf"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "any"
	}
	if len(p.Enum) == 0 {
		p.Enum = normalisedEnum(p.AllOf)
	}
	if len(p.Enum) > 0 {
		var lits []string
		for i, e := range p.Enum {
			if i == maxEnum {
				lits = append(lits, "…")
				break
			}
			lits = append(lits, string(e))
		}
		return strings.Join(lits, "|")
	}
	switch t := p.Type.(type) {
	case string:
		if t == "array" && len(p.Items) > 0 {
			return typeWords(p.Items) + "[]"
		}
		return t
	case []any:
		var ts []string
		for _, v := range t {
			ts = append(ts, fmt.Sprint(v))
		}
		return strings.Join(ts, "|")
	}
	return "any"
}

// normalisedEnum is the enumeration of an allOf part written as
// {anyOf: [{enum}, {pattern}]}: the policy compiler's enumeration of an
// XML Schema type whose whiteSpace is replace or collapse, whose pattern
// only takes the same values with the whitespace XML Schema strips.
func normalisedEnum(allOf []json.RawMessage) []json.RawMessage {
	for _, part := range allOf {
		var a struct {
			AnyOf []map[string]json.RawMessage `json:"anyOf"`
		}
		if json.Unmarshal(part, &a) != nil || len(a.AnyOf) != 2 {
			continue
		}
		e, re := a.AnyOf[0], a.AnyOf[1]
		if len(e) != 1 || len(re) != 1 || re["pattern"] == nil {
			continue
		}
		var enum []json.RawMessage
		if json.Unmarshal(e["enum"], &enum) == nil && len(enum) > 0 {
			return enum
		}
	}
	return nil
}

// firstSentence is a description's first sentence, on one line.
func firstSentence(s string) string {
	s = oneLine(s)
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// oneLine collapses whitespace, newlines included, to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// describeResources answers describe_resource: every tool the caller sees
// of each named resource, with its full schemas and, for an action, its
// description and policy in words (describe_action's answer). A resource
// the caller may not use is refused as one that does not exist.
func (s *Server) describeResources(ctx context.Context, caller *engine.Caller, args json.RawMessage) *engine.Outcome {
	in, issues := argsObject(args)
	if issues != nil {
		return invalid(issues)
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if k != "resources" {
			issues = append(issues, engine.Issue{Path: pointer(k), Message: "is not an argument of this tool; it takes resources alone"})
		}
	}
	var names []string
	if raw, ok := in["resources"]; !ok {
		issues = append(issues, engine.Issue{Path: "/resources", Message: "required: the resources' names, as list_resources shows them"})
	} else if json.Unmarshal(raw, &names) != nil || len(names) == 0 {
		issues = append(issues, engine.Issue{Path: "/resources", Message: "must be a non-empty array of resource names"})
	}
	for i, name := range names {
		if slices.Index(names, name) < i {
			issues = append(issues, engine.Issue{Path: fmt.Sprintf("/resources/%d", i), Message: "listed twice"})
		}
	}
	usable := s.usable(caller)
	seen := map[string]resource{}
	for _, r := range s.catalog(caller) {
		seen[r.name] = r
	}
	type toolAnswer struct {
		Name         string            `json:"name"`
		Title        string            `json:"title,omitempty"`
		Description  string            `json:"description,omitempty"`
		Kind         string            `json:"kind"`
		Confirms     bool              `json:"confirms,omitempty"`
		Scope        *engine.ScopeNeed `json:"scope,omitempty"`
		InputSchema  any               `json:"inputSchema"`
		OutputSchema any               `json:"outputSchema,omitempty"`
		Action       *actionAnswer     `json:"action,omitempty"`
	}
	type resourceAnswer struct {
		Resource    string       `json:"resource"`
		Title       string       `json:"title,omitempty"`
		Description string       `json:"description,omitempty"`
		Tools       []toolAnswer `json:"tools"`
	}
	var answers []resourceAnswer
	for i, name := range names {
		r, ok := seen[name]
		if !ok {
			issues = append(issues, engine.Issue{Path: fmt.Sprintf("/resources/%d", i), Message: "no resource of that name is in your catalog: list_resources names them"})
			continue
		}
		ra := resourceAnswer{Resource: name, Title: r.group.Title, Description: r.group.Description}
		for _, t := range r.tools {
			def, _ := s.seenBy(t, usable)
			ta := toolAnswer{Name: t.def.Name, Title: t.def.Title, Description: t.def.Description, Kind: "read", Confirms: t.confirms,
				InputSchema: def.InputSchema, OutputSchema: def.OutputSchema}
			if isAction(t) {
				ta.Kind = "action"
			}
			if scope := s.cfg.ToolScope(t.def.Name); scope != "" {
				ta.Scope = &engine.ScopeNeed{Name: scope, Held: slices.Contains(caller.Scopes, scope)}
			}
			if t.kind == ontology.ToolAction {
				d, out := s.engine.DescribeResourceAction(ctx, caller, t.subject)
				if out != nil {
					return out
				}
				if d != nil {
					ta.Action = &actionAnswer{ActionDescription: d, InputSchema: t.def.InputSchema, OutputSchema: t.def.OutputSchema, Answers: answersWords(d)}
				}
			}
			ra.Tools = append(ra.Tools, ta)
		}
		answers = append(answers, ra)
	}
	if issues != nil {
		return invalid(issues)
	}
	data, err := json.Marshal(map[string]any{"resources": answers})
	if err != nil {
		panic("mcp: a description does not encode: " + err.Error()) // contained by the handler; a bug if reached
	}
	return &engine.Outcome{Status: engine.StatusOK, Data: data}
}

// manage answers manage_resource: the named tool of the named resource,
// called as a tools/call of it would be (Server.call), its answer byte for
// byte. A tool that does not exist, that the caller does not see, or that
// is not in that resource answers alike, as a tool that does not exist.
func (s *Server) manage(ctx context.Context, session *sdk.ServerSession, caller *engine.Caller, args json.RawMessage) (*sdk.CallToolResult, error) {
	manageTool := s.tools[ontology.ManageResourceTool]
	var (
		resource, tool *string
		arguments      json.RawMessage
	)
	raw, issues := argsObject(args)
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if k != "resource" && k != "tool" && k != "arguments" {
			issues = append(issues, engine.Issue{Path: pointer(k), Message: "is not an argument of this tool: it takes resource, tool and arguments"})
		}
	}
	if issues == nil {
		// Each member is held to the schema at its own path.
		for _, m := range []struct {
			name string
			dst  **string
			want string
		}{{"resource", &resource, "required: the resource, as list_resources names it"}, {"tool", &tool, "required: the tool of the resource to call"}} {
			v, ok := raw[m.name]
			switch {
			case !ok:
				issues = append(issues, engine.Issue{Path: pointer(m.name), Message: m.want})
			case json.Unmarshal(v, m.dst) != nil || *m.dst == nil:
				issues = append(issues, engine.Issue{Path: pointer(m.name), Message: "must be a string"})
			}
		}
		if a, ok := raw["arguments"]; ok {
			if !strings.HasPrefix(strings.TrimSpace(string(a)), "{") {
				issues = append(issues, engine.Issue{Path: "/arguments", Message: "must be an object: the tool's arguments, as its input schema says (leave it out for none)"})
			}
			arguments = a
		}
	}
	if issues != nil {
		out := invalid(issues)
		s.emit(ctx, session, manageTool.def.Name, caller, out, "")
		return render(manageTool, out), nil
	}
	name := *tool
	t, exists := s.tools[name]
	// A tool of no group (a built-in, a meta tool, manage_resource itself)
	// is of no resource: its group "" is no resource's name.
	group := s.cfg.GroupOf(name)
	if !exists || group == "" || group != *resource || !s.engine.Sees(caller, name) {
		refusal := engine.RefusalUnknown
		if exists {
			refusal = engine.RefusalHidden
		}
		// Shortened, as a tools/call of an unknown name is (Server.offered).
		s.emit(ctx, session, display.Echo(name), caller, &engine.Outcome{Status: engine.StatusNotFound, Code: errcode.MCPToolUnknown}, refusal)
		return nil, unknownTool(name)
	}
	return s.call(ctx, session, t, caller, arguments)
}

// Measure is what one caller's catalog costs an agent's context, in
// bytes of JSON as the SDK sends it.
type Measure struct {
	// Served is the surface the caller is served.
	Served ontology.Surface
	// Flat is the tools/list result's size were the caller served flat.
	Flat int
	// Meta is the tools/list result's size were the caller served meta,
	// and ListResources the size of list_resources' text for it; both 0
	// when the config serves nobody meta.
	Meta, ListResources int
}

// Measure measures caller's catalog on each surface (orangerail surface
// measure): the tools/list result as JSON, which is what a client puts in
// its model's context.
func (s *Server) Measure(caller *engine.Caller) Measure {
	usable := s.usable(caller)
	size := func(names []string) int {
		res := &sdk.ListToolsResult{Tools: []*sdk.Tool{}}
		for _, name := range names {
			def, _ := s.seenBy(s.tools[name], usable)
			res.Tools = append(res.Tools, def)
		}
		b, err := json.Marshal(res)
		if err != nil {
			panic("mcp: a tool list does not encode: " + err.Error()) // the SDK sends the same, so a bug if reached
		}
		return len(b)
	}
	m := Measure{Served: s.engine.Surface(caller), Flat: size(s.visibleAs(caller, ontology.SurfaceFlat))}
	if s.cfg.MetaServed() {
		m.Meta = size(s.visibleAs(caller, ontology.SurfaceMeta))
		m.ListResources = len(renderCatalog(s.catalog(caller), s.cfg.ToolScope))
	}
	return m
}
