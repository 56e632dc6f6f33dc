package sqlquery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/testdb"
)

type bundle struct {
	admin   *pgxpool.Pool
	runtime *pgxpool.Pool
	url     string
	q       *sqlquery.Querier
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	runtime := testdb.RuntimePool(t, url)
	for _, tenant := range []string{"acme", "globex"} {
		for i := range 3 {
			err := database.InTenant(ctx, runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
				err := engine.AppendAudit(ctx, tx, &engine.Record{Tenant: tenant, At: time.Now(), CorrelationID: fmt.Sprintf("c-%d", i),
					Phase: engine.PhaseStaged, Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.Exec(ctx, "CREATE SEQUENCE s; CREATE TABLE scratch (a int)"); err != nil {
		t.Fatal(err)
	}
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: testdb.WithUser(t, url, sqlquery.QueryRole, ""), Store: runtime})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{admin: admin, runtime: runtime, url: url, q: q}
}

// state is what a refused statement must leave as it was.
func (b *bundle) state(t *testing.T) string {
	t.Helper()
	var s string
	err := b.admin.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT count(*) || ':' || coalesce(sum(seq), 0) FROM orangerail.audit),
		(SELECT count(*) FROM orangerail.approvals),
		(SELECT count(*) FROM orangerail.tenants),
		(SELECT count(*) FROM scratch),
		(SELECT last_value FROM s),
		(SELECT count(*) FROM pg_class WHERE relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)),
		(SELECT count(*) FROM pg_prepared_xacts),
		(SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE a.usename = 'orangerail_query' AND a.datname = current_database() AND l.locktype <> 'virtualxid'),
		(SELECT rolsuper::text || rolbypassrls::text || rolcreaterole::text FROM pg_roles WHERE rolname = 'orangerail_query'),
		(SELECT count(*) FROM orangerail.query_sessions))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// allowed are legitimate reads: each must run, with every guard engaged.
var allowed = []string{
	"SELECT 1",
	"SELECT 1;",
	"  SELECT 1 ;  ",
	"SELECT seq, phase FROM audit ORDER BY seq",
	"SELECT * FROM orangerail.audit_verify('acme')",
	"SELECT * FROM audit_unfinished('acme')",
	"WITH x AS (SELECT seq FROM audit) SELECT count(*) FROM x",
	"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
	"SELECT a.seq, p.status FROM audit a LEFT JOIN approvals p ON p.id = a.approval_id",
	"SELECT seq, row_number() OVER (ORDER BY seq), lag(hash) OVER (ORDER BY seq) FROM audit",
	"SELECT 'DROP TABLE audit' AS s",
	"SELECT 1 -- DELETE FROM audit",
	"SELECT /* DELETE FROM audit; */ 1",
	"SELECT $$DELETE FROM audit$$",
	"SELECT $x$; DELETE FROM audit; $x$",
	"SELECT pg_thing FROM (SELECT 1 AS pg_thing) t",
	`SELECT "pg_sleep" FROM (SELECT 1 AS "pg_sleep") t`,
	"SELECT set_configured, lo_res FROM (SELECT 1 AS set_configured, 2 AS lo_res) x",
	"SELECT current_user, session_user",
	"SELECT now(), current_setting('search_path')",
	"VALUES (1), (2)",
	"TABLE audit",
	"SELECT encode(entry, 'escape') FROM audit",
	"SELECT convert_from(entry, 'UTF8')::jsonb->>'phase' FROM audit",
	"SELECT phase, count(*) FROM audit GROUP BY phase HAVING count(*) > 0",
	"SELECT * FROM audit WHERE phase IN (SELECT phase FROM audit)",
	"SELECT 1 UNION SELECT 2 INTERSECT SELECT 2",
	"SELECT lower('PG_SLEEP(10)')",
	"SELECT coalesce(NULL, 1), greatest(1, 2), nullif(1, 1)",
	"SELECT * FROM generate_series(1, 3)",
	"SELECT count(*) FROM audit WHERE tenant_id = 'globex'",
	"SELECT * FROM audit_heads",
	"SELECT sha256(entry) FROM audit",
	"SELECT * FROM audit a JOIN audit b ON a.seq = b.seq - 1",
	// The catalog layer's allow-list, and calls it resolves as safe.
	"SELECT random(), gen_random_uuid() IS NOT NULL, clock_timestamp() IS NOT NULL",
	"SELECT 'a' LIKE 'a%', 2 = ANY (ARRAY[1, 2]), 1 IN (1, 2), -1, 1 = ANY (SELECT 1)",
	"SELECT s.seq, (s.hash) FROM audit s",
	"SELECT pg_catalog.lower('A'), orangerail.audit_verify('acme') IS NOT NULL",
	// Casts: each function converting to the type is judged, but for an
	// extension type's that no column holds (hstore, installed by
	// TestCorpus, casts to json; no column is an hstore).
	"SELECT '2026-11-30'::date, CAST(seq AS text), DATE '2026-11-30', 1.5::numeric(10, 2), '{}'::json, '{}'::jsonb FROM audit",
	"SELECT ARRAY[1, 2]::int8[], '1 day'::interval, 1::pg_catalog.int4",
}

// rejected must not run: refused by the parse layer (rule set) or by
// Postgres itself (rule "").
var rejected = []struct {
	sql  string
	rule sqlguard.Rule
}{
	// Stacked statements and transaction control.
	{"SELECT 1; COMMIT", sqlguard.RuleOneStatement},
	{"SELECT 1; DELETE FROM audit", sqlguard.RuleOneStatement},
	{"COMMIT; SELECT 1", sqlguard.RuleOneStatement},
	{"SELECT 1; SET TRANSACTION READ WRITE", sqlguard.RuleOneStatement},
	{"SELECT 1 /* */; DELETE FROM audit", sqlguard.RuleOneStatement},
	{"SELECT 1; SELECT 2", sqlguard.RuleOneStatement},
	{"", sqlguard.RuleOneStatement},
	{";", sqlguard.RuleOneStatement},
	{"-- only a comment", sqlguard.RuleOneStatement},
	{"BEGIN", sqlguard.RuleSelectOnly},
	{"COMMIT", sqlguard.RuleSelectOnly},
	{"ROLLBACK", sqlguard.RuleSelectOnly},
	{"SET TRANSACTION READ WRITE", sqlguard.RuleSelectOnly},
	{"PREPARE TRANSACTION 'x'", sqlguard.RuleSelectOnly},
	{"COMMIT PREPARED 'x'", sqlguard.RuleSelectOnly},
	// Roles and settings.
	{"SET ROLE postgres", sqlguard.RuleSelectOnly},
	{"RESET ROLE", sqlguard.RuleSelectOnly},
	{"SET SESSION AUTHORIZATION postgres", sqlguard.RuleSelectOnly},
	{"SET orangerail.tenant_id = 'globex'", sqlguard.RuleSelectOnly},
	{"SELECT set_config('role', 'postgres', false)", sqlguard.RuleFunction},
	{"SELECT set_config('orangerail.tenant_id', 'globex', false)", sqlguard.RuleFunction},
	{"SELECT pg_catalog.set_config('role', 'orangerail_runtime', true)", sqlguard.RuleFunction},
	{`SELECT "set_config"('role', 'postgres', false)`, sqlguard.RuleFunction},
	{"SELECT * FROM audit WHERE set_config('role', 'postgres', true) IS NOT NULL", sqlguard.RuleFunction},
	{"DISCARD ALL", sqlguard.RuleSelectOnly},
	// Writes, DDL, utilities.
	{"DELETE FROM audit", sqlguard.RuleSelectOnly},
	{"UPDATE audit SET phase = 'x'", sqlguard.RuleSelectOnly},
	{"INSERT INTO tenants VALUES ('x')", sqlguard.RuleSelectOnly},
	{"MERGE INTO scratch USING (SELECT 1 AS a) s ON scratch.a = s.a WHEN NOT MATCHED THEN INSERT VALUES (1)", sqlguard.RuleSelectOnly},
	{"TRUNCATE audit", sqlguard.RuleSelectOnly},
	{"DROP TABLE audit", sqlguard.RuleSelectOnly},
	{"CREATE TABLE t (a int)", sqlguard.RuleSelectOnly},
	{"CREATE TEMP TABLE t AS SELECT 1", sqlguard.RuleSelectOnly},
	{"ALTER ROLE orangerail_query SUPERUSER", sqlguard.RuleSelectOnly},
	{"GRANT ALL ON audit TO PUBLIC", sqlguard.RuleSelectOnly},
	{"CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", sqlguard.RuleSelectOnly},
	{"DO $$ BEGIN DELETE FROM audit; END $$", sqlguard.RuleSelectOnly},
	{"CALL p()", sqlguard.RuleSelectOnly},
	{"COPY audit TO STDOUT", sqlguard.RuleSelectOnly},
	{"COPY audit TO '/tmp/x'", sqlguard.RuleSelectOnly},
	{"EXPLAIN ANALYZE DELETE FROM audit", sqlguard.RuleSelectOnly},
	{"EXPLAIN SELECT 1", sqlguard.RuleSelectOnly},
	{"VACUUM", sqlguard.RuleSelectOnly},
	{"ANALYZE audit", sqlguard.RuleSelectOnly},
	{"LOCK TABLE audit", sqlguard.RuleSelectOnly},
	{"LISTEN x", sqlguard.RuleSelectOnly},
	{"NOTIFY x", sqlguard.RuleSelectOnly},
	{"PREPARE p AS SELECT 1", sqlguard.RuleSelectOnly},
	{"EXECUTE p", sqlguard.RuleSelectOnly},
	{"DECLARE c CURSOR FOR SELECT 1", sqlguard.RuleSelectOnly},
	{"CHECKPOINT", sqlguard.RuleSelectOnly},
	{"LOAD 'x'", sqlguard.RuleSelectOnly},
	{"REINDEX TABLE audit", sqlguard.RuleSelectOnly},
	{"REFRESH MATERIALIZED VIEW x", sqlguard.RuleSelectOnly},
	// INTO and locking, at any depth.
	{"SELECT * INTO t FROM audit", sqlguard.RuleInto},
	{"SELECT * FROM audit FOR UPDATE", sqlguard.RuleLocking},
	{"SELECT * FROM audit FOR SHARE", sqlguard.RuleLocking},
	{"SELECT * FROM audit FOR NO KEY UPDATE SKIP LOCKED", sqlguard.RuleLocking},
	{"SELECT * FROM (SELECT * FROM audit FOR UPDATE) x", sqlguard.RuleLocking},
	{"WITH x AS (SELECT * FROM audit FOR UPDATE) SELECT * FROM x", sqlguard.RuleLocking},
	// Data-modifying CTEs, at any depth.
	{"WITH d AS (DELETE FROM audit RETURNING *) SELECT * FROM d", sqlguard.RuleModifying},
	{"WITH u AS (UPDATE approvals SET status = 'x' RETURNING 1) SELECT 1", sqlguard.RuleModifying},
	{"WITH i AS (INSERT INTO tenants VALUES ('z') RETURNING 1) SELECT 1", sqlguard.RuleModifying},
	{"SELECT * FROM (WITH d AS (DELETE FROM audit RETURNING 1) SELECT * FROM d) x", sqlguard.RuleModifying},
	{"WITH a AS (WITH d AS (DELETE FROM audit RETURNING 1) SELECT 1) SELECT * FROM a", sqlguard.RuleModifying},
	{"SELECT (WITH d AS (DELETE FROM scratch RETURNING 1) SELECT 1)", sqlguard.RuleModifying},
	// Banned functions, wherever the call stands, however spelled.
	{"SELECT pg_sleep(10)", sqlguard.RuleFunction},
	{"SELECT pg_catalog.pg_sleep(1)", sqlguard.RuleFunction},
	{`SELECT "pg_sleep"(1)`, sqlguard.RuleFunction},
	{`SELECT "pg_catalog"."pg_sleep"(1)`, sqlguard.RuleFunction},
	{"SELECT PG_SLEEP(1)", sqlguard.RuleFunction},
	{"SELECT * FROM pg_sleep(1)", sqlguard.RuleFunction},
	{"SELECT 1 WHERE pg_sleep(1) IS NOT NULL", sqlguard.RuleFunction},
	{"SELECT coalesce(pg_sleep(1)::text, 'x')", sqlguard.RuleFunction},
	{"SELECT array_agg(pg_sleep(0)) FROM audit", sqlguard.RuleFunction},
	{"SELECT (SELECT pg_sleep(0))", sqlguard.RuleFunction},
	{"SELECT * FROM audit ORDER BY pg_sleep(0)", sqlguard.RuleFunction},
	{"SELECT count(*) FILTER (WHERE pg_sleep(0) IS NULL) FROM audit", sqlguard.RuleFunction},
	{"SELECT * FROM audit a JOIN LATERAL pg_sleep(0) ON true", sqlguard.RuleFunction},
	{"SELECT * FROM audit GROUP BY seq HAVING pg_sleep(0) IS NULL", sqlguard.RuleFunction},
	{"SELECT pg_advisory_lock(1)", sqlguard.RuleFunction},
	{"SELECT pg_try_advisory_lock(1)", sqlguard.RuleFunction},
	{"SELECT pg_advisory_xact_lock(1)", sqlguard.RuleFunction},
	{"SELECT pg_advisory_lock_shared(1)", sqlguard.RuleFunction},
	{"SELECT query_to_xml('delete from audit', true, true, '')", sqlguard.RuleFunction},
	{"SELECT query_to_xmlschema('select 1', true, true, '')", sqlguard.RuleFunction},
	{"SELECT table_to_xml('audit', true, true, '')", sqlguard.RuleFunction},
	{"SELECT cursor_to_xml('c', 1, true, true, '')", sqlguard.RuleFunction},
	{"SELECT database_to_xml(true, true, '')", sqlguard.RuleFunction},
	{"SELECT schema_to_xml('orangerail', true, true, '')", sqlguard.RuleFunction},
	{"SELECT * FROM ts_stat('delete from audit')", sqlguard.RuleFunction},
	{"SELECT ts_rewrite('a'::tsquery, 'select 1')", sqlguard.RuleFunction},
	{"SELECT * FROM crosstab('select 1')", sqlguard.RuleFunction},
	{"SELECT dblink('dbname=x', 'delete from audit')", sqlguard.RuleFunction},
	{"SELECT dblink_exec('x')", sqlguard.RuleFunction},
	{"SELECT lo_import('/etc/passwd')", sqlguard.RuleFunction},
	{"SELECT lo_export(1, '/tmp/x')", sqlguard.RuleFunction},
	{"SELECT pg_read_file('/etc/passwd')", sqlguard.RuleFunction},
	{"SELECT pg_ls_dir('.')", sqlguard.RuleFunction},
	{"SELECT pg_terminate_backend(1)", sqlguard.RuleFunction},
	{"SELECT pg_cancel_backend(1)", sqlguard.RuleFunction},
	{"SELECT pg_reload_conf()", sqlguard.RuleFunction},
	{"SELECT pg_notify('x', 'y')", sqlguard.RuleFunction},
	{"SELECT pg_stat_reset()", sqlguard.RuleFunction},
	{"SELECT nextval('s')", sqlguard.RuleFunction},
	{"SELECT setval('s', 100)", sqlguard.RuleFunction},
	{"SELECT txid_current()", sqlguard.RuleFunction},
	// Field selection is a call: x.f and (x).f are f(x) to Postgres. A
	// qualified column named like a banned family is refused with them.
	{"SELECT (pid).pg_terminate_backend FROM (SELECT pg_backend_pid() AS pid) s", sqlguard.RuleFunction},
	{"SELECT (1).pg_cancel_backend", sqlguard.RuleFunction},
	{"SELECT ('orangerail.audit'::regclass).pg_relation_size", sqlguard.RuleFunction},
	{"SELECT (42::bigint).pg_try_advisory_lock_shared", sqlguard.RuleFunction},
	{"SELECT (42::bigint).pg_advisory_xact_lock", sqlguard.RuleFunction},
	{"SELECT s.pg_column_size FROM (SELECT 1 AS x) s", sqlguard.RuleFunction},
	{`SELECT (seq)."pg_terminate_backend" FROM audit`, sqlguard.RuleFunction},
	{"SELECT a.seq FROM audit a WHERE (a.seq).PG_CANCEL_BACKEND", sqlguard.RuleFunction},
	{"SELECT x.set_configured, x.lo_res FROM (SELECT 1 AS set_configured, 2 AS lo_res) x", sqlguard.RuleFunction},
	// Relations outside the search path's schemas: the catalogs show every
	// tenant's statistics and are not the caller's to read.
	{"SELECT relname FROM pg_class ORDER BY relname LIMIT 5", sqlguard.RuleRelation},
	{"SELECT count(*) FROM pg_catalog.pg_tables", sqlguard.RuleRelation},
	{"SELECT table_name FROM information_schema.tables WHERE table_schema = 'orangerail'", sqlguard.RuleRelation},
	{"SELECT relname, n_tup_ins, n_tup_upd FROM pg_stat_user_tables", sqlguard.RuleRelation},
	{"SELECT * FROM pg_statio_user_tables", sqlguard.RuleRelation},
	{"SELECT relname, reltuples FROM pg_catalog.pg_class WHERE relname = 'audit'", sqlguard.RuleRelation},
	{"SELECT * FROM pg_stat_activity", sqlguard.RuleRelation},
	{"SELECT * FROM pg_authid", sqlguard.RuleRelation},
	{"SELECT * FROM public.scratch", sqlguard.RuleRelation},
	{"SELECT * FROM pg_toast.pg_toast_2619", sqlguard.RuleRelation},
	{"SELECT * FROM audit WHERE seq > (SELECT max(n_tup_ins) FROM pg_stat_user_tables)", sqlguard.RuleRelation},
	// The catalogs read through an oid's name (TestCatalogNamesAreNotReadable).
	{"SELECT 'audit'::regclass", sqlguard.RuleRelation},
	{"SELECT g::regrole FROM generate_series(1, 100) g", sqlguard.RuleRelation},
	{"SELECT format_type(16384, NULL)", sqlguard.RuleFunction},
	{"SELECT to_regrole('orangerail_runtime')", sqlguard.RuleFunction},
	// A function that reads a relation's statistics is a pg_* function.
	{"SELECT pg_stat_get_tuples_inserted('orangerail.audit'::regclass)", sqlguard.RuleFunction},
	{"SELECT ('orangerail.audit'::regclass).pg_stat_get_live_tuples", sqlguard.RuleFunction},
	// U& escapes.
	{`SELECT U&"\0070g_sleep"(1)`, sqlguard.RuleUnicode},
	{`SELECT U&'\0041'`, sqlguard.RuleUnicode},
	// No parameters are bound: Postgres would refuse the bind as a
	// protocol violation, naming nothing of the statement.
	{"SELECT $1", sqlguard.RuleParameter},
	{"SELECT seq FROM audit WHERE seq = $1::int", sqlguard.RuleParameter},
	{`SELECT * FROM U&"audit"`, sqlguard.RuleUnicode},
	// Not SQL.
	{"SELEC 1", sqlguard.RuleSyntax},
	{"SELECT (", sqlguard.RuleSyntax},
	{"SELECT 'unterminated", sqlguard.RuleSyntax},
	// Parsed and allowed, but refused by Postgres: the role has no right.
	{"SELECT * FROM orangerail.tenants", ""},
	{"SELECT * FROM orangerail.query_sessions", ""},
	{"SELECT * FROM scratch", ""},
	// The catalog layer: what no list of names knows. VOLATILE built-ins
	// outside the banned families — large-object reads and writes, index
	// maintenance, sequences, session state, clocks — however called.
	{"SELECT lowrite(0, 'x')", sqlguard.RuleVolatile},
	{"SELECT loread(0, 1)", sqlguard.RuleVolatile},
	{"SELECT brin_summarize_new_values('audit')", sqlguard.RuleVolatile},
	{"SELECT brin_summarize_range('audit', 0)", sqlguard.RuleVolatile},
	{"SELECT brin_desummarize_range('audit', 0)", sqlguard.RuleVolatile},
	{"SELECT gin_clean_pending_list('audit')", sqlguard.RuleVolatile},
	{"SELECT setseed(0.5)", sqlguard.RuleVolatile},
	{"SELECT currval('s')", sqlguard.RuleVolatile},
	{"SELECT * FROM audit WHERE seq > (SELECT lastval())", sqlguard.RuleVolatile},
	{"SELECT (1::oid).currval", sqlguard.RuleVolatile},
	{"SELECT pg_catalog.timeofday()", sqlguard.RuleVolatile},
	// The tool's own schema's VOLATILE functions (Postgres refuses them
	// too: TestDatabaseRefusesWithoutTheParser).
	{"SELECT orangerail.audit_append('{}')", sqlguard.RuleVolatile},
	{"SELECT orangerail.query_session_bind(1, 'globex')", sqlguard.RuleVolatile},
	{"SELECT * FROM audit WHERE orangerail.audit_append('{}') IS NULL", sqlguard.RuleVolatile},
	// Extensions' functions (installed by TestCorpus), in the tool's schema
	// or outside it, and calls the catalog cannot resolve.
	{"SELECT * FROM pgstattuple('orangerail.audit')", sqlguard.RuleUnresolved},
	{"SELECT orangerail.pgstattuple('orangerail.audit')", sqlguard.RuleUnresolved},
	{"SELECT ('orangerail.audit'::text).pgstattuple", sqlguard.RuleUnresolved},
	{"SELECT public.gen_random_bytes(4)", sqlguard.RuleUnresolved},
	{"SELECT gen_random_bytes(4)", sqlguard.RuleUnresolved},
	{"SELECT public.digest('x', 'sha256')", sqlguard.RuleUnresolved},
	{"SELECT 1 OPERATOR(public.+) 1", sqlguard.RuleUnresolved},
	{"SELECT 1 !~~~ 1", sqlguard.RuleUnresolved},
	{"SELECT no_such_function(1)", sqlguard.RuleUnresolved},
	// Casts: to a type whose cast function is VOLATILE (a function of the
	// tool's own schema, installed by TestCorpus), to an extension's type
	// (its input function is the extension's), to a type outside the
	// schemas, and to none.
	{"SELECT 1::int8::probe", sqlguard.RuleVolatile},
	{"SELECT CAST(seq AS orangerail.probe) FROM audit", sqlguard.RuleVolatile},
	{"SELECT 'a=>1'::hstore", sqlguard.RuleUnresolved},
	{"SELECT 'a=>1'::public.hstore", sqlguard.RuleUnresolved},
	{"SELECT 1::no_such_type", sqlguard.RuleUnresolved},
	{"SELECT lower('a', 'b', 'c')", sqlguard.RuleUnresolved},
	{"SELECT information_schema._pg_truetypid(null, null)", sqlguard.RuleUnresolved},
	{"SELECT * FROM does_not_exist", ""},
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	if n := len(allowed) + len(rejected); n < 100 {
		t.Fatalf("the corpus has %d statements; it must have at least 100", n)
	}
	b := setup(t)
	ctx := context.Background()
	// Extensions whose functions only the catalog layer knows to refuse:
	// one in the tool's schema (its tuple statistics see every tenant's
	// rows), one outside it.
	// And a cast whose function is VOLATILE, in the tool's schema, and an
	// extension's type with casts to built-in types, outside it.
	if _, err := b.admin.Exec(ctx, "CREATE EXTENSION pgstattuple SCHEMA orangerail; CREATE EXTENSION pgcrypto SCHEMA public; "+
		"CREATE EXTENSION hstore SCHEMA public; CREATE TYPE orangerail.probe AS (x int8); "+
		"CREATE FUNCTION orangerail.probe_of(int8) RETURNS orangerail.probe LANGUAGE sql VOLATILE AS 'SELECT ROW($1)::orangerail.probe'; "+
		"CREATE CAST (int8 AS orangerail.probe) WITH FUNCTION orangerail.probe_of(int8)"); err != nil {
		t.Fatal(err)
	}
	before := b.state(t)

	for _, sql := range allowed {
		res, err := b.q.Query(ctx, "acme", sql)
		if err != nil {
			t.Errorf("allowed %q: %v", sql, err)
			continue
		}
		if len(res.Guards) != 5 {
			t.Errorf("allowed %q: guards %v", sql, res.Guards)
		}
	}
	for _, tt := range rejected {
		res, err := b.q.Query(ctx, "acme", tt.sql)
		var refusal *sqlguard.Refusal
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			t.Errorf("rejected %q ran: %v", tt.sql, res.Rows)
		case tt.rule != "" && (!errors.As(err, &refusal) || refusal.Rule != tt.rule):
			t.Errorf("rejected %q: %v, want rule %s", tt.sql, err, tt.rule)
		case tt.rule == "" && !errors.As(err, &pgErr):
			t.Errorf("rejected %q: %v, want a Postgres refusal", tt.sql, err)
		}
		if after := b.state(t); after != before {
			t.Fatalf("after %q the database changed:\n before %s\n after  %s", tt.sql, before, after)
		}
	}
	if after := b.state(t); after != before {
		t.Fatalf("the corpus changed the database:\n before %s\n after  %s", before, after)
	}
}

func TestTenantIsolationAndLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	count := func(tenant, sql string) string {
		res, err := b.q.Query(ctx, tenant, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return string(res.Rows[0])
	}
	if n := count("acme", "SELECT count(*) FROM audit"); n != "[3]" {
		t.Fatalf("acme sees %v audit rows", n)
	}
	if n := count("acme", "SELECT count(*) FROM audit WHERE tenant_id = 'globex'"); n != "[0]" {
		t.Fatalf("acme sees %v of globex's rows", n)
	}
	if n := count("nobody", "SELECT count(*) FROM audit"); n != "[0]" {
		t.Fatalf("an unknown tenant sees %v rows", n)
	}
	// The statement runs as the agent role, in a session of the query login.
	if who := count("acme", "SELECT current_user, session_user"); who != `["orangerail_query_agent","orangerail_query"]` {
		t.Fatalf("the statement ran as %s", who)
	}

	res, err := b.q.Query(ctx, "acme", "SELECT * FROM generate_series(1, 5000)")
	if err != nil || len(res.Rows) != sqlquery.MaxRows || res.TruncatedBy != "rows" {
		t.Fatalf("row ceiling: %v rows, truncatedBy %q, %v", len(res.Rows), res.TruncatedBy, err)
	}
	res, err = b.q.Query(ctx, "acme", "SELECT * FROM generate_series(1, 5000) LIMIT 2000")
	if err != nil || len(res.Rows) != sqlquery.MaxRows || res.TruncatedBy != "rows" {
		t.Fatalf("a LIMIT above the ceiling: %v rows, %v", len(res.Rows), err)
	}
	res, err = b.q.Query(ctx, "acme", "SELECT repeat('x', 100000) FROM generate_series(1, 10)")
	if err != nil || res.TruncatedBy != "bytes" || res.Bytes > sqlquery.MaxBytes || len(res.Rows) == 0 {
		t.Fatalf("byte cap: %d rows, %d bytes, %q, %v", len(res.Rows), res.Bytes, res.TruncatedBy, err)
	}
	// The database bounds each query's memory and temporary files.
	res, err = b.q.Query(ctx, "acme", "SELECT current_setting('work_mem'), current_setting('temp_file_limit')")
	if err != nil || string(res.Rows[0]) != `["4MB","256MB"]` {
		t.Fatalf("memory settings: %v %v", res, err)
	}
	// Wide rows spill 256MB to sort after some 32,000 of them: the limit
	// is met in about a third of a second here, far inside the statement
	// timeout even on a loaded machine (50M integers took over twice as
	// long, and under load ran into the timeout first).
	_, err = b.q.Query(ctx, "acme", "SELECT count(*) FROM (SELECT repeat('x', 8192) || g AS r FROM generate_series(1, 200000) g ORDER BY 1 DESC) s")
	var limitErr *pgconn.PgError
	if !errors.As(err, &limitErr) || limitErr.Code != "53400" {
		t.Fatalf("temp_file_limit: %v", err)
	}
	start := time.Now()
	// Long but small: a join of two short series never fills temp files.
	_, err = b.q.Query(ctx, "acme", "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("statement timeout: %v after %s", err, time.Since(start))
	}
}

