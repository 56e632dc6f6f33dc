package scaffold

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestPublicTableShadowedByAnotherSchema: a table in public whose name a
// table in another schema shares is written schema-qualified, so the
// object reads the table it was drafted from whatever the serving login's
// search_path. As it was, public.orders was written table: orders, which
// a login named app (the default search_path is "$user", public) resolves
// to app.orders: config check against the same database, as the same
// login, found app.orders' columns, and with the same columns the object
// would have served app.orders as orders.
func TestPublicTableShadowedByAnotherSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	login := "scaffold_app_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	url := datasourceOf(t, `CREATE SCHEMA `+login+`;
		CREATE TABLE public.orders (id int PRIMARY KEY, org_id text NOT NULL, status text);
		CREATE TABLE `+login+`.orders (id int PRIMARY KEY, org_id text NOT NULL, internal_note text);
		CREATE TABLE public.customers (id int PRIMARY KEY, org_id text NOT NULL);`)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, "CREATE ROLE "+login+" LOGIN; GRANT USAGE ON SCHEMA "+login+" TO "+login+
		"; GRANT SELECT ON ALL TABLES IN SCHEMA public, "+login+" TO "+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login)
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+login)
	})
	as := testdb.WithUser(t, url, login, "")
	got, err := Generate(ctx, as, Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	// Each object's table, as the login resolves it, is the one drafted.
	reader := testdb.Pool(t, as)
	for name, want := range map[string]string{"orders": "public.orders", login + "_orders": login + ".orders", "customers": "public.customers"} {
		o := cfg.Objects[name]
		if o == nil {
			t.Fatalf("no object %s:\n%s", name, got)
		}
		var same bool
		if err := reader.QueryRow(ctx, "SELECT to_regclass($1) IS NOT DISTINCT FROM to_regclass($2)", o.QuotedTable(), want).Scan(&same); err != nil {
			t.Fatal(err)
		}
		if !same {
			t.Errorf("object %s: table %q is not %s as the login reads it", name, o.Table, want)
		}
	}
	if t.Failed() {
		t.Fatalf("\n%s", got)
	}
	// config check, as the same login, finds the columns drafted.
	accepted(t, as, got)
}

// TestPublicTableShadowedByAnotherRelation: what shadows a bare name on
// the search_path is any relation, not only a table. Only tables were
// counted, so public.orders beside a view, a materialized view or a
// sequence app.orders was written table: orders, which the login app
// resolves to app's relation.
func TestPublicTableShadowedByAnotherRelation(t *testing.T) {
	t.Parallel()
	for _, shadow := range []string{
		"VIEW %s.orders AS SELECT 1 AS id, 'x'::text AS org_id",
		"MATERIALIZED VIEW %s.orders AS SELECT 1 AS id, 'x'::text AS org_id",
		"SEQUENCE %s.orders",
	} {
		t.Run(strings.Fields(shadow)[0], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			login := "scaffold_app_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
			url := datasourceOf(t, `CREATE SCHEMA `+login+`;
				CREATE TABLE public.orders (id int PRIMARY KEY, org_id text NOT NULL, status text);
				CREATE `+strings.ReplaceAll(shadow, "%s", login)+`;`)
			admin := testdb.Pool(t, url)
			if _, err := admin.Exec(ctx, "CREATE ROLE "+login+" LOGIN; GRANT USAGE ON SCHEMA "+login+" TO "+login+
				"; GRANT SELECT ON ALL TABLES IN SCHEMA public, "+login+" TO "+login); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login)
				_, _ = admin.Exec(context.Background(), "DROP ROLE "+login)
			})
			as := testdb.WithUser(t, url, login, "")
			got, err := Generate(ctx, as, Options{Service: "x"})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ontology.Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			o := cfg.Objects["orders"]
			if o == nil {
				t.Fatalf("no object orders:\n%s", got)
			}
			var same bool
			if err := testdb.Pool(t, as).QueryRow(ctx, "SELECT to_regclass($1) IS NOT DISTINCT FROM 'public.orders'::regclass", o.QuotedTable()).Scan(&same); err != nil {
				t.Fatal(err)
			}
			if !same {
				t.Fatalf("table %q is not public.orders as the login reads it:\n%s", o.Table, got)
			}
			accepted(t, as, got)
		})
	}
}
