package database_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestHardeningGapsNameTheLockAnAuditorStillStalls: since migration 00065
// the sweep and the checkpoint signer lock rows no auditor may lock, and
// since 00068 so do an execution's end and an operator's settle of it
// (00063's trigger, AuditSettleLock): the server takes no advisory lock,
// so an auditor granted one stalls none of the server's work, as
// hardening_gaps said it did (the settle lock, after 00066). What it can
// still stall are the operator's commands that take one: `orangerail
// migrate` and the grant or revoke of an auditor login.
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
	if len(got) != 1 || strings.Contains(got[0], "settle") || strings.Contains(got[0], "checkpoint signing and sweep") ||
		!strings.Contains(got[0], "the server takes no advisory lock") || !strings.Contains(got[0], "orangerail migrate") ||
		!strings.Contains(got[0], "revoke of an auditor login") {
		t.Fatalf("the auditor's advisory lock is listed as %q; want no lock of the server's named (it takes none), the operator's commands it can still stall named", got)
	}
}
