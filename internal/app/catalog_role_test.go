package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServeChecksPrivilegesAsTheRuntime: on the service database every
// read runs as orangerail_runtime, so serve's start asks whether that role
// may read an object's table, not whether the login may. A superuser or
// the tables' owner (the demo's login, a test's) may read everything, so
// a table never granted to orangerail_runtime passed the check and every
// read of it was refused with permission denied.
func TestServeChecksPrivilegesAsTheRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	conn, err := pgx.Connect(ctx, testdb.Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		CREATE TABLE granted (id int PRIMARY KEY, org_id text NOT NULL);
		CREATE TABLE ungranted (id int PRIMARY KEY, org_id text NOT NULL);
		GRANT SELECT ON granted TO orangerail_runtime`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	cfg, err := ontology.Parse([]byte(`service: s
objects:
  granted: {table: granted, key: id, tenant_column: org_id, fields: [id]}
  ungranted: {table: ungranted, key: id, tenant_column: org_id, fields: [id]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Serve: true, SweepEvery: time.Hour})
	if err == nil {
		rt.Close()
		t.Fatal("serve started though orangerail_runtime may not read ungranted")
	}
	if msg := err.Error(); !strings.Contains(msg, ontology.DiagnosticPrivilegeMissing) || !strings.Contains(msg, `"ungranted"`) || strings.Contains(msg, `"granted"`) ||
		!strings.Contains(msg, `role "orangerail_runtime" may not read`) {
		t.Errorf("serve refused with %q, want %s naming ungranted alone and the runtime's role", msg, ontology.DiagnosticPrivilegeMissing)
	}
}

// TestCatalogCheckActsAsTheRuntimeBehindAPooler: behind a pooler in
// transaction mode (PgBouncer) a session's SET ROLE stays on the one
// server connection it ran on, and each statement outside a transaction
// runs on whichever is free: the check must set the role in a transaction
// of its own, as every read does, or it asks what the login may read. The
// pooler's server connections here act as the login (another client reset
// them), as connections other clients made or the pooler opened since do.
func TestCatalogCheckActsAsTheRuntimeBehindAPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := testdb.Direct(testdb.New(t))
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		CREATE TABLE granted (id int PRIMARY KEY, org_id text NOT NULL);
		CREATE TABLE ungranted (id int PRIMARY KEY, org_id text NOT NULL);
		GRANT SELECT, UPDATE ON granted TO orangerail_runtime`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	pooled := testdb.Bouncer(t, direct)
	store := testdb.RuntimePool(t, pooled)
	// Every server connection of the pooler (default_pool_size 8) is
	// taken by a transaction that resets the role for its session.
	var others []pgx.Tx
	for range 8 {
		c, err := pgx.Connect(ctx, pooled)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
			t.Fatal(err)
		}
		others = append(others, tx)
	}
	for _, tx := range others {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := ontology.Parse([]byte(`service: s
objects:
  granted: {table: granted, key: id, tenant_column: org_id, fields: [id]}
  ungranted: {table: ungranted, key: id, tenant_column: org_id, fields: [id]}
actions:
  touch:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {sql: "UPDATE granted SET org_id = org_id WHERE false"}
  broken:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {sql: "UPDATE nowhere SET x = 1"}
  lacking:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {sql: "DELETE FROM granted WHERE false"}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Config: cfg, Store: store}
	_, err = rt.checkCatalog(ctx)
	msg := fmt.Sprint(err)
	if err == nil || !strings.Contains(msg, `"ungranted"`) || strings.Contains(msg, `"granted"`) || !strings.Contains(msg, `role "orangerail_runtime"`) {
		t.Fatalf("the check behind a pooler: %v, want ungranted refused to orangerail_runtime", err)
	}
	// A statement that cannot be prepared is its own problem and leaves
	// the others checked; each is tried as the runtime too, which may
	// update granted and not delete from it.
	if !strings.Contains(msg, "actions.broken") || strings.Contains(msg, "actions.touch") ||
		!strings.Contains(msg, `actions.lacking.execute.sql: datasource_privilege_missing: role "orangerail_runtime" may not run the statement`) {
		t.Errorf("the check's statements: %v, want actions.broken and actions.lacking alone", err)
	}
}

