package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// awaitLockWait returns once a session of the database other than the
// asker's waits on a lock: the second session of a race has reached the
// lock the first holds. (Polled, not timed: it returns when it is so.)
func awaitLockWait(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for {
		var waiting bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ends returns the records of correlation's executions that finish one
// after its last execution_started.
func ends(t *testing.T, admin *pgxpool.Pool, correlation string) []string {
	t.Helper()
	var phases []string
	if err := admin.QueryRow(context.Background(), `SELECT coalesce(array_agg(phase ORDER BY id), '{}') FROM orangerail.audit
		WHERE correlation_id = $1 AND phase IN ('execution_succeeded', 'execution_failed', 'execution_settled')
		  AND id > (SELECT max(id) FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_started')`, correlation).Scan(&phases); err != nil {
		t.Fatal(err)
	}
	return phases
}

// refused reports whether err is a settle's refusal, having waited on
// another's end or settle: it reads the execution finished, whatever the
// database's default isolation (a settle's transaction is READ
// COMMITTED), and says so, coded.
func refused(err error) bool {
	var c *errcode.Error
	return errors.As(err, &c) && c.Code == errcode.ExecutionNotUnfinished
}

// raceBundle is a database whose sessions begin transactions at the
// isolation level isolation names by default (as `ALTER DATABASE … SET
// default_transaction_isolation` makes it), "" for Postgres's own.
func raceBundle(t *testing.T, isolation string) *testBundle {
	t.Helper()
	if isolation != "" && testdb.Bouncing() {
		// A database's default reaches the sessions begun after it is
		// set; PgBouncer's pooled server sessions began before, and keep
		// theirs. The pass without PgBouncer runs it.
		t.Skip("the default isolation of a database is not set behind PgBouncer's pooled sessions")
	}
	b := setup(t)
	if isolation != "" {
		if _, err := b.admin.Exec(context.Background(), fmt.Sprintf(
			"DO $$BEGIN EXECUTE format('ALTER DATABASE %%I SET default_transaction_isolation = %%L', current_database(), '%s'); END$$", isolation)); err != nil {
			t.Fatal(err)
		}
		b.runtime.Reset()
		b.admin.Reset()
	}
	return b
}

// started appends correlation's execution_started records, and before
// them, where before is set, an earlier execution of it that ended (a call
// run again under its correlation id): its end took the settle lock first.
func started(t *testing.T, b *testBundle, correlation string, before bool) {
	t.Helper()
	ctx := context.Background()
	phases := []engine.Phase{engine.PhaseExecutionStarted}
	if before {
		phases = []engine.Phase{engine.PhaseExecutionStarted, engine.PhaseExecutionFailed, engine.PhaseExecutionStarted}
	}
	for _, p := range phases {
		if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, record("acme", p, correlation))
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// settleHeld begins an operator's settle of correlation as
// SettleExecution makes it — the settle lock, then the execution_settled
// record — and leaves it uncommitted.
func settleHeld(t *testing.T, b *testBundle, correlation string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	result, err := json.Marshal(map[string]string{engine.BreakGlassReasonMember: "the carrier has no such order", engine.SettledOutcomeMember: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	rec := record("acme", engine.PhaseExecutionSettled, correlation)
	rec.Actor, rec.Input, rec.Result = engine.Actor{Kind: engine.ActorOperator, Subject: "postgres"}, nil, result
	if _, err := tx.Exec(ctx, "SELECT set_config('orangerail.tenant_id', 'acme', true), orangerail.settle_lock('acme', $1)", correlation); err != nil {
		t.Fatal(err)
	}
	if err := engine.AppendAudit(ctx, tx, rec); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestEndWaitingOnASettleNeverStandsBesideIt: an execution's end record
// that waits, in the audit's trigger, on the settle lock an operator's
// settle holds does not stand beside the settle once it commits. Two real
// sessions: the settle, held open until the end waits on it, then
// committed. Under READ COMMITTED the trigger's check after the wait sees
// the settle (ORA10). Under REPEATABLE READ, a database's default where
// its administrator set one, the end's transaction reads a snapshot taken
// before the wait, which never shows the settle: the end must fail (a
// serialization failure), not be recorded beside it — with the lock's row
// made by the settle, and with it made by an earlier execution of the
// correlation id.
func TestEndWaitingOnASettleNeverStandsBesideIt(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"", "read committed", "repeatable read"} {
		for _, before := range []bool{false, true} {
			t.Run(fmt.Sprintf("%q,row before %v", isolation, before), func(t *testing.T) {
				t.Parallel()
				b := raceBundle(t, isolation)
				ctx := context.Background()
				const c = "c-race"
				started(t, b, c, before)
				settle := settleHeld(t, b, c)
				ended := make(chan error, 1)
				go func() {
					ended <- database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // the execution's transaction ran before its end
							return err
						}
						return engine.AppendAudit(ctx, tx, record("acme", engine.PhaseExecutionSucceeded, c))
					})
				}()
				awaitLockWait(t, b.admin)
				if err := settle.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				endErr := <-ended
				want := "ORA10" // the trigger's check sees the settle
				if isolation == "repeatable read" {
					want = "40001" // the lock's row changed after the snapshot
				}
				if got := ends(t, b.admin, c); len(got) != 1 || got[0] != "execution_settled" || sqlState(endErr) != want {
					t.Errorf("the end waiting on the settle: %v; the execution's ends: %q, want the settle's alone and the end refused %s", endErr, got, want)
				}
			})
		}
	}
}

// TestSettleWaitingOnAnEndNeverStandsBesideIt: a settle that waits on the
// lock an execution's end record holds, uncommitted, finds the execution
// finished once the end commits, and is refused X_EXECUTION_NOT_UNFINISHED;
// so is a second settle waiting on a first. Also where the database's
// default isolation is REPEATABLE READ: the settle's read after the wait
// must see what committed during it.
func TestSettleWaitingOnAnEndNeverStandsBesideIt(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"", "repeatable read"} {
		for _, before := range []bool{false, true} {
			t.Run(fmt.Sprintf("%q,row before %v", isolation, before), func(t *testing.T) {
				t.Parallel()
				b := raceBundle(t, isolation)
				ctx := context.Background()
				started(t, b, "c-end", before)
				started(t, b, "c-settle", before)
				end, err := b.runtime.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer end.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // committed below
				if _, err := end.Exec(ctx, "SELECT set_config('orangerail.tenant_id', 'acme', true)"); err != nil {
					t.Fatal(err)
				}
				if err := engine.AppendAudit(ctx, end, record("acme", engine.PhaseExecutionSucceeded, "c-end")); err != nil {
					t.Fatal(err)
				}
				settled := make(chan error, 1)
				go func() {
					_, err := engine.SettleExecution(ctx, b.admin, "acme", "c-end", engine.SettledFailed, "the carrier has no such order", 0, time.Now())
					settled <- err
				}()
				awaitLockWait(t, b.admin)
				if err := end.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				settleErr := <-settled
				if got := ends(t, b.admin, "c-end"); len(got) != 1 || got[0] != "execution_succeeded" || !refused(settleErr) {
					t.Errorf("the settle waiting on the end: %v; the execution's ends: %q, want its own alone and the settle refused", settleErr, got)
				}

				first := settleHeld(t, b, "c-settle")
				go func() {
					_, err := engine.SettleExecution(ctx, b.admin, "acme", "c-settle", engine.SettledSucceeded, "the carrier shipped it", 0, time.Now())
					settled <- err
				}()
				awaitLockWait(t, b.admin)
				if err := first.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				settleErr = <-settled
				if got := ends(t, b.admin, "c-settle"); len(got) != 1 || !refused(settleErr) {
					t.Errorf("the second settle: %v; the execution's ends: %q, want one settle and the second refused", settleErr, got)
				}
			})
		}
	}
}
