package ontology

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks documents against a compiled JSON Schema. It answers
// as the schema library does, and asks it for every document the quick
// path cannot vouch for: what a document is refused for, and how the
// refusal reads, are always the library's.
//
// The quick path is for the common case, a document the schema accepts,
// which is most of what agents send. The library's validator walks a
// document through deep, wide frames that grow a request goroutine's
// stack; a read's input check cost some 30 µs that way, most of it the
// runtime copying the stack, for a document as small as {"id": "o-1"}.
// The quick path reads the library's own compiled schema (its formats,
// patterns, bounds, enums) with frames of its own, for the keywords the
// schemas of reads and of most actions use; a schema node holding any
// other keyword is left to the library whenever a document reaches it.
// It may answer "ask the library" for a document the schema accepts, never
// "accepted" for one it refuses (FuzzQuickAgreesWithTheLibrary).
type Validator struct {
	schema *jsonschema.Schema
	quick  *quickNode
}

// newValidator wraps a compiled schema.
func newValidator(s *jsonschema.Schema) *Validator {
	return &Validator{schema: s, quick: quickOf(s, map[*jsonschema.Schema]*quickNode{})}
}

// Validate checks doc, a document as jsonschema.UnmarshalJSON decodes
// one, and returns the library's error when the schema refuses it.
func (v *Validator) Validate(doc any) error {
	if v.quick.accepts(doc) {
		return nil
	}
	return v.schema.Validate(doc)
}

// jsonKinds is a set of JSON types, as a schema's type keyword names them.
type jsonKinds uint8

const (
	kindNull jsonKinds = 1 << iota
	kindBoolean
	kindNumber
	kindInteger
	kindString
	kindArray
	kindObject
)

var kindNames = map[string]jsonKinds{"null": kindNull, "boolean": kindBoolean, "number": kindNumber, "integer": kindInteger,
	"string": kindString, "array": kindArray, "object": kindObject}

// quickNode is a schema node as the quick path reads it. A field the
// schema leaves out is its zero value (a nil bound, a negative length).
type quickNode struct {
	// opaque: the node holds a keyword the quick path does not model (or
	// is the schema false): a document reaching it goes to the library.
	opaque bool

	kinds  jsonKinds // 0: any type
	enum   []any
	format *jsonschema.Format

	required   []string
	properties map[string]*quickNode
	// closed: additionalProperties false. additional: its schema.
	closed     bool
	additional *quickNode

	minItems, maxItems int
	unique             bool
	items              *quickNode

	minLength, maxLength int
	pattern              jsonschema.Regexp

	minimum, maximum, exclusiveMinimum, exclusiveMaximum *big.Rat
}

// quickFields are the fields of a compiled schema the quick path models,
// or that do not bear on what a document it models may be (annotations,
// names, anchors without a dynamic reference, which it does not model). A
// node with any other field set is opaque: a keyword the library gains in
// a later version is the library's to check until it is modelled here.
var quickFields = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true, "DynamicAnchor": true, "RecursiveAnchor": true,
	"Bool": true, "Types": true, "Enum": true, "Format": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "UniqueItems": true, "Items2020": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Maximum": true, "Minimum": true, "ExclusiveMaximum": true, "ExclusiveMinimum": true,
	"Title": true, "Description": true, "Default": true, "Comment": true, "ReadOnly": true, "WriteOnly": true,
	"Examples": true, "Deprecated": true,
}

// quickOf reads s as the quick path checks it; seen holds the nodes read
// so far, so that a schema reached twice is read once.
func quickOf(s *jsonschema.Schema, seen map[*jsonschema.Schema]*quickNode) *quickNode {
	if n, ok := seen[s]; ok {
		return n
	}
	n := &quickNode{}
	seen[s] = n
	// Draft 2020-12 alone: an earlier draft's items, formats and
	// $ref siblings read otherwise.
	if s.DraftVersion < 2020 || (s.Bool != nil && !*s.Bool) || (s.Format != nil && s.Format.Name == "regex") {
		n.opaque = true
		return n
	}
	v := reflect.ValueOf(s).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.IsExported() && !quickFields[f.Name] && !v.FieldByIndex(f.Index).IsZero() {
			n.opaque = true
			return n
		}
	}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			n.kinds |= kindNames[name]
		}
	}
	if s.Enum != nil {
		n.enum = s.Enum.Values
	}
	n.format = s.Format
	n.required = s.Required
	if len(s.Properties) > 0 {
		n.properties = make(map[string]*quickNode, len(s.Properties))
		for name, p := range s.Properties {
			n.properties[name] = quickOf(p, seen)
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		n.closed = !a
	case *jsonschema.Schema:
		n.additional = quickOf(a, seen)
	}
	n.minItems, n.maxItems = orMinus(s.MinItems), orMinus(s.MaxItems)
	n.unique = s.UniqueItems
	if s.Items2020 != nil {
		n.items = quickOf(s.Items2020, seen)
	}
	n.minLength, n.maxLength = orMinus(s.MinLength), orMinus(s.MaxLength)
	n.pattern = s.Pattern
	n.minimum, n.maximum, n.exclusiveMinimum, n.exclusiveMaximum = s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum
	return n
}

