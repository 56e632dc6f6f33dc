package database_test

import (
	"context"
	"errors"
	neturl "net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// tracer counts the statements a pool sends on their own and the batches
// it sends.
type tracer struct{ queries, batches atomic.Int32 }

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.queries.Add(1)
	return ctx
}
func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.batches.Add(1)
	return ctx
}
func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// onePool is a pool of a single connection, traced.
func onePool(t *testing.T, url string) (*pgxpool.Pool, *tracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{}
	cfg.MaxConns, cfg.ConnConfig.Tracer = 1, tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, tr
}

const settingsSQL = "SELECT current_setting('lock_timeout') || ' ' || current_setting('statement_timeout') || ' ' || current_setting('orangerail.tenant_id', true)"

// TestBoundedTransactionsSetLimitsLocally: every transaction InTenant or
// QueryInTenant begins on a bounded pool runs under its limits, set with
// the tenant in the transaction's first statement (a read stays one
// batch), and the limits end with the transaction: the pooled connection
// is left as it was.
func TestBoundedTransactionsSetLimitsLocally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := onePool(t, testdb.New(t))
	bounded := database.Bound(pool, database.Limits{LockTimeout: 1500 * time.Millisecond, StatementTimeout: 30 * time.Second})
	const want = "1500ms 30s acme"

	var got string
	err := database.InTenant(ctx, bounded, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, settingsSQL).Scan(&got)
	})
	if err != nil || got != want {
		t.Fatalf("InTenant: settings %q (%v), want %q", got, err, want)
	}
	// The scope is sent with BEGIN: BEGIN, fn's one statement, COMMIT.
	if q := tr.queries.Load(); q != 3 {
		t.Fatalf("InTenant sent %d statements for a transaction of one, want 3", q)
	}

	got = ""
	tr.queries.Store(0)
	err = database.QueryInTenant(ctx, bounded, "acme", settingsSQL, nil, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil || got != want {
		t.Fatalf("QueryInTenant: settings %q (%v), want %q", got, err, want)
	}
	if q, b := tr.queries.Load(), tr.batches.Load(); q != 0 || b != 1 {
		t.Fatalf("QueryInTenant sent %d statements and %d batches, want 0 and 1", q, b)
	}

	// The same connection, outside those transactions: the server's own.
	if err := pool.QueryRow(ctx, settingsSQL).Scan(&got); err != nil || got != "0 0 " {
		t.Fatalf("after the transactions: %q (%v)", got, err)
	}
	// A plain pool's transactions keep the server's settings.
	err = database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, settingsSQL).Scan(&got)
	})
	if err != nil || got != "0 0 acme" {
		t.Fatalf("a plain pool's transaction: %q (%v)", got, err)
	}
}

// TestBoundedWaitsFail: a statement waiting on a row another transaction
// holds fails with lock_not_available, and a statement running past its
// limit is cancelled, each with its SQLSTATE, instead of waiting.
func TestBoundedWaitsFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, "CREATE TABLE held (id int PRIMARY KEY); INSERT INTO held VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	holder, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT * FROM held WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	bounded := database.Bound(testdb.Pool(t, url), database.Limits{LockTimeout: 50 * time.Millisecond, StatementTimeout: 200 * time.Millisecond})
	tests := []struct {
		name, sql, code string
	}{
		{"a held row", "UPDATE held SET id = 1 WHERE id = 1", pgerrcode.LockNotAvailable},
		{"a long statement", "SELECT pg_sleep(60)", pgerrcode.QueryCanceled},
	}
	for _, tt := range tests {
		err := database.InTenant(ctx, bounded, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, tt.sql)
			return err
		})
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != tt.code {
			t.Errorf("%s: %v, want SQLSTATE %s", tt.name, err, tt.code)
		}
	}
}

func TestMilliseconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{0: 0, time.Nanosecond: 1, time.Millisecond: 1, 1500 * time.Microsecond: 2, 5 * time.Second: 5000} {
		if got := database.Milliseconds(d); got != want {
			t.Errorf("Milliseconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestInTenantKeepsTransactionOptions: the scope sent with BEGIN keeps what
// the caller asked of the transaction; one begun the caller's own way is
// scoped by a statement of its own.
func TestInTenantKeepsTransactionOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, testdb.New(t))
	const modeSQL = "SELECT current_setting('transaction_isolation') || ' ' || current_setting('transaction_read_only') || ' ' || current_setting('orangerail.tenant_id', true)"
	tests := []struct {
		opts pgx.TxOptions
		want string
	}{
		{pgx.TxOptions{}, "read committed off acme"},
		{pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, "repeatable read on acme"},
		{pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable}, "serializable on acme"},
		{pgx.TxOptions{BeginQuery: "begin isolation level repeatable read"}, "repeatable read off acme"},
	}
	for _, tt := range tests {
		var got string
		err := database.InTenant(ctx, pool, "acme", tt.opts, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, modeSQL).Scan(&got)
		})
		if err != nil || got != tt.want {
			t.Errorf("%+v: %q (%v), want %q", tt.opts, got, err, tt.want)
		}
	}
}

// TestInTenantWithoutFlush: the transaction that asks commits without
// waiting for a flush, and only it: the connection's next transaction
// waits again.
func TestInTenantWithoutFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := onePool(t, testdb.New(t))
	var inside, after string
	err := database.InTenantWithoutFlush(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&inside)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&after)
	})
	if err != nil || inside != "off" || after != "on" {
		t.Fatalf("synchronous_commit %q inside, %q after (%v); want off, on", inside, after, err)
	}
}

// TestRuntimeTransactionsSetTheirRole: a transaction begun on a pool Open
// made acts as the runtime role even on a connection whose session does
// not — as behind PgBouncer in transaction mode, where a transaction runs
// on whichever server connection is free, not the one that ran the SET
// ROLE on connect. A plain pool's transactions act as its login.
func TestRuntimeTransactionsSetTheirRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	one, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := one.Query()
	q.Set("pool_max_conns", "1")
	one.RawQuery = q.Encode()
	pool, err := database.Open(ctx, one.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The one connection's session drops the role it assumed.
	if _, err := pool.Exec(ctx, "RESET ROLE"); err != nil {
		t.Fatal(err)
	}
	var session string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&session); err != nil || session != "postgres" {
		t.Fatalf("the session acts as %q (%v), want postgres", session, err)
	}
	const who = "SELECT current_user::text"
	for name, p := range map[string]database.TxBeginner{"the pool": pool, "the pool, bounded": database.Bound(pool, database.Limits{LockTimeout: time.Second})} {
		var got string
		err := database.InTenant(ctx, p, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error { return tx.QueryRow(ctx, who).Scan(&got) })
		if err != nil || got != database.RuntimeRole {
			t.Errorf("InTenant on %s acts as %q (%v), want %s", name, got, err, database.RuntimeRole)
		}
	}
	var got string
	err = database.QueryInTenant(ctx, pool, "acme", who, nil, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil || got != database.RuntimeRole {
		t.Errorf("QueryInTenant acts as %q (%v), want %s", got, err, database.RuntimeRole)
	}
	plain := testdb.Pool(t, url)
	err = database.InTenant(ctx, plain, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error { return tx.QueryRow(ctx, who).Scan(&got) })
	if err != nil || got != "postgres" {
		t.Errorf("a plain pool's transaction acts as %q (%v), want postgres", got, err)
	}
}

