package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestServedToolsEncodeAsDeclared: a tool as the SDK is given it, its
// schemas encoded once, encodes byte for byte as its declaration does —
// as the SDK encodes a tools/list (no HTML escaping) and as json.Marshal
// does (describe_resource, the catalog resources) — a schema's <, &, >
// and U+2028 included, and an absent output schema left out.
func TestServedToolsEncodeAsDeclared(t *testing.T) {
	t.Parallel()
	action := &ontology.Action{Description: "Cancel an order <now> & then.", Destructive: new(true),
		Input: map[string]any{"type": "object", "required": []any{"reason"}, "properties": map[string]any{
			"reason": map[string]any{"type": "string", "pattern": "^[<>&]\u2028$", "description": "Why, in <b>words</b>."},
			"zeta":   map[string]any{"type": "integer"}, "alpha": map[string]any{"type": "number"}}}}
	defs := []*sdk.Tool{actionTool("cancel_order", action, "", map[string]any{"type": "object"}), checkTool(nil, ""),
		metaTool(ontology.ToolManageResource, &ontology.Config{}), {Name: "bare", InputSchema: map[string]any{"type": "object"}}}
	for _, def := range defs {
		served := servedDef(def)
		if _, ok := served.InputSchema.(json.RawMessage); !ok {
			t.Errorf("%s: the served input schema is a %T, encoded again at each call", def.Name, served.InputSchema)
		}
		for name, encode := range map[string]func(any) []byte{"sdk": encodeUnescaped, "json.Marshal": func(v any) []byte { b, _ := json.Marshal(v); return b }} {
			if want, got := encode(def), encode(served); !bytes.Equal(got, want) {
				t.Errorf("%s, encoded as %s:\n got %s\nwant %s", def.Name, name, got, want)
			}
		}
	}
}

func encodeUnescaped(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return b.Bytes()
}