// TestValuesAreCutInTheDatabase: a long value is cut by Postgres before it
// is sent — the query succeeds though the value is far larger than the
// connection accepts in one message — and the answer says which values
// were cut.
func TestValuesAreCutInTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	res, err := b.q.Query(ctx, "acme", "SELECT repeat('x', 100000000) AS huge")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.TruncatedBy != "" || res.CutChars != sqlquery.RowChars || len(res.CutValues) != 1 ||
		res.CutValues[0] != (sqlquery.CutValue{Row: 0, Column: 0}) || res.Bytes > sqlquery.MaxBytes {
		t.Fatalf("a huge value: %d rows, truncatedBy %q, cut %v to %d, %d bytes", len(res.Rows), res.TruncatedBy, res.CutValues, res.CutChars, res.Bytes)
	}
	if want := `["` + strings.Repeat("x", sqlquery.RowChars) + `"]`; string(res.Rows[0]) != want {
		t.Fatalf("the cut value is %d bytes, want the first %d characters", len(res.Rows[0]), sqlquery.RowChars)
	}

	// Each long column gets an equal share; short values are whole, and
	// bounded types are never cut.
	res, err = b.q.Query(ctx, "acme", "SELECT repeat('9', 100000)::numeric AS n, 'short' AS s, jsonb_build_object('k', repeat('é', 100000)) AS j, 7 AS i")
	if err != nil {
		t.Fatal(err)
	}
	share := sqlquery.RowChars / 3
	var row []any
	if err := json.Unmarshal(res.Rows[0], &row); err != nil {
		t.Fatal(err)
	}
	if res.CutChars != share || fmt.Sprint(res.CutValues) != "[{0 0} {0 2}]" || row[0] != strings.Repeat("9", share) || row[1] != "short" ||
		len([]rune(row[2].(string))) != share || row[3] != float64(7) {
		t.Fatalf("shares: cut %v to %d; row %.60v", res.CutValues, res.CutChars, row)
	}

	// The widest row: Postgres's most columns, every value cut to its share.
	columns := make([]string, 1664)
	for i := range columns {
		columns[i] = fmt.Sprintf("repeat('x', 1000) AS c%d", i)
	}
	res, err = b.q.Query(ctx, "acme", "SELECT "+strings.Join(columns, ", "))
	if err != nil || len(res.Rows) != 1 || len(res.CutValues) != 1664 || res.Bytes > sqlquery.MaxBytes {
		t.Fatalf("1664 columns: %v", err)
	}
	// Of four-byte characters, the same row is within the message cap but
	// beyond the answer's byte cap.
	for i := range columns {
		columns[i] = fmt.Sprintf("repeat('😀', 1000) AS c%d", i)
	}
	res, err = b.q.Query(ctx, "acme", "SELECT "+strings.Join(columns, ", "))
	if err != nil || len(res.Rows) != 0 || res.TruncatedBy != "bytes" {
		t.Fatalf("1664 columns of four-byte characters: %v", err)
	}

	// A row the byte cap leaves out ends the statement: the long rest of
	// it is not read.
	res, err = b.q.Query(ctx, "acme", "SELECT repeat('w', 100000) FROM generate_series(1, 100000)")
	if err != nil || res.TruncatedBy != "bytes" || len(res.Rows) != 2 {
		t.Fatalf("many long rows: %d rows, %q, %v", len(res.Rows), res.TruncatedBy, err)
	}
}

