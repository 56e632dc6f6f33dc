package errcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestTableIsComplete(t *testing.T) {
	t.Parallel()
	seen := map[Code]bool{}
	shape := regexp.MustCompile(`^X_[A-Z0-9_]+$`)
	for _, e := range All() {
		if seen[e.Code] {
			t.Errorf("%s is declared twice", e.Code)
		}
		seen[e.Code] = true
		if !shape.MatchString(string(e.Code)) || e.Cause == "" || e.Fix == "" {
			t.Errorf("%s: code, cause and fix must all be set", e.Code)
		}
		if got, ok := Explain(string(e.Code)); !ok || got != e {
			t.Errorf("Explain(%s) = %v, %v", e.Code, got, ok)
		}
	}
	err := New(DatabaseTooNew, "at 9", nil)
	if Of(err) != DatabaseTooNew || err.Fix() == "" {
		t.Fatalf("Of/Fix: %v %q", Of(err), err.Fix())
	}
}

// TestEveryCodeIsExplained reads this package's source: every Code constant
// declared must have its entry in the table.
func TestEveryCodeIsExplained(t *testing.T) {
	t.Parallel()
	file, err := parser.ParseFile(token.NewFileSet(), "errcode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if ident, ok := vs.Type.(*ast.Ident); !ok || ident.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				code, _ := strconv.Unquote(lit.Value)
				declared++
				if _, ok := Explain(code); !ok {
					t.Errorf("%s is declared but not explained in the table", code)
				}
			}
		}
	}
	if declared != len(All()) {
		t.Fatalf("%d codes declared, %d explained", declared, len(All()))
	}
}

// agentCodes are the codes an agent's call can be answered with: in a tool
// result, a JSON-RPC error, or an HTTP refusal of /mcp. Each must carry an
// AgentFix; no other code may.
var agentCodes = []Code{
	Forbidden, InputInvalid, InputTooLarge, IdempotencyKeyReused, RateLimited,
	MCPToolUnknown, MCPScopeDenied, MCPQueryRejected, MCPQueryTooLarge,
	MCPBodyTooLarge, MCPProtocol, MCPOriginRefused, IdentityOriginRefused, IdentityNetworkRefused,
	MCPRateLimited, MCPAuthThrottled, MCPUnauthorized, MCPIdentityUnavailable, MCPLimitsUnavailable,
	StdioTokenRefused, InternalError, MCPParseError, MCPInvalidRequest, MCPMethodUnknown, MCPHostRefused,
	MCPPromptArgumentsInvalid, ActionNotServed, MCPInvalidParams, MCPPromptUnknown, MCPResourceUnknown,
	MCPHeaderMismatch, RouteUnknown, ContentEncodingUnsupported, ApprovalNotFound,
}

// TestAgentFixes: one table, two audiences. Every code an agent can
// receive has a fix written for an agent, which names nothing only an
// operator can run; an operator-only code has none, and an agent is told
// to hand it to the operator.
func TestAgentFixes(t *testing.T) {
	t.Parallel()
	for _, e := range All() {
		agent := slices.Contains(agentCodes, e.Code)
		switch {
		case agent && e.AgentFix == "":
			t.Errorf("%s: an agent can receive it, so it needs an AgentFix", e.Code)
		case !agent && e.AgentFix != "":
			t.Errorf("%s: has an AgentFix, but is not in agentCodes: add it there if an agent can receive it", e.Code)
		case agent && (strings.Contains(e.AgentFix, "`orangerail") || strings.Contains(e.AgentFix, "config check")):
			t.Errorf("%s: the agent's fix names an operator's command: %q", e.Code, e.AgentFix)
		}
		if e.OperatorOnly() == agent || e.ForAgent() == "" || (!agent && e.ForAgent() == e.Fix) {
			t.Errorf("%s: operator only %v, ForAgent %q", e.Code, e.OperatorOnly(), e.ForAgent())
		}
	}
	// What agents are answered is held in the MCP and front golden files:
	// every code there is one agentCodes lists.
	code := regexp.MustCompile(`X_[A-Z0-9_]+`)
	for _, dir := range []string{"../mcp/testdata", "../front/testdata"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			b, err := os.ReadFile(path) //nolint:gosec // G304: this repository's golden files
			if err != nil {
				return err
			}
			for _, c := range code.FindAllString(string(b), -1) {
				if _, known := Explain(c); known && !slices.Contains(agentCodes, Code(c)) {
					t.Errorf("%s answers an agent %s, which agentCodes does not list", path, c)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
