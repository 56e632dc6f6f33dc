package database_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestTenantPatternMatchesConstraint holds ValidateTenantID and the
// tenants_id_format check constraint to one rule.
func TestTenantPatternMatchesConstraint(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.New(t))
	samples := []string{
		"acme", "a", "A9", "org_123", "t.e-s.t_x", "0", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"", "-acme", "_a", "acme corp", "acme/1", "ümlaut", "a\x00b", "a\nb", "a'b", `a"b`, "a;DROP",
		"a:b", "ops@acme", "acme\n", "acme$",
	}
	for _, s := range samples {
		goOK := database.ValidateTenantID(s) == nil
		_, err := pool.Exec(context.Background(), "INSERT INTO orangerail.tenants (id) VALUES ($1)", s)
		if dbOK := err == nil; goOK != dbOK {
			t.Errorf("tenant %q: Go accepts=%v, database accepts=%v (%v)", s, goOK, dbOK, err)
		}
	}
}

// TestTenantIDsHoldNoSeparator: ':' and '@' (which keys and subjects use
// as separators) are not tenant id characters, in Go or in the database.
func TestTenantIDsHoldNoSeparator(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a:b", "acme:eu", "ops@acme", "a@b:c"} {
		if database.ValidateTenantID(id) == nil {
			t.Errorf("tenant id %q was accepted", id)
		}
	}
}

// TestTenantIDMigrationRefusesOldIDs: a database holding a tenant id the
// new alphabet refuses is not migrated, and is told which ids and what to
// do; once they are gone the migration applies, and goes down again.
func TestTenantIDMigrationRefusesOldIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	m, err := database.NewMigrator(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	pool := testdb.Pool(t, url)
	// Tenant ids the old alphabet allowed.
	if _, err := pool.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('acme'), ('acme:eu'), ('ops@acme')"); err != nil {
		t.Fatal(err)
	}
	_, err = m.Up(ctx)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" || !strings.Contains(pgErr.Message, "2 tenant id(s)") ||
		!strings.Contains(pgErr.Message, "'acme:eu'") || !strings.Contains(pgErr.Hint, "SELECT id FROM orangerail.tenants") {
		t.Fatalf("migrating a database with old tenant ids: %v", err)
	}
	var kept int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM orangerail.tenants").Scan(&kept); err != nil || kept != 3 {
		t.Fatalf("the refused migration changed the tenants: %d %v", kept, err)
	}

	if _, err := pool.Exec(ctx, "DELETE FROM orangerail.tenants WHERE id <> 'acme'"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("migrating once the old ids are gone: %v", err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('acme:eu')"); err == nil {
		t.Fatal("the database accepted a tenant id with ':'")
	}
	if _, err := m.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('acme:eu')"); err != nil {
		t.Fatalf("down did not restore the old alphabet: %v", err)
	}
}

//

// TestQueryInTenantFailureKeepsConnection holds a failed read to leaving
// its pooled connection reusable: a statement Postgres refuses must end the
// read's transaction, not the connection. Ten failures and ten successes on
// a pool of one connection open that connection once.
func TestQueryInTenantFailureKeepsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	read := func(sql string, args ...any) (int32, error) {
		var pid int32
		err := database.QueryInTenant(ctx, pool, "acme", sql, args, func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&pid); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		return pid, err
	}
	failing := []struct {
		name, sql string
		args      []any
	}{
		{"a value the column's type cannot hold", "SELECT pg_backend_pid() WHERE now() > $1::timestamptz", []any{"not-a-time"}},
		{"an error while rows are read", "SELECT pg_backend_pid() / (g - 2) FROM generate_series(1, 3) g", nil},
		{"a statement that does not parse", "SELEC 1", nil},
	}
	pids := map[int32]bool{}
	for i := range 10 {
		f := failing[i%len(failing)]
		if _, err := read(f.sql, f.args...); err == nil {
			t.Fatalf("%s: no error", f.name)
		}
		pid, err := read("SELECT pg_backend_pid()")
		if err != nil {
			t.Fatalf("the read after %s: %v", f.name, err)
		}
		pids[pid] = true
		// The connection is back in the pool, idle and outside any
		// transaction.
		if got := pool.Stat().IdleConns(); got != 1 {
			t.Fatalf("after %s: %d idle connections, want 1", f.name, got)
		}
	}
	if n := pool.Stat().NewConnsCount(); n != 1 || len(pids) != 1 {
		t.Fatalf("10 failed and 10 good reads opened %d connections on %d backends, want 1", n, len(pids))
	}
}

