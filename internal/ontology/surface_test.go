package ontology

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

// metaServed serves support the meta surface, over one group.
const metaServed = "surface: {audiences: [{roles: [support], surface: meta}]}\ngroups:\n  orders: {description: Orders, tools: [order_get, order_list, cancel_order]}\n"

// TestMetaSurfaceLoads: the meta tools are declared only when someone is
// served meta, and each grouped tool knows its group.
func TestMetaSurfaceLoads(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(add(metaServed)(base)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range cfg.Tools() {
		names = append(names, tool.Name)
	}
	for _, meta := range []string{ListResourcesTool, DescribeResourceTool, ManageResourceTool} {
		if !slices.Contains(names, meta) {
			t.Errorf("the meta surface is served and %s is not declared: %v", meta, names)
		}
	}
	if cfg.GroupOf("order_get") != "orders" || cfg.GroupOf("check_approval") != "" || cfg.DefaultSurface() != SurfaceFlat {
		t.Fatalf("groups %q %q, default %q", cfg.GroupOf("order_get"), cfg.GroupOf("check_approval"), cfg.DefaultSurface())
	}
	flat, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range flat.Tools() {
		if strings.HasSuffix(tool.Name, "_resource") || strings.HasSuffix(tool.Name, "_resources") {
			t.Fatalf("a flat config declares %s", tool.Name)
		}
	}
}

// TestMetaSurfaceProblems: each breach of surface: and groups: is a boot
// problem with its stable code at its field path.
func TestMetaSurfaceProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config, path string
		code               errcode.Code
	}{
		{"a group naming no tool", add(strings.Replace(metaServed, "cancel_order]", "cancel_order, refund]", 1))(base), "groups.orders.tools.3", errcode.MCPGroupUnknown},
		{"a group naming a meta tool", add(strings.Replace(metaServed, "cancel_order]", "cancel_order, manage_resource]", 1))(base), "groups.orders.tools.3", errcode.MCPGroupUnknown},
		{"a tool in two groups", add(metaServed + "  more: {tools: [order_get]}\n")(base), "groups.orders.tools.0", errcode.MCPGroupConflict},
		{"meta without groups", add("surface: {default: meta}\n")(base), "surface", errcode.MCPSurfaceInvalid},
		{"groups nobody is served", add("groups:\n  orders: {tools: [order_get]}\n")(base), "groups", errcode.MCPSurfaceInvalid},
		{"groups with flat rules only", add("surface: {default: flat, audiences: [{roles: [support], surface: flat}]}\ngroups:\n  orders: {tools: [order_get]}\n")(base),
			"groups", errcode.MCPSurfaceInvalid},
		{"an action taking a meta tool's name", add(strings.Replace(metaServed, ", cancel_order]", "]", 1))(strings.Replace(base, "  cancel_order:\n", "  manage_resource:\n", 1)), "actions.manage_resource", errcode.MCPToolDuplicate},
		// The scopes map covers the meta tools like any tool.
		{"a meta tool under no scope", add(metaServed + "scopes:\n  r: [check_approval, describe_object, describe_action, list_policies, errors_explain, list_resources, describe_resource, order_get, order_list]\n  w: [cancel_order]\n")(base),
			"scopes", errcode.MCPScopeUncovered},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.config))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != tt.path || !strings.Contains(problems[0].Message, string(tt.code)) {
			t.Errorf("%s: Parse = %v, want one %s at %s", tt.name, err, tt.code, tt.path)
		}
	}
	// An audience rule's predicate compiles at its path; a surface not
	// flat or meta is the schema's.
	if _, err := Parse([]byte(add("surface: {audiences: [{audience: \"caller.roles\", surface: meta}]}\ngroups:\n  o: {tools: [order_get]}\n")(base))); err == nil ||
		!strings.Contains(err.Error(), "surface.audiences.0.audience") {
		t.Fatalf("a non-boolean audience: %v", err)
	}
	if _, err := Parse([]byte(add("surface: {default: compact}\n")(base))); err == nil || !strings.Contains(err.Error(), "surface.default") {
		t.Fatalf("an unknown surface: %v", err)
	}
}
