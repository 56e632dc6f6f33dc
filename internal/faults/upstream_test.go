package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// carrier is an upstream that makes one label per Idempotency-Key, as the
// example's carrier does, and counts what it made: the effect the
// database cannot see.
type carrier struct {
	*httptest.Server
	mu     sync.Mutex
	labels map[string]int // Idempotency-Key → requests that made or found its label
}

func newCarrier(t *testing.T) *carrier {
	t.Helper()
	c := &carrier{labels: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		c.mu.Lock()
		c.labels[key]++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"label_id": %q, "tracking_number": "1Z999", "label_url": "https://carrier.example.com/l/1"}`, key)
	}))
	t.Cleanup(c.Close)
	return c
}

// made is how many labels the carrier made, and how many requests asked.
func (c *carrier) made() (labels, requests int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.labels {
		labels++
		requests += n
	}
	return labels, requests
}

// upstreamBundle serves the example's create_return_label, an upstream
// call, against c, through a pool the killer traces.
func upstreamBundle(t *testing.T, c *carrier) *bundle {
	t.Helper()
	return setupOn(t, testdb.New(t), ontologytest.Set("upstreams.shipping", map[string]any{"base_url": c.URL}))
}

// labelLifecycle stages a return label, approves it and polls until it
// executed or a poll answers outcome_unknown, retrying each step after a
// classified failure as an agent or approver would.
func (b *bundle) labelLifecycle(t *testing.T) (id string, polls []*engine.Outcome) {
	t.Helper()
	input := json.RawMessage(`{"order_id": "o-1003", "reason": "arrived damaged", "weight_grams": 1200}`)
	staged := b.call(t, "stage", func(ctx context.Context) *engine.Outcome {
		return b.engine.Call(ctx, agent, "create_return_label", input)
	})
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s (%v)", staged.Status, staged.Err)
	}
	id = staged.ApprovalID.String()
	v, err := b.engine.ShowApproval(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if out := b.call(t, "decide", func(ctx context.Context) *engine.Outcome {
		return b.engine.Decide(ctx, approver, engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest})
	}); out.Status != engine.StatusOK {
		t.Fatalf("decide: %s (%v)", out.Status, out.Err)
	}
	for range attempts {
		out := b.call(t, "check", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
		polls = append(polls, out)
		if out.Status == engine.StatusOK || out.Status == engine.StatusConsumed || out.Status == engine.StatusOutcomeUnknown {
			break
		}
	}
	return id, polls
}

// requireFinishedOrFlagged checks the invariants of an upstream effect's
// run: none is violated but an unfinished execution, and each unfinished
// one is the execution of an approval whose poll answered
// outcome_unknown — every effect the database cannot see either finished
// in the audit log or was flagged.
func requireFinishedOrFlagged(t *testing.T, b *bundle, flagged map[string]bool) {
	t.Helper()
	vs, err := faults.Check(context.Background(), b.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Kind == faults.KindUnfinished && len(flagged) > 0 && flaggedIn(v.Detail, flagged) {
			continue
		}
		t.Errorf("invariant violated: %s", v)
	}
}

func flaggedIn(detail string, flagged map[string]bool) bool {
	for id := range flagged {
		if strings.Contains(detail, "(correlation "+id+")") {
			return true
		}
	}
	return false
}

// killed holds the killer to one fault that happened and no failure of
// its own.
func killed(t *testing.T, b *bundle) {
	t.Helper()
	if err := b.killer.Err(); err != nil {
		t.Fatal(err)
	}
	if b.killer.Kills() == 0 {
		t.Fatal("no backend was terminated: the fault never happened")
	}
	for _, l := range b.log {
		t.Log(l)
	}
}

// TestUpstreamKillAfterConsume: the backend of an upstream call's consume
// dies before execution_started commits with it: the consume rolls back,
// the carrier is not called, the poll fails classified, and the next poll
// calls the carrier once — one label, one request, every invariant.
func TestUpstreamKillAfterConsume(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b := upstreamBundle(t, c)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: ApprovalConsume"}, When: faults.After})
	_, polls := b.labelLifecycle(t)
	fired(t, trap)
	killed(t, b)
	executedOnce(t, polls)
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Fatalf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
	requireFinishedOrFlagged(t, b, nil)
}

// TestUpstreamKillBeforeFinish: the carrier made the label, and the
// backend that would record execution_succeeded dies: the poll answers
// outcome_unknown (never "nothing ran", never "done"), the next poll
// answers consumed without calling the carrier again, and the invariant
// checker finds exactly that execution unfinished — the effect the
// database cannot see is flagged.
func TestUpstreamKillBeforeFinish(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b := upstreamBundle(t, c)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditAppend"}, Arg: `"phase":"execution_succeeded"`, When: faults.Before})
	id, polls := b.labelLifecycle(t)
	fired(t, trap)
	killed(t, b)
	if last := polls[len(polls)-1]; last.Status != engine.StatusOutcomeUnknown {
		t.Fatalf("the poll answered %s (%v), want outcome_unknown", last.Status, last.Err)
	}
	again := b.call(t, "check again", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
	if again.Status != engine.StatusConsumed {
		t.Fatalf("a poll after outcome_unknown answered %s, want consumed", again.Status)
	}
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Fatalf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
	requireFinishedOrFlagged(t, b, map[string]bool{id: true})
	vs, err := faults.Check(context.Background(), b.admin)
	if err != nil {
		t.Fatal(err)
	}
	unfinished := 0
	for _, v := range vs {
		if v.Kind == faults.KindUnfinished {
			unfinished++
		}
	}
	if unfinished == 0 {
		t.Fatal("the execution the poll flagged outcome_unknown is not reported unfinished")
	}
}
