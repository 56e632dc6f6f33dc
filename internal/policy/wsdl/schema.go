package wsdl

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// maxWork bounds the schemas and properties one document may make. Named
// types are shared, so a real document makes a few per element it
// declares; the bound stops an extension chain that copies its bases'
// properties at every level from growing quadratically.
const maxWork = 1 << 21

// maxNest bounds how deeply named types, elements and groups may refer to
// one another before the chain is shared: each level is a call, so the
// bound keeps a hostile chain of distinct types from exhausting the stack.
const maxNest = 512

// enter counts one level of reference; leave undoes it. Past maxNest the
// load fails with ErrTooLarge.
func (l *loader) enter() bool {
	l.nest++
	if l.nest > maxNest && l.err == nil {
		l.err = fmt.Errorf("%w: types refer to types more than %d deep", ErrTooLarge, maxNest)
	}
	return l.err == nil
}

func (l *loader) leave() { l.nest-- }

// spend counts n units of schema work and reports whether the document is
// still inside its bound; past it the load fails with ErrTooLarge.
func (l *loader) spend(n int) bool {
	l.work += n
	if l.work > maxWork && l.err == nil {
		l.err = fmt.Errorf("%w: its schemas make more than %d properties and types", ErrTooLarge, maxWork)
	}
	return l.err == nil
}

// isXSD reports whether ns is an XML Schema namespace, the current or one
// of the drafts older generators still write.
func isXSD(ns string) bool {
	switch ns {
	case xsdNS, "http://www.w3.org/1999/XMLSchema", "http://www.w3.org/2000/10/XMLSchema":
		return true
	}
	return false
}

// builtin maps an XML Schema built-in type (or the SOAP encoding type of
// the same name) to a JSON Schema; ok is false for a name neither
// defines.
func builtin(local, src string) (s *apidoc.Schema, ok bool) {
	s = &apidoc.Schema{Source: src}
	// Every built-in type collapses its value's whitespace before its
	// facets are checked but xs:string, which keeps it, and
	// xs:normalizedString, which replaces tab, newline and CR with spaces
	// (XSD 1.0 Part 2, 4.3.6).
	// A date, time or dateTime is the exception: its JSON Schema format
	// refuses a value with any whitespace, so the value orangerail checks
	// is already its normalised value and its facets read it as it is.
	switch local {
	case "string", "date", "time", "dateTime":
	case "normalizedString":
		s.WhiteSpace = "replace"
	default:
		s.WhiteSpace = "collapse"
	}
	str := func(format string) (*apidoc.Schema, bool) {
		s.Types, s.Format = []string{"string"}, format
		return s, true
	}
	integer := func(minimum float64, bounded bool) (*apidoc.Schema, bool) {
		s.Types = []string{"integer"}
		if bounded {
			s.Minimum = &minimum
		}
		return s, true
	}
	switch local {
	case "string", "normalizedString", "token", "language", "Name", "NCName", "NMTOKEN", "NMTOKENS",
		"ID", "IDREF", "IDREFS", "ENTITY", "ENTITIES", "QName", "NOTATION", "hexBinary", "duration",
		"gYear", "gYearMonth", "gMonth", "gMonthDay", "gDay":
		return str("")
	case "dateTime":
		return str("date-time")
	case "date":
		return str("date")
	case "time":
		return str("time")
	case "anyURI":
		return str("uri")
	case "base64Binary", "base64":
		return str("byte")
	case "int", "long", "short", "byte", "integer", "negativeInteger", "nonPositiveInteger":
		return integer(0, false)
	case "nonNegativeInteger", "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte":
		return integer(0, true)
	case "positiveInteger":
		return integer(1, true)
	case "decimal", "double", "float":
		s.Types = []string{"number"}
		return s, true
	case "boolean":
		s.Types = []string{"boolean"}
		return s, true
	}
	s.WhiteSpace = ""
	return s, false
}

// spaceless reports whether a value of the JSON Schema format has no
// whitespace, which its format check refuses.
func spaceless(format string) bool {
	return format == "date" || format == "time" || format == "date-time"
}

