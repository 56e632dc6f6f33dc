package policy

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// converter turns apidoc schemas into the JSON Schema (draft 2020-12) an
// action's input declares. A definition the description names ($ref) is
// written once under $defs and referred to, so a recursive one stays
// finite.
type converter struct {
	defs  map[string]any
	names map[*apidoc.Schema]string
	note  func(format string, args ...any)
}

func newConverter(note func(format string, args ...any)) *converter {
	return &converter{defs: map[string]any{}, names: map[*apidoc.Schema]string{}, note: note}
}

var notDefName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// convert writes s. request drops readOnly properties: a server sets them,
// and a request that sends one is refused by some.
func (c *converter) convert(s *apidoc.Schema, request bool) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	if s.Ref == "" {
		return c.body(s, request)
	}
	name, ok := c.names[s]
	if !ok {
		base := strings.Trim(notDefName.ReplaceAllString(lastToken(s.Ref), "_"), "_")
		if base == "" {
			base = "def"
		}
		name = base
		for i := 2; c.defs[name] != nil; i++ {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		c.names[s] = name
		c.defs[name] = map[string]any{} // taken while it is written
		c.defs[name] = c.body(s, request)
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

// body writes a schema's own keywords.
func (c *converter) body(s *apidoc.Schema, request bool) map[string]any {
	return c.bodyOf(s, request, s.Types)
}

// bodyOf is body, s's XML Schema pattern read as the lexical form of a
// value published as types: s's own, or the type's whose base's pattern
// s is, kept as a part of it (which names no type).
func (c *converter) bodyOf(s *apidoc.Schema, request bool, types []string) map[string]any {
	out := map[string]any{}
	switch len(s.Types) {
	case 0:
	case 1:
		out["type"] = s.Types[0]
	default:
		out["type"] = slices.Clone(s.Types)
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Description != "" {
		d := strings.Join(strings.Fields(s.Description), " ")
		if r := []rune(d); len(r) > 500 {
			d = string(r[:499]) + "…"
		}
		out["description"] = d
	}
	if len(s.Properties) > 0 {
		props := map[string]any{}
		for _, p := range s.Properties {
			if request && p.Schema != nil && p.Schema.ReadOnly {
				continue
			}
			props[p.Name] = c.convert(p.Schema, request)
		}
		out["properties"] = props
	}
	// A required name is kept whatever declares it (the schema, an allOf
	// part, or nothing: JSON Schema's required names a member); only a
	// readOnly one is not asked of the agent.
	var required []string
	for _, r := range s.Required {
		if !request || !readOnly(s, r) {
			required = append(required, r)
		}
	}
	if len(required) > 0 {
		out["required"] = required
	}
	noAdditional := s.NoAdditional
	if len(s.PatternProperties) > 0 {
		pp := map[string]any{}
		for _, p := range s.PatternProperties {
			re, ok := c.re2("patternProperties pattern", p.Name, s.Source, false)
			if !ok {
				// Left out, the members it allows would be refused as
				// additional: the object is left open instead.
				noAdditional = false
				continue
			}
			pp[re] = c.convert(p.Schema, request)
		}
		if len(pp) > 0 {
			out["patternProperties"] = pp
		}
	}
	if s.Not != nil {
		out["not"] = c.convert(s.Not, request)
	}
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		out["multipleOf"] = *s.MultipleOf
	}
	if s.UniqueItems {
		out["uniqueItems"] = true
	}
	switch {
	case noAdditional:
		out["additionalProperties"] = false
	case s.AdditionalProperties != nil && !isEmpty(s.AdditionalProperties):
		out["additionalProperties"] = c.convert(s.AdditionalProperties, request)
	}
	if s.Items != nil {
		out["items"] = c.convert(s.Items, request)
	}
	// In a fixed order: converting names $defs first come, first named.
	for _, g := range []struct {
		key   string
		group []*apidoc.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		key, group := g.key, g.group
		if len(group) == 0 {
			continue
		}
		list := make([]any, len(group))
		for i, g := range group {
			if key == "allOf" && g.Ref == "" && g.PatternXSD && len(g.Types) == 0 {
				list[i] = c.bodyOf(g, request, s.Types)
			} else {
				list[i] = c.convert(g, request)
			}
		}
		out[key] = list
	}
	if s.Enum != nil {
		if re, ok := normalisedEnum(s); ok {
			// The enumeration is kept for the agent to read; the pattern
			// takes the values it names with the whitespace XML Schema
			// normalises away.
			alt := map[string]any{"anyOf": []any{map[string]any{"enum": slices.Clone(s.Enum)}, map[string]any{"pattern": re}}}
			all, _ := out["allOf"].([]any)
			out["allOf"] = append(all, alt)
		} else {
			out["enum"] = slices.Clone(s.Enum)
		}
	}
	if s.HasConst {
		out["const"] = s.Const
	}
	// A default is not written: it says what the upstream assumes when
	// the value is absent, and orangerail fills every default an input
	// declares into the call, so a PATCH that leaves a member out (keep
	// it) would send the default (reset it).
	for key, v := range map[string]*float64{"minimum": s.Minimum, "maximum": s.Maximum, "exclusiveMinimum": s.ExclusiveMinimum, "exclusiveMaximum": s.ExclusiveMaximum} {
		if v != nil {
			out[key] = *v
		}
	}
	maxLength := s.MaxLength
	if maxLength != nil && s.WhiteSpace == "collapse" {
		// Collapsing shortens the value by a count of spaces no JSON
		// Schema keyword reads; minLength, which the raw value can only
		// pass more easily, is kept.
		c.note("the XML Schema maxLength %d at %s counts the value with its whitespace collapsed, which JSON Schema cannot: orangerail does not assert it, the upstream does", *maxLength, s.Source)
		maxLength = nil
	}
	if s.MinLength != nil && *s.MinLength > 0 && s.WhiteSpace == "collapse" {
		// The raw value is never shorter than the collapsed one, so
		// minLength alone takes what the upstream refuses ("  ", empty
		// once collapsed): a value of whitespace alone is refused, which
		// is minLength 1 exactly, and a greater one is said so.
		all, _ := out["allOf"].([]any)
		out["allOf"] = append(all, map[string]any{"pattern": `[^ \t\n\r]`})
		if *s.MinLength > 1 {
			c.note("the XML Schema minLength %d at %s counts the value with its whitespace collapsed, which JSON Schema cannot: orangerail checks it on the value as sent, which may take a value the upstream refuses", *s.MinLength, s.Source)
		}
	}
	for key, v := range map[string]*int{"minLength": s.MinLength, "maxLength": maxLength, "minItems": s.MinItems, "maxItems": s.MaxItems,
		"minProperties": s.MinProperties, "maxProperties": s.MaxProperties} {
		if v != nil {
			out[key] = *v
		}
	}
	if s.Pattern != "" {
		if re, ok := c.re2("pattern", s.Pattern, s.Source, s.PatternXSD); ok {
			if s.PatternXSD && len(types) > 0 && !slices.Contains(types, "string") {
				c.lexicalPattern(re, s, types, out)
			} else if re, ok = c.normalisedPattern(re, s); ok {
				out["pattern"] = re
			}
		}
	}
	return out
}

// lexicalPattern writes re, s's XML Schema pattern written for RE2, for
// a value published as types, none of them string: JSON Schema's pattern
// applies to strings alone, where XML Schema's applies to every simple
// type's lexical form. A boolean's is the literal orangerail sends (true
// or false, never 1 or 0), so the pattern is the values it matches; a
// number's is the agent's spelling of it and a list's its items joined
// by spaces, neither of them the JSON value: left to the upstream, and
// said so. A nillable value's null (xsi:nil) has no lexical form, and no
// pattern applies to it.
func (c *converter) lexicalPattern(re string, s *apidoc.Schema, types []string, out map[string]any) {
	nullable := slices.Contains(types, "null")
	types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
	switch {
	case slices.Equal(types, []string{"boolean"}):
		compiled, err := regexp.Compile(re)
		if err != nil {
			c.note("the XML Schema pattern %q at %s is not one RE2 reads: orangerail does not assert it, the upstream does", s.Pattern, s.Source)
			return
		}
		var allowed []any
		for _, v := range []bool{true, false} {
			if compiled.MatchString(strconv.FormatBool(v)) {
				allowed = append(allowed, v)
			}
		}
		switch {
		case len(allowed) == 2:
			return
		case len(allowed) == 0:
			c.note("the XML Schema pattern %q at %s matches neither true nor false, so the upstream takes no value: orangerail does not assert it, the upstream does", s.Pattern, s.Source)
			return
		}
		if nullable {
			allowed = append(allowed, nil)
		}
		if out["enum"] == nil {
			out["enum"] = allowed
		} else {
			all, _ := out["allOf"].([]any)
			out["allOf"] = append(all, map[string]any{"enum": allowed})
		}
	case slices.Contains(types, "array"):
		c.note("the XML Schema pattern %q at %s applies to the list's lexical form, its items joined by spaces, which the array the agent sends is not: orangerail does not assert it, the upstream does", s.Pattern, s.Source)
	default:
		c.note("the XML Schema pattern %q at %s applies to the value's lexical form, which the JSON %s the agent sends does not keep (its spelling is the agent's): orangerail does not assert it, the upstream does", s.Pattern, s.Source, strings.Join(types, " or "))
	}
}

// xmlSpace matches XML Schema's whitespace, the characters its
// whiteSpace facet replaces and collapses, written as escapes RE2 and
// ECMA-262 read alike.
const xmlSpace = `[ \t\n\r]`

func isXMLSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// normalisedPattern is re, an XML Schema pattern s declares written for
// RE2, written to match the value as sent whose normalised value (s's
// whiteSpace) re matches. When re matches no whitespace it is exact: a
// replaced value is then the value as sent, and a collapsed one the value
// as sent without its leading and trailing whitespace, which re is
// wrapped to allow. One that can match whitespace is left to the
// upstream (ok false), and said so.
func (c *converter) normalisedPattern(re string, s *apidoc.Schema) (string, bool) {
	if !s.PatternXSD || s.WhiteSpace == "" {
		return re, true
	}
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil || matchesSpace(parsed) {
		c.note("the XML Schema pattern %q at %s can match whitespace, which the type's whiteSpace %s rewrites before the pattern is checked: orangerail does not assert it, the upstream does", s.Pattern, s.Source, s.WhiteSpace)
		return "", false
	}
	if s.WhiteSpace == "collapse" {
		re = collapsed(re)
	}
	return re, true
}

// collapsed is re, a pattern anchored at both ends, also matching the
// leading and trailing whitespace a collapse strips.
func collapsed(re string) string {
	return "^" + xmlSpace + "*" + strings.TrimSuffix(strings.TrimPrefix(re, "^"), "$") + xmlSpace + "*$"
}

// matchesSpace reports whether any string re matches may hold XML
// Schema whitespace: whether any of its characters may be one (a
// repetition of none counts: it only errs towards leaving re unasserted).
func matchesSpace(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpLiteral:
		return slices.ContainsFunc(re.Rune, isXMLSpace)
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for _, r := range []rune{' ', '\t', '\n', '\r'} {
				if re.Rune[i] <= r && r <= re.Rune[i+1] {
					return true
				}
			}
		}
	}
	return slices.ContainsFunc(re.Sub, matchesSpace)
}