// TestAfterCommit: what AfterCommit registers on InTenant's transaction
// runs once it committed — after the commit, in order — and never when it
// rolls back, on an error or a panic.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	var ran []string
	err := database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		database.AfterCommit(tx, func() { ran = append(ran, "first") })
		database.AfterCommit(tx, func() { ran = append(ran, "second") })
		if len(ran) != 0 {
			t.Error("ran before the commit")
		}
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	if err != nil || strings.Join(ran, ",") != "first,second" {
		t.Fatalf("after a commit: %v %v", ran, err)
	}

	ran = nil
	_ = database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		database.AfterCommit(tx, func() { ran = append(ran, "failed") })
		return errors.New("rolled back")
	})
	func() {
		defer func() { _ = recover() }()
		_ = database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			database.AfterCommit(tx, func() { ran = append(ran, "panicked") })
			panic("rolled back")
		})
	}()
	if len(ran) != 0 {
		t.Fatalf("ran after a rollback: %v", ran)
	}
}

// TestConfirmCommit: a transaction whose backend dies as its COMMIT is
// sent did not commit. With ConfirmCommit — its own round trip, or read
// with a Queue's statements — InTenant asks Postgres and says so
// (ErrNotCommitted), running nothing AfterCommit registered; without, the
// COMMIT's error is all it has: it cannot tell.
func TestConfirmCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	const insert = "INSERT INTO orangerail.tenants (id) VALUES ($1)"
	for _, tenant := range []string{"confirmed", "queued", "unconfirmed"} {
		confirm := tenant != "unconfirmed"
		ran := false
		err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			database.AfterCommit(tx, func() { ran = true })
			switch tenant {
			case "queued":
				var q database.Queue
				_, _ = q.Exec(ctx, insert, tenant)
				q.ConfirmCommit(tx, tenantWitness(tenant))
				if _, err := q.Send(ctx, tx); err != nil {
					return err
				}
			default:
				if _, err := tx.Exec(ctx, insert, tenant); err != nil {
					return err
				}
				if confirm {
					if err := database.ConfirmCommit(ctx, tx, tenantWitness(tenant)); err != nil {
						return err
					}
				}
			}
			// The backend dies before the COMMIT reaches it.
			var ok bool
			if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", int32(tx.Conn().PgConn().PID())).Scan(&ok); err != nil || !ok { //nolint:gosec // G115: a backend pid fits
				t.Fatalf("terminate the backend: %v %v", ok, err)
			}
			return nil
		})
		if err == nil || errors.Is(err, database.ErrNotCommitted) != confirm {
			t.Errorf("%s: %v, want ErrNotCommitted only when confirmed", tenant, err)
		}
		if ran {
			t.Errorf("%s: what AfterCommit registered ran for a transaction that did not commit", tenant)
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM orangerail.tenants WHERE id = $1", tenant).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of the transaction: %v", tenant, n, err)
		}
	}
}

// tenantWitness sees the row of orangerail.tenants a test's transaction
// inserts, named for its tenant.
func tenantWitness(tenant string) database.Witness {
	return func(ctx context.Context, tx pgx.Tx) (bool, error) {
		var seen bool
		err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM orangerail.tenants WHERE id = $1)", tenant).Scan(&seen)
		return seen, err
	}
}

// seen is a witness that always sees the transaction's writes.
func seen(context.Context, pgx.Tx) (bool, error) { return true, nil }

