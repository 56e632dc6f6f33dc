package ontology

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// quickSchemas are schemas of every keyword the quick path models, as the
// engine's reads and the ontology's actions write them, and of keywords it
// leaves to the library.
var quickSchemas = []string{
	// A get: a key, links to include.
	`{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {
		"id": {"type": "string", "maxLength": 16},
		"include": {"type": "array", "items": {"enum": ["customer", "lines"]}, "uniqueItems": true}}}`,
	// A list: bounds, filters, a sort, formats.
	`{"type": "object", "additionalProperties": false, "properties": {
		"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
		"cursor": {"type": "string", "maxLength": 64},
		"sort": {"enum": ["created_at", "-created_at"]},
		"filters": {"type": "object", "additionalProperties": false, "properties": {
			"total": {"type": "object", "additionalProperties": false, "properties": {
				"gt": {"type": ["integer", "string"], "pattern": "^-?[0-9]+$", "minimum": -2147483648, "maximum": 2147483647},
				"in": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"}}}},
			"id": {"type": "object", "properties": {"eq": {"type": "string", "format": "uuid"}}},
			"at": {"type": "object", "properties": {"gte": {"type": "string", "format": "date-time"}, "on": {"type": "string", "format": "date"}}},
			"paid": {"type": "object", "properties": {"eq": {"enum": [true, false, "true", "false"]}}},
			"score": {"type": "object", "properties": {"lt": {"type": ["number", "string"]}, "gt": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}},
			"note": {"type": "object", "properties": {"eq": {"type": ["string", "number", "boolean"]}}}}}}}`,
	// An action's input: required members, nested objects, open ones, a
	// null, a minimum length.
	`{"type": "object", "required": ["order_id", "reason"], "properties": {
		"order_id": {"type": "string", "minLength": 1},
		"reason": {"type": "string", "minLength": 3, "maxLength": 10},
		"note": {"type": ["string", "null"]},
		"meta": {"type": "object", "additionalProperties": {"type": "string"}},
		"anything": {}}}`,
	// Keywords the quick path does not model, each beside ones it does.
	`{"type": "object", "properties": {"a": {"type": "string", "not": {"const": "x"}}}}`,
	`{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`,
	`{"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 5}}}`,
	`{"type": "object", "patternProperties": {"^x": {"type": "integer"}}}`,
	`{"type": "object", "minProperties": 2}`,
	`{"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "string"}}}}`,
	`{"type": "object", "properties": {"a": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string", "maxLength": 2}}}`,
	`{"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}`,
	`{"type": "object", "dependentRequired": {"a": ["b"]}, "propertyNames": {"maxLength": 3}}`,
	`{"type": "object", "unevaluatedProperties": false, "properties": {"a": {"type": "string"}}}`,
	`{"type": "object", "properties": {"a": {"type": "string", "format": "regex"}, "b": false}}`,
	`{"type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}, "b": {"const": 1}}}`,
}

func compileQuick(t testing.TB, schema string) *Validator {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	v, err := CompileSchema("urn:orangerail:test", m)
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return v
}

func decode(t testing.TB, doc string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return v
}

// TestQuickAcceptsWhatAgentsSend: the documents the schemas of reads and
// actions accept are accepted on the quick path, not by the library.
func TestQuickAcceptsWhatAgentsSend(t *testing.T) {
	for _, tc := range []struct {
		schema int
		docs   []string
	}{
		{0, []string{`{"id": "o-1001"}`, `{"id": "ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ"}`, `{"id": "o-1", "include": ["lines", "customer"]}`, `{"id": "", "include": []}`}},
		{1, []string{`{}`, `{"limit": 1}`, `{"limit": 100.0, "cursor": "abc", "sort": "-created_at"}`,
			`{"filters": {"total": {"gt": "-2147483648", "in": [1, "2", 3]}}}`, `{"filters": {"total": {"gt": 2147483647}}}`,
			`{"filters": {"id": {"eq": "0b5c7e8e-9a3f-4c1d-8e2b-1f2a3b4c5d6e"}, "paid": {"eq": "true"}}}`,
			`{"filters": {"at": {"gte": "2024-05-01T12:00:00Z", "on": "2024-02-29"}, "score": {"lt": "1.5", "gt": 0.5}}}`,
			`{"filters": {"note": {"eq": false}, "id": {"other": 1}}}`}},
		{2, []string{`{"order_id": "o-1", "reason": "why"}`, `{"order_id": "o", "reason": "0123456789", "note": null, "meta": {"a": "b"}, "anything": [1, {}], "more": 1}`}},
		// Where the keywords left to the library are not reached.
		{3, []string{`{"b": 1}`}},
		{13, []string{`{}`, `{"c": "x"}`}},
	} {
		v := compileQuick(t, quickSchemas[tc.schema])
		for _, doc := range tc.docs {
			d := decode(t, doc)
			if err := v.schema.Validate(d); err != nil {
				t.Fatalf("schema %d refuses %s: %v", tc.schema, doc, err)
			}
			if !v.quick.accepts(d) {
				t.Errorf("schema %d: %s was left to the library", tc.schema, doc)
			}
		}
	}
}

