package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestReadonlyManageResourceOnlyReads: under preset readonly no action is
// served, so manage_resource reaches reads alone — the orders group's
// get and list. Its annotations say so: read-only and closed-world, never
// the destructive, open-world hints of a tool that may call the
// carrier's API, which would have a host ask its user before each read.
func TestReadonlyManageResourceOnlyReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := metaServer(t, b, ontologytest.Set("preset", "readonly"))
	cs := connect(t, s, metaCaller("orders:read"))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "manage_resource" })
	if i < 0 {
		t.Fatalf("no manage_resource in %v", toolNames(t, cs))
	}
	// What the engine does: no action is reached, a read is.
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "manage_resource",
		Arguments: json.RawMessage(`{"resource": "orders", "tool": "cancel_order", "arguments": {"order_id": "o-1001", "reason": "x"}}`)}); err == nil {
		t.Fatal("a readonly server's manage_resource reached cancel_order")
	}
	if res, _ := call(t, cs, "manage_resource", `{"resource": "orders", "tool": "order_get", "arguments": {"id": "o-1001"}}`); res.IsError {
		t.Fatalf("order_get through manage_resource: %s", text(res))
	}
	a := res.Tools[i].Annotations
	if !a.ReadOnlyHint || (a.DestructiveHint != nil && *a.DestructiveHint) || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("manage_resource on a readonly server, which reaches reads alone: readOnly %v, destructive %v, openWorld %v",
			a.ReadOnlyHint, deref(a.DestructiveHint), deref(a.OpenWorldHint))
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