// TestRowReader: a RowReader's QueryRow is one read-only transaction in
// one batch, scoped to its tenant and under the pool's limits; no row is
// pgx.ErrNoRows, and it makes no other statement.
func TestRowReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := onePool(t, testdb.New(t))
	bounded := database.Bound(pool, database.Limits{LockTimeout: 1500 * time.Millisecond, StatementTimeout: 30 * time.Second})
	r := database.RowReader(bounded, "acme")

	var got string
	var readOnly bool
	err := r.QueryRow(ctx, settingsSQL+", current_setting('transaction_read_only') = 'on' WHERE $1", true).Scan(&got, &readOnly)
	if err != nil || got != "1500ms 30s acme" || !readOnly {
		t.Fatalf("settings %q, read-only %v (%v), want %q read-only", got, readOnly, err, "1500ms 30s acme")
	}
	if q, b := tr.queries.Load(), tr.batches.Load(); q != 0 || b != 1 {
		t.Fatalf("a row's read sent %d statements and %d batches, want 0 and 1", q, b)
	}
	if err := r.QueryRow(ctx, "SELECT 1 WHERE false").Scan(new(int)); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("no row: %v, want pgx.ErrNoRows", err)
	}
	if _, err := r.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a RowReader ran an Exec")
	}
	if rows, err := r.Query(ctx, "SELECT 1"); err == nil {
		rows.Close()
		t.Fatal("a RowReader ran a Query")
	}
	if err := database.RowReader(bounded, "no tenant").QueryRow(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Fatal("a RowReader read in an invalid tenant")
	}
}

// TestQueryInTenantIsOneReadOnlyTransaction: in each of pgx's query exec
// modes, QueryInTenant's scope and query are one transaction — the query
// acts as the runtime role, in the tenant, under the limits, and may not
// write — and the transaction ends with the read: the connection, whose
// session dropped the role, is left with the server's settings.
func TestQueryInTenantIsOneReadOnlyTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	const sql = settingsSQL + " || ' ' || current_setting('transaction_read_only') || ' ' || current_user"
	read := func(pool database.Acquirer, sql string) (string, error) {
		var got string
		err := database.QueryInTenant(ctx, pool, "acme", sql, nil, func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&got); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		return got, err
	}
	for _, mode := range execModes {
		t.Run(mode, func(t *testing.T) {
			pool, bounded := boundedInMode(t, url, mode)
			for range 2 { // the first read prepares its statements, the second reuses them
				if got, err := read(bounded, sql); err != nil || got != "1500ms 30s acme on "+database.RuntimeRole {
					t.Fatalf("the read: %q (%v), want %q", got, err, "1500ms 30s acme on "+database.RuntimeRole)
				}
				var pgErr *pgconn.PgError
				if _, err := read(bounded, "CREATE TABLE written (id int)"); !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.ReadOnlySQLTransaction {
					t.Fatalf("a write: %v, want SQLSTATE %s", err, pgerrcode.ReadOnlySQLTransaction)
				}
				var after string
				if err := pool.QueryRow(ctx, sql).Scan(&after); err != nil || after != "0 0  off postgres" {
					t.Fatalf("the connection after the read: %q (%v), want %q", after, err, "0 0  off postgres")
				}
			}
		})
	}
}

// TestRowWriter: in each of pgx's query exec modes, a RowWriter's (and a
// RowWriterWithoutFlush's) QueryRow is one transaction sent in one batch
// that may write, acts as the runtime role in its tenant under the
// limits, commits waiting for its flush (or, without flush, not), and
// commits: its transaction id is committed once the row is read, on
// another connection. The connection is left with the server's settings,
// and a failed statement leaves nothing behind.
func TestRowWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	const sql = settingsSQL + " || ' ' || current_setting('transaction_read_only') || ' ' || current_setting('synchronous_commit') || ' ' || current_user, pg_current_xact_id()::text"
	for _, mode := range execModes {
		t.Run(mode, func(t *testing.T) {
			// One pool a mode: behind PgBouncer a second one in
			// cache_statement mode would meet the first's prepared
			// statements on the server connections they share.
			pool, bounded := boundedInMode(t, url, mode)
			for _, writer := range []struct {
				name   string
				writer func(database.Acquirer, string) store.DBTX
				commit string // synchronous_commit
			}{{"RowWriter", database.RowWriter, "on"}, {"RowWriterWithoutFlush", database.RowWriterWithoutFlush, "off"}} {
				w := writer.writer(bounded, "acme")
				want := "1500ms 30s acme off " + writer.commit + " " + database.RuntimeRole
				for range 2 { // the first prepares its statements, the second reuses them
					var got, xid string
					if err := w.QueryRow(ctx, sql).Scan(&got, &xid); err != nil || got != want {
						t.Fatalf("%s: the write: %q (%v), want %q", writer.name, got, err, want)
					}
					var status string
					if err := admin.QueryRow(ctx, "SELECT pg_xact_status($1::xid8)", xid).Scan(&status); err != nil || status != "committed" {
						t.Fatalf("%s: the write's transaction %s is %q (%v), want committed", writer.name, xid, status, err)
					}
					var pgErr *pgconn.PgError
					if err := w.QueryRow(ctx, "SELECT 1/0").Scan(new(int)); !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.DivisionByZero {
						t.Fatalf("%s: a failed write: %v, want SQLSTATE %s", writer.name, err, pgerrcode.DivisionByZero)
					}
					var after string
					if err := pool.QueryRow(ctx, settingsSQL+" || ' ' || current_setting('synchronous_commit') || ' ' || current_user").Scan(&after); err != nil || after != "0 0  on postgres" {
						t.Fatalf("%s: the connection after the write: %q (%v), want %q", writer.name, after, err, "0 0  on postgres")
					}
				}
				if _, err := w.Exec(ctx, "SELECT 1"); err == nil {
					t.Fatalf("a %s ran an Exec", writer.name)
				}
			}
		})
	}
}

