package mcp_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestUnservedActionOverMCP: an action not served in the config's
// environment is absent through the real client — not in tools/list, not
// in list_policies or the instructions — and a call of it answers, byte
// for byte, what a server without it answers; the scopes map may still
// name it.
func TestUnservedActionOverMCP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := b.server(t, scopesMap, ontologytest.Set("environment", "production"),
		ontologytest.Set("actions.add_order_note.environments", []string{"demo"}))
	without, _ := b.server(t, scopesMap, ontologytest.Set("environment", "production"), ontologytest.Delete("actions.add_order_note"),
		ontologytest.SetYAML("scopes.orders:write", "[cancel_order, create_return_label, update_shipping_address]"))
	writer := scoped("acme", "orders:read", "orders:write")
	cs := connect(t, s, writer)
	if got := toolNames(t, cs); slices.Contains(got, "add_order_note") || !slices.Contains(got, "cancel_order") {
		t.Fatalf("tools/list %v", got)
	}
	if strings.Contains(cs.InitializeResult().Instructions, "add_order_note") {
		t.Fatal("the instructions mention the unserved action")
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_policies", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Content {
		if text, ok := c.(*sdk.TextContent); ok && strings.Contains(text.Text, "add_order_note") {
			t.Fatalf("list_policies mentions the unserved action: %s", text.Text)
		}
	}
	args := `{"order_id": "o-1001", "note": "hello"}`
	unserved, absent := rawResult(t, s, writer, "add_order_note", args), rawResult(t, without, writer, "add_order_note", args)
	if !bytes.Equal(unserved, absent) || !bytes.Contains(unserved, []byte(errcode.MCPToolUnknown)) {
		t.Fatalf("unserved answered\n%s\nabsent answered\n%s", unserved, absent)
	}
}