// TestValuesKeepTheirJSONTypes: numbers, booleans, nulls, JSON and arrays
// arrive as JSON of their kind; numbers JSON cannot spell (NaN, the
// infinities) arrive as Postgres spells them, as strings, and a numeric
// always as a string, exact.
func TestValuesKeepTheirJSONTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.q.Query(context.Background(), "acme", `SELECT 1::int2, 2::int4, 3::int8, 4::oid, 1.5::float4, 2.5::float8,
		'NaN'::float8, 'Infinity'::float8, '-Infinity'::float4, 12.340::numeric, 'NaN'::numeric, 'Infinity'::numeric, -0.5::numeric,
		true, false, NULL, NULL::int, '{"a": [1, 2]}'::jsonb, '[1, 2]'::json, ARRAY[1, 2], ARRAY['a', 'b'], ARRAY['NaN'::float8],
		'text', '', 'a"b\c', 1e300::float8`)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, res.Rows[0]); err != nil {
		t.Fatal(err)
	}
	want := `[1,2,3,4,1.5,2.5,"NaN","Infinity","-Infinity","12.340","NaN","Infinity","-0.5",true,false,null,null,{"a":[1,2]},[1,2],[1,2],["a","b"],["NaN"],"text","","a\"b\\c",1e+300]`
	if compact.String() != want {
		t.Fatalf("got  %s\nwant %s", compact.String(), want)
	}
	if len(res.Columns) != 26 || len(res.CutValues) != 0 {
		t.Fatalf("columns %v, cut %v", res.Columns, res.CutValues)
	}
	// Duplicate and odd column names are the statement's own.
	res, err = b.q.Query(context.Background(), "acme", `SELECT 1 AS a, 2 AS a, 3 AS "x""); DROP", 4`)
	if err != nil || fmt.Sprint(res.Columns) != `[{a int4} {a int4} {x"); DROP int4} {?column? int4}]` || string(res.Rows[0]) != "[1,2,3,4]" {
		t.Fatalf("names: %v %s %v", res, res.Rows, err)
	}
	// A statement of no columns.
	res, err = b.q.Query(context.Background(), "acme", "SELECT FROM audit")
	if err != nil || len(res.Columns) != 0 || len(res.Rows) != 3 || string(res.Rows[0]) != "[]" {
		t.Fatalf("no columns: %v %v", res, err)
	}
}

