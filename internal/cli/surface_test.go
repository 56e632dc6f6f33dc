package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// metaExample writes the example with support served the meta surface
// and edits, and returns its path.
func metaExample(t *testing.T, edits ...ontologytest.Edit) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.yaml")
	edits = append([]ontologytest.Edit{
		ontologytest.SetYAML("surface", `{default: flat, audiences: [{roles: [support], surface: meta}]}`),
		ontologytest.SetYAML("groups", `{orders: {title: Orders, tools: [order_get, order_list, cancel_order, update_shipping_address, add_order_note, create_return_label]},
  customers: {tools: [customer_get, customer_list]}, catalog: {tools: [product_get, product_list]}}`),
	}, edits...)
	if err := os.WriteFile(path, ontologytest.Apply(t, orders.Config, edits...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSurfaceMeasure: surface measure prints each audience's tools/list
// tokens, flat and meta, typed from the live catalog (golden); without a
// database it still measures, untyped; over surface.budget it exits 1
// naming each audience over, with X_MCP_SURFACE_OVER_BUDGET.
func TestSurfaceMeasure(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	if err := seedExample(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	path := metaExample(t)
	code, out, stderr := cli(t, "surface", "measure", path, "--database-url", url)
	if code != exitOK {
		t.Fatalf("surface measure: exit %d\n%s%s", code, out, stderr)
	}
	golden.Bytes(t, "testdata/surface_measure.txt", []byte(strings.ReplaceAll(out, database.RedactURL(url), "DATABASE_URL")))

	code, untyped, _ := cli(t, "surface", "measure", path, "--database-url", "")
	if code != exitOK || !strings.Contains(untyped, "catalog not read: no database URL") || !strings.Contains(untyped, "roles [support]") {
		t.Fatalf("without a database: exit %d\n%s", code, untyped)
	}

	// sql_query is measured from its login, its description listing what
	// the query role may read; without a database it is said unmeasured.
	auditors := metaExample(t, ontologytest.SetYAML("sql_query", "{enabled: true, roles: [auditor]}"))
	if code, out, _ := cli(t, "surface", "measure", auditors, "--database-url", url); code != exitOK || !strings.Contains(out, "roles [auditor]") || strings.Contains(out, "not measured") {
		t.Fatalf("with sql_query: exit %d\n%s", code, out)
	}
	if code, out, _ := cli(t, "surface", "measure", auditors, "--database-url", ""); code != exitOK || !strings.Contains(out, "not measured: sql_query (no database URL") {
		t.Fatalf("with sql_query, without a database: exit %d\n%s", code, out)
	}

	// A budget the flat audiences pass and support's flat catalog would
	// not: support is served meta, so it passes too.
	within := metaExample(t, ontologytest.SetYAML("surface.budget", "{max_tokens: 3500}"))
	if code, out, _ := cli(t, "surface", "measure", within, "--database-url", url); code != exitOK || strings.Contains(out, string(errcode.MCPSurfaceOverBudget)) {
		t.Fatalf("within the budget: exit %d\n%s", code, out)
	}
	over := metaExample(t, ontologytest.SetYAML("surface.budget", "{max_tokens: 500}"))
	code, out, _ = cli(t, "surface", "measure", over, "--database-url", url)
	if code != exitFindings || !strings.Contains(out, string(errcode.MCPSurfaceOverBudget)+": authenticated: its flat tools/list costs") ||
		!strings.Contains(out, string(errcode.MCPSurfaceOverBudget)+": roles [support]: its meta tools/list costs") ||
		strings.Contains(out, string(errcode.MCPSurfaceOverBudget)+": anonymous") {
		t.Fatalf("over the budget: exit %d\n%s", code, out)
	}
	if code, _, stderr := cli(t, "surface", "measure", filepath.Join(t.TempDir(), "none.yaml")); code != exitError || !strings.Contains(stderr, "none.yaml") {
		t.Fatalf("a missing file: exit %d %s", code, stderr)
	}
}
