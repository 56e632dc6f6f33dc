package app

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestImportsPointDown holds the house's layering, as DESIGN.md draws it
// (cli → app → front, mcp → engine → store → db), to the real import graph:
// each rule names packages that must not import others, directly or not.
func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	const module = "github.com/orangerail/orangerail/"
	cmd := exec.CommandContext(context.Background(), "go", "list", "-deps=false", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, module+"...")
	cmd.Dir = "../.."
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps, imports := map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "|")
		pkg := strings.TrimPrefix(fields[0], module)
		imports[pkg], deps[pkg] = strings.Fields(fields[1]), strings.Fields(fields[2])
	}
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages", len(deps))
	}
	rules := []struct {
		pkg       string // a package path, or a prefix ending in /
		forbidden []string
	}{
		// The engine knows no transport, no composition and no effect.
		{"internal/engine", []string{"internal/app", "internal/cli", "internal/front", "internal/mcp", "internal/effects", "net/http", "github.com/modelcontextprotocol/go-sdk",
			"internal/metrics", "internal/tracing", "go.opentelemetry.io/otel/sdk"}},
		// Metrics and traces observe the engine's events and spans; neither
		// reaches up into a transport or the composition.
		{"internal/metrics", []string{"internal/app", "internal/cli", "internal/front", "internal/mcp"}},
		{"internal/tracing", []string{"internal/app", "internal/cli", "internal/front", "internal/mcp", "internal/engine"}},
		{"internal/store", []string{"internal/engine", "internal/app", "internal/front", "internal/mcp", "internal/ontology"}},
		{"internal/front", []string{"internal/app", "internal/cli", "internal/mcp", "github.com/modelcontextprotocol/go-sdk"}},
		{"internal/mcp", []string{"internal/app", "internal/cli", "internal/front"}},
		{"internal/effects/", []string{"internal/app", "internal/cli", "internal/front", "internal/mcp"}},
		// The desk's surfaces call the engine and mount on the front.
		{"internal/desk/", []string{"internal/app", "internal/cli", "internal/mcp", "github.com/modelcontextprotocol/go-sdk"}},
		{"internal/app", []string{"internal/cli"}},
		// Webhooks run beside the engine, never in its path.
		{"internal/webhooks", []string{"internal/engine", "internal/app", "internal/cli", "internal/front", "internal/mcp"}},
		// Background rounds are a leaf every layer may run its own on.
		{"internal/periodic", []string{"internal/engine", "internal/app", "internal/cli", "internal/front", "internal/mcp", "internal/database",
			"internal/store", "internal/webhooks", "internal/desk"}},
	}
	for pkg, ds := range deps {
		for _, r := range rules {
			// "internal/effects/" is the package and every package under it.
			if pkg != strings.TrimSuffix(r.pkg, "/") && !(strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(pkg, r.pkg)) {
				continue
			}
			for _, d := range ds {
				for _, f := range r.forbidden {
					if strings.TrimPrefix(d, module) == f || strings.HasPrefix(strings.TrimPrefix(d, module), f+"/") {
						t.Errorf("%s depends on %s", pkg, d)
					}
				}
			}
		}
		// internal/faults is test support: no package the binary links
		// imports it (go list lists the packages' own imports, not their
		// tests').
		for _, d := range ds {
			if strings.TrimPrefix(d, module) == "internal/faults" {
				t.Errorf("%s depends on internal/faults, which only tests may import", pkg)
			}
		}
		// One owner each: the sqlc package and the MCP SDK.
		for _, d := range imports[pkg] {
			if d == module+"internal/db" && pkg != "internal/store" {
				t.Errorf("%s imports internal/db; only internal/store may", pkg)
			}
			// internal/bench is an MCP client of the server it measures
			// (mcp_http_load), as the tests are: it serves nothing.
			if strings.HasPrefix(d, "github.com/modelcontextprotocol/go-sdk") && pkg != "internal/mcp" && pkg != "internal/bench" {
				t.Errorf("%s imports %s; only internal/mcp may", pkg, d)
			}
		}
	}
}
