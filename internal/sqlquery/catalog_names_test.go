package sqlquery_test

import (
	"context"
	"errors"
	"testing"

	"github.com/orangerail/orangerail/internal/sqlguard"
)

// TestCatalogNamesAreNotReadable: the guard refuses every catalog relation
// (pg_roles, pg_class…) because they describe the whole server, every
// tenant's objects among them. The same catalogs answer through an object
// identifier type's output (an oid cast to regrole prints the role's name,
// to regclass the relation's) and through built-ins that look an oid or a
// name up in them (format_type, obj_description, to_regrole,
// has_*_privilege): a query walking the oids would list every role —
// auditor logins named for their tenants among them — every relation of
// every schema of the database, and every comment. Each is refused.
func TestCatalogNamesAreNotReadable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, "CREATE TABLE public.globex_secret_plans (a int); COMMENT ON TABLE public.globex_secret_plans IS 'globex merger'"); err != nil {
		t.Fatal(err)
	}
	probes := []string{
		// Every role's name, by oid.
		"SELECT string_agg(g::regrole::text, ',') FROM generate_series(1, 100000) g WHERE g::regrole::text <> g::text",
		"SELECT CAST(g AS pg_catalog.regrole) FROM generate_series(1, 100000) g WHERE g::oid::text <> CAST(g AS regrole)::text",
		"SELECT regrole 'orangerail_auditor'",
		// Every relation's, schema's and type's name, by oid.
		"SELECT g::regclass FROM generate_series(16384, 100000) g WHERE g::regclass::text LIKE '%secret%'",
		"SELECT g::oid::regnamespace FROM generate_series(1, 100000) g WHERE g::regnamespace::text <> g::text",
		"SELECT ARRAY[g]::regtype[] FROM generate_series(16384, 100000) g",
		"SELECT regclass('public.globex_secret_plans')",
		"SELECT format_type(g, NULL) FROM generate_series(16384, 100000) g WHERE format_type(g, NULL) LIKE '%secret%'",
		// Comments on any object.
		"SELECT obj_description(g, 'pg_class') FROM generate_series(16384, 100000) g WHERE obj_description(g, 'pg_class') IS NOT NULL",
		// One call a statement: the first refused call hides the rest.
		"SELECT col_description(16384, 1)",
		"SELECT shobj_description(10, 'pg_authid')",
		// Whether a name exists, and what any role may do.
		"SELECT to_regrole('orangerail_auditor') IS NOT NULL, to_regclass('public.globex_secret_plans') IS NOT NULL",
		"SELECT has_table_privilege('orangerail_runtime', 'orangerail.tenants', 'SELECT')",
		"SELECT (x.n).to_regrole IS NOT NULL FROM (SELECT 'orangerail_auditor'::text AS n) x",
		// A type's own output function, its argument cast implicitly
		// from an integer: no cast is written.
		"SELECT regroleout(g)::text FROM generate_series(1, 100000) g WHERE regroleout(g)::text <> g::text",
		"SELECT regclassout(g)::text FROM generate_series(16384, 100000) g WHERE regclassout(g)::text LIKE '%secret%'",
	}
	for _, sql := range probes {
		res, err := b.q.Query(ctx, "acme", sql)
		var refusal *sqlguard.Refusal
		if !errors.As(err, &refusal) {
			rows := ""
			if res != nil && len(res.Rows) > 0 {
				rows = string(res.Rows[0])
				if len(rows) > 300 {
					rows = rows[:300]
				}
			}
			t.Errorf("%s: not refused (%v): %s", sql, err, rows)
		}
	}
}
