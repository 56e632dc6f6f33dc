package scaffold

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

//go:embed testdata/schema.sql
var schemaSQL string

// datasource returns the URL of a migrated database (so orangerail's own
// schema is there to be left out) holding testdata/schema.sql.
func datasource(t *testing.T) string {
	t.Helper()
	return datasourceOf(t, schemaSQL)
}

// datasourceOf returns the URL of a migrated database holding what sql
// makes.
func datasourceOf(t *testing.T, sql string) string {
	t.Helper()
	url := testdb.New(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
	return url
}

// accepted loads a draft and checks it against the live catalog, as
// config check does: it must have no problem at all.
func accepted(t *testing.T, url string, draft []byte) *ontology.Config {
	t.Helper()
	cfg, err := ontology.Parse(draft)
	if err != nil {
		t.Fatalf("the draft does not load: %v\n%s", err, draft)
	}
	// A draft names no datasource of its own: serve reads it from the
	// service database as orangerail_runtime, and config check checks it
	// as that role. Grant it, as a deployment does, what the draft reads.
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), testdb.WithDatabase(t, testdb.ServerURL(t), connCfg.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `DO $$
		DECLARE s text;
		BEGIN
			FOR s IN SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('information_schema', 'orangerail') LOOP
				EXECUTE format('GRANT USAGE ON SCHEMA %I TO orangerail_runtime; GRANT SELECT ON ALL TABLES IN SCHEMA %I TO orangerail_runtime', s, s);
			END LOOP;
		END $$`); err != nil {
		t.Fatal(err)
	}
	_, problems, _, err := app.CheckCatalog(context.Background(), cfg, url)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("the catalog check finds %d problem(s): %v\n%s", len(problems), problems, draft)
	}
	return cfg
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	url := datasource(t)
	got, err := Generate(context.Background(), url, Options{Service: "Acme Data"})
	if err != nil {
		t.Fatal(err)
	}
	golden.Bytes(t, "testdata/init.yaml", got)
	again, err := Generate(context.Background(), url, Options{Service: "Acme Data"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, again) {
		t.Fatalf("two runs on one catalog differ:\n%s\n---\n%s", got, again)
	}
	cfg := accepted(t, url, got)
	if cfg.Service != "acme-data" {
		t.Fatalf("service %q, want acme-data", cfg.Service)
	}
	if len(cfg.Actions) != 0 {
		t.Fatalf("the draft has actions: %v", slices.Sorted(maps.Keys(cfg.Actions)))
	}
	// Objects: tables with one key column and a tenant column, named so
	// that schemas other than public keep them apart.
	wantObjects := []string{"Invoices", "billing_orders", "billing_payments", "customers", "orders", "products", "reviews", "tickets"}
	if got := slices.Sorted(maps.Keys(cfg.Objects)); !slices.Equal(got, wantObjects) {
		t.Fatalf("objects %v, want %v", got, wantObjects)
	}
	for name, o := range cfg.Objects {
		if strings.HasPrefix(o.Table, "orangerail.") {
			t.Fatalf("object %s serves orangerail's own table %s", name, o.Table)
		}
	}
	if o := cfg.Objects["billing_payments"]; o.Table != "billing.payments" || o.Key != "id" || o.TenantColumn != "account_id" ||
		!slices.Equal(o.List.Sort, []string{"id", "inserted_at"}) || o.List.MaxLimit != 100 || o.ReadAccess.Kind != ontology.ReadAuthenticated {
		t.Fatalf("billing_payments: %+v", o)
	}
	if o := cfg.Objects["orders"]; slices.Contains(o.Fields, "Shipping Address") || !slices.Contains(o.Fields, "tags") ||
		!slices.Equal(slices.Sorted(maps.Keys(o.List.Filters)), []string{"customer_id", "status"}) {
		t.Fatalf("orders: %+v", o)
	}
	if o := cfg.Objects["reviews"]; o.Key != "id" || o.TenantColumn != "org_id" || !slices.Equal(o.List.Sort, []string{"id", "created_on"}) ||
		!slices.Equal(slices.Sorted(maps.Keys(o.List.Filters)), []string{"review_state", "sku"}) {
		t.Fatalf("reviews: %+v", o)
	}
	// An enum status is filtered by; what holds a secret is no field.
	if o := cfg.Objects["tickets"]; !slices.Equal(o.Fields, []string{"id", "org_id", "status", "token_id", "reset_token_expires_at", "secretary"}) ||
		!slices.Equal(slices.Sorted(maps.Keys(o.List.Filters)), []string{"status"}) {
		t.Fatalf("tickets: %+v", o)
	}
	wantLinks := map[string]ontology.Link{
		"billing_payments_orders": {From: "billing_payments.order_id", To: "orders.id"},
		"Invoices_orders":         {From: "Invoices.OrderId", To: "orders.id"},
		"orders_customers":        {From: "orders.customer_id", To: "customers.id"},
		"reviews_products":        {From: "reviews.sku", To: "products.sku"},
	}
	gotLinks := map[string]ontology.Link{}
	for name, l := range cfg.Links {
		gotLinks[name] = *l
	}
	if !maps.Equal(gotLinks, wantLinks) {
		t.Fatalf("links %v, want %v", cfg.Links, wantLinks)
	}
	for _, left := range []string{"event_log: no tenant column", "organizations: no tenant column", `workspaces: its only key is its tenant column "workspace_id"`, "order_lines: its primary key (order_id, line) has 2 columns",
		"scratch: it has no primary key", "left out:\n#   event_log", "line items: its name is not an identifier", `left out "Shipping Address"`, "No actions"} {
		if !bytes.Contains(got, []byte(left)) {
			t.Fatalf("the draft does not say %q:\n%s", left, got)
		}
	}
}

