package openapi

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// schema reads the schema at a place, once: a place reached again (a
// parameter, response or path item that several operations share) is the
// same *Schema. A $ref is the definition it names, read once: two $refs to
// one definition are one *Schema, and a recursive definition a cycle. A
// $ref with sibling keywords (3.1 applies them beside it) is a schema of
// its own whose allOf holds the definition.
func (l *loader) schema(at loc, v any) *apidoc.Schema {
	key := at.file + "#" + at.ptr
	if s, ok := l.read[key]; ok {
		return s
	}
	// Nesting is bounded, $refs included: a chain of definitions each
	// naming the next is as deep as it is long, and the stack of a read
	// that deep overflows (a fatal error, not a panic).
	if l.depth >= maxSchemaDepth {
		l.problem(at, "schemas nest deeper than %d, in place or through $refs: what is deeper is not read", maxSchemaDepth)
		return &apidoc.Schema{Source: l.source(at)}
	}
	l.depth++
	s := l.readSchema(at, v)
	l.depth--
	l.read[key] = s
	return s
}

// maxSchemaDepth bounds how deep schemas nest: real descriptions nest a
// few dozen deep.
const maxSchemaDepth = 2000

func (l *loader) readSchema(at loc, v any) *apidoc.Schema {
	switch v := v.(type) {
	case bool:
		// 3.1's true allows anything; false nothing.
		s := &apidoc.Schema{Source: l.source(at)}
		if !v {
			s.Enum = []any{}
		}
		return s
	case map[string]any:
		ref, isRef := v["$ref"].(string)
		if !isRef {
			return l.schemaOf(at, v)
		}
		def := l.definition(at, ref)
		// 3.0 and 2.0 ignore a $ref's siblings (OAS 3.0.3 §4.7.26: "any
		// properties added SHALL be ignored"; 2.0's JSON Reference); 3.1
		// applies them beside it (JSON Schema 2020-12 §8.2.3.1).
		siblings := false
		for k := range v {
			if k != "$ref" && k != "description" && k != "summary" && k != "title" && k != "example" && k != "examples" {
				siblings = l.v31
			}
		}
		if !siblings {
			return def
		}
		own := maps.Clone(v)
		delete(own, "$ref")
		s := l.schemaOf(at, own)
		if def != nil {
			s.AllOf = append([]*apidoc.Schema{def}, s.AllOf...)
		}
		return s
	case nil:
		return nil
	}
	l.problem(at, "a schema must be an object")
	return &apidoc.Schema{Source: l.source(at)}
}

// definition returns the schema a $ref names, read once.
func (l *loader) definition(at loc, ref string) *apidoc.Schema {
	target, err := l.target(at, ref)
	if err != nil {
		l.problem(at, "%v", err)
		return &apidoc.Schema{Source: l.source(at)}
	}
	key := target.file + "#" + target.ptr
	if s, ok := l.schemas[key]; ok {
		return s
	}
	v, err := l.get(target)
	if err != nil {
		// Said at every place that names it, not once: the compiler
		// reports a problem beside the operations under its place.
		l.problem(at, "%s", nothing(ref, err))
		return &apidoc.Schema{Source: l.source(at)}
	}
	// The definition is registered before it is read, so that a $ref
	// back to it while it is read is the same *Schema: a cycle.
	s := &apidoc.Schema{}
	l.schemas[key] = s
	l.reading[s] = true
	read := l.schema(target, v)
	delete(l.reading, s)
	switch {
	case read != nil && l.reading[read] || read == s:
		// $refs alone lead back to a definition still being read (A to B
		// to A, A to itself): no schema is ever named, and the value
		// would be read as anything at all.
		l.problem(target, "the $ref %q leads back to itself through $refs alone: it names no schema", ref)
		s.Source = l.source(target)
	case read != nil:
		*s = *read
	default:
		// A definition written as null: nothing is said of it, but it
		// is still at its place.
		s.Source = l.source(target)
	}
	if s.Ref == "" {
		s.Ref = l.source(target)
	}
	return s
}

