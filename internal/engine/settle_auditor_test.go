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

// TestAuditorStallsNeitherAnEndNorASettle: an execution's end record and
// an operator's settle of it wait on one lock (migration 00063), which was
// an advisory lock keyed on the tenant and correlation id, both of which
// an auditor of the tenant reads in its audit. Where the migrations ran as
// a login that is no superuser, the advisory-lock built-ins stay
// executable by orangerail_auditor, so an auditor login could hold that
// lock for as long as its session lasted: the execution's end failed on
// the lock timeout (the agent told outcome_unknown of an effect that took
// place), and so did every settle of it. The lock is now a row no auditor
// may lock: whatever the auditor holds, the end and the settle are done.
func TestAuditorStallsNeitherAnEndNorASettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, c := range []string{"c-end", "c-settle"} {
		if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseExecutionStarted, c))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// What a migration by a login that is no superuser leaves.
	if _, err := b.admin.Exec(ctx, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) TO orangerail_auditor"); err != nil {
		t.Fatal(err)
	}
	auditor := auditorLogin(t, b, "acme")
	for _, c := range []string{"c-end", "c-settle"} {
		// 00063's key, read from the auditor's own view of the chain.
		if _, err := auditor.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('orangerail.settle:' || $1::text || ':' || $2::text, 0))", "acme", c); err != nil {
			t.Fatalf("the auditor could not take the settle lock of %s as such a database lets it: %v", c, err)
		}
	}
	// And whatever else it can take, held in a transaction left open: a
	// row or table lock of every table of the schema, the server's lock
	// functions. Each refused attempt is undone; each granted one is kept.
	held, err := auditor.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // it only held locks
	rows, err := b.admin.Query(ctx, `SELECT c.oid::regclass::text FROM pg_catalog.pg_class c
		WHERE c.relnamespace = 'orangerail'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		t.Fatalf("the schema's tables: %q %v", tables, err)
	}
	var attempts []string
	for _, table := range tables {
		for _, strength := range []string{"UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"} {
			attempts = append(attempts, fmt.Sprintf("SELECT FROM %s FOR %s", table, strength))
		}
		attempts = append(attempts, fmt.Sprintf("LOCK TABLE %s IN ACCESS SHARE MODE", table))
	}
	for _, c := range []string{"c-end", "c-settle"} {
		attempts = append(attempts,
			fmt.Sprintf("SELECT orangerail.settle_lock('acme', '%s')", c),
			fmt.Sprintf("SELECT orangerail.coordination_lock('acme', 'settle %s', true)", c))
	}
	var took []string
	for _, a := range attempts {
		if _, err := held.Exec(ctx, "SAVEPOINT attempt"); err != nil {
			t.Fatal(err)
		}
		undo := "RELEASE SAVEPOINT attempt"
		if _, err := held.Exec(ctx, a); err != nil {
			undo = "ROLLBACK TO SAVEPOINT attempt"
		} else {
			took = append(took, a)
		}
		if _, err := held.Exec(ctx, undo); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("besides the advisory locks, the auditor holds: %q", took)

	// Bounded as a deployment's store is: a wait on what the auditor
	// holds fails on the lock timeout rather than hanging the test.
	limits := database.Limits{LockTimeout: 2 * time.Second, StatementTimeout: 30 * time.Second}
	if err := database.InTenant(ctx, database.Bound(b.runtime, limits), "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseExecutionSucceeded, "c-end"))
	}); err != nil {
		t.Errorf("the execution's end beside an auditor holding what it can: %v", err)
	}
	s, err := engine.SettleExecution(ctx, database.Bound(b.admin, limits), "acme", "c-settle", engine.SettledFailed, "the carrier has no such order", 0, time.Now())
	if err != nil || s.CorrelationID != "c-settle" {
		t.Fatalf("the settle beside an auditor holding what it can: %+v, %v", s, err)
	}
}
