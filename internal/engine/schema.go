package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The JSON Schemas of the reads. Each is made here, from the ontology and
// the live catalog, once: a transport advertises ReadSchemas, and Get and
// List check every input against the very schema advertised (compiled in
// compileReadSchemas) before their own checks of each value against its
// column, so what is advertised and what is enforced cannot drift apart.

// ReadSchemas are the JSON Schemas of an object's get and list tools: what
// each takes, exactly as it is enforced, and what each returns.
type ReadSchemas struct {
	GetInput, GetOutput, ListInput, ListOutput map[string]any
}

// ReadSchemas returns the schemas of an object's reads, made afresh: the
// caller may keep or change them. An unknown object has none. The get's
// schemas name every link of the object; a caller is served them as
// GetSchemas makes them for it.
func (e *Engine) ReadSchemas(object string) (ReadSchemas, bool) {
	o, ok := e.cfg.Objects[object]
	if !ok {
		return ReadSchemas{}, false
	}
	links := e.LinksSeen(object, nil)
	return ReadSchemas{
		GetInput:   e.getInputSchema(object, o, linkItems(links)),
		GetOutput:  e.getOutputSchema(object, links),
		ListInput:  e.listInputSchema(object, o),
		ListOutput: e.listOutputSchema(object),
	}, true
}

// GetSchemas returns the input and output schemas of an object's get as a
// caller is served them: naming only links, the links it may include
// (LinksSeen of the tools it sees) — nothing of an object it cannot see.
func (e *Engine) GetSchemas(object string, links []string) (input, output map[string]any) {
	o := e.cfg.Objects[object]
	return e.getInputSchema(object, o, linkItems(links)), e.getOutputSchema(object, links)
}

// linkItems is the schema of an include's items naming links; nil, with
// no links, leaves include out.
func linkItems(links []string) map[string]any {
	if len(links) == 0 {
		return nil
	}
	return map[string]any{"enum": links}
}

// compileReadSchemas compiles every object's get and list input schema,
// by tool name. A get's include takes any link name here: which a caller
// may include is its own (parseGetInput), and a name refused by the
// schema's enum would be answered with every link's name.
func (e *Engine) compileReadSchemas() (map[string]*ontology.Validator, error) {
	compiled := map[string]*ontology.Validator{}
	for _, object := range slices.Sorted(maps.Keys(e.cfg.Objects)) {
		s, _ := e.ReadSchemas(object)
		if len(e.LinksSeen(object, nil)) > 0 {
			s.GetInput = e.getInputSchema(object, e.cfg.Objects[object], map[string]any{"type": "string"})
		}
		for name, schema := range map[string]map[string]any{ontology.GetTool(object): s.GetInput, ontology.ListTool(object): s.ListInput} {
			c, err := compileReadSchema(name, schema)
			if err != nil {
				return nil, fmt.Errorf("engine: the input schema of %s: %w", name, err)
			}
			compiled[name] = c
		}
	}
	return compiled, nil
}

// compileReadSchema compiles a read's schema made here: a read's schema
// states uuid, date and date-time, and enforces them.
func compileReadSchema(name string, schema map[string]any) (*ontology.Validator, error) {
	return ontology.CompileSchema("urn:orangerail:read:"+name, schema)
}

// checkReadInput checks a read's arguments against its advertised input
// schema; every issue at its path. A member named twice in one object is
// refused first: the schema would be checked on the one a decoder keeps.
func (e *Engine) checkReadInput(tool string, args json.RawMessage) []Issue {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if issue := RepeatedMember(args); issue != nil {
		return []Issue{*issue}
	}
	return schemaIssues(e.readSchemas[tool], args, true)
}

// RepeatedMember is the issue of arguments that name a member twice in
// one object, at any depth, at the second's path; nil when none does.
// Every tool's arguments are held to it (an action's by jcs.Parse): a
// decoder keeps one of the two, where a log or the audit record may show
// the other.
func RepeatedMember(args json.RawMessage) *Issue {
	path, ok := jsonmember.Repeated(args)
	if !ok {
		return nil
	}
	at := make(ontology.Pointer, len(path))
	for i, seg := range path {
		at[i] = display.Echo(seg)
	}
	return &Issue{Path: at.String(), Message: fmt.Sprintf("duplicate member name %q", at[len(at)-1])}
}

// column returns the catalog's column under an object's field; known is
// false when the catalog does not describe it.
func (e *Engine) column(object, field string) (ontology.Column, bool) {
	return e.catalog.Column(object, field)
}