// TestRowWriterSentAgainAfterADeadConnection: a write whose pooled
// connection died while idle (its backend terminated) is sent again on a
// new one and succeeds, once: its statement is repeatable, as the writer
// requires, so a second send is safe however far the first got.
func TestRowWriterSentAgainAfterADeadConnection(t *testing.T) {
	t.Parallel()
	if testdb.Bouncing() {
		t.Skip("kills the backend its connection reports, which behind PgBouncer leaves that connection alive; the run without PgBouncer runs it")
	}
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	pool := openInMode(t, url, "cache_statement", "pool_max_conns", "1")
	w := database.RowWriterWithoutFlush(pool, "acme")
	var before int32
	if err := w.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", before).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the backend: %v %v", ok, err)
	}
	var after int32
	if err := w.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&after); err != nil || after == before {
		t.Fatalf("the write after its connection died: backend %d (was %d): %v; want a new backend", after, before, err)
	}
}

// TestQueryInTenantAllocations bounds what a read on a bounded runtime
// pool allocates, the server's most frequent call into Postgres: a scope
// statement built per read (some fifteen allocations), or statements of
// their own again for BEGIN READ ONLY and COMMIT (eighty-four in all, with
// both), go over it. Not parallel: AllocsPerRun counts the whole
// process's allocations.
func TestQueryInTenantAllocations(t *testing.T) {
	ctx := context.Background()
	pool := database.Bound(testdb.RuntimePool(t, testdb.New(t)), database.Limits{LockTimeout: time.Second, StatementTimeout: 5 * time.Second})
	var got int
	read := func() {
		err := database.QueryInTenant(ctx, pool, "acme", "SELECT $1::int", []any{1}, func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&got); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		if err != nil || got != 1 {
			t.Fatalf("read %d: %v", got, err)
		}
	}
	read() // prepares the statements
	const bound = 52
	if n := testing.AllocsPerRun(200, read); n > bound {
		t.Fatalf("a read allocates %v times, want at most %d", n, bound)
	}
}

// boundedInMode opens a runtime pool of one connection on url in pgx's
// exec mode, its session's role reset, so that what a transaction sets
// locally is what it shows, and bounds it by a 1500ms lock timeout and a
// 30s statement timeout.
func boundedInMode(t *testing.T, url, mode string) (*pgxpool.Pool, *database.Bounded) {
	t.Helper()
	pool := openInMode(t, url, mode, "pool_max_conns", "1")
	if _, err := pool.Exec(context.Background(), "RESET ROLE"); err != nil {
		t.Fatal(err)
	}
	return pool, database.Bound(pool, database.Limits{LockTimeout: 1500 * time.Millisecond, StatementTimeout: 30 * time.Second})
}

// execModes are pgx's query exec modes, as a database URL names them.
var execModes = []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"}

// openInMode opens a runtime pool on url whose statements run in pgx's
// exec mode, with the further URL parameters given as name, value pairs;
// the test closes it.
func openInMode(t *testing.T, url, mode string, params ...string) *pgxpool.Pool {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	pool, err := database.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