func orMinus(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// accepts reports whether the schema surely accepts v; false is "ask the
// library", not a refusal.
func (n *quickNode) accepts(v any) bool {
	if n.opaque {
		return false
	}
	var kind jsonKinds
	switch v.(type) {
	case nil:
		kind = kindNull
	case bool:
		kind = kindBoolean
	case json.Number:
		kind = kindNumber
	case string:
		kind = kindString
	case []any:
		kind = kindArray
	case map[string]any:
		kind = kindObject
	default:
		return false
	}
	if n.kinds != 0 && n.kinds&kind == 0 {
		// An integer is a number whose value is whole (1.0 is).
		if kind != kindNumber || n.kinds&kindInteger == 0 {
			return false
		}
		if r, ok := exactNumber(v.(json.Number)); !ok || !r.IsInt() {
			return false
		}
	}
	if n.enum != nil && !n.enumHas(v) {
		return false
	}
	// The library asks a format of every value; each format passes a
	// value not of its type.
	if n.format != nil && n.format.Validate(v) != nil {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		return n.acceptsObject(v)
	case []any:
		return n.acceptsArray(v)
	case string:
		return n.acceptsString(v)
	case json.Number:
		return n.acceptsNumber(v)
	}
	return true
}

// enumHas reports whether v is one of the enum's values. Only a null, a
// boolean or a string is compared here (the library compares numbers by
// their value, and arrays and objects member by member).
func (n *quickNode) enumHas(v any) bool {
	switch v.(type) {
	case nil, bool, string:
	default:
		return false
	}
	for _, e := range n.enum {
		switch e.(type) {
		case nil, bool, string:
			if e == v {
				return true
			}
		}
	}
	return false
}

func (n *quickNode) acceptsObject(obj map[string]any) bool {
	for _, name := range n.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	for name, value := range obj {
		if p, ok := n.properties[name]; ok {
			if !p.accepts(value) {
				return false
			}
			continue
		}
		switch {
		case n.closed:
			return false
		case n.additional != nil && !n.additional.accepts(value):
			return false
		}
	}
	return true
}

func (n *quickNode) acceptsArray(arr []any) bool {
	if (n.minItems >= 0 && len(arr) < n.minItems) || (n.maxItems >= 0 && len(arr) > n.maxItems) {
		return false
	}
	if n.unique && len(arr) > 1 {
		// Strings alone are compared here.
		seen := make(map[string]struct{}, len(arr))
		for _, item := range arr {
			s, ok := item.(string)
			if !ok {
				return false
			}
			if _, twice := seen[s]; twice {
				return false
			}
			seen[s] = struct{}{}
		}
	}
	if n.items != nil {
		for _, item := range arr {
			if !n.items.accepts(item) {
				return false
			}
		}
	}
	return true
}

func (n *quickNode) acceptsString(s string) bool {
	if n.minLength >= 0 || n.maxLength >= 0 {
		// Characters, as the library counts them: each invalid byte one.
		length := utf8.RuneCountInString(s)
		if (n.minLength >= 0 && length < n.minLength) || (n.maxLength >= 0 && length > n.maxLength) {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(s)
}

func (n *quickNode) acceptsNumber(v json.Number) bool {
	if n.minimum == nil && n.maximum == nil && n.exclusiveMinimum == nil && n.exclusiveMaximum == nil {
		return true
	}
	r, ok := exactNumber(v)
	return ok &&
		(n.minimum == nil || r.Cmp(n.minimum) >= 0) &&
		(n.maximum == nil || r.Cmp(n.maximum) <= 0) &&
		(n.exclusiveMinimum == nil || r.Cmp(n.exclusiveMinimum) > 0) &&
		(n.exclusiveMaximum == nil || r.Cmp(n.exclusiveMaximum) < 0)
}

// exactNumber is n's exact value, as the library reads it. A number with
// an exponent is left to the library: 1e999999 is a million digits to
// make, and the library would make them again.
func exactNumber(n json.Number) (*big.Rat, bool) {
	if strings.ContainsAny(string(n), "eE") {
		return nil, false
	}
	return new(big.Rat).SetString(string(n))
}
