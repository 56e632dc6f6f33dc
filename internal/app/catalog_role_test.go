package app

import (
	"context"
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