// typeSchema returns the schema of the type ref names, at is where the
// reference is written. A built-in type makes a new schema at at; a named
// type is read once and shared.
func (l *loader) typeSchema(ref xml.Name, at string) *apidoc.Schema {
	if !l.spend(1) {
		return &apidoc.Schema{Source: at}
	}
	if isXSD(ref.Space) || ref.Space == soapencNS {
		if ref.Space == soapencNS && ref.Local == "Array" {
			return &apidoc.Schema{Source: at, Types: []string{"array"}, Items: &apidoc.Schema{Source: at}}
		}
		s, ok := builtin(ref.Local, at)
		if !ok {
			if ref.Local == "anyType" || ref.Local == "anySimpleType" {
				l.problem(at, "{%s}%s accepts any content: no schema constrains it", ref.Space, ref.Local)
			} else {
				l.problem(at, "{%s}%s is not a type this loader knows: no schema constrains it", ref.Space, ref.Local)
			}
		}
		return s
	}
	if s, ok := l.typeMemo[ref]; ok {
		return s
	}
	d, ok := l.types[ref]
	if !ok {
		l.problem(at, "type {%s}%s is not declared", ref.Space, ref.Local)
		return &apidoc.Schema{Source: at}
	}
	s := &apidoc.Schema{Source: d.src, Ref: d.src}
	l.typeMemo[ref] = s
	if !l.enter() {
		return s
	}
	defer l.leave()
	l.filling[s] = true
	if d.n.name.Local == "complexType" {
		l.fillComplex(s, d.n, d.src, d.tns)
	} else {
		l.fillSimple(s, d.n, d.src)
	}
	delete(l.filling, s)
	return s
}

// elementSchema returns the schema of the global element ref names,
// read once and shared.
func (l *loader) elementSchema(ref xml.Name, at string) *apidoc.Schema {
	if !l.spend(1) {
		return &apidoc.Schema{Source: at}
	}
	if s, ok := l.elemMemo[ref]; ok {
		return s
	}
	d, ok := l.elements[ref]
	if !ok {
		l.problem(at, "element {%s}%s is not declared", ref.Space, ref.Local)
		return &apidoc.Schema{Source: at}
	}
	if t := d.n.attr("type"); t != "" {
		// The element is its type: share the type's schema. A type that
		// refers back to this element finds the type memoized, so the
		// element need not be memoized before it is read.
		q, ok := d.n.qname(t)
		if !ok {
			l.problem(d.src, "the type %q has an undeclared prefix", t)
			s := &apidoc.Schema{Source: d.src}
			l.elemMemo[ref] = s
			return s
		}
		s := l.typeSchema(q, d.src)
		l.elemMemo[ref] = s
		return s
	}
	s := &apidoc.Schema{Source: d.src, Ref: d.src}
	l.elemMemo[ref] = s
	if !l.enter() {
		return s
	}
	defer l.leave()
	l.filling[s] = true
	l.fillAnonymous(s, d.n, d.src, d.tns)
	delete(l.filling, s)
	return s
}

// fillAnonymous fills s from the complexType or simpleType written inside
// element n; an element with neither is xsd:anyType.
func (l *loader) fillAnonymous(s *apidoc.Schema, n *node, src, tns string) {
	s.Description = n.documentation(xsdNS)
	if c := n.child(xsdNS, "complexType"); c != nil {
		l.fillComplex(s, c, src, tns)
		return
	}
	if c := n.child(xsdNS, "simpleType"); c != nil {
		l.fillSimple(s, c, src)
		return
	}
	l.problem(src, "the element declares no type: it accepts any content (xsd:anyType)")
}

// fillComplex fills s from complexType n.
func (l *loader) fillComplex(s *apidoc.Schema, n *node, src, tns string) {
	s.Types = []string{"object"}
	if d := n.documentation(xsdNS); d != "" {
		s.Description = d
	}
	for _, c := range n.children {
		if c.name.Space != xsdNS {
			continue
		}
		switch c.name.Local {
		case "sequence", "all", "choice", "group":
			l.particle(s, c, src, tns, false)
		case "complexContent":
			l.complexContent(s, c, src+"/complexContent", tns)
		case "simpleContent":
			for _, d := range c.children {
				if d.is(xsdNS, "extension") || d.is(xsdNS, "restriction") {
					l.simpleBase(s, d, src+"/simpleContent/"+d.name.Local)
				}
			}
		}
	}
}

