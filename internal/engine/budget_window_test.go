package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestBudgetWindowNeverMovesBack: a spend reads its minute and day from
// the start of its transaction, before it waits for the counts' lock; one
// that waited while a spend of the next minute (or day) committed finds
// the row's window newer than its own. It counts in the row's window:
// refused where that window is spent, and the row stays in it — it no
// longer resets the count and moves the window back, admitting a spend
// the minute's budget had run out of and forgetting the newer window's.
// The row is set as such a later spend leaves it.
func TestBudgetWindowNeverMovesBack(t *testing.T) {
	t.Parallel()
	clearOfMinuteEnd(t)
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.SetYAML("actions.add_order_note.budget", "{per_minute: 2, per_day: 5}"))
	note := json.RawMessage(`{"order_id": "o-1001", "note": "n"}`)
	want(t, e.Call(ctx, support("acme"), "add_order_note", note), engine.StatusOK)
	counts := func() string {
		t.Helper()
		var row string
		if err := b.admin.QueryRow(ctx, "SELECT concat_ws(' ', minute_start, minute_calls, day_start, day_calls) FROM orangerail.budget_counts WHERE tenant_id = 'acme'").Scan(&row); err != nil {
			t.Fatal(err)
		}
		return row
	}
	for _, tt := range []struct {
		name  string
		later string // the row as a later window's spends leave it
		limit engine.BudgetLimit
		max   time.Duration
	}{
		{"the next minute's", `minute_start = date_trunc('minute', now(), 'UTC') + interval '1 minute', minute_calls = 2`, engine.LimitPerMinute, 2 * time.Minute},
		{"the next day's", `day_start = date_trunc('day', now(), 'UTC') + interval '1 day', day_calls = 5`, engine.LimitPerDay, 48 * time.Hour},
	} {
		if _, err := b.admin.Exec(ctx, "UPDATE orangerail.budget_counts SET "+tt.later+" WHERE tenant_id = 'acme' AND action = 'add_order_note'"); err != nil {
			t.Fatal(err)
		}
		before := counts()
		wantLimited(t, e.Call(ctx, support("acme"), "add_order_note", note), tt.limit, map[engine.BudgetLimit]int{engine.LimitPerMinute: 2, engine.LimitPerDay: 5}[tt.limit], tt.max)
		if after := counts(); after != before {
			t.Fatalf("after a spend behind %s window, the counts went from %s to %s", tt.name, before, after)
		}
	}
}