// TestTooLargeAMessageEndsTheQuery: a message longer than the connection
// accepts — here an error quoting a 2 MB value — ends the query with a
// clear refusal, its body unread, and the next query runs.
func TestTooLargeAMessageEndsTheQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before := b.state(t)
	_, err := b.q.Query(ctx, "acme", "SELECT repeat('1x', 1000000)::int")
	var tooLarge *sqlquery.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Bytes <= sqlquery.MaxMessageBytes {
		t.Fatalf("an over-long error: %v", err)
	}
	if res, err := b.q.Query(ctx, "acme", "SELECT 1"); err != nil || string(res.Rows[0]) != "[1]" {
		t.Fatalf("the next query: %v", err)
	}
	// A discarded connection's backend ends when it next touches its
	// socket: wait for it, so the comparison sees what it left behind.
	b.waitQueryBackendsGone(t)
	if after := b.state(t); after != before {
		t.Fatalf("the ended query left the database changed:\n before %s\n after  %s", before, after)
	}
}

// waitQueryBackendsGone waits, at most ten seconds, until no backend of the
// query role is left in the test's database.
func (b *bundle) waitQueryBackendsGone(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var n int
		err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE usename = 'orangerail_query' AND datname = current_database()`).Scan(&n)
		if err != nil {
			t.Fatalf("query backends still running after 10s (%v)", err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d query backends still running after 10s", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDatabaseRefusesWithoutTheParser: the side-effect built-ins the parse
// layer bans are not executable by the query role even when the parser is
// bypassed, and the role cannot read past its binding or leave read-only.
func TestDatabaseRefusesWithoutTheParser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	conn, err := pgx.Connect(ctx, testdb.WithUser(t, url, sqlquery.QueryRole, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	refused := []string{
		"SELECT pg_sleep(0)",
		"SELECT set_config('role', 'postgres', false)",
		"SELECT pg_advisory_lock(1)",
		"SELECT pg_advisory_xact_lock(1)",
		"SELECT pg_notify('x', 'y')",
		"SELECT query_to_xml('select 1', true, true, '')",
		"SELECT * FROM ts_stat('select ''a''::tsvector')",
		"SET ROLE orangerail_runtime",
		"INSERT INTO orangerail.query_sessions VALUES (pg_backend_pid(), now(), 'globex', now())",
		// Every advisory-lock overload, the signals, sizes and files.
		"SELECT pg_try_advisory_lock_shared(42::bigint)",
		"SELECT (42::bigint).pg_try_advisory_lock_shared",
		"SELECT pg_try_advisory_xact_lock_shared(1, 2)",
		"SELECT pg_advisory_lock_shared(1, 2)",
		"SELECT pg_advisory_xact_lock_shared(1)",
		"SELECT pg_advisory_unlock_shared(1)",
		"SELECT pg_advisory_unlock(1, 2)",
		"SELECT pg_try_advisory_xact_lock(1, 2)",
		"SELECT pg_terminate_backend(pg_backend_pid())",
		"SELECT pg_cancel_backend(pg_backend_pid())",
		"SELECT pg_relation_size('orangerail.audit')",
		"SELECT ('orangerail.audit'::regclass).pg_relation_size",
		"SELECT pg_total_relation_size('orangerail.audit')",
		"SELECT pg_table_size('orangerail.audit')",
		"SELECT pg_indexes_size('orangerail.audit')",
		"SELECT pg_database_size(current_database())",
		"SELECT pg_tablespace_size('pg_default')",
		"SELECT pg_read_file('PG_VERSION')",
		"SELECT pg_ls_dir('.')",
		"SELECT pg_stat_file('PG_VERSION')",
		// What writes though the transaction is read-only: a logical WAL
		// message (kept after the rollback), large objects; and every
		// backend's locks, pg_locks' rows.
		"SELECT pg_logical_emit_message(false, 'orangerail', 'x')",
		"SELECT pg_logical_emit_message(false, 'orangerail', 'x'::bytea)",
		"SELECT lo_from_bytea(0, 'x')",
		"SELECT lo_create(0)",
		"SELECT lo_creat(-1)",
		"SELECT lo_put(1, 0, 'x')",
		"SELECT lo_unlink(1)",
		"SELECT count(*) FROM pg_lock_status()",
		// The tool's schema's writers, which the catalog layer refuses first.
		"SELECT orangerail.audit_append('{}')",
		"SELECT orangerail.query_session_bind(1, 'globex')",
	}
	for _, sql := range refused {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, sql); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s as %s: %v, want permission denied", sql, sqlquery.QueryRole, err)
		}
	}
	// And as the role agent SQL runs as, where the Querier runs it.
	runtime := testdb.RuntimePool(t, url)
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: testdb.WithUser(t, url, sqlquery.QueryRole, ""), Store: runtime})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range refused {
		err := q.InSession(ctx, "acme", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql)
			return err
		})
		want := "42501"
		if strings.HasPrefix(sql, "INSERT") {
			want = "25006" // the read-only transaction refuses it first
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != want {
			t.Errorf("%s as %s: %v, want SQLSTATE %s", sql, sqlquery.AgentRole, err, want)
		}
	}
}

// TestOneTenantCannotSignalAnother: with the guard bypassed, and even with
// the signalling built-ins executable by PUBLIC again, one tenant's query
// cannot cancel or terminate another tenant's running query backend: agent
// SQL runs as a role without the privileges of the login all query
// backends share.
func TestOneTenantCannotSignalAnother(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	check := func(t *testing.T) {
		// globex's query waits on a lock the superuser holds, bound and running.
		release := lockAudit(t, b)
		defer func() { _ = release() }()
		done := make(chan answer, 1)
		go func() {
			res, err := b.q.Query(ctx, "globex", "SELECT count(*) FROM audit")
			done <- answer{res, err}
		}()
		var pid int32
		for pid == 0 {
			err := b.admin.QueryRow(ctx, `SELECT q.pid FROM orangerail.query_sessions q JOIN pg_locks l ON l.pid = q.pid
				WHERE q.tenant_id = 'globex' AND NOT l.granted`).Scan(&pid)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // poll gently; not an assertion
		}
		for _, signal := range []string{"pg_cancel_backend($1)", "pg_terminate_backend($1)", "pg_terminate_backend($1, 0)"} {
			err := b.q.InSession(ctx, "acme", func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT "+signal, pid)
				return err
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("acme's %s of globex's backend: %v, want permission denied", signal, err)
			}
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if a := <-done; a.err != nil || string(a.res.Rows[0]) != "[3]" {
			t.Fatalf("globex's query did not survive: %v %v", a.res, a.err)
		}
	}
	t.Run("as migrated", check)
	// Function privileges are the database's own: this test's database only.
	if _, err := b.admin.Exec(ctx, `GRANT EXECUTE ON FUNCTION pg_cancel_backend(integer), pg_terminate_backend(integer, bigint) TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	t.Run("executable by PUBLIC", check)
}