// complexContent fills s from a complexContent's extension or restriction.
func (l *loader) complexContent(s *apidoc.Schema, n *node, src, tns string) {
	for _, d := range n.children {
		if !d.is(xsdNS, "extension") && !d.is(xsdNS, "restriction") {
			continue
		}
		dsrc := src + "/" + d.name.Local
		base, ok := d.qname(d.attr("base"))
		if !ok {
			l.problem(dsrc, "the base %q has an undeclared prefix", d.attr("base"))
			continue
		}
		if d.name.Local == "restriction" && base.Space == soapencNS && base.Local == "Array" {
			l.soapArray(s, d, dsrc, tns)
			continue
		}
		if d.name.Local == "extension" && !(isXSD(base.Space) && base.Local == "anyType") {
			b := l.typeSchema(base, dsrc)
			if l.filling[b] {
				l.problem(dsrc, "the type derives from itself through {%s}%s: the base's properties are not copied", base.Space, base.Local)
			} else if l.spend(len(b.Properties)) {
				s.Properties = append(s.Properties, b.Properties...)
				s.Required = append(s.Required, b.Required...)
				if b.AdditionalProperties != nil {
					s.AdditionalProperties = b.AdditionalProperties
				}
			}
		}
		// A restriction restates the content it keeps; an extension adds
		// its own after the base's.
		for _, c := range d.children {
			if c.name.Space == xsdNS {
				switch c.name.Local {
				case "sequence", "all", "choice", "group":
					l.particle(s, c, dsrc, tns, false)
				}
			}
		}
	}
}

// soapArray makes s the array a SOAP-encoded array restriction declares:
// its items are the wsdl:arrayType ("tns:Foo[]", "xsd:string[][]") or, in
// the other common form, the one element of its sequence.
func (l *loader) soapArray(s *apidoc.Schema, d *node, src, tns string) {
	s.Types = []string{"array"}
	for _, a := range d.children {
		if !a.is(xsdNS, "attribute") {
			continue
		}
		at := a.attrNS(wsdlNS, "arrayType")
		if at == "" {
			continue
		}
		base, dims, _ := strings.Cut(at, "[")
		q, ok := a.qname(base)
		if !ok {
			l.problem(src, "the arrayType %q has an undeclared prefix", at)
			s.Items = &apidoc.Schema{Source: src}
			return
		}
		item := l.typeSchema(q, src)
		// Each further [] is one more level of array.
		for range strings.Count(dims, "[") {
			if !l.spend(1) {
				break
			}
			item = &apidoc.Schema{Source: src, Types: []string{"array"}, Items: item}
		}
		s.Items = item
		return
	}
	for _, c := range d.children {
		if c.is(xsdNS, "sequence") || c.is(xsdNS, "all") {
			tmp := &apidoc.Schema{}
			l.particle(tmp, c, src, tns, false)
			if len(tmp.Properties) == 1 {
				item := tmp.Properties[0].Schema
				if item.Types != nil && item.Types[0] == "array" && item.Items != nil && item.Ref == "" {
					item = item.Items
				}
				s.Items = item
				return
			}
		}
	}
	l.problem(src, "the SOAP-encoded array declares no wsdl:arrayType: its items are not constrained")
	s.Items = &apidoc.Schema{Source: src}
}

