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
	note := func(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": "note %d"}`, n)) }

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
		ontologytest.SetYAML("upstreams", fmt.Sprintf(`{carrier: {base_url: %q}}`, upstream.URL)),
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
