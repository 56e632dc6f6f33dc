package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/mcp"
)

// TestApprovalResourceNeedsCheckApprovalsScope: the approval resource is
// check_approval's read (its template is offered with that tool), so it
// passes that tool's gates: a token without the scope that grants
// check_approval is refused there, naming the scope, as the tool refuses
// it, rather than reading the approval around the scope.
func TestApprovalResourceNeedsCheckApprovalsScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s, _ := b.server(t, scopesMap)
	writer := connect(t, s, scoped("acme", "orders:write")) // check_approval is granted by orders:read
	_, body := call(t, writer, "cancel_order", `{"order_id": "o-1001", "reason": "customer asked"}`)
	id, _ := body["approvalId"].(string)
	if body["status"] != "approval_pending" || id == "" {
		t.Fatalf("stage: %v", body)
	}
	_, err := writer.CallTool(ctx, &sdk.CallToolParams{Name: "check_approval", Arguments: map[string]any{"approvalId": id}})
	if werr := wireError(t, err); werr.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("check_approval without its scope: %v", werr)
	}
	res, err := writer.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ApprovalURI(id)})
	if err == nil {
		t.Fatalf("the approval resource answered a token without check_approval's scope: %s", res.Contents[0].Text)
	}
	if werr := wireError(t, err); werr.Code != jsonrpc.CodeInvalidRequest || !jsonHasCode(werr.Data, errcode.MCPScopeDenied) {
		t.Fatalf("the approval resource without check_approval's scope: %d %s %s", werr.Code, werr.Message, werr.Data)
	}
}

func jsonHasCode(data []byte, code errcode.Code) bool {
	var d struct{ Code string }
	return json.Unmarshal(data, &d) == nil && d.Code == string(code)
}
