package mcp

import "testing"

// TestOneLineParamsShowsANormalisedEnum: the policy compiler writes the
// enumeration of a WSDL type whose whiteSpace is replace or collapse as
// allOf: [{anyOf: [{enum}, {pattern}]}] (the pattern takes the values
// with the whitespace XML Schema strips), so that the enumeration is
// still there for the agent to read. The compact catalog read only a
// top-level enum and said such a property was a string, where it listed
// an xs:string enumeration's literals.
func TestOneLineParamsShowsANormalisedEnum(t *testing.T) {
	t.Parallel()
	schema := map[string]any{
		"type":     "object",
		"required": []any{"kind"},
		"properties": map[string]any{
			"kind": map[string]any{"type": "string", "allOf": []any{
				map[string]any{"anyOf": []any{
					map[string]any{"enum": []any{"A", "B C"}},
					map[string]any{"pattern": `^[ \t\n\r]*(?:A|B[ \t\n\r]+C)[ \t\n\r]*$`},
				}},
			}},
			"plain": map[string]any{"type": "string", "enum": []any{"X", "Y"}},
			// An anyOf whose other branch admits values of its own is no
			// list of the values.
			"either": map[string]any{"allOf": []any{
				map[string]any{"anyOf": []any{
					map[string]any{"enum": []any{"A"}},
					map[string]any{"type": "integer"},
				}},
			}},
		},
	}
	want := `{kind: "A"|"B C", either?: any, plain?: "X"|"Y"}`
	if got := oneLineParams(schema); got != want {
		t.Errorf("oneLineParams = %s, want %s", got, want)
	}
}
