package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

var errRollBack = errors.New("rolled back on purpose")

// TestSealersUnderConcurrentWriters runs 16 writers over 4 tenants, some
// of whose transactions roll back after appending, while two sealers (two
// pools, as two replicas) seal and a third is killed mid-batch, again and
// again: its backend terminated after it sealed a batch and before it
// committed. Afterwards every committed record is sealed exactly once,
// the chains have no gap and verify under both verifiers, and no record
// of a rolled-back transaction was ever sealed.
func TestSealersUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	if testdb.Bouncing() {
		t.Skip("kills a sealer's backend by the pid its connection reports, which behind PgBouncer names no backend; the run without PgBouncer runs it")
	}
	b := setup(t)
	ctx := context.Background()
	const writers, tenants, perWriter = 16, 4, 40

	other := testdb.RuntimePool(t, b.url)
	var sealErrs atomic.Int64
	onError := func(error) { sealErrs.Add(1) }
	sealers := []*engine.Sealer{
		engine.StartSealer(b.runtime, periodic.Config{Interval: 3 * time.Millisecond, OnError: onError}),
		engine.StartSealer(other, periodic.Config{Interval: 5 * time.Millisecond, OnError: onError}),
	}

	// The victim: a sealer that seals a batch and dies before its commit.
	victims := testdb.RuntimePool(t, b.url)
	stop := make(chan struct{})
	var killedMidBatch atomic.Int64
	var victimDone sync.WaitGroup
	victimDone.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if sealedThenKilled(t, victims, b, fmt.Sprintf("t%d", i%tenants)) {
				killedMidBatch.Add(1)
			}
		}
	})

	var committed [tenants]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			tenant := w % tenants
			for i := range perWriter {
				rollBack := i%5 == 4
				corr := fmt.Sprintf("w%d-%d", w, i)
				if rollBack {
					corr = "rolled-back-" + corr
				}
				err := database.InTenant(ctx, b.runtime, fmt.Sprintf("t%d", tenant), pgx.TxOptions{}, func(tx pgx.Tx) error {
					if err := engine.AppendAudit(ctx, tx, record(fmt.Sprintf("t%d", tenant), engine.PhaseStaged, corr)); err != nil {
						return err
					}
					if rollBack {
						return errRollBack
					}
					return nil
				})
				switch {
				case rollBack && errors.Is(err, errRollBack):
				case err == nil && !rollBack:
					committed[tenant].Add(1)
				default:
					errs <- fmt.Errorf("writer %d append %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Let the victim die a few more times on what the writers left.
	time.Sleep(20 * time.Millisecond)
	close(stop)
	victimDone.Wait()
	for _, s := range sealers {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("the last seal: %v", err)
		}
	}
	if killedMidBatch.Load() == 0 {
		t.Fatal("no sealer was killed mid-batch: the test proved nothing about dying sealers")
	}
	t.Logf("sealers killed mid-batch: %d; sealing rounds that failed: %d", killedMidBatch.Load(), sealErrs.Load())

	for tenant := range tenants {
		name := fmt.Sprintf("t%d", tenant)
		want := committed[tenant].Load()
		var total, unsealed, rolledBack, distinctSeqs, maxSeq, unstamped int64
		if err := b.admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE seq IS NULL),
				count(*) FILTER (WHERE correlation_id LIKE 'rolled-back-%'), count(DISTINCT seq), coalesce(max(seq), 0),
				count(*) FILTER (WHERE sealed_at IS NULL)
			FROM orangerail.audit WHERE tenant_id = $1`, name).Scan(&total, &unsealed, &rolledBack, &distinctSeqs, &maxSeq, &unstamped); err != nil {
			t.Fatal(err)
		}
		if total != want || unsealed != 0 || rolledBack != 0 || distinctSeqs != want || maxSeq != want || unstamped != 0 {
			t.Errorf("tenant %s: %d records (%d committed), %d unsealed, %d of rolled-back transactions, %d distinct seqs up to %d, %d without sealed_at",
				name, total, want, unsealed, rolledBack, distinctSeqs, maxSeq, unstamped)
		}
		r, err := engine.VerifyTenant(ctx, b.runtime, name, engine.VerifyOptions{PageSize: 7})
		if err != nil || !r.OK() || r.Records != want || r.HeadSeq != want || r.Pending != 0 {
			t.Errorf("tenant %s: %+v (%v), want %d sealed records and a clean chain", name, r, err, want)
		}
		if brk := sqlBreak(t, b, name); brk != nil {
			t.Errorf("tenant %s: the SQL verifier found %+v", name, brk)
		}
	}
}

// sealedThenKilled seals a batch of tenant in a transaction, and before
// it commits terminates its backend. It reports whether the batch sealed
// anything (the kill was mid-batch) and that the transaction then failed.
func sealedThenKilled(t *testing.T, pool *pgxpool.Pool, b *testBundle, tenant string) bool {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Errorf("victim connection: %v", err)
		return false
	}
	defer conn.Release() // the pool drops it: it is closed
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Errorf("victim transaction: %v", err)
		return false
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT set_config('orangerail.tenant_id', $1, true)", tenant); err != nil {
		t.Errorf("victim tenant: %v", err)
		return false
	}
	n, err := store.New(tx).AuditSeal(ctx, 3, false)
	if err != nil || n == 0 {
		return false // nothing to seal, or another sealer holds the tenant
	}
	// Wait (up to 5s) until the backend is gone.
	var gone bool
	if err := b.admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", conn.Conn().PgConn().PID()).Scan(&gone); err != nil || !gone {
		t.Errorf("terminate the victim: %v %v", gone, err)
		return false
	}
	if err := tx.Commit(ctx); err == nil {
		t.Error("a killed sealer's batch committed")
	}
	return true
}

// appendAt appends one record of phase at the given time, unsealed.
func appendAt(t *testing.T, b *testBundle, phase engine.Phase, corr string, at time.Time) {
	t.Helper()
	rec := record("acme", phase, corr)
	rec.At = at
	if err := database.InTenant(context.Background(), b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(context.Background(), tx, rec)
	}); err != nil {
		t.Fatalf("append %s: %v", corr, err)
	}
}

// TestVerifyReportsUnsealedPastTheBound leaves records unsealed: one
// written long ago is a finding of both verifiers, one just written is
// only counted, and a sealer that stops seals both. How long a record
// waited is the database's clock's, not its writer's: the stale record's
// writer ran a year ahead, the fresh one's three minutes behind.
func TestVerifyReportsUnsealedPastTheBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendAt(t, b, engine.PhaseStaged, "stale", time.Now().AddDate(1, 0, 0))
	appendAt(t, b, engine.PhaseStaged, "fresh", time.Now().Add(-3*time.Minute))
	// The stale record was written three minutes ago: its written_at is
	// moved back, past the append-only guard, as time would have.
	if _, err := b.admin.Exec(ctx, `ALTER TABLE orangerail.audit DISABLE TRIGGER audit_refuse_update_delete;
		UPDATE orangerail.audit SET written_at = written_at - interval '3 minutes' WHERE correlation_id = 'stale';
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete`); err != nil {
		t.Fatal(err)
	}
	// No one else may change when a record was written.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.audit SET written_at = now() WHERE correlation_id = 'stale'"); !errors.Is(store.InterpretError(err), store.ErrAppendOnly) {
		t.Fatalf("changing written_at: %v, want the append-only refusal", err)
	}
	// The lag is the oldest unsealed record's wait.
	if lag, err := engine.SealLag(ctx, b.runtime); err != nil || lag < 3*time.Minute || lag > time.Hour {
		t.Fatalf("SealLag = %v, %v; want the stale record's wait, about 3m", lag, err)
	}

	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Records != 0 || r.Pending != 2 || len(r.Unsealed) != 1 || r.Unsealed[0].CorrelationID != "stale" ||
		r.Unsealed[0].Phase != engine.PhaseStaged || r.Unsealed[0].UnsealedFor < 3*time.Minute || r.Unsealed[0].UnsealedFor > time.Hour || r.Break != nil {
		t.Fatalf("report = %+v, want the stale record as the only finding", r)
	}
	var listed []*store.AuditUnsealedRecord
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		listed, _, err = store.New(tx).AuditListUnsealed(ctx, "acme", engine.DefaultSealLagBound, engine.ReportListMax)
		return err
	}); err != nil || len(listed) != 1 || listed[0].CorrelationID != "stale" {
		t.Fatalf("orangerail.audit_unsealed = %+v, %v; want the stale record", listed, err)
	}
	if brk := sqlBreak(t, b, "acme"); brk != nil {
		t.Fatalf("an unsealed record is a broken link to the SQL verifier: %+v", brk)
	}
	if r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{LagBound: time.Hour}); err != nil || !r.OK() || r.Pending != 2 {
		t.Fatalf("under a bound of an hour: %+v, %v", r, err)
	}

	// A sealer that would not wake for an hour seals what is left when it
	// stops, and keeps when each record was written.
	var written []time.Time
	if err := b.admin.QueryRow(ctx, "SELECT array_agg(written_at ORDER BY id) FROM orangerail.audit WHERE tenant_id = 'acme'").Scan(&written); err != nil {
		t.Fatal(err)
	}
	if err := engine.StartSealer(b.runtime, periodic.Config{Interval: time.Hour}).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var after []time.Time
	if err := b.admin.QueryRow(ctx, "SELECT array_agg(written_at ORDER BY id) FROM orangerail.audit WHERE tenant_id = 'acme'").Scan(&after); err != nil ||
		!slices.EqualFunc(written, after, time.Time.Equal) || len(after) != 2 {
		t.Fatalf("written_at before the seal %v, after %v (%v)", written, after, err)
	}
	if r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || !r.OK() || r.Records != 2 || r.Pending != 0 || r.HeadSeq != 2 {
		t.Fatalf("after the last seal: %+v, %v", r, err)
	}
	if lag, err := engine.SealLag(ctx, b.runtime); err != nil || lag != 0 {
		t.Fatalf("SealLag after the last seal = %v, %v; want 0", lag, err)
	}
}

// TestVerifyRelatesRecordsAwaitingTheirSeal: an execution whose finish is
// not sealed yet is finished, and one whose start is not sealed yet and
// never finished is unfinished, to both verifiers.
func TestVerifyRelatesRecordsAwaitingTheirSeal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now()
	appendAt(t, b, engine.PhaseExecutionStarted, "finished", now)
	if _, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil {
		t.Fatal(err)
	}
	appendAt(t, b, engine.PhaseExecutionSucceeded, "finished", now)
	appendAt(t, b, engine.PhaseExecutionStarted, "open", now)

	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 1 || r.Pending != 2 || len(r.Unfinished) != 1 || r.Unfinished[0].CorrelationID != "open" || r.Unfinished[0].Seq != 0 {
		t.Fatalf("report = %+v, want the open execution, unsealed, as the one unfinished", r)
	}
	var sqlSeen []*store.AuditUnfinished
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		sqlSeen, err = store.New(tx).AuditListUnfinished(ctx, "acme")
		return err
	}); err != nil || len(sqlSeen) != 1 || sqlSeen[0].CorrelationID != "open" || sqlSeen[0].Seq != 0 {
		t.Fatalf("orangerail.audit_unfinished = %+v, %v", sqlSeen, err)
	}
}

// TestSealAfterCommitMigratesChainsInPlace goes down to the schema before
// seal-after-commit with records awaiting their seal (its Down seals
// them), appends there the old way (seq and link at append), and comes
// back up: the chain written both ways verifies, and grows sealed after
// commit.
func TestSealAfterCommitMigratesChainsInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendAt(t, b, engine.PhaseStaged, "new-1", time.Now())
	appendAt(t, b, engine.PhaseStaged, "new-2", time.Now())

	m, err := database.NewMigrator(ctx, testdb.Direct(b.url)) // migrations hold a session lock
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const beforeSealing = 14
	if _, err := m.DownTo(ctx, beforeSealing); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		entry, err := record("acme", engine.PhaseStaged, fmt.Sprintf("old-%d", i)).Entry()
		if err != nil {
			t.Fatal(err)
		}
		var seq int64
		if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT seq FROM orangerail.audit_append($1)", entry).Scan(&seq)
		}); err != nil || seq != int64(3+i) {
			t.Fatalf("the old append: seq %d, %v; want %d after the two records the Down sealed", seq, err, 3+i)
		}
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool's connections cached plans of the old schema.
	b.runtime.Reset()

	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !r.OK() || r.Records != 4 || r.HeadSeq != 4 || r.Pending != 0 {
		t.Fatalf("migrated in place: %+v, %v", r, err)
	}
	appendAt(t, b, engine.PhaseStaged, "new-3", time.Now())
	if n, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil || n != 1 {
		t.Fatalf("sealed %d: %v", n, err)
	}
	r, err = engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !r.OK() || r.Records != 5 || r.HeadSeq != 5 {
		t.Fatalf("after sealing on the migrated chain: %+v, %v", r, err)
	}
	if brk := sqlBreak(t, b, "acme"); brk != nil {
		t.Fatalf("the SQL verifier: %+v", brk)
	}
	var order []string
	rows, err := b.admin.Query(ctx, "SELECT correlation_id FROM orangerail.audit WHERE tenant_id = 'acme' ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		order = append(order, c)
	}
	if fmt.Sprint(order) != "[new-1 new-2 old-0 old-1 new-3]" {
		t.Fatalf("chain order %v", order)
	}
}

// TestReportListsAreBounded: a report lists the first findings of each
// kind and counts them all, whether the walk finds them (unfinished
// executions, operators' records) or SQL does (records unsealed past the
// bound), among the records awaiting their seal and among the sealed: a
// sealer's long outage cannot make a report as large as what it left.
func TestReportListsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := range 5 {
		appendAt(t, b, engine.PhaseExecutionStarted, fmt.Sprintf("x%d", i), time.Now())
	}
	// The owner's records are an operator's, listed as break-glass ones.
	for i := range 4 {
		rec := record("acme", engine.PhaseApproved, fmt.Sprintf("op%d", i))
		rec.Actor = engine.Actor{Subject: "postgres", Kind: engine.ActorOperator}
		if err := database.InTenant(ctx, b.admin, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, rec)
		}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(r *engine.Report, unsealed int64) {
		t.Helper()
		var corr []string
		for _, u := range r.Unsealed {
			corr = append(corr, u.CorrelationID)
		}
		want := []string{"x0", "x1", "x2"}
		if unsealed == 0 {
			want = nil
		}
		if r.UnsealedTotal != unsealed || !slices.Equal(corr, want) {
			t.Errorf("unsealed: %v of %d, want %v of %d", corr, r.UnsealedTotal, want, unsealed)
		}
		corr = nil
		for _, u := range r.Unfinished {
			corr = append(corr, u.CorrelationID)
		}
		if want := []string{"x0", "x1", "x2"}; r.UnfinishedTotal != 5 || !slices.Equal(corr, want) {
			t.Errorf("unfinished: %v of %d, want %v of 5", corr, r.UnfinishedTotal, want)
		}
		var ops []engine.Phase
		for _, d := range r.BreakGlass {
			ops = append(ops, d.Phase)
		}
		if r.BreakGlassTotal != 4 || len(ops) != 3 || ops[0] != engine.PhaseApproved {
			t.Errorf("break glass: %v of %d, want 3 of 4", ops, r.BreakGlassTotal)
		}
		if r.OK() {
			t.Errorf("a report with findings is OK: %+v", r)
		}
	}
	opts := engine.WithListMax(engine.VerifyOptions{LagBound: time.Nanosecond}, 3)
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", opts)
	if err != nil {
		t.Fatal(err)
	}
	check(r, 9)
	if _, err := engine.Seal(ctx, b.runtime); err != nil {
		t.Fatal(err)
	}
	if r, err = engine.VerifyTenant(ctx, b.runtime, "acme", opts); err != nil || r.Records != 9 || r.Break != nil {
		t.Fatalf("sealed: %+v, %v", r, err)
	}
	check(r, 0)
}