// TestConfirmTellsAnothersCommit: a failed COMMIT whose transaction id
// reads as committed is confirmed only when the witness, read in the
// transaction's tenant, sees its writes. A server that crashed before the
// COMMIT reached its disk recovers without the transaction and may give
// its id to the next one: pg_xact_status then says "committed" of that
// other transaction, and the witness, finding nothing, says the asked one
// did not commit. Played here with the id of another committed
// transaction, which is what such a server answers for.
func TestConfirmTellsAnothersCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	const identify = "SELECT pg_current_xact_id()::text, extract(epoch FROM pg_postmaster_start_time())::text"
	// insert commits (or not) a transaction of tenant adding a tenants
	// row named id, and returns its transaction id and server run.
	insert := func(tenant, id string, commit bool) (xid, server string) {
		err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ($1)", id); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, identify).Scan(&xid, &server); err != nil {
				return err
			}
			if !commit {
				return errRolledBack
			}
			return nil
		})
		if err != nil && !errors.Is(err, errRolledBack) {
			t.Fatal(err)
		}
		return xid, server
	}
	ours, server := insert("acme", "ours", true)
	anothers, _ := insert("acme", "anothers", true)
	aborted, _ := insert("acme", "aborted", false)
	// inScope is tenantWitness(id), failing unless read in acme's scope.
	inScope := func(id string) database.Witness {
		return func(ctx context.Context, tx pgx.Tx) (bool, error) {
			var tenant string
			if err := tx.QueryRow(ctx, "SELECT current_setting('orangerail.tenant_id', true)").Scan(&tenant); err != nil {
				return false, err
			}
			if tenant != "acme" {
				return false, fmt.Errorf("the witness read in tenant %q's scope, not acme's", tenant)
			}
			return tenantWitness(id)(ctx, tx)
		}
	}
	failing := func(context.Context, pgx.Tx) (bool, error) { return false, errors.New("the witness could not read") }
	lost := errors.New("the COMMIT's answer never came")
	for _, c := range []struct {
		name    string
		xid     string
		witness database.Witness
		// want: nil (committed), ErrNotCommitted, or lost as it was
		// (Postgres cannot tell).
		want error
	}{
		{"its own commit, seen", ours, inScope("ours"), nil},
		{"another's commit under its id", anothers, inScope("lost"), database.ErrNotCommitted},
		{"aborted", aborted, inScope("aborted"), database.ErrNotCommitted},
		{"a witness that fails", ours, failing, lost},
	} {
		err := database.Confirm(ctx, pool, "acme", c.xid, server, c.witness, lost)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want confirmed", c.name, err)
		case c.want == database.ErrNotCommitted && (!errors.Is(err, database.ErrNotCommitted) || !errors.Is(err, lost)): //nolint:errorlint // which answer the case wants
			t.Errorf("%s: %v, want ErrNotCommitted wrapping the COMMIT's error", c.name, err)
		case c.want == lost && err != lost: //nolint:errorlint // the COMMIT's error itself, unwrapped
			t.Errorf("%s: %v, want the COMMIT's error as it was", c.name, err)
		}
	}
}

// errRolledBack rolls a test's transaction back.
var errRolledBack = errors.New("rolled back")

// TestCommitStatusOnItsServerOnly: a transaction's status is read from the
// server run it ran on — committed, aborted — and from no other: a server
// whose postmaster started at another time (a standby a failover promoted,
// a restart) may never have seen the id, or given it again to another
// transaction, so it gives no verdict; nor does an id the server never
// gave (Postgres refuses it, 22023), which confirm must not take for
// "not yet".
func TestCommitStatusOnItsServerOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	const identify = "SELECT pg_current_xact_id()::text, extract(epoch FROM pg_postmaster_start_time())::text"
	run := func(commit bool) (xid, server string) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := tx.QueryRow(ctx, identify).Scan(&xid, &server); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return xid, server
	}
	committed, server := run(true)
	aborted, _ := run(false)
	for _, c := range []struct{ xid, want string }{{committed, "committed"}, {aborted, "aborted"}} {
		if got, err := database.CommitStatus(ctx, pool, "", c.xid, server, seen); err != nil || got != c.want {
			t.Errorf("the status of transaction %s on its server: %q (%v), want %q", c.xid, got, err, c.want)
		}
	}
	next, err := strconv.ParseUint(committed, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ xid, server string }{
		"another server run": {committed, server + "1"},
		"an id never given":  {strconv.FormatUint(next+1_000_000, 10), server},
	} {
		if got, err := database.CommitStatus(ctx, pool, "", c.xid, c.server, seen); !errors.Is(err, database.ErrNoVerdict) {
			t.Errorf("%s: %q (%v), want no verdict", name, got, err)
		}
	}
}