// TestQuickLeavesRefusalsToTheLibrary: what a schema refuses, the quick
// path never accepts, and Validate returns the library's own error —
// including where only a keyword the quick path does not model refuses.
func TestQuickLeavesRefusalsToTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		schema int
		docs   []string
	}{
		{0, []string{`{}`, `[]`, `{"id": 1}`, `{"id": "ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ"}`, `{"id": "o", "x": 1}`, `{"id": "o", "include": ["lines", "lines"]}`,
			`{"id": "o", "include": ["orders"]}`, `{"id": "o", "include": "lines"}`, `{"id": null}`}},
		{1, []string{`{"limit": 0}`, `{"limit": 101}`, `{"limit": 1.5}`, `{"limit": "1"}`, `{"limit": 1e400}`, `{"sort": "total"}`,
			`{"cursor": "` + string(bytes.Repeat([]byte("a"), 65)) + `"}`,
			`{"filters": {"total": {"gt": 2147483648}}}`, `{"filters": {"total": {"gt": "1.5"}}}`,
			`{"filters": {"total": {"in": []}}}`, `{"filters": {"total": {"in": [1, 2, 3, 4]}}}`, `{"filters": {"total": {"in": [true]}}}`,
			`{"filters": {"id": {"eq": "not-a-uuid"}}}`, `{"filters": {"at": {"gte": "2024-05-01 12:00"}}}`, `{"filters": {"at": {"on": "2023-02-29"}}}`,
			`{"filters": {"paid": {"eq": 1}}}`, `{"filters": {"score": {"gt": 0}}}`, `{"filters": {"score": {"gt": 1}}}`, `{"filters": {"note": {"eq": null}}}`,
			`{"filters": {"other": {}}}`}},
		{2, []string{`{"order_id": "o"}`, `{"order_id": "", "reason": "why"}`, `{"order_id": "o", "reason": "no"}`, `{"order_id": "o", "reason": "why", "note": 1}`,
			`{"order_id": "o", "reason": "why", "meta": {"a": 1}}`}},
		{3, []string{`{"a": "x"}`}},
		{4, []string{`{"a": true}`}},
		{5, []string{`{"a": 7}`}},
		{6, []string{`{"x1": "1"}`}},
		{7, []string{`{"a": 1}`}},
		{8, []string{`{"a": [1]}`}},
		{9, []string{`{"a": "abc"}`}},
		{10, []string{`{"a": 1}`}},
		{11, []string{`{"a": 1}`, `{"abcd": 1}`}},
		{12, []string{`{"b": 1}`}},
		{13, []string{`{"a": "("}`, `{"b": 1}`}},
		{14, []string{`{"b": 2}`}},
	} {
		v := compileQuick(t, quickSchemas[tc.schema])
		for _, doc := range tc.docs {
			d := decode(t, doc)
			want := v.schema.Validate(d)
			if want == nil {
				t.Fatalf("schema %d accepts %s: the case tests nothing", tc.schema, doc)
			}
			if v.quick.accepts(d) {
				t.Errorf("schema %d: the quick path accepts %s, which the library refuses: %v", tc.schema, doc, want)
			}
			if got := v.Validate(d); got == nil || got.Error() != want.Error() {
				t.Errorf("schema %d: %s: Validate says %v, the library %v", tc.schema, doc, got, want)
			}
		}
	}
}

// FuzzQuickAgreesWithTheLibrary: a document the quick path accepts, the
// library accepts.
func FuzzQuickAgreesWithTheLibrary(f *testing.F) {
	for i := range quickSchemas {
		for _, doc := range []string{`{}`, `{"id": "o-1"}`, `{"limit": 10, "filters": {"total": {"in": [1, "2"]}}}`, `{"a": "x", "b": 1}`,
			`{"order_id": "o", "reason": "abc", "meta": {"k": "v"}}`, `{"include": ["lines"], "id": "x"}`, `{"filters": {"score": {"gt": 0.25}}}`} {
			f.Add(uint8(i), []byte(doc))
		}
	}
	validators := make([]*Validator, len(quickSchemas))
	for i, s := range quickSchemas {
		validators[i] = compileQuick(f, s)
	}
	f.Fuzz(func(t *testing.T, schema uint8, doc []byte) {
		v := validators[int(schema)%len(validators)]
		d, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return
		}
		if v.quick.accepts(d) {
			if err := v.schema.Validate(d); err != nil {
				t.Fatalf("the quick path accepts %s, which the library refuses: %v", doc, err)
			}
		}
	})
}
