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
		GRANT SELECT ON granted TO orangerail_runtime`); err != nil {
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
	// the others checked.
	if !strings.Contains(msg, "actions.broken") || strings.Contains(msg, "actions.touch") {
		t.Errorf("the check's statements: %v, want actions.broken alone", err)
	}
}
