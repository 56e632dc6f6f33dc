package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
)

// TestVerifiersReportAnUnsealedRecordWhoseClockWasMoved: a record left
// unsealed past the bound is a finding however its owner rewrote the
// columns its wait is measured from (written_at and at, neither covered by
// the chain): moved into the future, or both emptied. Neither can be
// legitimate — written_at is the database's clock at insert, so a record
// the snapshot sees was written before the verifier began, give or take
// the bound — and while either hid the record, a record no chain covers,
// changed at will, read as merely pending and the report as OK.
func TestVerifiersReportAnUnsealedRecordWhoseClockWasMoved(t *testing.T) {
	t.Parallel()
	for name, stmts := range map[string][]string{
		"written_at a year ahead": {
			"UPDATE orangerail.audit SET written_at = now() + interval '1 year' WHERE tenant_id = 'acme' AND seq IS NULL",
		},
		"written_at emptied, at a year ahead": {
			"UPDATE orangerail.audit SET written_at = NULL, at = now() + interval '1 year' WHERE tenant_id = 'acme' AND seq IS NULL",
		},
		"written_at and at emptied": {
			"ALTER TABLE orangerail.audit ALTER COLUMN at DROP NOT NULL",
			"UPDATE orangerail.audit SET written_at = NULL, at = NULL WHERE tenant_id = 'acme' AND seq IS NULL",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			appendN(t, b.runtime, "acme", 2)
			if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseStaged, "held-back"))
			}); err != nil {
				t.Fatal(err)
			}
			tamper(t, b, stmts...)
			report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{LagBound: time.Minute})
			if err != nil || report.Pending != 1 || report.UnsealedTotal != 1 || report.OK() {
				t.Fatalf("Go verifier: %+v, %v; want the record pending and unsealed past the bound", report, err)
			}
			var listed int
			if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_unsealed('acme', interval '1 minute')").Scan(&listed)
			}); err != nil || listed != 1 {
				t.Fatalf("SQL's audit_unsealed listed %d, %v; want 1", listed, err)
			}
		})
	}
}