// schemaOf reads a schema object that is not a $ref (a 2.0 parameter is
// read as one: it declares its type on itself).
func (l *loader) schemaOf(at loc, m map[string]any) *apidoc.Schema {
	l.nodes++
	s := &apidoc.Schema{Source: l.source(at)}
	if l.nodes > maxSchemas {
		if l.nodes == maxSchemas+1 {
			l.problem(at, "the document holds more than %d schemas: the rest are not read", maxSchemas)
		}
		return s
	}
	switch t := m["type"].(type) {
	case string:
		s.Types = []string{t}
	case []any:
		s.Types = strs(t)
	}
	// nullable is 3.0's alone (3.0.3 §4.7.24.1): 2.0 never had it (its
	// x-nullable is below), and 3.1, whose schemas are JSON Schema
	// 2020-12, removed it for a type array naming "null" — there it is
	// an unknown keyword, which allows nothing.
	if n, _ := m["nullable"].(bool); n && !l.swagger && !l.v31 && !slices.Contains(s.Types, "null") && len(s.Types) > 0 {
		s.Types = append(s.Types, "null")
	}
	if n, _ := m["x-nullable"].(bool); n && !slices.Contains(s.Types, "null") && len(s.Types) > 0 {
		s.Types = append(s.Types, "null")
	}
	if slices.Contains(s.Types, "file") {
		// 2.0's file is a form part's binary content.
		s.Types, s.Format = []string{"string"}, "binary"
	}
	if s.Format == "" {
		s.Format = str(m["format"])
	}
	s.Title, s.Description, s.Pattern = str(m["title"]), str(m["description"]), str(m["pattern"])
	if props, ok := m["properties"].(map[string]any); ok {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			s.Properties = append(s.Properties, apidoc.Property{Name: name, Schema: l.schema(at.child("properties", name), props[name])})
		}
	}
	s.Required = strs(m["required"])
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			s.AdditionalProperties = &apidoc.Schema{Source: l.source(at.child("additionalProperties"))}
		} else {
			s.NoAdditional = true
		}
	case map[string]any:
		s.AdditionalProperties = l.schema(at.child("additionalProperties"), ap)
	}
	var tuple []*apidoc.Schema
	for i, p := range list(m["prefixItems"]) {
		tuple = append(tuple, l.schema(at.child("prefixItems", strconv.Itoa(i)), p))
	}
	switch items := m["items"].(type) {
	case map[string]any, bool:
		s.Items = l.schema(at.child("items"), items)
	case []any:
		// A tuple, as draft 4 and some 2.0 documents write one.
		for i, p := range items {
			tuple = append(tuple, l.schema(at.child("items", strconv.Itoa(i)), p))
		}
	}
	if len(tuple) > 0 {
		all := tuple
		if s.Items != nil {
			all = append(all, s.Items)
		}
		s.Items = &apidoc.Schema{Source: l.source(at.child("items")), AnyOf: all}
	}
	s.AllOf = l.schemas2(at, "allOf", m)
	s.AnyOf = l.schemas2(at, "anyOf", m)
	s.OneOf = l.schemas2(at, "oneOf", m)
	if d, ok := m["discriminator"].(map[string]any); ok {
		if mapping, ok := d["mapping"].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(mapping)) {
				ref := str(mapping[k])
				if ref == "" {
					continue
				}
				if l.isComponent(at, ref) || !strings.ContainsAny(ref, "/.#") {
					// A mapping value that names a component schema is
					// that schema (OAS 3.1.1 §4.8.25.2.2: a name wins
					// over a relative reference it could also be, as
					// "Pet.v1" could).
					ref = "#/components/schemas/" + ref
				}
				s.Mapping = append(s.Mapping, l.definition(at.child("discriminator", "mapping", k), ref))
			}
		}
	}
	if e, ok := m["enum"].([]any); ok {
		s.Enum = e
	}
	if c, ok := m["const"]; ok {
		s.Const, s.HasConst = c, true
	}
	s.Minimum, s.Maximum = num(m["minimum"]), num(m["maximum"])
	switch e := m["exclusiveMinimum"].(type) {
	case bool: // 2.0 and 3.0: the minimum itself is excluded
		if e {
			s.ExclusiveMinimum, s.Minimum = s.Minimum, nil
		}
	default:
		s.ExclusiveMinimum = num(e)
	}
	switch e := m["exclusiveMaximum"].(type) {
	case bool:
		if e {
			s.ExclusiveMaximum, s.Maximum = s.Maximum, nil
		}
	default:
		s.ExclusiveMaximum = num(e)
	}
	s.MinLength, s.MaxLength = count(m["minLength"]), count(m["maxLength"])
	s.MinItems, s.MaxItems = count(m["minItems"]), count(m["maxItems"])
	s.ReadOnly, _ = m["readOnly"].(bool)
	s.WriteOnly, _ = m["writeOnly"].(bool)
	s.Deprecated, _ = m["deprecated"].(bool)
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for _, re := range slices.Sorted(maps.Keys(pp)) {
			s.PatternProperties = append(s.PatternProperties, apidoc.Property{Name: re, Schema: l.schema(at.child("patternProperties", re), pp[re])})
		}
	}
	if n, ok := m["not"]; ok && n != nil {
		s.Not = l.schema(at.child("not"), n)
	}
	s.MultipleOf = num(m["multipleOf"])
	s.UniqueItems, _ = m["uniqueItems"].(bool)
	s.MinProperties, s.MaxProperties = count(m["minProperties"]), count(m["maxProperties"])
	return s
}

func (l *loader) schemas2(at loc, key string, m map[string]any) []*apidoc.Schema {
	var out []*apidoc.Schema
	for i, e := range list(m[key]) {
		if s := l.schema(at.child(key, strconv.Itoa(i)), e); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func num(v any) *float64 {
	var f float64
	switch v := v.(type) {
	case int64:
		f = float64(v)
	case float64:
		f = v
	default:
		return nil
	}
	return &f
}

// count reads a non-negative integer. JSON Schema counts 10.0 an integer
// (2020-12 core §4.2.2, "numbers with a zero fractional part").
func count(v any) *int {
	i, ok := v.(int64)
	if f, isFloat := v.(float64); isFloat && f == math.Trunc(f) && f >= 0 && f <= 1<<31 {
		i, ok = int64(f), true
	}
	if ok && i >= 0 && i <= 1<<31 {
		n := int(i)
		return &n
	}
	return nil
}

// isComponent says whether name is a schema in the components of at's
// file.
func (l *loader) isComponent(at loc, name string) bool {
	if strings.ContainsAny(name, "/#~") {
		return false
	}
	_, err := l.get(loc{at.file, apidoc.Pointer("/components/schemas", name)})
	return err == nil
}
