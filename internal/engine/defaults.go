package engine

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// withDefaults returns an action's canonical input with the defaults its
// input schema declares filled in, and whether it filled any. canonical is
// RFC 8785 JSON, which decodes losslessly (jcs refused invalid UTF-8 and
// lone surrogates already); an input that is not a JSON object is left to
// checkInput to refuse.
//
// Defaults are applied before anything else looks at the input — the
// digest an approver approves, the approval that stores it, the
// precondition and the statement all see the input exactly as it
// executes. A default applies to a property declared under "properties"
// that the input leaves out, at the top and inside each object property
// the input holds (recursively); defaults behind $ref, allOf, anyOf, oneOf
// or if/then are not applied, since which of them holds depends on the
// value. An explicit null is a value, not a gap.
func withDefaults(schema map[string]any, canonical []byte) ([]byte, bool) {
	if !declaresDefault(schema) {
		return canonical, false
	}
	var schemaJSON map[string]any // the YAML's values as JSON decodes them
	if b, err := json.Marshal(schema); err != nil || json.Unmarshal(b, &schemaJSON) != nil {
		return canonical, false
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber() // numbers pass through as written
	var v any
	if err := dec.Decode(&v); err != nil || !fillDefaults(schemaJSON, v) {
		return canonical, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return canonical, false
	}
	return out, true
}

// fillDefaults fills v's missing properties from schema's defaults and
// reports whether it filled any.
func fillDefaults(schema map[string]any, v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	props, _ := schema["properties"].(map[string]any)
	filled := false
	for _, name := range slices.Sorted(maps.Keys(props)) {
		sub, _ := props[name].(map[string]any)
		if sub == nil {
			continue
		}
		if _, present := obj[name]; !present {
			if d, has := sub["default"]; has {
				obj[name] = d
				filled = true
			}
			continue
		}
		if fillDefaults(sub, obj[name]) {
			filled = true
		}
	}
	return filled
}

// declaresDefault reports whether any schema under properties declares a
// default: most declare none, and their input is used as sent.
func declaresDefault(schema map[string]any) bool {
	props, _ := schema["properties"].(map[string]any)
	for _, p := range props {
		sub, _ := p.(map[string]any)
		if sub == nil {
			continue
		}
		if _, has := sub["default"]; has || declaresDefault(sub) {
			return true
		}
	}
	return false
}
