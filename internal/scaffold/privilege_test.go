package scaffold

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestTablesAndColumnsTheLoginMayNotRead: a table the scaffolding login
// may not SELECT is left out, saying why, as one in a schema it may not
// use is; a column withheld from it (a column grant that leaves out ssn)
// is no field, and is named. As they were, both were drafted: config
// check, which reads only the catalog, accepted the draft, and every read
// of either object failed with the database's permission error — or,
// served as a login that may read more, handed agents the very column the
// grant withheld.
func TestTablesAndColumnsTheLoginMayNotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := datasourceOf(t, `CREATE TABLE orders (id int PRIMARY KEY, org_id text NOT NULL, status text);
		CREATE TABLE payroll (id int PRIMARY KEY, org_id text NOT NULL, salary numeric);
		CREATE TABLE people (id int PRIMARY KEY, org_id text NOT NULL, name text, ssn text);
		CREATE TABLE keyless (id int PRIMARY KEY, org_id text NOT NULL, name text);`)
	admin := testdb.Pool(t, url)
	login := "scaffold_reader_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(ctx, "CREATE ROLE "+login+" LOGIN; GRANT SELECT ON orders TO "+login+
		"; GRANT SELECT (id, org_id, name) ON people TO "+login+"; GRANT SELECT (org_id, name) ON keyless TO "+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login)
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+login)
	})
	as := testdb.WithUser(t, url, login, "")
	got, err := Generate(ctx, as, Options{Service: "x"})
	if err != nil {
		t.Fatalf("the draft is lost: %v", err)
	}
	cfg := accepted(t, as, got)
	if slices.Contains(cfg.Objects["people"].Fields, "ssn") || cfg.Objects["payroll"] != nil || cfg.Objects["keyless"] != nil || cfg.Objects["orders"] == nil {
		t.Fatalf("want orders drafted, people without ssn, payroll and keyless left out:\n%s", got)
	}
	for _, say := range []string{"payroll: this login may not read it (SELECT)", `keyless: this login may not read its key column "id" (SELECT)`,
		`left out "ssn": this login may not read them (SELECT)`} {
		if !strings.Contains(string(got), say) {
			t.Errorf("the draft does not say %q", say)
		}
	}
	// Every object the draft serves is one the login reads, each field.
	reader := testdb.Pool(t, as)
	for name, o := range cfg.Objects {
		if _, err := reader.Exec(ctx, "SELECT "+strings.Join(o.Fields, ", ")+" FROM "+o.QuotedTable()+" LIMIT 1"); err != nil {
			t.Errorf("object %s: the login cannot read it: %v", name, err)
		}
	}
	if t.Failed() {
		t.Fatalf("\n%s", got)
	}
}
