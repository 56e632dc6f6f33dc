package mcp

import "testing"

// TestParamShapesAreTheSDKs: every method whose params are checked is one
// go-sdk serves, spelled as it spells it — a misspelt one would check
// nothing.
func TestParamShapesAreTheSDKs(t *testing.T) {
	t.Parallel()
	for method := range paramShapes {
		if !standardMethod(method) {
			t.Errorf("%s is no method go-sdk serves", method)
		}
	}
}
