package ontology

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestCheckCatalogFindsWhatTheLoginCannotRead: config check, as the
// login that serves, names each object whose table or columns that login
// may not SELECT. The catalog check asked only whether they exist, so a
// config was accepted whose every read would fail with permission denied.
func TestCheckCatalogFindsWhatTheLoginCannotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	login := "catalog_reader_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(ctx, `
		CREATE TABLE open (id int PRIMARY KEY, org_id text NOT NULL, name text);
		CREATE TABLE partly (id int PRIMARY KEY, org_id text NOT NULL, note text, secret text);
		CREATE TABLE closed (id int PRIMARY KEY, org_id text NOT NULL);
		CREATE ROLE `+login+` LOGIN;
		GRANT SELECT ON open TO `+login+`;
		GRANT SELECT (id, org_id, note) ON partly TO `+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login+"; DROP ROLE "+login)
	})
	cfg, err := Parse([]byte(`service: s
objects:
  open: {table: open, key: id, tenant_column: org_id, fields: [id, name]}
  partly: {table: partly, key: id, tenant_column: org_id, fields: [id, note, secret]}
  closed: {table: closed, key: id, tenant_column: org_id, fields: [id]}
`))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testdb.WithUser(t, url, login, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"objects.closed.table": `table "closed" (columns "id", "org_id")`,
		"objects.partly.table": `table "partly" (columns "secret")`,
	}
	if len(problems) != len(want) {
		t.Fatalf("problems: %v, want one each on %v", problems, want)
	}
	for _, p := range problems {
		if !strings.HasPrefix(p.Message, DiagnosticPrivilegeMissing+`: role "`+login+`" may not read`) || !strings.Contains(p.Message, want[p.Path]) {
			t.Errorf("%s: %q, want %s naming %s", p.Path, p.Message, DiagnosticPrivilegeMissing, want[p.Path])
		}
	}
}

// TestCheckCatalogFindsASchemaTheLoginCannotUse: a table in a schema the
// login may not use (USAGE) is one it may not read, whatever its grants
// on the table; the check named no object and failed with the database's
// "permission denied for schema", to_regclass's answer to such a name.
func TestCheckCatalogFindsASchemaTheLoginCannotUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	login := "catalog_schema_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(ctx, `
		CREATE SCHEMA sales;
		CREATE TABLE sales.deals (id int PRIMARY KEY, org_id text NOT NULL);
		CREATE TABLE open (id int PRIMARY KEY, org_id text NOT NULL);
		CREATE ROLE `+login+` LOGIN;
		GRANT SELECT ON sales.deals, open TO `+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login+"; DROP ROLE "+login)
	})
	cfg, err := Parse([]byte(`service: s
objects:
  deal: {table: sales.deals, key: id, tenant_column: org_id, fields: [id]}
  open: {table: open, key: id, tenant_column: org_id, fields: [id]}
`))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testdb.WithUser(t, url, login, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		t.Fatalf("the check failed: %v", err)
	}
	if len(problems) != 1 || problems[0].Path != "objects.deal.table" ||
		!strings.HasPrefix(problems[0].Message, DiagnosticPrivilegeMissing+": ") || !strings.Contains(problems[0].Message, `"sales"`) {
		t.Errorf("problems: %v, want one %s on objects.deal.table naming schema sales", problems, DiagnosticPrivilegeMissing)
	}
}