// valueSchema is the schema of a value an agent sends for an object's
// field — a key or a filter's value — as the engine takes it. A field the
// catalog does not describe, and a type the engine does not model, takes
// any scalar, which Postgres then parses. A value sent as a string is at
// most MaxValueLength characters, the column's length if less.
func (e *Engine) valueSchema(object, field string) map[string]any {
	s := e.columnValueSchema(object, field)
	switch t := s["type"].(type) {
	case string:
		if t != "string" {
			return s
		}
	case []string:
		if !slices.Contains(t, "string") {
			return s
		}
	default:
		return s
	}
	if _, ok := s["format"]; ok {
		return s // a date, a time or a uuid: shorter by its form
	}
	if n, ok := s["maxLength"].(int); !ok || n > MaxValueLength {
		s["maxLength"] = MaxValueLength
	}
	return s
}

// columnValueSchema is valueSchema without the bound on its strings.
func (e *Engine) columnValueSchema(object, field string) map[string]any {
	col, known := e.column(object, field)
	if !known {
		return scalarSchema()
	}
	switch col.Kind {
	case ontology.ValueText:
		s := map[string]any{"type": "string"}
		if col.MaxLength > 0 {
			s["maxLength"] = col.MaxLength
		}
		return s
	case ontology.ValueInteger:
		// A whole number, or its digits as a string: a bigint beyond a
		// double's integers reaches the column exactly. The range binds
		// numbers here and strings in columnValue.
		lo, hi := integerRange(col.Bits)
		return map[string]any{"type": []string{"integer", "string"}, "pattern": `^-?[0-9]+$`, "minimum": lo, "maximum": hi}
	case ontology.ValueNumeric:
		// A number, or a numeric's text: a JSON number a double cannot
		// hold exactly still reaches the column exactly.
		return map[string]any{"type": []string{"number", "string"}}
	case ontology.ValueFloat:
		return map[string]any{"type": "number"}
	case ontology.ValueBoolean:
		return map[string]any{"enum": []any{true, false, "true", "false"}}
	case ontology.ValueTimestamptz:
		return map[string]any{"type": "string", "format": "date-time"}
	case ontology.ValueTimestamp:
		return map[string]any{"type": "string", "description": "A date and time without an offset, such as 2024-05-01T12:00:00."}
	case ontology.ValueDate:
		return map[string]any{"type": "string", "format": "date"}
	case ontology.ValueUUID:
		return map[string]any{"type": "string", "format": "uuid"}
	}
	return scalarSchema()
}

func scalarSchema() map[string]any {
	return map[string]any{"type": []string{"string", "number", "boolean"}}
}

// fieldSchema is the schema of a field's value as a read returns it: what
// row_to_json makes of the column, numerics excepted (readColumns sends
// them as text, so no digit is lost to a client's doubles). A nullable
// column's value may be null. Known limits, as Postgres writes them: a
// timestamptz or date of infinity, or before year 1 (written with BC), and
// a timestamptz whose session time zone gives it an offset in seconds
// (local mean time, before time zones), do not match their format.
func (e *Engine) fieldSchema(object, field string) map[string]any {
	col, known := e.column(object, field)
	if !known {
		return map[string]any{}
	}
	var s map[string]any
	switch {
	case col.JSON:
		return map[string]any{} // any JSON value, null included
	case col.Kind == ontology.ValueText:
		s = map[string]any{"type": "string"}
		if col.MaxLength > 0 {
			s["maxLength"] = col.MaxLength
		}
	case col.Kind == ontology.ValueInteger:
		// row_to_json writes every integer, bigint included, as a JSON
		// number.
		lo, hi := integerRange(col.Bits)
		s = map[string]any{"type": "integer", "minimum": lo, "maximum": hi}
	case col.Kind == ontology.ValueNumeric:
		s = map[string]any{"type": "string", "description": "A decimal number as text, every digit kept (or NaN, Infinity, -Infinity)."}
	case col.Kind == ontology.ValueFloat:
		// Postgres writes the floats JSON cannot spell as strings.
		s = map[string]any{"anyOf": []any{map[string]any{"type": "number"}, map[string]any{"enum": []string{"NaN", "Infinity", "-Infinity"}}}}
	case col.Kind == ontology.ValueBoolean:
		s = map[string]any{"type": "boolean"}
	case col.Kind == ontology.ValueTimestamptz:
		s = map[string]any{"type": "string", "format": "date-time"}
	case col.Kind == ontology.ValueTimestamp:
		s = map[string]any{"type": "string", "description": "A date and time without an offset."}
	case col.Kind == ontology.ValueDate:
		s = map[string]any{"type": "string", "format": "date"}
	case col.Kind == ontology.ValueUUID:
		s = map[string]any{"type": "string", "format": "uuid"}
	default:
		return map[string]any{} // enums, arrays, ranges…: as Postgres writes them
	}
	if col.Nullable {
		nullable(s)
	}
	return s
}

// nullable lets a schema's value also be null.
func nullable(s map[string]any) {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []string{t, "null"}
	default:
		if alts, ok := s["anyOf"].([]any); ok {
			s["anyOf"] = append(alts, map[string]any{"type": "null"})
		}
	}
}

