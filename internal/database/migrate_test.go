package database_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestMigrationsGoDownToZeroAndUpAgain runs every Down migration, newest
// first, on a migrated database, and then every Up again: each Down undoes
// its Up well enough for the Up to apply anew.
func TestMigrationsGoDownToZeroAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewEmpty(t)
	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var schemaLeft bool
	if err := testdb.Pool(t, url).QueryRow(ctx, "SELECT to_regnamespace('orangerail') IS NOT NULL").Scan(&schemaLeft); err != nil || schemaLeft {
		t.Fatalf("after going down to zero the orangerail schema is still there (%v)", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v, err := m.Version(ctx); err != nil || v != m.Latest() {
		t.Fatalf("version %d (%v), want %d", v, err, m.Latest())
	}
}

// TestDatabasesOfOneClusterMigrateAtOnce: several databases of one cluster
// (an instance each) migrated at the same time all migrate. Roles are the
// cluster's: two migrations changing one role at once make Postgres fail
// the second ("tuple concurrently updated"), which Up runs again.
func TestDatabasesOfOneClusterMigrateAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for round := range 2 {
		urls := make([]string, 4)
		for i := range urls {
			urls[i] = testdb.NewEmpty(t)
		}
		errs := make([]error, len(urls))
		var wg sync.WaitGroup
		for i, url := range urls {
			wg.Go(func() { errs[i] = database.MigrateUp(ctx, url) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, database %d: %v", round, i, err)
			} else if err := database.CheckCurrent(ctx, urls[i]); err != nil {
				t.Errorf("round %d, database %d: %v", round, i, err)
			}
		}
	}
}

// TestHardeningGapsListRolePowers: a role orangerail relies on, or a login
// reading as an auditor, that bypasses Row Level Security or reaches every
// table is listed among the hardening gaps, with the statement that
// removes the power (the migrations keep a role made beforehand as it
// is), a login in orangerail_auditor through a group too. The roles are made, and asked about, in a transaction rolled back:
// roles are the cluster's, and other tests list its gaps meanwhile.
func TestHardeningGapsListRolePowers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Pool(t, testdb.New(t))
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing of the test's is kept
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	bypasser, reader, auditor, plain := "gaps_bypass_"+suffix, "gaps_read_"+suffix, "gaps_auditor_"+suffix, "gaps_plain_"+suffix
	group, grouped := "gaps_group_"+suffix, "gaps_grouped_"+suffix
	if _, err := tx.Exec(ctx, "CREATE ROLE "+bypasser+" BYPASSRLS; CREATE ROLE "+reader+" IN ROLE pg_read_all_data; CREATE ROLE "+plain+
		"; CREATE ROLE "+auditor+" LOGIN BYPASSRLS IN ROLE orangerail_auditor; CREATE ROLE "+group+" IN ROLE orangerail_auditor"+
		"; CREATE ROLE "+grouped+" LOGIN BYPASSRLS IN ROLE "+group); err != nil {
		t.Fatal(err)
	}
	gaps := func(sql string, args ...any) string {
		t.Helper()
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var gap, fix string
			err := r.Scan(&gap, &fix)
			return gap + ": " + fix, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, "\n")
	}
	for role, want := range map[string]string{
		bypasser: bypasser + " bypasses Row Level Security (BYPASSRLS): it reads every tenant: ALTER ROLE " + bypasser + " NOBYPASSRLS;",
		reader:   reader + " is a member of pg_read_all_data: it reaches every table of the database: REVOKE pg_read_all_data FROM " + reader + ";",
		plain:    "",
	} {
		if got := gaps("SELECT * FROM orangerail.role_power_gaps($1)", role); !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", role, got, want)
		}
	}
	got := gaps("SELECT * FROM orangerail.hardening_gaps()")
	for _, login := range []string{auditor, grouped} {
		if !strings.Contains(got, login+" bypasses Row Level Security") {
			t.Errorf("hardening_gaps does not list %s, a login reading as an auditor that bypasses Row Level Security:\n%s", login, got)
		}
	}
	// The superuser that migrated the database is none of them.
	if strings.Contains(got, "is a superuser") {
		t.Errorf("hardening_gaps lists a superuser:\n%s", got)
	}
}