func TestGenerateTables(t *testing.T) {
	t.Parallel()
	url := datasource(t)
	got, err := Generate(context.Background(), url, Options{Tables: []string{"orders", "billing.payments", "public.customers", "customers", "public.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := accepted(t, url, got)
	if want := []string{"billing_payments", "customers", "orders"}; !slices.Equal(slices.Sorted(maps.Keys(cfg.Objects)), want) {
		t.Fatalf("objects %v, want %v", slices.Sorted(maps.Keys(cfg.Objects)), want)
	}
	// Only links between the chosen tables.
	if want := []string{"billing_payments_orders", "orders_customers"}; !slices.Equal(slices.Sorted(maps.Keys(cfg.Links)), want) {
		t.Fatalf("links %v, want %v", slices.Sorted(maps.Keys(cfg.Links)), want)
	}
	if !strings.HasPrefix(cfg.Service, "orangerail-test-") {
		t.Fatalf("service %q is not the database's name made to fit", cfg.Service)
	}
}

func TestGenerateRefusesUnknownTables(t *testing.T) {
	t.Parallel()
	url := datasource(t)
	// payments is in billing, not public; Orders is not orders; orangerail's
	// own tables are never an agent's object.
	_, err := Generate(context.Background(), url, Options{Tables: []string{"orders", "payments", "Orders", "orangerail.approvals", "orangerail_schema_version", "nope.x"}})
	if errcode.Of(err) != errcode.ScaffoldTableUnknown {
		t.Fatalf("err %v, want %s", err, errcode.ScaffoldTableUnknown)
	}
	for _, name := range []string{`"Orders"`, `"nope.x"`, `"orangerail.approvals"`, `"orangerail_schema_version"`, `"payments"`} {
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("%v does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), `"orders"`) {
		t.Fatalf("%v names a table that exists", err)
	}
}

func TestGenerateRefusesABadDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  string
		code errcode.Code
	}{
		{"malformed", "postgres://u:s3cret@[::1", errcode.DatabaseURLInvalid},
		{"none", "", errcode.DatabaseURLInvalid},
		{"unreachable", fmt.Sprintf("postgres://postgres:s3cret@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", testdb.FreePort(t)), errcode.DatabaseUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Generate(context.Background(), tt.url, Options{})
			if errcode.Of(err) != tt.code {
				t.Fatalf("err %v, want %s", err, tt.code)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error leaks the password: %v", err)
			}
		})
	}
}

func TestServiceName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"orders":                       "orders",
		"Acme Orders_DB":               "acme-orders-db",
		"--x--":                        "x",
		"":                             "orangerail",
		"ÄÖ":                           "orangerail",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "_b": strings.Repeat("a", 62),
	} {
		if got := ServiceName(in); got != want {
			t.Errorf("ServiceName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDraftLoadsWhateverTheNamesLeftOut: Postgres allows a quoted name any
// character but NUL; a table left out for its name, or a key's columns
// named in the reason, reach the draft's comments quoted, and the draft
// loads with the other tables in it. As they were, a control character
// made the whole file one no YAML reader loads.
func TestDraftLoadsWhateverTheNamesLeftOut(t *testing.T) {
	t.Parallel()
	for name, sql := range map[string]string{
		"table named with \\x01":         "CREATE TABLE \"bad\x01name\" (id int PRIMARY KEY, org_id text);",
		"table named with DEL":           "CREATE TABLE \"bad\x7fname\" (id int PRIMARY KEY, org_id text);",
		"table named with U+FFFE":        "CREATE TABLE \"bad\uFFFEname\" (id int PRIMARY KEY, org_id text);",
		"key column named with \\x1b":    "CREATE TABLE t (\"a\x1b\" int, b int, org_id text, PRIMARY KEY (\"a\x1b\", b));",
		"schema named with a line break": "CREATE SCHEMA \"odd\nschema\"; CREATE TABLE \"odd\nschema\".t (id int PRIMARY KEY, org_id text);",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := datasourceOf(t, sql+" CREATE TABLE good (id int PRIMARY KEY, org_id text);")
			got, err := Generate(context.Background(), url, Options{Service: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if cfg := accepted(t, url, got); cfg.Objects["good"] == nil || !strings.Contains(string(got), "Tables left out:") {
				t.Fatalf("want good drafted and the odd table left out:\n%s", got)
			}
		})
	}
}

// TestSchemaTheLoginMayNotUse: a schema the scaffolding login has no USAGE
// on (another team's) is listed by the catalog, which everyone reads; its
// tables are left out, saying why, and the rest drafted. Reading them
// failed the whole draft with the database's permission error.
func TestSchemaTheLoginMayNotUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := datasourceOf(t, `CREATE SCHEMA private; CREATE TABLE private.keys (id int PRIMARY KEY, org_id text);
		CREATE TABLE public.orders (id int PRIMARY KEY, org_id text);`)
	admin := testdb.Pool(t, url)
	login := "scaffold_login_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(ctx, "CREATE ROLE "+login+" LOGIN; GRANT SELECT ON public.orders TO "+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login)
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+login)
	})
	got, err := Generate(ctx, testdb.WithUser(t, url, login, ""), Options{Service: "x"})
	if err != nil {
		t.Fatalf("the draft is lost: %v (code %q)", err, errcode.Of(err))
	}
	cfg, err := ontology.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Objects["orders"] == nil || !strings.Contains(string(got), "private.keys: this login may not use its schema (USAGE)") {
		t.Fatalf("want orders drafted and private.keys left out for its schema:\n%s", got)
	}
}

