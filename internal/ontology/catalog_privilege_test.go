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

// TestCheckCatalogTriesActionsAsTheLogin: on a datasource of its own an
// action's statement runs as the login, so the check tries it as the
// login (a connection outside any transaction: it is tried in one of its
// own), and leaves the connection as it found it: no transaction open,
// nothing prepared, nothing written.
func TestCheckCatalogTriesActionsAsTheLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewEmpty(t) // a team's own database, orangerail's hardening not applied
	admin, err := pgx.Connect(ctx, testdb.Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	login := "catalog_writer_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(ctx, `
		CREATE TABLE notes (id serial PRIMARY KEY, org_id text NOT NULL, note text);
		CREATE ROLE `+login+` LOGIN;
		GRANT SELECT, INSERT ON notes TO `+login+`;
		GRANT USAGE ON SEQUENCE notes_id_seq TO `+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login+"; DROP ROLE "+login)
	})
	cfg, err := Parse([]byte(`service: s
objects:
  note: {table: notes, key: id, tenant_column: org_id, fields: [id, note]}
actions:
  add:
    description: d
    input: {type: object, properties: {note: {type: string}}}
    policy: {roles: [support]}
    execute: {sql: "INSERT INTO notes (org_id, note) VALUES (current_setting('orangerail.tenant_id'), :note) RETURNING id"}
  remove:
    description: d
    input: {type: object, properties: {note: {type: string}}}
    policy: {roles: [support]}
    execute: {sql: "DELETE FROM notes WHERE note = :note AND org_id = current_setting('orangerail.tenant_id')"}
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
	if len(problems) != 1 || problems[0].Path != "actions.remove.execute.sql" ||
		!strings.HasPrefix(problems[0].Message, DiagnosticPrivilegeMissing+`: role "`+login+`" may not run the statement`) || !strings.Contains(problems[0].Message, "notes") {
		t.Errorf("problems: %v, want one %s on actions.remove naming table notes and the login", problems, DiagnosticPrivilegeMissing)
	}
	var prepared, rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'orangerail%'").Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	if status := conn.PgConn().TxStatus(); status != 'I' || prepared != 0 {
		t.Errorf("after the check: transaction status %c, %d statement(s) left prepared; want idle, none", status, prepared)
	}
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("notes holds %d row(s) (%v), want none", rows, err)
	}
}
