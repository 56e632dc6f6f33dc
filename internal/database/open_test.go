package database_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestOpenNamesAMissingRoleGrant: a login that may read the schema version
// but not assume orangerail_runtime is refused by Open with the code that
// says so.
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
}
