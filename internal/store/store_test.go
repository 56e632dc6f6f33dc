package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	url     string
	admin   *pgxpool.Pool // superuser
	runtime *pgxpool.Pool // the server's own pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := testdb.New(t)
	return &testBundle{url: url, admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url)}
}

// inTenant runs fn on a Store in a transaction of the runtime pool scoped
// to tenant, and returns fn's error (rolled back when not nil).
func (b *testBundle) inTenant(t *testing.T, tenant string, fn func(*store.Store) error) error {
	t.Helper()
	return database.InTenant(context.Background(), b.runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return fn(store.New(tx))
	})
}

// entry is a canonical audit entry of the given phase, approval and actor.
func entry(tenant, phase string, approval uuid.UUID, actor string) []byte {
	return fmt.Appendf(nil, `{"action":"cancel_order","actor":{"kind":"agent","subject":%q},"approval_id":%q,`+
		`"at":"2026-11-29T20:56:15.123456Z","correlation_id":"c","dev_mode":false,"phase":%q,"tenant":%q,"v":1}`,
		actor, approval, phase, tenant)
}

func stageParams(id uuid.UUID, digest string) *store.ApprovalStageParams {
	sum := sha256.Sum256([]byte(digest))
	return &store.ApprovalStageParams{
		ID: id, Action: "cancel_order", RequestedBy: "agent-7", Input: []byte(`{"order_id":"o-1"}`),
		InputDigest: sum[:], DefinitionHash: make([]byte, 32), ExpiresAt: time.Now().Add(time.Hour),
		Entry: entry("acme", "staged", id, "agent-7"),
	}
}

// TestApprovalStatusesMatchSchema holds ApprovalStatuses to the CHECK
// constraint on orangerail.approvals.status.
func TestApprovalStatusesMatchSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var def string
	err := b.admin.QueryRow(context.Background(), `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		WHERE c.conrelid = 'orangerail.approvals'::regclass AND c.contype = 'c'
		  AND c.conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = 'status')]`).Scan(&def)
	if err != nil {
		t.Fatal(err)
	}
	var inSQL []string
	for _, m := range regexp.MustCompile(`'([a-z_]+)'::text`).FindAllStringSubmatch(def, -1) {
		inSQL = append(inSQL, m[1])
	}
	var inGo []string
	for _, s := range store.ApprovalStatuses() {
		inGo = append(inGo, string(s))
	}
	if !slices.Equal(slices.Sorted(slices.Values(inSQL)), slices.Sorted(slices.Values(inGo))) {
		t.Fatalf("the CHECK allows %v (%s); ApprovalStatuses() is %v", inSQL, def, inGo)
	}
}