// particle adds the elements of a model group to s's properties; optional
// is set inside a choice or an optional group, where no element is
// required.
func (l *loader) particle(s *apidoc.Schema, g *node, src, tns string, optional bool) {
	gsrc := src + "/" + g.name.Local
	if g.attr("minOccurs") == "0" || g.name.Local == "choice" {
		optional = true
	}
	if g.name.Local == "group" {
		ref, ok := g.qname(g.attr("ref"))
		d, found := l.groups[ref]
		switch {
		case !ok || !found:
			l.problem(gsrc, "group %q is not declared", g.attr("ref"))
			return
		case l.groupActive[ref]:
			l.problem(gsrc, "group %q contains itself", g.attr("ref"))
			return
		}
		if !l.enter() {
			return
		}
		defer l.leave()
		l.groupActive[ref] = true
		for _, c := range d.n.children {
			if c.is(xsdNS, "sequence") || c.is(xsdNS, "choice") || c.is(xsdNS, "all") {
				l.particle(s, c, d.src, d.tns, optional)
			}
		}
		delete(l.groupActive, ref)
		return
	}
	for _, c := range g.children {
		if c.name.Space != xsdNS || l.err != nil {
			continue
		}
		switch c.name.Local {
		case "element":
			name, sch, required := l.localElement(c, gsrc, tns)
			if name == "" {
				continue
			}
			if !l.spend(1) {
				return
			}
			s.Properties = append(s.Properties, apidoc.Property{Name: name, Schema: sch})
			if required && !optional {
				s.Required = append(s.Required, name)
			}
		case "sequence", "choice", "all", "group":
			l.particle(s, c, gsrc, tns, optional)
		case "any":
			s.AdditionalProperties = &apidoc.Schema{Source: gsrc + "/any"}
			l.problem(gsrc+"/any", "an xsd:any wildcard: the elements it admits are not described")
		}
	}
}

// localElement reads an element inside a model group: its property name
// ("" for one that is no part of the input: it has no name, or may not
// appear, maxOccurs 0), its schema (an array when it repeats, nullable
// when nillable) and whether it is required.
func (l *loader) localElement(n *node, parent, tns string) (string, *apidoc.Schema, bool) {
	var (
		name   string
		s      *apidoc.Schema
		src    string
		shared bool
	)
	if r := n.attr("ref"); r != "" {
		ref, ok := n.qname(r)
		src = parent + "/element:" + ref.Local
		if !ok {
			l.problem(src, "the element reference %q has an undeclared prefix", r)
			return "", nil, false
		}
		name, s, shared = ref.Local, l.elementSchema(ref, src), true
	} else {
		name = n.attr("name")
		src = parent + "/element:" + name
		if name == "" {
			l.problem(src, "a local element with neither name nor ref is ignored")
			return "", nil, false
		}
		if t := n.attr("type"); t != "" {
			ref, ok := n.qname(t)
			if !ok {
				l.problem(src, "the type %q has an undeclared prefix", t)
				s = &apidoc.Schema{Source: src}
			} else {
				s = l.typeSchema(ref, src)
			}
			shared = s.Ref != ""
			if !shared && s.Description == "" {
				s.Description = n.documentation(xsdNS)
			}
		} else {
			s = &apidoc.Schema{Source: src}
			l.fillAnonymous(s, n, src, tns)
		}
	}
	if n.attr("nillable") == "true" || n.attr("nillable") == "1" {
		switch {
		case shared:
			s = &apidoc.Schema{Source: src, AnyOf: []*apidoc.Schema{s, {Source: src, Types: []string{"null"}}}}
		case len(s.Types) > 0:
			s.Types = append(s.Types, "null")
		}
	}
	minOccurs := strings.TrimSpace(n.attr("minOccurs"))
	maxOccurs := strings.TrimSpace(n.attr("maxOccurs"))
	if maxOccurs == "0" {
		// The element may not appear: it is no part of the input.
		return "", nil, false
	}
	if m, err := strconv.Atoi(maxOccurs); maxOccurs != "" && maxOccurs != "unbounded" && (err != nil || m < 0) {
		l.problem(src, "maxOccurs %q is neither a count nor unbounded", maxOccurs)
	}
	if maxOccurs == "unbounded" || maxOccurs != "" && maxOccurs != "1" {
		arr := &apidoc.Schema{Source: src, Types: []string{"array"}, Items: s}
		if m, err := strconv.Atoi(maxOccurs); err == nil && m > 1 {
			arr.MaxItems = &m
		}
		if m, err := strconv.Atoi(minOccurs); err == nil && m > 0 {
			arr.MinItems = &m
		}
		s = arr
	}
	return name, s, minOccurs != "0"
}

