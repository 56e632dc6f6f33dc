package database_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestHardeningGapsNameTheLockAnAuditorStillStalls: since migration 00065
// the sweep and the checkpoint signer lock rows no auditor may lock, so an
// auditor granted an advisory lock stalls neither, as hardening_gaps still
// said it did; what it can stall is the one advisory lock the server still
// takes, the settle lock every execution's end record waits on (migration
// 00063's trigger, AuditSettleLock), which hardening_gaps did not name: an
// operator read a gap whose harm was gone and not the one left.
func TestHardeningGapsNameTheLockAnAuditorStillStalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Pool(t, testdb.New(t))
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing of the test's is kept
	if _, err := tx.Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) TO orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "SELECT gap FROM orangerail.hardening_gaps() WHERE gap LIKE 'orangerail_auditor may execute pg_catalog.pg_advisory_lock(bigint)%'")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "settle") || strings.Contains(got[0], "checkpoint signing and sweep") {
		t.Fatalf("the auditor's advisory lock is listed as %q; want the settle lock it can still hold named, not the signing and sweep it no longer stalls", got)
	}
}
