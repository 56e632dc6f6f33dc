package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/redact"
	"github.com/orangerail/orangerail/internal/testdb"
)

// engineFor serves cfg on b's database, its data on datasource (nil: the
// service database).
func engineFor(t *testing.T, b *exampleBundle, cfg *ontology.Config, datasource *pgxpool.Pool) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Datasource: datasource, Effects: effects.Factories(),
		Catalog: readCatalog(t, cfg, cmp.Or(datasource, b.runtime)), Key: b.key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// shortLimits sets the example's limits low, and adds two actions whose
// effects wait: touch_other updates an order other than its target, and
// slow_action sleeps past the statement timeout.
func shortLimits(t testing.TB) func(doc map[string]any) {
	return func(doc map[string]any) {
		doc["limits"] = map[string]any{"lock_timeout": "200ms", "statement_timeout": "2s"}
		actions := member(t, doc, "actions")
		actions["touch_other"] = map[string]any{
			"description": "Touch an order other than the target.",
			"target":      map[string]any{"object": "order", "key_from": "order_id"},
			"input": map[string]any{"type": "object", "required": []any{"order_id", "other_id"},
				"properties": map[string]any{"order_id": map[string]any{"type": "string"}, "other_id": map[string]any{"type": "string"}}},
			"policy":  map[string]any{"roles": []any{"support"}},
			"execute": map[string]any{"sql": "UPDATE orders SET status = status WHERE id = :other_id AND org_id = current_setting('orangerail.tenant_id')"},
		}
		actions["slow_action"] = map[string]any{
			"description": "Sleep.",
			"input":       map[string]any{"type": "object"},
			"policy":      map[string]any{"roles": []any{"support"}},
			"execute":     map[string]any{"sql": "SELECT true AS slept FROM pg_sleep(60)"},
		}
	}
}

// whileHeld runs call while another transaction (a superuser's) holds the
// row lock lockSQL takes, and returns call's outcome. The lock is let go
// once call returns — or after a minute, should call still be waiting, so
// that code without limits fails the test on its outcome instead of
// hanging it.
func whileHeld(t *testing.T, pool *pgxpool.Pool, lockSQL string, args []any, call func() *engine.Outcome) *engine.Outcome {
	t.Helper()
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	tag, err := holder.Exec(ctx, lockSQL, args...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("holding the lock: %v rows, %v", tag.RowsAffected(), err)
	}
	done := make(chan *engine.Outcome, 1)
	go func() { done <- call() }()
	select {
	case out := <-done:
		return out
	case <-time.After(time.Minute):
	}
	_ = holder.Rollback(ctx)
	return <-done
}

// wantTimeout holds an outcome to its status and diagnostic.
func wantTimeout(t *testing.T, out *engine.Outcome, status engine.Status, diagnostic engine.Diagnostic) {
	t.Helper()
	if out.Status != status || out.Diagnostic != diagnostic || out.Err == nil || out.CorrelationID == "" {
		t.Fatalf("outcome %s %q (%v), want %s %q", out.Status, out.Diagnostic, out.Err, status, diagnostic)
	}
}

// TestHeldLocksFailCalls: wherever an execution waits on a row another
// transaction holds — the target, a row the effect writes, the approval in
// orangerail's own database — the wait ends at limits.lock_timeout, the
// call fails with its status and diagnostic, the audit verifies clean,
// and once the lock is gone the call succeeds. A statement running past
// limits.statement_timeout is cancelled alike. On the service database
// and on a datasource of its own.
func TestHeldLocksFailCalls(t *testing.T) {
	t.Parallel()
	for _, apart := range []bool{false, true} {
		name := "together"
		if apart {
			name = "apart"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			heldLocksFailCalls(t, apart)
		})
	}
}