// TestApprovalLifecycle runs an approval through the store and checks what
// each step returns, in orangerail's types.
func TestApprovalLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	err := b.inTenant(t, "acme", func(s *store.Store) error {
		a, err := s.ApprovalStage(ctx, stageParams(id, "x"))
		if err != nil {
			return err
		}
		if a.Status != store.ApprovalPending || a.TenantID != "acme" || a.ID != id || a.DecidedBy != nil {
			return fmt.Errorf("staged %+v", a)
		}
		// An identical call's stage answers the open approval, staging
		// nothing (its own id and record are not used).
		open, err := s.ApprovalStage(ctx, stageParams(uuid.New(), "x"))
		if err != nil || open.ID != id || open.Status != store.ApprovalPending {
			return fmt.Errorf("an identical stage: %+v %w", open, err)
		}
		if pending, err := s.ApprovalList(ctx, &store.ApprovalListParams{TenantID: "acme", Status: store.ApprovalPending, Limit: 10}); err != nil || len(pending) != 1 {
			return fmt.Errorf("pending after an identical stage: %d %w", len(pending), err)
		}
		decided, err := s.ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: id, Status: store.ApprovalApproved, DecidedBy: "alice",
			Entry: []byte(`{"action":"cancel_order","actor":{"kind":"human","subject":"alice"},"approval_id":"` + id.String() +
				`","at":"2026-11-29T20:56:16.000000Z","correlation_id":"c","dev_mode":false,"phase":"approved","tenant":"acme","v":1}`)})
		if err != nil || decided.Status != store.ApprovalApproved || *decided.DecidedBy != "alice" {
			return fmt.Errorf("decide: %+v %w", decided, err)
		}
		consumed, inChain, err := s.ApprovalConsume(ctx, "acme", id)
		if err != nil || consumed.Status != store.ApprovalConsumed || consumed.ConsumedAt == nil || !inChain ||
			consumed.ID != id || *consumed.DecidedBy != "alice" || !bytes.Equal(consumed.InputDigest, a.InputDigest) {
			return fmt.Errorf("consume: %+v, decided in the chain %v, %w", consumed, inChain, err)
		}
		if _, _, err := s.ApprovalConsume(ctx, "acme", id); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("second consume: %w, want ErrNotFound", err)
		}
		list, err := s.ApprovalList(ctx, &store.ApprovalListParams{TenantID: "acme", Status: store.ApprovalConsumed, Limit: 10})
		if err != nil || len(list) != 1 || list[0].ID != id {
			return fmt.Errorf("list: %v %w", list, err)
		}
		unaudited, total, err := s.ApprovalListUnaudited(ctx, "acme", 10)
		if err != nil || len(unaudited) != 1 || total != 1 || unaudited[0].ApprovalID != id {
			return fmt.Errorf("unaudited: %v of %d %w", unaudited, total, err)
		}
		// Appended, not sealed: the chain is as it was until a sealer
		// runs after commit.
		head, err := s.AuditHead(ctx, "acme")
		if err != nil || head.Seq != 0 || len(head.Hash) != 32 {
			return fmt.Errorf("head before sealing: %+v %w", head, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.inTenant(t, "acme", func(s *store.Store) error {
		if sealed, err := s.AuditSeal(ctx, 10, true); err != nil || sealed != 2 {
			return fmt.Errorf("seal: %d %w", sealed, err)
		}
		head, err := s.AuditHead(ctx, "acme")
		if err != nil || head.Seq != 2 || len(head.Hash) != 32 {
			return fmt.Errorf("head: %+v %w", head, err)
		}
		page, err := s.AuditPage(ctx, &store.AuditPageParams{TenantID: "acme", Limit: 10})
		if err != nil || len(page) != 2 || page[0].Phase != "approved" || *page[0].ApprovalID != id || page[0].Seq != 2 {
			return fmt.Errorf("chain: %+v %w", page, err)
		}
		breaks, err := s.AuditVerify(ctx, "acme")
		if err != nil || len(breaks) != 0 {
			return fmt.Errorf("verify: %v %w", breaks, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.New(b.runtime).AuditHead(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("head of no chain: %v, want ErrNotFound", err)
	}
}

// TestStoreErrorsAreSentinels provokes each failure for real and checks the
// store reports it as its sentinel, with Postgres' error still reachable.
func TestStoreErrorsAreSentinels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sqlState := func(err error) string {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return pgErr.Code
		}
		return ""
	}
	staged := uuid.New()
	if err := b.inTenant(t, "acme", func(s *store.Store) error {
		_, err := s.ApprovalStage(ctx, stageParams(staged, "staged"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Each case runs in a transaction of tenant acme (rolled back when it
	// fails) and must fail with the sentinel and SQLSTATE given.
	tests := []struct {
		name  string
		run   func(*store.Store) error
		want  error
		state string
	}{
		{"no such approval", func(s *store.Store) error {
			_, err := s.ApprovalGet(ctx, &store.ApprovalGetParams{ID: uuid.New(), TenantID: "acme"})
			return err
		}, store.ErrNotFound, ""},
		{"a record that does not describe the change", func(s *store.Store) error {
			p := stageParams(uuid.New(), "other")
			p.Entry = entry("acme", "staged", uuid.New(), "agent-7")
			_, err := s.ApprovalStage(ctx, p)
			return err
		}, store.ErrRecordMismatch, "ORA05"},
		{"a decision that is no decision", func(s *store.Store) error {
			_, err := s.ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: staged, Status: store.ApprovalConsumed, DecidedBy: "alice", Entry: entry("acme", "consumed", staged, "alice")})
			return err
		}, store.ErrLifecycle, "ORA04"},
		{"an entry that is not JSON", func(s *store.Store) error {
			return s.AuditAppend(ctx, []byte(`{"v":1`))
		}, store.ErrMalformedValue, "22P02"},
		{"an entry that is not a record", func(s *store.Store) error {
			return s.AuditAppend(ctx, []byte(`[1]`))
		}, store.ErrAuditEntryInvalid, "ORA02"},
		{"another tenant's entry", func(s *store.Store) error {
			return s.AuditAppend(ctx, entry("globex", "staged", uuid.New(), "a"))
		}, store.ErrTenantMismatch, "ORA03"},
		{"a grant the runtime may not make", func(s *store.Store) error {
			_, err := s.AuditorGrantAdd(ctx, &store.AuditorGrantParams{RoleName: "someone", TenantID: "acme"})
			return err
		}, store.ErrPermission, "42501"},
	}
	for _, tt := range tests {
		err := b.inTenant(t, "acme", tt.run)
		if !errors.Is(err, tt.want) || sqlState(err) != tt.state {
			t.Errorf("%s: %v (SQLSTATE %q), want %v (%q)", tt.name, err, sqlState(err), tt.want, tt.state)
		}
	}
	// A malformed tenant id, set past InTenant's check, is the table's to
	// refuse.
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('orangerail.tenant_id', 'no tenant!', true)"); err != nil {
			return err
		}
		return store.New(tx).TenantOpen(ctx)
	})
	if !errors.Is(err, store.ErrCheckViolation) || sqlState(err) != "23514" {
		t.Errorf("opening a malformed tenant id: %v (SQLSTATE %q), want %v (23514)", err, sqlState(err), store.ErrCheckViolation)
	}

	// A transaction that names no tenant appends nothing.
	if err := store.New(b.runtime).AuditAppend(ctx, entry("acme", "staged", uuid.New(), "a")); !errors.Is(err, store.ErrTenantMismatch) {
		t.Errorf("append without a tenant: %v, want ErrTenantMismatch", err)
	}
	// Audit history does not change, even for a superuser.
	_, err = b.admin.Exec(ctx, "UPDATE orangerail.audit SET correlation_id = 'x'")
	if err = store.InterpretError(err); !errors.Is(err, store.ErrAppendOnly) || sqlState(err) != "ORA01" {
		t.Errorf("update audit: %v, want ErrAppendOnly", err)
	}
}

// TestDriverFailuresAreSentinels provokes the failures code running SQL
// outside the store classifies with InterpretError: a statement or lock
// that cannot wait, a lost serialization race, a cancelled context, a
// server that is not there or refuses the database, SQL naming what the
// database lacks, and a value of the wrong form.
func TestDriverFailuresAreSentinels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY, n int); INSERT INTO t VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	check := func(name string, err error, want error) {
		t.Helper()
		if got := store.InterpretError(err); !errors.Is(got, want) || !errors.Is(got, err) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}

	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "SET LOCAL statement_timeout = 1; SELECT pg_sleep(5)")
	check("statement_timeout", err, store.ErrStatementTimeout)
	_ = tx.Rollback(ctx)

	holder, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT FROM t WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	_, err = b.admin.Exec(ctx, "SELECT FROM t WHERE id = 1 FOR UPDATE NOWAIT")
	check("a lock held elsewhere", err, store.ErrLockNotAvailable)
	_ = holder.Rollback(ctx)

	reader, err := b.admin.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback(ctx) }()
	if _, err := reader.Exec(ctx, "SELECT n FROM t WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, "UPDATE t SET n = n + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Exec(ctx, "UPDATE t SET n = n + 1 WHERE id = 1")
	check("a concurrent update under repeatable read", err, store.ErrSerialization)
	_ = reader.Rollback(ctx)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = store.New(b.runtime).TenantList(cancelled)
	if !errors.Is(err, store.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v, want ErrCanceled", err)
	}

	_, err = pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", testdb.FreePort(t)))
	check("no server", err, store.ErrUnavailable)
	_, err = pgx.Connect(ctx, testdb.WithDatabase(t, b.url, "orangerail_no_such_database"))
	check("no such database", err, store.ErrLoginRefused)

	_, err = b.admin.Exec(ctx, "SELECT FROM no_such_table")
	check("no such table", err, store.ErrSchemaMismatch)
	_, err = b.admin.Exec(ctx, "SELECT 1 / 0")
	check("division by zero", err, store.ErrInvalidValue)
}

// TestIdenticalStagesAtOnce: two transactions staging an identical call
// at once meet at approvals_open_call_idx — the second waits for the
// first, and once it commits, fails ErrConflict (the engine then asks
// again and finds the first's) — and one approval is staged.
func TestIdenticalStagesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, second := uuid.New(), uuid.New()
	staged := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		<-staged
		done <- b.inTenant(t, "acme", func(s *store.Store) error {
			_, err := s.ApprovalStage(ctx, stageParams(second, "same"))
			return err
		})
	}()
	err := b.inTenant(t, "acme", func(s *store.Store) error {
		if _, err := s.ApprovalStage(ctx, stageParams(first, "same")); err != nil {
			return err
		}
		close(staged)
		// The second waits on this transaction's index entry before this
		// one commits.
		for {
			var waiting bool
			if err := b.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%approval_stage%')`).Scan(&waiting); err != nil {
				return err
			}
			if waiting {
				return nil
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the second identical stage: %v, want ErrConflict", err)
	}
	var n int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d approvals staged (%v), want 1", n, err)
	}
}
