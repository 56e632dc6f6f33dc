package database_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestOpenNamesAMissingRoleGrant: a login that may read the schema version
// but not assume orangerail_runtime is refused by Open with the code that
// says so, and by OpenAuditor until it is an auditor.
func TestOpenNamesAMissingRoleGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "orangerail_outsider_" + hex.EncodeToString(suffix)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN; GRANT SELECT ON orangerail_schema_version TO "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "REVOKE ALL ON orangerail_schema_version FROM "+ident+"; DROP ROLE IF EXISTS "+ident)
	})
	pool, err := database.Open(ctx, testdb.WithUser(t, url, name, ""))
	if err == nil {
		pool.Close()
	}
	if errcode.Of(err) != errcode.DatabaseRoleMissing {
		t.Fatalf("Open as %s: %v, want %s", name, err, errcode.DatabaseRoleMissing)
	}
	// Nor is it an auditor; once it is one, OpenAuditor's pool acts as it.
	pool, err = database.OpenAuditor(ctx, testdb.WithUser(t, url, name, ""))
	if err == nil {
		pool.Close()
	}
	if errcode.Of(err) != errcode.DatabaseRoleMissing {
		t.Fatalf("OpenAuditor as %s: %v, want %s", name, err, errcode.DatabaseRoleMissing)
	}
	if _, err := admin.Exec(ctx, "GRANT "+database.AuditorRole+" TO "+ident); err != nil {
		t.Fatal(err)
	}
	pool, err = database.OpenAuditor(ctx, testdb.WithUser(t, url, name, ""))
	if err != nil {
		t.Fatalf("OpenAuditor as the auditor %s: %v", name, err)
	}
	defer pool.Close()
	var user string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != name {
		t.Fatalf("OpenAuditor's connection acts as %q (%v), want %s", user, err, name)
	}
}

// TestPoolsKeepDeadlines: the connections of the pools Open and
// OpenDatasource make keep a bounded transaction's deadline while it runs
// (deadlineKeeper: a statement whose context ends does not lift it), the
// one Deadline tells the transaction, and none once it ended.
func TestPoolsKeepDeadlines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	for name, open := range map[string]func(context.Context, string, ...database.Option) (*pgxpool.Pool, error){
		"Open": database.Open, "OpenDatasource": database.OpenDatasource,
	} {
		pool, err := open(ctx, url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer pool.Close()
		limits := database.Limits{LockTimeout: time.Second, StatementTimeout: 2 * time.Second}
		var conn *pgconn.PgConn
		began := time.Now()
		err = database.InTenant(ctx, database.Bound(pool, limits), "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			conn = tx.Conn().PgConn()
			kept, ok := database.KeptDeadline(conn)
			// lock timeout, two statement timeouts and the grace: 10s
			if !ok || kept.Before(began.Add(10*time.Second)) || kept.After(time.Now().Add(10*time.Second)) {
				t.Errorf("%s: a bounded transaction's connection keeps %v (a keeper: %v), want about %v", name, kept, ok, began.Add(10*time.Second))
			}
			// The transaction knows the deadline its connection keeps.
			if until, ok := database.Deadline(tx); !ok || !until.Equal(kept) {
				t.Errorf("%s: Deadline says %v (%v), the connection keeps %v", name, until, ok, kept)
			}
			_, err := tx.Exec(ctx, "SELECT 1")
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if kept, ok := database.KeptDeadline(conn); !ok || !kept.IsZero() {
			t.Errorf("%s: after its transaction the connection keeps %v (a keeper: %v), want none", name, kept, ok)
		}
	}
}
