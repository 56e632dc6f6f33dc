package sqlguard

import (
	"errors"
	"slices"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// The corpus of allowed and refused statements, run through all four
// layers against Postgres, is in package sqlquery. These tests pin what
// this layer returns.

// orangerail is the default schema list a Querier passes.
var orangerail = []string{"orangerail"}

func TestCheckReturnsTheStatement(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"SELECT 1":                             "SELECT 1",
		"  SELECT 1 ;  ":                       "  SELECT 1 ",
		"SELECT 1 -- trailing":                 "SELECT 1 -- trailing",
		"/* lead */ SELECT 1;":                 "/* lead */ SELECT 1",
		"WITH x AS (SELECT 1) SELECT * FROM x": "WITH x AS (SELECT 1) SELECT * FROM x",
	} {
		got, err := Check(in, orangerail)
		if err != nil || got != want {
			t.Errorf("Check(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestBannedNamesAreMatchedOnTheLastPart(t *testing.T) {
	t.Parallel()
	for sql, banned := range map[string]bool{
		"SELECT pg_sleep(1)":                    true,
		"SELECT myschema.pg_sleep(1)":           true,
		`SELECT "PG_SLEEP"(1)`:                  true,
		"SELECT pg_sleep FROM t":                false, // a column
		"SELECT pg.sleep(1)":                    false, // schema pg, function sleep
		"SELECT length(pg_thing) FROM t":        false,
		"SELECT lower(set_config_value) FROM t": false,
	} {
		_, err := Check(sql, orangerail)
		var r *Refusal
		if got := errors.As(err, &r) && r.Rule == RuleFunction; got != banned {
			t.Errorf("Check(%q) = %v; banned %v", sql, err, banned)
		}
	}
}

// TestFieldSelectionIsACall: Postgres resolves x.f and (x).f as the call
// f(x) when x is a column, a whole row or any expression, so a name after a
// dot is held to the function rule wherever it stands.
func TestFieldSelectionIsACall(t *testing.T) {
	t.Parallel()
	for sql, banned := range map[string]bool{
		"SELECT (pid).pg_terminate_backend FROM t":                         true,
		"SELECT (pid).pg_cancel_backend FROM t":                            true,
		"SELECT ('orangerail.audit'::regclass).pg_relation_size":           true,
		"SELECT (42::bigint).pg_try_advisory_lock_shared":                  true,
		"SELECT (42).pg_advisory_xact_lock":                                true,
		"SELECT x.pg_terminate_backend FROM (SELECT 1 AS x) s":             true,
		"SELECT s.x.pg_terminate_backend FROM (SELECT 1 AS x) s":           true,
		`SELECT x."pg_terminate_backend" FROM t`:                           true,
		`SELECT x."PG_Terminate_Backend" FROM t`:                           true,
		"SELECT x.PG_TERMINATE_BACKEND FROM t":                             true,
		"SELECT (x).a.pg_sleep FROM t":                                     true,
		"SELECT (x).pg_catalog.pg_sleep FROM t":                            true,
		"SELECT 1 FROM t WHERE (t.pid).pg_terminate_backend":               true,
		"SELECT 1 FROM t ORDER BY t.pid.pg_cancel_backend":                 true,
		"SELECT count(*) FILTER (WHERE (pid).pg_terminate_backend) FROM t": true,
		"SELECT * FROM t JOIN u ON (t.a).pg_advisory_unlock_all":           true,
		"SELECT (SELECT (1).pg_sleep)":                                     true,
		"SELECT x.set_config FROM t":                                       true,
		"SELECT x.lo_unlink FROM t":                                        true,
		"SELECT (x).nextval FROM t":                                        true,
		"SELECT pg_catalog.pg_terminate_backend(1)":                        true,
		`SELECT "pg_catalog"."PG_TERMINATE_BACKEND"(1)`:                    true,
		"SELECT pid FROM t":                                                false,
		"SELECT t.pid, (t.pid).x FROM t":                                   false,
		"SELECT pg_thing FROM t":                                           false, // unqualified: a column, never a call
		"SELECT (x).* FROM t":                                              false,
		"SELECT (arr)[1] FROM t":                                           false,
		"SELECT pg_alias.a FROM t AS pg_alias":                             false, // the first part never names a function
		"SELECT t.* FROM t":                                                false,
	} {
		_, err := Check(sql, orangerail)
		var r *Refusal
		if got := errors.As(err, &r) && r.Rule == RuleFunction; got != banned {
			t.Errorf("Check(%q) = %v; banned %v", sql, err, banned)
		}
	}
}

// TestOnlyAllowedRelationsAreRead: a statement reads relations in its
// schemas only — never a catalog, which shows every tenant's statistics —
// wherever the relation stands in the tree.
func TestOnlyAllowedRelationsAreRead(t *testing.T) {
	t.Parallel()
	for sql, refused := range map[string]bool{
		"SELECT * FROM pg_stat_user_tables":                                 true,
		"SELECT n_tup_ins FROM pg_catalog.pg_stat_user_tables":              true,
		"SELECT * FROM pg_statio_user_tables":                               true,
		"SELECT reltuples FROM pg_class":                                    true,
		`SELECT reltuples FROM "pg_class"`:                                  true,
		"SELECT reltuples FROM PG_CLASS":                                    true,
		`SELECT * FROM "pg_catalog"."pg_class"`:                             true,
		"SELECT * FROM information_schema.tables":                           true,
		"SELECT * FROM INFORMATION_SCHEMA.tables":                           true,
		"SELECT * FROM pg_toast.pg_toast_2619":                              true,
		"SELECT * FROM pg_temp.t":                                           true,
		"SELECT * FROM pg_temp_3.t":                                         true,
		"SELECT * FROM public.scratch":                                      true,
		"SELECT * FROM other.audit":                                         true,
		"SELECT * FROM db.pg_catalog.pg_class":                              true,
		"TABLE pg_stat_activity":                                            true,
		"SELECT * FROM ONLY pg_class":                                       true,
		"SELECT * FROM audit WHERE seq IN (SELECT reltuples FROM pg_class)": true,
		"SELECT (SELECT n_tup_ins FROM pg_stat_user_tables LIMIT 1)":        true,
		"WITH c AS (SELECT * FROM pg_stat_user_tables) SELECT * FROM c":     true,
		"SELECT * FROM audit a JOIN pg_stat_activity s ON true":             true,
		"SELECT * FROM audit, LATERAL (SELECT * FROM pg_locks) l":           true,
		"SELECT 1 WHERE EXISTS (SELECT FROM pg_roles)":                      true,
		"SELECT * FROM audit":                                               false,
		"SELECT * FROM orangerail.audit":                                    false,
		`SELECT * FROM "orangerail"."audit"`:                                false,
		"SELECT * FROM audit_heads h JOIN approvals p ON true":              false,
		"WITH x AS (SELECT 1) SELECT * FROM x":                              false,
		"SELECT * FROM orangerail.audit_verify('acme')":                     false, // a function, not a relation
		"SELECT * FROM generate_series(1, 3)":                               false,
		"SELECT 'pg_class'::text, NULL::pg_class":                           false, // names, not reads
	} {
		_, err := Check(sql, orangerail)
		var r *Refusal
		if got := errors.As(err, &r) && r.Rule == RuleRelation; got != refused {
			t.Errorf("Check(%q) = %v; refused %v", sql, err, refused)
		}
	}
	// The schemas are the caller's: another list allows other relations,
	// but never a system schema.
	for sql, refused := range map[string]bool{
		"SELECT * FROM public.scratch":      false,
		"SELECT * FROM orangerail.audit":    true,
		"SELECT * FROM pg_catalog.pg_class": true,
	} {
		_, err := Check(sql, []string{"public", "pg_catalog"})
		var r *Refusal
		if got := errors.As(err, &r) && r.Rule == RuleRelation; got != refused {
			t.Errorf("Check(%q, [public pg_catalog]) = %v; refused %v", sql, err, refused)
		}
	}
}

// fuzzSeeds is real traffic: statements the read-only SQL tool's corpus
// (package sqlquery) accepts and refuses, and hostile spellings.
var fuzzSeeds = []string{
	"SELECT 1", "  SELECT 1 ;  ", "SELECT seq, phase FROM audit ORDER BY seq", "SELECT * FROM orangerail.audit_verify('acme')",
	"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
	"SELECT a.seq, p.status FROM audit a LEFT JOIN approvals p ON p.id = a.approval_id",
	"SELECT $x$; DELETE FROM audit; $x$", `SELECT "pg_sleep" FROM (SELECT 1 AS "pg_sleep") t`, "VALUES (1), (2)", "TABLE audit",
	"SELECT convert_from(entry, 'UTF8')::jsonb->>'phase' FROM audit", "SELECT '2026-11-30'::date, CAST(seq AS text) FROM audit",
	"SELECT 1; DELETE FROM t", "SELECT 1 /* */; DELETE FROM audit", "", ";", "-- only a comment", "SET ROLE postgres",
	"SELECT set_config('role', 'postgres', false)", "SELECT * FROM audit WHERE set_config('role', 'postgres', true) IS NOT NULL",
	"WITH d AS (DELETE FROM t RETURNING 1) SELECT 1", "SELECT * INTO t FROM audit", "SELECT * FROM t FOR UPDATE",
	"SELECT * FROM (SELECT * FROM audit FOR UPDATE) x", `SELECT U&"\0061"`, "SELECT U&'\0061'", "SELECT pg_sleep(1)",
	"SELECT (pid).pg_terminate_backend FROM t", "SELECT t.pg_cancel_backend FROM t", "SELECT * FROM pg_catalog.pg_class",
	"SELECT * FROM pg_stat_activity", "SELECT * FROM information_schema.tables", "SELECT $$a$$", "SELECT E'\\x00'",
	"SELECT 'a\x00b'", "SELECT \xff", "SELECT " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200),
}

// FuzzCheck holds the guard to never panicking; to refusing only with a
// *Refusal naming one of its own rules; and to accepting only what parses
// as exactly one SELECT, which it accepts again as is, and none of whose
// calls Calls lists is in a banned family.
func FuzzCheck(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	rules := []Rule{RuleSyntax, RuleOneStatement, RuleSelectOnly, RuleInto, RuleLocking, RuleModifying, RuleFunction,
		RuleUnicode, RuleTooLong, RuleRelation, RuleParameter}
	f.Fuzz(func(t *testing.T, sql string) {
		stmt, err := Check(sql, orangerail)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) || !slices.Contains(rules, r.Rule) {
				t.Fatalf("Check(%q) refused with %T %v, not a guard rule", sql, err, err)
			}
			return
		}
		tree, perr := pg.Parse(stmt)
		if perr != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
			t.Fatalf("accepted %q, whose statement %q is not one SELECT (%v)", sql, stmt, perr)
		}
		if again, err := Check(stmt, orangerail); err != nil || again != stmt {
			t.Fatalf("accepted %q as %q, which checks as %q, %v", sql, stmt, again, err)
		}
		calls, err := Calls(stmt)
		if err != nil {
			t.Fatalf("accepted %q, whose calls are %v", sql, err)
		}
		for _, c := range calls {
			if c.Kind == CallFunction && callable(c.Name, "") != nil {
				t.Fatalf("accepted %q, which calls %+v", sql, c)
			}
		}
	})
}

