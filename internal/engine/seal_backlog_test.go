package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
)

// TestSealerDrainsABacklogUnderAShortStatementTimeout: a backlog of
// unsealed records (a burst of writes, a database hiccup the sealer
// waited out) is sealed by a sealer whose store has a short, valid
// statement_timeout. audit_seal sealed SealBatchSize records in one
// statement, and a batch that outlasts the statement timeout was
// cancelled and rolled back: every round tried the same batch again, and
// nothing was sealed again (the verifiers report the records unsealed,
// and a listing of the audit log, which seals first, fails).
func TestSealerDrainsABacklogUnderAShortStatementTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const backlog = engine.SealBatchSize
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		for i := range backlog {
			if err := engine.AppendAudit(ctx, tx, record("acme", engine.PhaseStaged, fmt.Sprintf("c-%d", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The store as a deployment with limits.statement_timeout: 50ms bounds
	// it (a batch of SealBatchSize records takes far longer; one record far
	// less).
	bounded := database.Bound(b.runtime, database.Limits{LockTimeout: 50 * time.Millisecond, StatementTimeout: 50 * time.Millisecond})
	sealed := 0
	for round := 0; round < 5 && sealed < backlog; round++ {
		n, err := engine.Seal(ctx, bounded)
		sealed += n
		t.Logf("round %d: sealed %d (%v)", round, n, err)
	}
	var unsealed int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme' AND seq IS NULL").Scan(&unsealed); err != nil {
		t.Fatal(err)
	}
	if unsealed > 0 {
		t.Fatalf("%d of %d records are still unsealed after five rounds of sealing", unsealed, backlog)
	}
}
