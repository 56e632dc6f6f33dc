package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/mcp"
)

// TestMetaSurfaceThroughMCPGo: the meta surface as a client that is not
// go-sdk reads it — mark3labs/mcp-go over Streamable HTTP, with bearer
// tokens: a meta caller is offered list_resources, describe_resource and
// manage_resource and not the grouped tools; list_resources is plain
// text; manage_resource reads through the read's gates and answers what
// the read answers; a scope the token lacks is refused by name, through
// the same gate a direct call meets.
func TestMetaSurfaceThroughMCPGo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := metaServer(t, b)
	srv := httptest.NewServer(mcp.NewAuthenticator(byToken{
		"reader": scoped("acme", "orders:read"),
	}).Require(s.HTTPHandler()))
	t.Cleanup(srv.Close)

	c, err := mcpgo.NewStreamableHttpClient(srv.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer reader"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcpgotypes.InitializeRequest{Params: mcpgotypes.InitializeParams{
		ClientInfo: mcpgotypes.Implementation{Name: "mcp-go", Version: "1.2.1"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}

	listed, err := c.ListTools(ctx, mcpgotypes.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range listed.Tools {
		names = append(names, tool.Name)
	}
	for _, name := range []string{"list_resources", "describe_resource", "manage_resource"} {
		if !slices.Contains(names, name) {
			t.Fatalf("the meta caller is offered %v, without %s", names, name)
		}
	}
	if slices.Contains(names, "order_get") || slices.Contains(names, "cancel_order") {
		t.Fatalf("the meta caller is offered a grouped tool: %v", names)
	}

	callTool := func(name string, args map[string]any) (*mcpgotypes.CallToolResult, error) {
		return c.CallTool(ctx, mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: name, Arguments: args}})
	}
	text := func(res *mcpgotypes.CallToolResult) string {
		var b strings.Builder
		for _, content := range res.Content {
			if tc, ok := content.(mcpgotypes.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}

	catalog, err := callTool("list_resources", map[string]any{})
	if err != nil || catalog.IsError || !strings.Contains(text(catalog), "orders") || !strings.Contains(text(catalog), "cancel_order") {
		t.Fatalf("list_resources: %v %v", catalog, err)
	}

	read, err := callTool("manage_resource", map[string]any{"resource": "orders", "tool": "order_get", "arguments": map[string]any{"id": "o-1001"}})
	if err != nil || read.IsError {
		t.Fatalf("manage_resource order_get: %v %v", read, err)
	}
	var got struct {
		Item map[string]any `json:"item"`
	}
	if err := json.Unmarshal([]byte(text(read)), &got); err != nil || got.Item["id"] != "o-1001" {
		t.Fatalf("manage_resource order_get answered %q (%v)", text(read), err)
	}

	_, err = callTool("manage_resource", map[string]any{"resource": "orders", "tool": "cancel_order",
		"arguments": map[string]any{"order_id": "o-1001", "reason": "through mcp-go"}})
	if err == nil || !strings.Contains(err.Error(), string(errcode.MCPScopeDenied)) || !strings.Contains(err.Error(), "orders:write") {
		t.Fatalf("manage_resource cancel_order without orders:write: %v", err)
	}
}
