package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
	// Each record holds 16 KiB of input, which sealing hashes whole (the
	// column keeps it compressed): a full batch hashes 64 MiB, far past
	// the timeout below on any machine, one record far within it.
	input := json.RawMessage(`{"order_id": "o-1", "reason": "` + strings.Repeat("customer asked ", 16<<10/15) + `"}`)
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		for i := range backlog {
			rec := record("acme", engine.PhaseStaged, fmt.Sprintf("c-%d", i))
			rec.Input = input
			if err := engine.AppendAudit(ctx, tx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The store as a deployment with limits.statement_timeout: 50ms bounds
	// each batch.
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
