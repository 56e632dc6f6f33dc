package sqlguard

import (
	"errors"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// The corpus of allowed and refused statements, run through all four
// layers against Postgres, is in package sqlquery. These tests pin what
// this layer returns.

func TestCheckReturnsTheStatement(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"SELECT 1":                             "SELECT 1",
		"  SELECT 1 ;  ":                       "  SELECT 1 ",
		"SELECT 1 -- trailing":                 "SELECT 1 -- trailing",
		"/* lead */ SELECT 1;":                 "/* lead */ SELECT 1",
		"WITH x AS (SELECT 1) SELECT * FROM x": "WITH x AS (SELECT 1) SELECT * FROM x",
	} {
		got, err := Check(in)
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
		_, err := Check(sql)
		var r *Refusal
		if got := errors.As(err, &r) && r.Rule == RuleFunction; got != banned {
			t.Errorf("Check(%q) = %v; banned %v", sql, err, banned)
		}
	}
}

// FuzzCheck holds the guard to never panicking and to accepting only what
// parses as exactly one SELECT.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{"SELECT 1", "SELECT 1; DELETE FROM t", "WITH d AS (DELETE FROM t RETURNING 1) SELECT 1",
		`SELECT U&"\0061"`, "SELECT pg_sleep(1)", "SELECT $$a$$", "SELECT * FROM t FOR UPDATE"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		stmt, err := Check(sql)
		if err != nil {
			return
		}
		tree, perr := pg.Parse(stmt)
		if perr != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
			t.Fatalf("accepted %q, whose statement %q is not one SELECT (%v)", sql, stmt, perr)
		}
	})
}