// TestRepeatable: a transaction marked Repeatable whose backend dies under
// it, between its statements or at its COMMIT, runs once more and commits
// once; never a third time; and a transaction not so marked fails as
// before.
func TestRepeatable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	type death int
	const (
		midway   death = iota // between two of fn's statements
		atCommit              // after fn's last statement, before the COMMIT
	)
	tests := []struct {
		name       string
		readOnly   bool
		repeatable bool
		dies       death
		deaths     int // on how many runs the backend dies
		runs       int
		fails      bool
	}{
		{name: "repeatable write, died midway", repeatable: true, dies: midway, deaths: 1, runs: 2},
		{name: "write, died midway", dies: midway, deaths: 1, runs: 1, fails: true},
		{name: "repeatable write, died at its commit", repeatable: true, dies: atCommit, deaths: 1, runs: 2},
		{name: "write, died at its commit", dies: atCommit, deaths: 1, runs: 1, fails: true},
		{name: "repeatable read, died at its commit", readOnly: true, repeatable: true, dies: atCommit, deaths: 1, runs: 2},
		{name: "read, died at its commit", readOnly: true, dies: atCommit, deaths: 1, runs: 1, fails: true},
		{name: "repeatable write, died twice", repeatable: true, dies: midway, deaths: 2, runs: 2, fails: true},
	}
	for i, tt := range tests {
		tenant := fmt.Sprintf("repeatable-%d", i)
		opts := pgx.TxOptions{}
		if tt.readOnly {
			opts.AccessMode = pgx.ReadOnly
		}
		runs := 0
		err := database.InTenant(ctx, pool, tenant, opts, func(tx pgx.Tx) error {
			runs++
			if tt.repeatable {
				database.Repeatable(tx)
			}
			statement := "SELECT 1"
			if !tt.readOnly {
				statement = "INSERT INTO orangerail.tenants (id) VALUES ('" + tenant + "')"
			}
			if _, err := tx.Exec(ctx, statement); err != nil {
				return err
			}
			if runs > tt.deaths {
				return nil
			}
			var ok bool
			if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", int32(tx.Conn().PgConn().PID())).Scan(&ok); err != nil || !ok { //nolint:gosec // G115: a backend pid fits
				t.Fatalf("%s: terminate the backend: %v %v", tt.name, ok, err)
			}
			if tt.dies == midway {
				_, err := tx.Exec(ctx, "SELECT 1")
				return err
			}
			return nil
		})
		if (err != nil) != tt.fails || runs != tt.runs {
			t.Errorf("%s: fn ran %d times and InTenant returned %v; want %d runs, failing %v", tt.name, runs, err, tt.runs, tt.fails)
		}
		if tt.readOnly {
			continue
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM orangerail.tenants WHERE id = $1", tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[tt.fails]; n != want {
			t.Errorf("%s: %d rows committed, want %d", tt.name, n, want)
		}
	}
}

// TestQueryInTenantRepeated: a pipelined read whose backend dies after its
// first rows reached the caller is read once more, and rows sees the new
// read whole; a read that dies again fails.
func TestQueryInTenantRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	// Rows large enough to leave the server's send buffer, the first two
	// at once and the third after a pause: the first is the caller's
	// while the statement still runs.
	const sql = `SELECT pg_backend_pid(), repeat('x', 65536)
		FROM generate_series(1, 3) g, LATERAL (SELECT pg_sleep(CASE WHEN g = 3 THEN 2 ELSE 0 END)) AS pause`
	for _, deaths := range []int{1, 2} {
		runs, got := 0, 0
		err := database.QueryInTenant(ctx, pool, "query-repeated", sql, nil, func(rows pgx.Rows) error {
			runs++
			got = 0
			for rows.Next() {
				var pid int32
				var filler string
				if err := rows.Scan(&pid, &filler); err != nil {
					return err
				}
				got++
				if got == 1 && runs <= deaths {
					var ok bool
					if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
						t.Fatalf("terminate the backend: %v %v", ok, err)
					}
				}
			}
			return rows.Err()
		})
		switch {
		case deaths == 1 && (err != nil || runs != 2 || got != 3):
			t.Errorf("died once: %d reads, %d rows of the last: %v; want 2 reads, 3 rows", runs, got, err)
		case deaths == 2 && (err == nil || runs != 2):
			t.Errorf("died twice: %d reads: %v; want 2 reads and an error", runs, err)
		}
	}
}