// TestServeFindsWhatAnActionMayNotDo: an action's statement runs as
// orangerail_runtime, and Postgres checks its privileges only when it
// runs: INSERT, UPDATE or DELETE on its table and EXECUTE on a function
// it calls as the executor starts, USAGE on a sequence it takes values
// from (a serial column's default, a nextval('…') it calls) as it takes
// one. The statements were only prepared at serve's start, which asks
// none of these, so a missing grant was met after a person approved the
// call. A statement granted all it needs (an identity column takes its
// values without USAGE) passes.
func TestServeFindsWhatAnActionMayNotDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	conn, err := pgx.Connect(ctx, testdb.Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		CREATE TABLE readonly_notes (id int PRIMARY KEY, org_id text NOT NULL, note text);
		CREATE TABLE shouted (id int PRIMARY KEY, org_id text NOT NULL, note text);
		CREATE TABLE numbered (id serial PRIMARY KEY, org_id text NOT NULL, note text);
		CREATE TABLE granted (id serial PRIMARY KEY, org_id text NOT NULL, note text, n bigint);
		CREATE TABLE identified (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, org_id text NOT NULL, note text);
		CREATE SEQUENCE loose;
		CREATE SEQUENCE counted;
		-- STRICT: a plan made for a NULL argument folds the call away
		-- without asking whether it may be made.
		CREATE FUNCTION shout(t text) RETURNS text STRICT LANGUAGE plpgsql AS $$ BEGIN RETURN upper(t); END $$;
		CREATE FUNCTION whisper(t text) RETURNS text STRICT LANGUAGE plpgsql AS $$ BEGIN RETURN lower(t); END $$;
		REVOKE EXECUTE ON FUNCTION shout(text), whisper(text) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION whisper(text) TO orangerail_runtime;
		GRANT SELECT ON readonly_notes, shouted, numbered, granted, identified TO orangerail_runtime;
		GRANT UPDATE ON shouted, granted TO orangerail_runtime;
		GRANT INSERT ON numbered, granted, identified TO orangerail_runtime;
		GRANT USAGE ON SEQUENCE granted_id_seq, counted TO orangerail_runtime`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	action := func(sql string) string {
		return fmt.Sprintf(`
    description: d
    input: {type: object, properties: {note: {type: string}, id: {type: integer}}}
    policy: {roles: [support]}
    execute: {sql: %q}`, sql)
	}
	cfg, err := ontology.Parse([]byte(`service: s
objects:
  note: {table: granted, key: id, tenant_column: org_id, fields: [id, note]}
actions:
  add_readonly:` + action("INSERT INTO readonly_notes (id, org_id, note) VALUES (:id, current_setting('orangerail.tenant_id'), :note)") + `
  shout_note:` + action("UPDATE shouted SET note = shout(:note) WHERE id = :id AND org_id = current_setting('orangerail.tenant_id')") + `
  add_numbered:` + action("INSERT INTO numbered (org_id, note) VALUES (current_setting('orangerail.tenant_id'), :note) RETURNING id") + `
  add_loose:` + action("INSERT INTO granted (org_id, note, n) VALUES (current_setting('orangerail.tenant_id'), :note, nextval('loose')) RETURNING id") + `
  add_granted:` + action("INSERT INTO granted (org_id, note, n) VALUES (current_setting('orangerail.tenant_id'), whisper(:note), nextval('counted')) RETURNING id") + `
  whisper_note:` + action("UPDATE granted SET note = whisper(:note) WHERE id = :id AND org_id = current_setting('orangerail.tenant_id')") + `
  add_identified:` + action("INSERT INTO identified (org_id, note) VALUES (current_setting('orangerail.tenant_id'), :note) RETURNING id") + `
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Serve: true, SweepEvery: time.Hour})
	if err == nil {
		rt.Close()
		t.Fatal("serve started though orangerail_runtime may not run four of the actions")
	}
	msg := err.Error()
	for action, object := range map[string]string{
		"add_readonly": `table readonly_notes`,
		"shout_note":   `function shout`,
		"add_numbered": `sequence numbered_id_seq`,
		"add_loose":    `sequence loose`,
	} {
		want := fmt.Sprintf(`actions.%s.execute.sql: %s: role "orangerail_runtime" may not`, action, ontology.DiagnosticPrivilegeMissing)
		line := lineWith(msg, "actions."+action+".")
		if !strings.Contains(line, want) || !strings.Contains(line, object) {
			t.Errorf("serve refused with %q, want %s… naming %s", msg, want, object)
		}
	}
	for _, action := range []string{"add_granted", "whisper_note", "add_identified"} {
		if strings.Contains(msg, "actions."+action+".") {
			t.Errorf("serve refused %s, granted all it needs: %q", action, msg)
		}
	}
}

// lineWith returns the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