// normalisedEnum is a pattern, read alike by RE2 and ECMA-262, that
// matches a string whose value normalised as s's whiteSpace says is one
// s's enumeration names (itself normalised, as XML Schema reads it); ok
// is false when s's whiteSpace is preserve or its enumeration is not of
// strings, where the enumeration is exact as it is.
func normalisedEnum(s *apidoc.Schema) (string, bool) {
	if s.WhiteSpace == "" || !slices.Contains(s.Types, "string") {
		return "", false
	}
	var b strings.Builder
	b.WriteString("^(?:")
	for i, v := range s.Enum {
		e, ok := v.(string)
		if !ok {
			return "", false
		}
		if i > 0 {
			b.WriteByte('|')
		}
		if s.WhiteSpace == "replace" {
			// Each whitespace character is replaced by one space.
			for _, r := range e {
				if isXMLSpace(r) {
					b.WriteString(xmlSpace)
				} else {
					b.WriteString(xsdChar(r))
				}
			}
			continue
		}
		for j, word := range strings.FieldsFunc(e, isXMLSpace) {
			if j > 0 {
				b.WriteString(xmlSpace + "+")
			}
			for _, r := range word {
				b.WriteString(xsdChar(r))
			}
		}
	}
	b.WriteString(")$")
	re := b.String()
	if s.WhiteSpace == "collapse" {
		re = collapsed(re)
	}
	if _, err := regexp.Compile(re); err != nil {
		return "", false
	}
	return re, true
}

