package database_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
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
		"acme", "a", "A9", "org_123", "t.e-s:t@x", "0", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"", "-acme", "_a", "acme corp", "acme/1", "ümlaut", "a\x00b", "a\nb", "a'b", `a"b`, "a;DROP",
	}
	for _, s := range samples {
		goOK := database.ValidateTenantID(s) == nil
		_, err := pool.Exec(context.Background(), "INSERT INTO orangerail.tenants (id) VALUES ($1)", s)
		if dbOK := err == nil; goOK != dbOK {
			t.Errorf("tenant %q: Go accepts=%v, database accepts=%v (%v)", s, goOK, dbOK, err)
		}
	}
}

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