func heldLocksFailCalls(t *testing.T, apart bool) {
	b := setupExample(t)
	ctx := context.Background()
	data, dataPool := b.admin, (*pgxpool.Pool)(nil)
	if apart {
		dataURL := testdb.New(t)
		data = testdb.Pool(t, dataURL)
		if _, err := data.Exec(ctx, orders.Seed); err != nil {
			t.Fatal(err)
		}
		dataPool = testdb.RuntimePool(t, dataURL)
	}
	e := engineFor(t, b, editExample(t, shortLimits(t)), dataPool)
	const lockOrder = "SELECT 1 FROM orders WHERE org_id = 'acme' AND id = $1 FOR UPDATE"
	status := func(id string) string {
		var s string
		if err := data.QueryRow(ctx, "SELECT status FROM orders WHERE org_id = 'acme' AND id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The target is held: the re-read under lock waits, and fails before
	// anything is consumed; the approval executes once the lock is gone.
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, e, "acme", id)
	out := whileHeld(t, data, lockOrder, []any{"o-1001"}, func() *engine.Outcome { return e.Check(ctx, support("acme"), id) })
	wantTimeout(t, out, engine.StatusResolveError, engine.DiagnosticDatasourceTimeout)
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged", "approved", "resolve_error"}) {
		t.Fatalf("phases %v", got)
	}
	if v, err := e.ShowApproval(ctx, "acme", id); err != nil || v.Status != "approved" || status("o-1001") != "paid" {
		t.Fatalf("after the held target: approval %+v (%v), order %s", v, err, status("o-1001"))
	}
	verifyClean(t, b.testBundle, "acme")
	want(t, e.Check(ctx, support("acme"), id), engine.StatusOK)
	if status("o-1001") != "cancelled" {
		t.Fatal("the order was not cancelled once the lock was gone")
	}

	// A row the effect writes is held: the effect fails, recorded as
	// such, and nothing of it stays.
	args := json.RawMessage(`{"order_id": "o-1002", "other_id": "o-1003"}`)
	out = whileHeld(t, data, lockOrder, []any{"o-1003"}, func() *engine.Outcome { return e.Call(ctx, support("acme"), "touch_other", args) })
	wantTimeout(t, out, engine.StatusFailed, engine.DiagnosticDatasourceTimeout)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"execution_started", "execution_failed"}) {
		t.Fatalf("phases %v", got)
	}
	var diagnostic string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->>'diagnostic' FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_failed'",
		out.CorrelationID).Scan(&diagnostic); err != nil || diagnostic != string(engine.DiagnosticDatasourceTimeout) {
		t.Fatalf("audited diagnostic %q (%v)", diagnostic, err)
	}
	verifyClean(t, b.testBundle, "acme")
	want(t, e.Call(ctx, support("acme"), "touch_other", args), engine.StatusOK)

	// A statement past the statement timeout is cancelled.
	out = e.Call(ctx, support("acme"), "slow_action", json.RawMessage(`{}`))
	wantTimeout(t, out, engine.StatusFailed, engine.DiagnosticDatasourceTimeout)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"execution_started", "execution_failed"}) {
		t.Fatalf("phases %v", got)
	}
	verifyClean(t, b.testBundle, "acme")

	// The approval itself is held in orangerail's database: the consume
	// waits, and fails with nothing consumed or run.
	staged = e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	id = staged.ApprovalID.String()
	approve(t, e, "acme", id)
	out = whileHeld(t, b.admin, "SELECT 1 FROM orangerail.approvals WHERE id = $1 FOR UPDATE", []any{id}, func() *engine.Outcome {
		return e.Check(ctx, support("acme"), id)
	})
	wantTimeout(t, out, engine.StatusInternalError, engine.DiagnosticStoreTimeout)
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged", "approved"}) {
		t.Fatalf("phases %v", got)
	}
	if v, err := e.ShowApproval(ctx, "acme", id); err != nil || v.Status != "approved" || status("o-1002") != "pending" {
		t.Fatalf("after the held approval: approval %+v (%v), order %s", v, err, status("o-1002"))
	}
	verifyClean(t, b.testBundle, "acme")
	want(t, e.Check(ctx, support("acme"), id), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")
}

