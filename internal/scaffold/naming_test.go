package scaffold

import (
	"context"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestPublicTablesKeepTheirNames: a public table's object is its table's
// name, and another schema's table whose schema_table spells the same
// name is the one numbered. The names went in the catalog's order, schema
// by schema, so app.orders took "app_orders" from public.app_orders
// (which became app_orders_2), and which table an object name meant
// depended on the schemas' names and the database's collation.
func TestPublicTablesKeepTheirNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := datasourceOf(t, `CREATE SCHEMA app;
		CREATE TABLE app.orders (id int PRIMARY KEY, org_id text NOT NULL, region text);
		CREATE TABLE public.app_orders (id int PRIMARY KEY, org_id text NOT NULL, total int);`)
	got, err := Generate(ctx, url, Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range map[string]string{"app_orders": "app_orders", "app_orders_2": "app.orders"} {
		if o := cfg.Objects[name]; o == nil || o.Table != table {
			t.Errorf("object %s is %+v, want table %s:\n%s", name, o, table, got)
		}
	}
}