// rowSchema is the schema of one of an object's rows as reads return it.
func (e *Engine) rowSchema(object string) map[string]any {
	o := e.cfg.Objects[object]
	props := make(map[string]any, len(o.Fields))
	for _, f := range o.Fields {
		props[f] = e.fieldSchema(object, f)
	}
	return map[string]any{"type": "object", "properties": props, "required": slices.Clone(o.Fields), "additionalProperties": false}
}

// LinksSeen lists, sorted, the links a get of object may include for a
// caller that sees the tools sees does: those whose other end it may read
// (linkTool); every link when sees is nil.
func (e *Engine) LinksSeen(object string, sees func(tool string) bool) []string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(e.cfg.Links)) {
		if e.linkTouches(name, object) && (sees == nil || sees(e.linkTool(name, object))) {
			names = append(names, name)
		}
	}
	return names
}

// linkTool is the tool whose caller may follow link from object
// (followTool): from the link's from side its other end's get, from the
// to side its list.
func (e *Engine) linkTool(link, object string) string {
	l := e.cfg.Links[link]
	from, _, _ := strings.Cut(l.From, ".")
	if from == object {
		to, _, _ := strings.Cut(l.To, ".")
		return followTool(to, false)
	}
	return followTool(from, true)
}

// getInputSchema is a get's input schema; include, when not nil, is the
// schema of the links it takes.
func (e *Engine) getInputSchema(object string, o *ontology.Object, include map[string]any) map[string]any {
	props := map[string]any{o.Key: e.valueSchema(object, o.Key)}
	if include != nil {
		props["include"] = map[string]any{"type": "array", "items": include, "uniqueItems": true,
			"description": "Links whose objects to return beside this one."}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{o.Key}, "additionalProperties": false}
}

// getOutputSchema describes a get's answer: the row, and each included
// link's rows as fetchLink reads them — from the link's from side the one
// row it points to, from its to side the rows pointing here; null when the
// field linking them is null or names no row; withheld when the caller may
// not read the linked object.
func (e *Engine) getOutputSchema(object string, links []string) map[string]any {
	props := map[string]any{"item": e.rowSchema(object)}
	if len(links) > 0 {
		withheld := map[string]any{"type": "object", "required": []string{"withheld"}, "additionalProperties": false,
			"properties": map[string]any{"withheld": map[string]any{"type": "string"}}}
		byLink := map[string]any{}
		var many []string
		for _, name := range links {
			l := e.cfg.Links[name]
			fromObj, _, _ := strings.Cut(l.From, ".")
			toObj, _, _ := strings.Cut(l.To, ".")
			if fromObj == object {
				byLink[name] = map[string]any{"anyOf": []any{e.rowSchema(toObj), map[string]any{"type": "null"}, withheld}}
				continue
			}
			many = append(many, name)
			byLink[name] = map[string]any{"anyOf": []any{map[string]any{"type": "array", "items": e.rowSchema(fromObj), "maxItems": e.cfg.Objects[fromObj].List.MaxLimit},
				map[string]any{"type": "null"}, withheld}}
		}
		props["links"] = map[string]any{"type": "object", "properties": byLink, "additionalProperties": false,
			"description": "The links include named, each by its name."}
		if len(many) > 0 {
			props["linksCut"] = map[string]any{"type": "array", "items": map[string]any{"enum": many}, "uniqueItems": true,
				"description": "The links that point at more rows than they show: each shows the first max_limit of the linked object, by its key; list that object, filtered by the link's field, for the rest."}
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{"item"}, "additionalProperties": false}
}

func (e *Engine) listInputSchema(object string, o *ontology.Object) map[string]any {
	filters := map[string]any{}
	for _, field := range slices.Sorted(maps.Keys(o.List.Filters)) {
		ops := map[string]any{}
		for _, op := range o.List.Filters[field] {
			if op == ontology.FilterIn {
				ops[string(op)] = map[string]any{"type": "array", "items": e.valueSchema(object, field), "minItems": 1, "maxItems": MaxInValues}
				continue
			}
			ops[string(op)] = e.valueSchema(object, field)
		}
		filters[field] = map[string]any{"type": "object", "properties": ops, "additionalProperties": false}
	}
	props := map[string]any{
		"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": o.List.MaxLimit, "default": min(ListLimitDefault, o.List.MaxLimit)},
		"cursor": map[string]any{"type": "string", "maxLength": maxCursorLength, "description": "The nextCursor of the previous page."},
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
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

func (e *Engine) listOutputSchema(object string) map[string]any {
	return map[string]any{"type": "object", "required": []string{"items"}, "additionalProperties": false, "properties": map[string]any{
		"items":      map[string]any{"type": "array", "items": e.rowSchema(object)},
		"nextCursor": map[string]any{"type": "string", "description": "Present when more rows follow: pass it as cursor for the next page."},
	}}
}