// TestTimeoutDiagnosticsAreExplained: an agent told of a timeout reads a
// sentence of its own, for the datasource and for orangerail's database
// alike, never "an unexpected internal error".
func TestTimeoutDiagnosticsAreExplained(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status     engine.Status
		diagnostic engine.Diagnostic
	}{
		{engine.StatusFailed, engine.DiagnosticDatasourceTimeout},
		{engine.StatusResolveError, engine.DiagnosticDatasourceTimeout},
		{engine.StatusInternalError, engine.DiagnosticStoreTimeout},
		{engine.StatusAuditBlocked, engine.DiagnosticStoreTimeout},
	} {
		msg := redact.Message("cancel_order", string(tt.status), "c", string(tt.diagnostic), false)
		if redact.Diagnostic(string(tt.diagnostic)) == "" || strings.Contains(msg, "unexpected") || !strings.Contains(msg, "Retry later") {
			t.Errorf("%s %s: %s", tt.status, tt.diagnostic, msg)
		}
	}
}

// TestNewTenantsCallsDoNotQueue: a tenant's first call holds its
// transaction open — a direct action whose effect, on the service
// database, runs in the transaction of its first record — while another
// replica serves the same new tenant's second call. The second does not
// wait for the first: the tenant was opened in a transaction of its own.
// (It waited on the first's insert of the tenant, and failed at
// limits.lock_timeout.)
func TestNewTenantsCallsDoNotQueue(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	cfg := editExample(t, func(doc map[string]any) {
		shortLimits(t)(doc)
		member(t, doc, "actions")["nap"] = map[string]any{
			"description": "Sleep a second.",
			"input":       map[string]any{"type": "object"},
			"policy":      map[string]any{"roles": []any{"support"}},
			"execute":     map[string]any{"sql": "SELECT true AS slept FROM pg_sleep(1)"},
		}
	})
	first, second := engineFor(t, b, cfg, nil), engineFor(t, b, cfg, nil)
	const tenant = "fresh"

	done := make(chan *engine.Outcome, 1)
	go func() { done <- first.Call(ctx, support(tenant), "nap", json.RawMessage(`{}`)) }()
	// The first call is in its effect, its first record written.
	for napping := false; !napping; {
		if err := b.admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query LIKE '%pg_sleep(1)%' AND pid <> pg_backend_pid()`).Scan(&napping); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Its input refused, the second call's one record is the tenant's
	// second write.
	out := second.Call(ctx, support(tenant), "nap", json.RawMessage(`[1]`))
	want(t, out, engine.StatusInvalidInput)
	if got := phases(t, b.testBundle, tenant, out.CorrelationID); !slices.Equal(got, []string{"invalid_input"}) {
		t.Fatalf("the second call's records: %v", got)
	}
	select {
	case <-done:
		t.Fatal("the first call ended before the second: the test proves nothing")
	default:
	}
	want(t, <-done, engine.StatusOK)
	verifyClean(t, b.testBundle, tenant)
}

// TestUnopenableTenantIsAuditBlocked: a new tenant whose opening waits past
// lock_timeout — another transaction is making its row — fails its call as
// audit_blocked with store_timeout: nothing of the call ran or was
// recorded, as a first append that failed says. Once the other transaction
// is gone the call runs.
func TestUnopenableTenantIsAuditBlocked(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := engineFor(t, b, editExample(t, shortLimits(t)), nil)
	const tenant = "unopened"
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`)
	out := whileHeld(t, b.admin, "INSERT INTO orangerail.tenants (id) VALUES ($1)", []any{tenant}, func() *engine.Outcome {
		return e.Call(ctx, support(tenant), "cancel_order", args)
	})
	wantTimeout(t, out, engine.StatusAuditBlocked, engine.DiagnosticStoreTimeout)
	var records int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = $1", tenant).Scan(&records); err != nil || records != 0 {
		t.Fatalf("%d records of the blocked call (%v)", records, err)
	}
	want(t, e.Call(ctx, support(tenant), "cancel_order", args), engine.StatusNotFound)
	verifyClean(t, b.testBundle, tenant)
}