// TestCalls: every function, field selection and operator a statement may
// call is listed for the catalog layer, with its schema and arity.
func TestCalls(t *testing.T) {
	calls, err := Calls("SELECT pg_catalog.lower(a.b), -x, 1 OPERATOR(public.+) 2, y LIKE 'z', (w).f, count(*), 1 = ANY (SELECT 1), a.c::text, CAST(d AS int), s.t '1' FROM t a WHERE q BETWEEN 1 AND 2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Schema: "pg_catalog", Name: "lower", Args: 1},
		{Name: "b", Args: 1, Optional: true},
		{Name: "-", Args: 1, Kind: CallOperator},
		{Schema: "public", Name: "+", Args: 2, Kind: CallOperator},
		{Name: "~~", Args: 2, Kind: CallOperator},
		{Name: "f", Args: 1, Optional: true},
		{Name: "count", Args: 0},
		{Name: "=", Args: 2, Kind: CallOperator},
		{Name: "text", Args: 1, Kind: CallCast},
		{Name: "c", Args: 1, Optional: true},
		{Schema: "pg_catalog", Name: "int4", Args: 1, Kind: CallCast},
		{Schema: "s", Name: "t", Args: 1, Kind: CallCast},
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls:\n got %+v\nwant %+v", calls, want)
	}
}
