package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestConfigCheckChecksAsTheRuntime: on the service database serve reads
// and runs actions as orangerail_runtime, and refuses to start on what
// that role may not do; config check asked it of its own login, so a
// superuser or the tables' owner passed a config serve then refused. A
// login that may not act as the runtime is checked as itself, and told
// so (a warning of its own code), never passed as though it were.
func TestConfigCheckChecksAsTheRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin, err := pgx.Connect(ctx, testdb.Direct(url))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const outsider = "config_check_outsider"
	if _, err := admin.Exec(ctx, `
		CREATE TABLE ungranted (id int PRIMARY KEY, org_id text NOT NULL);
		DROP ROLE IF EXISTS `+outsider+`;
		CREATE ROLE `+outsider+` LOGIN;
		GRANT SELECT ON ungranted TO `+outsider); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+outsider+"; DROP ROLE "+outsider)
	})
	file := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(file, []byte(`service: s
objects:
  thing: {table: ungranted, key: id, tenant_column: org_id, fields: [id]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "config", "check", file, "--database-url", url)
	if code != exitFindings || !strings.Contains(out, `objects.thing.table: `+ontology.DiagnosticPrivilegeMissing+`: role "orangerail_runtime" may not read`) {
		t.Errorf("config check as a superuser: exit %d, want %s of orangerail_runtime\n%s%s", code, ontology.DiagnosticPrivilegeMissing, out, stderr)
	}
	code, out, stderr = cli(t, "config", "check", file, "--database-url", testdb.WithUser(t, url, outsider, ""))
	if code != exitOK || !strings.Contains(out, "warning: datasource: "+ontology.DiagnosticRuntimeUnchecked+`: role "`+outsider+`" may not act as orangerail_runtime`) {
		t.Errorf("config check as a login that may not act as the runtime: exit %d, want a %s warning\n%s%s", code, ontology.DiagnosticRuntimeUnchecked, out, stderr)
	}
}