// TestHardeningGapsListAnAuditorsLocks: a grant of one of the server's
// coordination built-ins (an advisory lock, pg_notify) to
// orangerail_auditor — the migrations revoke them — is a hardening gap,
// with the REVOKE that ends it; one of the reads (set_config) is not. In
// a transaction rolled back: other tests list the gaps meanwhile.
func TestHardeningGapsListAnAuditorsLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Pool(t, testdb.New(t))
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing of the test's is kept
	gaps := func() []string {
		t.Helper()
		rows, err := tx.Query(ctx, "SELECT gap || ': ' || fix FROM orangerail.hardening_gaps() WHERE gap LIKE 'orangerail_auditor may%'")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := gaps(); len(got) != 0 {
		t.Fatalf("a database just migrated lists %q", got)
	}
	if _, err := tx.Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint), pg_catalog.pg_notify(text, text), pg_catalog.set_config(text, text, boolean) TO orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	got := gaps()
	if len(got) != 2 || !strings.HasPrefix(got[0], "orangerail_auditor may execute pg_catalog.pg_advisory_lock(bigint)") ||
		!strings.HasSuffix(got[0], ": REVOKE EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) FROM orangerail_auditor;") ||
		!strings.HasPrefix(got[1], "orangerail_auditor may execute pg_catalog.pg_notify(text,text)") {
		t.Fatalf("the auditor's grants listed as %q", got)
	}
	for _, g := range got {
		_, fix, _ := strings.Cut(g, ": REVOKE")
		if _, err := tx.Exec(ctx, "REVOKE"+fix); err != nil {
			t.Fatal(err)
		}
	}
	if got := gaps(); len(got) != 0 {
		t.Fatalf("once fixed, %q", got)
	}
}

// TestRollbackKeepsTheEvidence: no rollback drops what an incident is read
// from. migrate down to zero ran 00001's Down, DROP SCHEMA orangerail
// CASCADE, whatever the audit log held, and 00016's dropped the signed
// checkpoints: each is refused, X_ROLLBACK_REFUSED, once its table holds
// rows, the owner's row security notwithstanding, and nothing changes.
func TestRollbackKeepsTheEvidence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewEmpty(t)
	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	pool := testdb.Pool(t, url)
	entry := `{"v":1,"tenant":"acme","at":"2026-12-06T05:30:00.000000Z","correlation_id":"c-1","phase":"staged","actor":{"kind":"agent","subject":"agent-7"},"dev_mode":false}`
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('orangerail.tenant_id', 'acme', true)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT orangerail.audit_append(convert_to($1, 'UTF8'))", entry); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := m.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 0); errcode.Of(err) != errcode.RollbackRefused || !strings.Contains(err.Error(), "the audit log") {
		t.Fatalf("DownTo(0) = %v, want X_ROLLBACK_REFUSED naming the audit log", err)
	}
	if v, err := m.Version(ctx); err != nil || v != before {
		t.Fatalf("a refused rollback left version %d (%v), want %d", v, err, before)
	}
	// Down to just past 00016 is the operator's to make; 00016's own is
	// refused once a checkpoint is kept.
	if _, err := m.DownTo(ctx, 16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO orangerail.audit_checkpoints (tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note)
		VALUES ('acme', 1, decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'), 'orangerail/test/acme', 'test', 1, 'test+00000001+AAAA', 'note')`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Down(ctx); errcode.Of(err) != errcode.RollbackRefused || !strings.Contains(err.Error(), "checkpoints") {
		t.Fatalf("Down past 00016 = %v, want X_ROLLBACK_REFUSED naming the checkpoints", err)
	}
	if v, err := m.Version(ctx); err != nil || v != 16 {
		t.Fatalf("version %d (%v), want 16", v, err)
	}
}
