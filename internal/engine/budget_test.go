package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// clearOfMinuteEnd waits, if the minute is about to turn, until it has:
// a test counting calls in one minute must not straddle two.
func clearOfMinuteEnd(t *testing.T) {
	t.Helper()
	if now := time.Now().UTC(); now.Second() >= 50 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
	}
}

// wantLimited asserts a budget's refusal: its status, code and limit, the
// calls it allows and a wait within max.
func wantLimited(t *testing.T, out *engine.Outcome, limit engine.BudgetLimit, allowed int, max time.Duration) {
	t.Helper()
	want(t, out, engine.StatusRateLimited)
	r := out.RateLimit
	if out.Code != errcode.RateLimited || r == nil || r.Limit != limit || r.Allowed != allowed || r.RetryAfter <= 0 || r.RetryAfter > max || r.Detail == "" {
		t.Fatalf("refusal %s %+v, want %s allowing %d within %s", out.Code, r, limit, allowed, max)
	}
}

// budgetCounts reads a tenant's counts of an action (as the superuser):
// this minute's and today's calls, and the leases live.
func budgetCounts(t *testing.T, b *testBundle, tenant, action string) (minute, day, leases int) {
	t.Helper()
	ctx := context.Background()
	err := b.admin.QueryRow(ctx, `SELECT coalesce(max(minute_calls), 0), coalesce(max(day_calls), 0) FROM orangerail.budget_counts
		WHERE tenant_id = $1 AND action = $2`, tenant, action).Scan(&minute, &day)
	if err == nil {
		err = b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.budget_leases WHERE tenant_id = $1 AND action = $2 AND expires_at > now()`,
			tenant, action).Scan(&leases)
	}
	if err != nil {
		t.Fatal(err)
	}
	return minute, day, leases
}

// TestBudgetsSharedByReplicas: two engines on one database, as two
// replicas, spend one budget per tenant and action — per minute and per
// day — and each refusal names its limit, what it allows and when it
// lifts, and is recorded; another tenant's budget is its own.
func TestBudgetsSharedByReplicas(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	note := func(n int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": "note %d"}`, n))
	}

	t.Run("per minute", func(t *testing.T) {
		clearOfMinuteEnd(t)
		edit := ontologytest.SetYAML("actions.add_order_note.budget", "{per_minute: 2}")
		one := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edit)
		two := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edit)
		want(t, one.Call(ctx, support("acme"), "add_order_note", note(1)), engine.StatusOK)
		want(t, two.Call(ctx, support("acme"), "add_order_note", note(2)), engine.StatusOK)
		out := one.Call(ctx, support("acme"), "add_order_note", note(3))
		wantLimited(t, out, engine.LimitPerMinute, 2, time.Minute)
		if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"rate_limited"}) {
			t.Fatalf("phases %v", got)
		}
		if r := engine.RefusalOf(out); r != engine.RefusalBudget {
			t.Fatalf("the host log's refusal %q", r)
		}
		wantLimited(t, two.Call(ctx, support("acme"), "add_order_note", note(4)), engine.LimitPerMinute, 2, time.Minute)
		// Another tenant spends its own budget.
		want(t, two.Call(ctx, support("globex"), "add_order_note", note(5)), engine.StatusOK)
		if minute, day, leases := budgetCounts(t, b.testBundle, "acme", "add_order_note"); minute != 2 || day != 2 || leases != 0 {
			t.Fatalf("acme counts minute %d day %d leases %d", minute, day, leases)
		}
		var notes int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM order_notes WHERE org_id = 'acme'").Scan(&notes); err != nil || notes != 2 {
			t.Fatalf("%d notes (%v)", notes, err)
		}
	})

	t.Run("per day", func(t *testing.T) {
		// The per-minute run spent two of acme's calls today: a day of three
		// allows one more, whatever the minute allows.
		edit := ontologytest.SetYAML("actions.add_order_note.budget", "{per_minute: 3, per_day: 3}")
		one := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edit)
		two := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edit)
		want(t, two.Call(ctx, support("acme"), "add_order_note", note(6)), engine.StatusOK)
		out := one.Call(ctx, support("acme"), "add_order_note", note(7))
		wantLimited(t, out, engine.LimitPerDay, 3, 24*time.Hour)
		if !strings.Contains(out.RateLimit.Detail, "renews at") {
			t.Fatalf("detail %q", out.RateLimit.Detail)
		}
	})
	verifyClean(t, b.testBundle, "acme")
	verifyClean(t, b.testBundle, "globex")
}

