package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
)

// TestAuditorWithAdvisoryLocksStallsNeitherSweepNorSigning: where the
// migrations ran as a login that is no superuser, the advisory-lock
// built-ins stay executable by orangerail_auditor (by PUBLIC, or a grant
// the owner cannot revoke: 00055 only warns, hardening_gaps lists it).
// An auditor login then held the very locks the server keyed on a
// tenant's id alone, for as long as its session lasted: the tenant's
// sweep was skipped every round and its checkpoints failed to sign. The
// sweep and the signer now coordinate on rows no auditor may lock, so
// whatever advisory locks an auditor holds, both run.
func TestAuditorWithAdvisoryLocksStallsNeitherSweepNorSigning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendBulk(t, b.runtime, "acme", 0, 3)
	appendBulk(t, b.runtime, "globex", 0, 1)
	// What a migration by a login that is no superuser leaves.
	if _, err := b.admin.Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) TO orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	auditor := auditorLogin(t, b, "globex")
	for _, lock := range []string{"orangerail checkpoint sign acme", "orangerail approval sweep acme"} {
		if _, err := auditor.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", lock); err != nil {
			t.Fatalf("the auditor could not take %q as such a database lets it: %v", lock, err)
		}
	}
	var swept bool
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		swept, err = store.New(tx).ApprovalSweepLock(ctx, "acme")
		return err
	}); err != nil || !swept {
		t.Fatalf("acme's sweep beside an auditor holding advisory locks: may run %v (%v)", swept, err)
	}
	signer, _ := signingKey(t, "orangerail.test")
	signCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c, err := engine.SignCheckpoint(signCtx, b.runtime, "acme", signer, testDeployment); err != nil || c == nil || c.Size != 3 {
		t.Fatalf("acme's checkpoint beside an auditor holding advisory locks: %+v, %v", c, err)
	}
}