// TestOneTenantCannotHoldEverySlot: with one tenant's queries stuck (on a
// lock the superuser holds), another tenant's query still runs: a tenant
// holds at most its share of the slots.
func TestOneTenantCannotHoldEverySlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	release := lockAudit(t, b)
	defer func() { _ = release() }()
	acme := make(chan answer, sqlquery.MaxConcurrent)
	for range sqlquery.MaxConcurrent {
		go func() {
			res, err := b.q.Query(ctx, "acme", "SELECT count(*) FROM audit")
			acme <- answer{res, err}
		}()
	}
	waiting := func() int {
		var n int
		err := b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.query_sessions q JOIN pg_locks l ON l.pid = q.pid
			WHERE q.tenant_id = 'acme' AND NOT l.granted`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for waiting() < sqlquery.MaxPerTenant {
		time.Sleep(10 * time.Millisecond) // poll gently; not an assertion
	}
	globex := make(chan answer, 1)
	go func() {
		res, err := b.q.Query(ctx, "globex", "SELECT 1")
		globex <- answer{res, err}
	}()
	select {
	case a := <-globex:
		if a.err != nil || string(a.res.Rows[0]) != "[1]" {
			t.Fatalf("globex: %v %v", a.res, a.err)
		}
	case a := <-acme:
		t.Fatalf("an acme query ended (%v) before globex's was answered: globex waited for acme's slots", a.err)
	}
	if n := waiting(); n != sqlquery.MaxPerTenant {
		t.Fatalf("%d of acme's queries hold a slot, want %d", n, sqlquery.MaxPerTenant)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for range sqlquery.MaxConcurrent {
		if a := <-acme; a.err != nil || string(a.res.Rows[0]) != "[3]" {
			t.Fatalf("acme, once the lock was gone: %v %v", a.res, a.err)
		}
	}
}

// TestMigrationRevokesEveryOverload: migration 00004 finds the built-ins it
// revokes in pg_proc, every overload, and its Down gives back exactly what
// it took.
func TestMigrationRevokesEveryOverload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	// Which of the families the agent role (and so PUBLIC) may execute.
	executable := func() map[string]bool {
		rows, err := admin.Query(ctx, `SELECT p.oid::regprocedure::text, has_function_privilege($1, p.oid, 'EXECUTE')
			FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace
			AND (p.proname LIKE 'pg\_%advisory%' OR p.proname LIKE 'pg\_ls\_%' OR p.proname IN ('pg_terminate_backend', 'pg_cancel_backend',
				'pg_relation_size', 'pg_total_relation_size', 'pg_table_size', 'pg_indexes_size', 'pg_database_size', 'pg_tablespace_size',
				'pg_stat_file', 'pg_read_file', 'pg_read_binary_file'))`, sqlquery.AgentRole)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			name string
			ok   bool
		}, error) {
			var v struct {
				name string
				ok   bool
			}
			return v, r.Scan(&v.name, &v.ok)
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, v := range m {
			out[v.name] = v.ok
		}
		return out
	}
	up := executable()
	advisory := 0
	for name, ok := range up {
		if ok {
			t.Errorf("%s is executable by %s", name, sqlquery.AgentRole)
		}
		if strings.Contains(name, "advisory") {
			advisory++
		}
	}
	if advisory < 20 {
		t.Fatalf("only %d advisory-lock overloads found: %v", advisory, up)
	}

	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Down to just before 00004, whatever came after it.
	if _, err := m.DownTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	down := executable()
	for name, want := range map[string]bool{
		"pg_terminate_backend(integer,bigint)": true,  // PUBLIC's again
		"pg_try_advisory_lock_shared(bigint)":  true,  // PUBLIC's again
		"pg_relation_size(regclass)":           true,  // PUBLIC's again
		"pg_advisory_lock(bigint)":             false, // 00003 revoked it
		"pg_read_file(text)":                   false, // never PUBLIC's
		"pg_ls_dir(text)":                      false, // never PUBLIC's
	} {
		if got, ok := down[name]; !ok || got != want {
			t.Errorf("after Down, %s executable: %v (known %v), want %v", name, got, ok, want)
		}
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for name, ok := range executable() {
		if ok {
			t.Errorf("after Down and Up, %s is executable by %s", name, sqlquery.AgentRole)
		}
	}
}

// TestOtherQueriesTextIsHidden: a tenant's running query is not readable
// by another tenant's query through pg_stat_activity: the guard refuses
// the catalog, and the query role, reading it without the guard, does not
// see the text.
func TestOtherQueriesTextIsHidden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const peek = "SELECT coalesce(string_agg(query, ' '), '') FROM pg_stat_activity WHERE usename = 'orangerail_query'"
	var refusal *sqlguard.Refusal
	if _, err := b.q.Query(ctx, "acme", peek); !errors.As(err, &refusal) || refusal.Rule != sqlguard.RuleRelation {
		t.Fatalf("reading pg_stat_activity: %v, want rule %s", err, sqlguard.RuleRelation)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.q.Query(ctx, "globex", "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 1000) AS secret_marker")
		done <- err
	}()
	deadline := time.Now().Add(3 * time.Second)
	seen := false
	for time.Now().Before(deadline) && !seen {
		var text string
		err := b.q.InSession(ctx, "acme", func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, peek).Scan(&text)
		})
		if err != nil {
			t.Fatal(err)
		}
		seen = strings.Contains(text, "secret_marker")
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-done; err != nil && !strings.Contains(err.Error(), "57014") {
		t.Fatal(err)
	}
	if seen {
		t.Fatal("one tenant's query read another's SQL text from pg_stat_activity")
	}
}

// answer is what one Query returned, sent on a channel.
type answer struct {
	res *sqlquery.Result
	err error
}

// lockAudit has the superuser hold a lock on the audit table that every
// query of it waits on, and returns the func that lets go (safe to call
// more than once).
func lockAudit(t *testing.T, b *bundle) (release func() error) {
	t.Helper()
	ctx := context.Background()
	lock, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "LOCK TABLE orangerail.audit IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = lock.Rollback(ctx)
		t.Fatal(err)
	}
	return func() error { return lock.Rollback(ctx) }
}

// TestStringsAreLexedAsTheGuardLexesThem: the guard reads a statement with
// standard_conforming_strings on; where the database turned it off,
// 'x\', ' would be one string to Postgres and a string and the start of
// another to the guard, and what the guard took for a string literal — a
// catalog read, a pg_* call — would run. The session pins the setting, so
// Postgres reads the literals the guard read.
func TestStringsAreLexedAsTheGuardLexesThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, `DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET standard_conforming_strings = off', current_database()); END$$`); err != nil {
		t.Fatal(err)
	}
	// To the guard, two string literals; with the setting off, to Postgres
	// a string, a read of pg_roles and a call of pg_lock_status.
	hidden := `SELECT 'x\', ' AS a, (SELECT string_agg(rolname, ',') FROM pg_catalog.pg_roles) AS b, (SELECT count(*) FROM pg_catalog.pg_lock_status()) AS c --'`
	if _, err := sqlguard.Check(hidden, []string{"orangerail"}); err != nil {
		t.Fatalf("the guard refuses it: %v; the test shows nothing", err)
	}
	res, err := b.q.Query(ctx, "acme", hidden)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || !strings.HasPrefix(string(res.Rows[0]), `["x\\",`) || strings.Contains(string(res.Rows[0]), "orangerail_runtime") {
		t.Fatalf("the statement ran as Postgres lexes it with standard_conforming_strings off: columns %v rows %s", res.Columns, res.Rows)
	}
}