// TestBudgetConcurrency: while one replica's execution runs, a second
// call on another replica is refused for max_concurrent, for a SQL effect
// and an upstream call alike; once it ends, the slot is free.
func TestBudgetConcurrency(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()

	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"rate": 7}`))
	}))
	defer upstream.Close()
	edits := []ontologytest.Edit{
		ontologytest.SetYAML("upstreams.carrier", fmt.Sprintf(`{base_url: %q}`, upstream.URL)),
		ontologytest.SetYAML("actions.quote", `
description: Ask the carrier for a rate.
input: {type: object}
policy: {roles: [support]}
destructive: false
budget: {max_concurrent: 1}
execute: {http: {upstream: carrier, method: GET, path: /rates}}`),
		ontologytest.SetYAML("actions.slow_note", `
description: Sleep, then answer.
input: {type: object, properties: {seconds: {type: number}}}
policy: {roles: [support]}
destructive: false
budget: {max_concurrent: 1}
execute: {sql: "SELECT true AS slept FROM pg_sleep(:seconds)"}`),
	}
	one := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edits...)
	two := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edits...)
	if got := ontologytest.Parse(t, orders.Config, edits...).Actions["quote"].Risk(); got != ontology.RiskRead {
		t.Fatalf("quote's risk %s", got)
	}

	// An upstream call held open by the upstream.
	var wg sync.WaitGroup
	var first *engine.Outcome
	wg.Go(func() { first = one.Call(ctx, support("acme"), "quote", json.RawMessage(`{}`)) })
	<-arrived
	wantLimited(t, two.Call(ctx, support("acme"), "quote", json.RawMessage(`{}`)), engine.LimitConcurrent, 1, time.Second)
	close(release)
	wg.Wait()
	want(t, first, engine.StatusOK)
	want(t, two.Call(ctx, support("acme"), "quote", json.RawMessage(`{}`)), engine.StatusOK)

	// A SQL effect held open by pg_sleep: the slot is taken once its lease
	// is written, which the call's own budget row shows.
	wg.Go(func() { first = one.Call(ctx, support("acme"), "slow_note", json.RawMessage(`{"seconds": 2}`)) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, leases := budgetCounts(t, b.testBundle, "acme", "slow_note"); leases == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow call never took its slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantLimited(t, two.Call(ctx, support("acme"), "slow_note", json.RawMessage(`{"seconds": 0}`)), engine.LimitConcurrent, 1, time.Second)
	wg.Wait()
	want(t, first, engine.StatusOK)
	want(t, two.Call(ctx, support("acme"), "slow_note", json.RawMessage(`{"seconds": 0}`)), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")
}

// verifyBoth holds a tenant's chain to both verifiers: the engine's, and
// the SQL functions an auditor runs with nothing but SQL.
func verifyBoth(t *testing.T, b *testBundle, tenant string) {
	t.Helper()
	verifyClean(t, b, tenant)
	for _, fn := range []string{"audit_verify", "audit_unfinished", "approvals_unaudited", "approvals_unexplained", "audit_unexplained_executions"} {
		var n int
		if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM orangerail."+fn+"($1)", tenant).Scan(&n); err != nil || n != 0 {
			t.Fatalf("orangerail.%s(%s): %d rows (%v)", fn, tenant, n, err)
		}
	}
}

// TestBudgetSpentOnlyWhenTheEffectRuns: a malformed call, one a gate or
// the precondition refuses, one merely staged, a poll by a caller no
// longer allowed, and an approval a re-check refuses after its consume
// spend nothing; only the execution that runs its effect does.
func TestBudgetSpentOnlyWhenTheEffectRuns(t *testing.T) {
	t.Parallel()
	clearOfMinuteEnd(t)
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.SetYAML("actions.cancel_order.budget", "{per_minute: 1}"))
	unspent := func(when string) {
		t.Helper()
		if minute, day, leases := budgetCounts(t, b.testBundle, "acme", "cancel_order"); minute != 0 || day != 0 || leases != 0 {
			t.Fatalf("%s: minute %d day %d leases %d", when, minute, day, leases)
		}
	}
	noScope := support("acme")
	noScope.Scopes = nil

	want(t, e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001"}`)), engine.StatusInvalidInput)
	want(t, e.Call(ctx, noScope, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`)), engine.StatusDenied)
	want(t, e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1003", "reason": "shipped"}`)), engine.StatusPreconditionFailed)
	first := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, first, engine.StatusApprovalPending)
	second := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "y"}`))
	want(t, second, engine.StatusApprovalPending)
	unspent("refused and staged calls")

	approve(t, e, "acme", first.ApprovalID.String())
	approve(t, e, "acme", second.ApprovalID.String())
	// A poller without the action's scope executes nothing.
	want(t, e.Check(ctx, noScope, first.ApprovalID.String()), engine.StatusDenied)
	// An approval the re-check refuses after its consume: the order
	// shipped meanwhile. The budget was spent, and given back: the effect
	// never ran.
	if _, err := b.admin.Exec(ctx, "UPDATE orders SET status = 'shipped' WHERE org_id = 'acme' AND id = 'o-1002'"); err != nil {
		t.Fatal(err)
	}
	want(t, e.Check(ctx, support("acme"), second.ApprovalID.String()), engine.StatusPreconditionFailed)
	unspent("a denied poll and a refused execution")

	want(t, e.Check(ctx, support("acme"), first.ApprovalID.String()), engine.StatusOK)
	if minute, day, leases := budgetCounts(t, b.testBundle, "acme", "cancel_order"); minute != 1 || day != 1 || leases != 0 {
		t.Fatalf("after the execution: minute %d day %d leases %d", minute, day, leases)
	}
	verifyBoth(t, b.testBundle, "acme")
}

// TestBudgetRefusalLeavesTheApprovalPollable: an approved approval a
// budget refuses stays approved — nothing was consumed — and the refusal
// is recorded under it; a later poll, the budget free again, executes it.
// Both verifiers pass over the chain.
func TestBudgetRefusalLeavesTheApprovalPollable(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)

	// Another replica is executing cancel_order (destructive: one at once).
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
		VALUES ('acme', 'cancel_order', gen_random_uuid(), 'another', now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	out := b.engine.Check(ctx, support("acme"), id)
	wantLimited(t, out, engine.LimitConcurrent, 1, time.Second)
	if out.ApprovalID == nil || out.ApprovalID.String() != id || out.CorrelationID != id {
		t.Fatalf("refusal names approval %v, correlation %s", out.ApprovalID, out.CorrelationID)
	}
	if v, err := b.engine.ShowApproval(ctx, "acme", id); err != nil || v.Status != "approved" {
		t.Fatalf("after the refusal: %+v %v", v, err)
	}
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("the refused call ran")
	}
	verifyBoth(t, b.testBundle, "acme")

	if _, err := b.admin.Exec(ctx, "DELETE FROM orangerail.budget_leases WHERE correlation_id = 'another'"); err != nil {
		t.Fatal(err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "cancelled" {
		t.Fatal("the later poll did not execute")
	}
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged", "approved", "rate_limited", "execution_started", "execution_succeeded"}) {
		t.Fatalf("phases %v", got)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusConsumed)
	verifyBoth(t, b.testBundle, "acme")
}

// panicEffect panics as it runs.
type panicEffect struct{}

func (panicEffect) Transactional() bool { return true }
func (panicEffect) Run(context.Context, *engine.EffectCall) (engine.EffectResult, error) {
	panic("the effect panicked")
}

// TestBudgetSlotReleased: an execution's slot is free again after it
// succeeds, fails or panics; and when its replica dies holding it, once
// its lease expires.
func TestBudgetSlotReleased(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	one := ontologytest.SetYAML("actions.add_order_note.budget", "{max_concurrent: 1}")
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, one)
	note := json.RawMessage(`{"order_id": "o-1001", "note": "n"}`)
	free := func(when string) {
		t.Helper()
		if _, _, leases := budgetCounts(t, b.testBundle, "acme", "add_order_note"); leases != 0 {
			t.Fatalf("after %s: %d leases held", when, leases)
		}
	}
	want(t, e.Call(ctx, support("acme"), "add_order_note", note), engine.StatusOK)
	free("a success")

	if _, err := b.admin.Exec(ctx, "REVOKE INSERT ON order_notes FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	want(t, e.Call(ctx, support("acme"), "add_order_note", note), engine.StatusFailed)
	free("a failure")

	cfg := ontologytest.Parse(t, orders.Config, one)
	panics := effects.Factories()
	panics[ontology.ExecuteSQL] = func(string, *ontology.Action) (engine.Effect, error) { return panicEffect{}, nil }
	panicking, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Logger: quiet,
		Effects: panics})
	if err != nil {
		t.Fatal(err)
	}
	want(t, panicking.Call(ctx, support("acme"), "add_order_note", note), engine.StatusInternalError)
	free("a panic")
	if _, err := b.admin.Exec(ctx, "GRANT INSERT (org_id, order_id, note) ON order_notes TO orangerail_runtime"); err != nil {
		t.Fatal(err)
	}

	// A replica that dies mid-execution never releases its slot: the
	// lease (its effect's deadline and a statement timeout: here 0.5s +
	// 5s + 0.5s) frees it.
	short := []ontologytest.Edit{one, ontologytest.SetYAML("limits", "{statement_timeout: 500ms}")}
	dying := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, short...)
	engine.SetKeepLeases(dying, true)
	start := time.Now()
	want(t, dying.Call(ctx, support("acme"), "add_order_note", note), engine.StatusOK)
	other := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, short...)
	wantLimited(t, other.Call(ctx, support("acme"), "add_order_note", note), engine.LimitConcurrent, 1, time.Second)
	for {
		out := other.Call(ctx, support("acme"), "add_order_note", note)
		if out.Status == engine.StatusOK {
			break
		}
		wantLimited(t, out, engine.LimitConcurrent, 1, time.Second)
		if time.Since(start) > 20*time.Second {
			t.Fatal("the dead replica's slot was never freed")
		}
		time.Sleep(out.RateLimit.RetryAfter)
	}
	if held := time.Since(start); held < 5*time.Second {
		t.Fatalf("the slot was freed after %s, before its lease expired", held)
	}
	verifyBoth(t, b.testBundle, "acme")
}

// TestBudgetRefusalIsNotFiledUnderAKey: an idempotent call a budget
// refuses files nothing under its key, so a retry with the key, once the
// budget lifts, runs instead of getting the refusal back.
func TestBudgetRefusalIsNotFiledUnderAKey(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.add_order_note.idempotent", true), ontologytest.SetYAML("actions.add_order_note.budget", "{max_concurrent: 1}"))
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
		VALUES ('acme', 'add_order_note', gen_random_uuid(), 'another', now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"order_id": "o-1001", "note": "once", "idempotencyKey": "k-1"}`)
	wantLimited(t, e.Call(ctx, support("acme"), "add_order_note", args), engine.LimitConcurrent, 1, time.Second)
	if _, err := b.admin.Exec(ctx, "DELETE FROM orangerail.budget_leases WHERE correlation_id = 'another'"); err != nil {
		t.Fatal(err)
	}
	first := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusOK)
	again := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, again, engine.StatusOK)
	if again.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry ran again: %s, first %s", again.CorrelationID, first.CorrelationID)
	}
}