// fillSimple fills s from simpleType n: a restriction of a base with its
// facets, a list, or a union.
func (l *loader) fillSimple(s *apidoc.Schema, n *node, src string) {
	if d := n.documentation(xsdNS); d != "" {
		s.Description = d
	}
	for _, c := range n.children {
		switch {
		case c.is(xsdNS, "restriction"):
			l.simpleBase(s, c, src+"/restriction")
		case c.is(xsdNS, "list"):
			s.Types, s.XMLList = []string{"array"}, true
			lsrc := src + "/list"
			var item *apidoc.Schema
			if t := c.attr("itemType"); t != "" {
				if q, ok := c.qname(t); ok {
					item = l.typeSchema(q, lsrc)
				} else {
					l.problem(lsrc, "the itemType %q has an undeclared prefix", t)
				}
			} else if st := c.child(xsdNS, "simpleType"); st != nil {
				item = &apidoc.Schema{Source: lsrc + "/simpleType"}
				l.fillSimple(item, st, lsrc+"/simpleType")
			}
			s.Items = listItem(item, lsrc)
		case c.is(xsdNS, "union"):
			usrc := src + "/union"
			for _, t := range strings.Fields(c.attr("memberTypes")) {
				if q, ok := c.qname(t); ok {
					s.AnyOf = append(s.AnyOf, l.typeSchema(q, usrc))
				} else {
					l.problem(usrc, "the member type %q has an undeclared prefix", t)
				}
			}
			for i, st := range c.children {
				if st.is(xsdNS, "simpleType") {
					m := &apidoc.Schema{Source: fmt.Sprintf("%s/simpleType[%d]", usrc, i)}
					l.fillSimple(m, st, m.Source)
					s.AnyOf = append(s.AnyOf, m)
				}
			}
		}
	}
}

// listItemPattern matches a list's item as the list's text can carry it:
// the text is split on whitespace, so an item holding any, or none at
// all, would be read as other items (ECMA-262 and RE2 read it alike).
const listItemPattern = `^[^ \t\n\r]+$`

// listItem is a list's item schema: the item type's (nil for one not
// read), its value one listItemPattern matches. A value that is not a
// string (a number, a boolean) is spelled without whitespace already.
func listItem(item *apidoc.Schema, src string) *apidoc.Schema {
	if item == nil {
		return &apidoc.Schema{Source: src, Pattern: listItemPattern}
	}
	if len(item.Types) > 0 && !slices.Contains(item.Types, "string") {
		return item
	}
	// The item's types are restated: what judges a field by its value's
	// type (a list of strings may hold a secret) reads them.
	return &apidoc.Schema{Source: src, Types: slices.Clone(item.Types), AllOf: []*apidoc.Schema{item}, Pattern: listItemPattern}
}

// listValue is a list's value written v, as the agent sends it: an array
// of its items, split on whitespace, each a number or a boolean when item
// (the list's item schema) is one and it reads as one.
func listValue(v string, item *apidoc.Schema) []any {
	var types []string
	if item != nil {
		types = item.Types
	}
	numeric := slices.Contains(types, "integer") || slices.Contains(types, "number")
	boolean := slices.Contains(types, "boolean")
	out := []any{}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		x, err := strconv.ParseFloat(f, 64)
		switch {
		case numeric && err == nil:
			out = append(out, x)
		case boolean && (f == "true" || f == "1"):
			out = append(out, true)
		case boolean && (f == "false" || f == "0"):
			out = append(out, false)
		default:
			out = append(out, f)
		}
	}
	return out
}