// re2 is pattern, the schema at source's (what names the keyword), an
// ECMA-262 pattern, written so that RE2, which orangerail validates with,
// reads it as ECMA does (ecmaToRE2); ok is false for one that cannot be
// (an ECMA lookahead, \A), which is left to the upstream, and said so:
// asserted as RE2 reads it, it would refuse what the upstream takes, or
// take what it refuses. An XML Schema pattern (xsd, a WSDL's facet) is
// written so that RE2 and ECMA read it as XML Schema does (xsdToRE2), or
// left to the upstream in the same way.
func (c *converter) re2(what, pattern, source string, xsd bool) (string, bool) {
	if xsd {
		re, err := xsdToRE2(pattern)
		if err != nil {
			c.note("the XML Schema %s %q at %s cannot be written so that RE2 and ECMA-262 read it as XML Schema does (%v): orangerail does not assert it, the upstream does", what, pattern, source, err)
			return "", false
		}
		return re, true
	}
	re, err := ecmaToRE2(pattern)
	if err != nil {
		c.note("the %s %q at %s is not read alike by ECMA-262 and RE2 (%v): orangerail does not assert it, the upstream does", what, pattern, source, err)
		return "", false
	}
	return re, true
}

// readOnly reports whether the member name, as s or an allOf part of it
// declares it, is readOnly.
func readOnly(s *apidoc.Schema, name string) bool {
	for _, p := range s.Members(false) {
		if p.Name == name && p.Schema != nil && p.Schema.ReadOnly {
			return true
		}
	}
	return false
}