// TestTableKeyedByASecretIsLeftOut: a column named as a secret is no field
// of the draft, and a table whose key is one (a session's token, an API
// key) is no object: listing it would hand agents every one of the
// tenant's secrets, the key being served whatever its name.
func TestTableKeyedByASecretIsLeftOut(t *testing.T) {
	t.Parallel()
	url := datasourceOf(t, `CREATE TABLE sessions (token text PRIMARY KEY, org_id text NOT NULL, user_id int);
		CREATE TABLE api_keys (org_id text, api_key text, label text, PRIMARY KEY (org_id, api_key));
		CREATE TABLE good (id int PRIMARY KEY, org_id text);`)
	got, err := Generate(context.Background(), url, Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := accepted(t, url, got)
	for name, o := range cfg.Objects {
		for _, f := range o.Fields {
			if secretLike(f) {
				t.Errorf("object %s serves %q, a column named as a secret is", name, f)
			}
		}
	}
	for _, left := range []string{`sessions: its key "token" is named as a secret is`, `api_keys: its key "api_key" is named as a secret is`} {
		if !strings.Contains(string(got), left) {
			t.Errorf("the draft does not say %q", left)
		}
	}
	if cfg.Objects["good"] == nil || t.Failed() {
		t.Fatalf("\n%s", got)
	}
}
