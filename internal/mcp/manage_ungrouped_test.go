package mcp_test

import (
	"bytes"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// TestManageResourceRefusesAToolOfNoResource: manage_resource calls a tool
// of a resource list_resources names; a tool no group holds — a built-in,
// a meta tool, manage_resource itself — is of no resource, and answers as
// a tool that does not exist, as one named under the wrong resource does.
// The empty resource, which no group is, matched every ungrouped tool's
// "no group": manage_resource called itself, nested as deep as the
// message, each level a call and a host-log line of its own.
func TestManageResourceRefusesAToolOfNoResource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, events := metaServer(t, b)
	caller := metaCaller("orders:read", "orders:write")
	absent := rawResult(t, s, caller, "manage_resource", manageArgs("", "no_such_tool", `{}`))
	for _, tool := range []struct{ name, args string }{
		{"manage_resource", manageArgs("orders", "order_get", `{"id": "o-1001"}`)},
		{"list_resources", `{}`},
		{"errors_explain", `{"code": "X_FORBIDDEN"}`},
	} {
		got := rawResult(t, s, caller, "manage_resource", manageArgs("", tool.name, tool.args))
		if !bytes.Contains(got, []byte(errcode.MCPToolUnknown)) || bytes.Contains(got, []byte("o-1001")) {
			t.Errorf("manage_resource of %s under no resource answered\n%s\nwant what a tool that does not exist answers\n%s", tool.name, got, absent)
		}
	}
	for _, ev := range events() {
		if (ev.Tool == "manage_resource" || ev.Tool == "list_resources" || ev.Tool == "errors_explain") && ev.Outcome != engine.StatusNotFound {
			t.Errorf("a call of %s ran through manage_resource: %+v", ev.Tool, ev)
		}
	}
}
