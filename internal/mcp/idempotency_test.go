package mcp_test

import (
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestIdempotencyKeyAdvertised: an idempotent action's tool schema
// carries the optional idempotencyKey, bounded 1 to 255 characters and
// not required; another action's does not, and the config's own input is
// left as it was.
func TestIdempotencyKeyAdvertised(t *testing.T) {
	t.Parallel()
	cfg := ontologytest.Parse(t, orders.Config)
	idempotent, other := cfg.Actions["update_shipping_address"], cfg.Actions["add_order_note"]
	if !idempotent.Idempotent || other.Idempotent {
		t.Fatal("the example's actions changed: pick an idempotent one and another")
	}
	schema := mcp.ActionSchema(idempotent)
	key, _ := schema["properties"].(map[string]any)[ontology.IdempotencyKeyArg].(map[string]any)
	if key["type"] != "string" || key["minLength"] != 1 || key["maxLength"] != 255 {
		t.Fatalf("idempotencyKey = %v", key)
	}
	for _, r := range schema["required"].([]any) {
		if r == ontology.IdempotencyKeyArg {
			t.Fatal("idempotencyKey is required")
		}
	}
	if _, ok := idempotent.Input["properties"].(map[string]any)[ontology.IdempotencyKeyArg]; ok {
		t.Fatal("the config's input schema was changed")
	}
	if _, ok := mcp.ActionSchema(other)["properties"].(map[string]any)[ontology.IdempotencyKeyArg]; ok {
		t.Fatal("a non-idempotent action advertises idempotencyKey")
	}
}