// simpleBase fills s from a restriction or extension of a simple type:
// the base's type and facets, then the restriction's own facets.
func (l *loader) simpleBase(s *apidoc.Schema, r *node, src string) {
	var b *apidoc.Schema
	if base := r.attr("base"); base != "" {
		if q, ok := r.qname(base); ok {
			b = l.typeSchema(q, src)
		} else {
			l.problem(src, "the base %q has an undeclared prefix", base)
		}
	} else if st := r.child(xsdNS, "simpleType"); st != nil {
		b = &apidoc.Schema{Source: src + "/simpleType"}
		l.fillSimple(b, st, b.Source)
	}
	if b != nil && !l.filling[b] {
		s.Types = append([]string(nil), b.Types...)
		s.Format, s.Pattern, s.PatternXSD, s.Items = b.Format, b.Pattern, b.PatternXSD, b.Items
		s.Enum = append([]any(nil), b.Enum...)
		s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum = b.Minimum, b.Maximum, b.ExclusiveMinimum, b.ExclusiveMaximum
		s.MinLength, s.MaxLength = b.MinLength, b.MaxLength
		s.MinItems, s.MaxItems, s.XMLList = b.MinItems, b.MaxItems, b.XMLList
		s.WhiteSpace = b.WhiteSpace
		s.AnyOf = b.AnyOf
		s.AllOf = slices.Clone(b.AllOf)
	} else if b != nil {
		l.problem(src, "the type derives from itself: its base is not read")
	}
	if r.name.Local != "restriction" {
		return
	}
	numeric := len(s.Types) > 0 && (s.Types[0] == "integer" || s.Types[0] == "number")
	var enum []any
	var patterns []string
	for _, f := range r.children {
		if f.name.Space != xsdNS {
			continue
		}
		v := f.attr("value")
		num := func() *float64 {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				l.problem(src, "the %s facet %q is not a number", f.name.Local, v)
				return nil
			}
			return &x
		}
		count := func() *int {
			x, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || x < 0 {
				l.problem(src, "the %s facet %q is not a count", f.name.Local, v)
				return nil
			}
			return &x
		}
		if s.XMLList {
			// A list's length facets count its items (XSD 1.0 Part 2,
			// 4.3.1-3).
			switch f.name.Local {
			case "length":
				s.MinItems, s.MaxItems = count(), count()
				continue
			case "minLength":
				s.MinItems = count()
				continue
			case "maxLength":
				s.MaxItems = count()
				continue
			}
		}
		switch f.name.Local {
		case "enumeration":
			if !l.spend(1) {
				return
			}
			if s.XMLList {
				enum = append(enum, listValue(v, s.Items))
				continue
			}
			if numeric {
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					enum = append(enum, x)
					continue
				}
			}
			enum = append(enum, v)
		case "pattern":
			patterns = append(patterns, v)
		case "length":
			s.MinLength, s.MaxLength = count(), count()
		case "minLength":
			s.MinLength = count()
		case "maxLength":
			s.MaxLength = count()
		case "minInclusive":
			s.Minimum = num()
		case "maxInclusive":
			s.Maximum = num()
		case "minExclusive":
			s.ExclusiveMinimum = num()
		case "maxExclusive":
			s.ExclusiveMaximum = num()
		case "whiteSpace":
			// A restriction may only tighten it: preserve, replace,
			// collapse; a date, time or dateTime's value is spaceless
			// already, as builtin says.
			if v := strings.TrimSpace(v); !spaceless(s.Format) && (v == "collapse" || v == "replace" && s.WhiteSpace == "") {
				s.WhiteSpace = v
			}
		}
	}
	// The base's patterns are checked on the value this type normalises.
	for i, part := range s.AllOf {
		if part.PatternXSD && part.WhiteSpace != s.WhiteSpace {
			cp := *part
			cp.WhiteSpace = s.WhiteSpace
			s.AllOf[i] = &cp
		}
	}
	if enum != nil {
		s.Enum = enum
	}
	if patterns == nil {
		return
	}
	// The patterns of one derivation step are its branches; each step's
	// must hold (XSD 1.0 Part 2, 4.3.4): the base's is kept as a part.
	if s.Pattern != "" {
		s.AllOf = append(s.AllOf, &apidoc.Schema{Source: src + " (its base's pattern)", Pattern: s.Pattern, PatternXSD: s.PatternXSD, WhiteSpace: s.WhiteSpace})
	}
	// An XML Schema regular expression, a dialect of its own, which the
	// policy compiler writes for RE2 and ECMA-262.
	s.Pattern, s.PatternXSD = patterns[0], true
	if len(patterns) > 1 {
		s.Pattern = "(" + strings.Join(patterns, ")|(") + ")"
	}
}
