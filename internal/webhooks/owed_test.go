package webhooks_test

import (
	"context"
	"slices"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestMessagesGoToTheEndpointsOfTheirTime: a message is owed to the
// endpoints configured, and subscribed to its event, when its event
// happened. The config changes twice between three stagings (an endpoint
// added, then the first one removed); the worker, on the last config,
// sends the added endpoint only what happened since it was configured,
// fails the message owed to the removed one alone rather than send it to
// its replacement, and sends that one once an operator redelivers it. An
// event no endpoint subscribes to queues no message.
func TestMessagesGoToTheEndpointsOfTheirTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	old, added := newReceiver(t), newReceiver(t)
	oldEp, addedEp := endpoint(t, old.URL, false), endpoint(t, added.URL+"/hook", false, ontology.WebhookApprovalPending)

	before := b.open(t, oldEp)
	both := b.open(t, oldEp, addedEp)
	after := b.open(t, addedEp)
	stage := func(e *engine.Engine, reason string) string {
		t.Helper()
		b.engine = e
		return b.stage(t, reason)
	}
	first, second, third := stage(before, "before"), stage(both, "both"), stage(after, "after")
	// The added endpoint subscribes to stagings alone: a rejection, once
	// the first endpoint is gone, is owed to none.
	if out, _ := after.DecideBreakGlassApproval(ctx, after.BoundAsStore(b.admin), "acme", "the desk is down", engine.Decision{ApprovalID: third}); out.Status != engine.StatusOK {
		t.Fatalf("break glass: %s %s %v", out.Status, out.Code, out.Err)
	}

	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	byApproval := map[string]*store.WebhookMessage{}
	for _, m := range msgs {
		if m.Event != store.WebhookApprovalPending {
			t.Fatalf("a %s message was queued, owed to no endpoint", m.Event)
		}
		byApproval[m.ApprovalID.String()] = m
	}
	oldKey, addedKey := ontology.WebhookKey(oldEp.URL), ontology.WebhookKey(addedEp.URL)
	for id, want := range map[string][]string{first: {oldKey}, second: {oldKey, addedKey}, third: {addedKey}} {
		if m := byApproval[id]; m == nil || !slices.Equal(m.OwedTo, want) {
			t.Fatalf("the message of %s is owed to %v, want %v", id, m, want)
		}
	}

	// One attempt: a message none of whose endpoints is configured here
	// is failed once its attempts run out (another replica may know them).
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{addedEp}, MaxAttempts: 1})
	if n := b.runOnce(t, w); n != 3 {
		t.Fatalf("handled %d messages, want 3", n)
	}
	sent := func() []string {
		var ids []string
		for _, d := range added.deliveries() {
			ids = append(ids, d.header.Get("webhook-id"))
		}
		return ids
	}
	if got, want := sent(), []string{byApproval[second].ID.String(), byApproval[third].ID.String()}; !slices.Equal(got, want) {
		t.Fatalf("the added endpoint was sent %v, want %v (what happened since it was configured)", got, want)
	}
	if n := len(old.deliveries()); n != 0 {
		t.Fatalf("the removed endpoint was sent %d messages", n)
	}
	failed, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookFailed, 10)
	if err != nil || len(failed) != 1 || failed[0].ID != byApproval[first].ID || failed[0].LastError == nil ||
		*failed[0].LastError != "not sent: none of the endpoints configured when its event happened is configured now; `webhooks redeliver` sends it to those configured now" {
		t.Fatalf("failed: %+v %v", failed, err)
	}

	// An operator redelivers it: to the endpoints configured now.
	if m, err := webhooks.Redeliver(ctx, b.runtime, "acme", failed[0].ID.String(), b.clock.Now()); err != nil || m.OwedTo != nil {
		t.Fatalf("redeliver: %+v %v", m, err)
	}
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("handled %d messages, want the one redelivered", n)
	}
	if got := sent(); len(got) != 3 || got[2] != byApproval[first].ID.String() {
		t.Fatalf("after the redelivery the added endpoint was sent %v", got)
	}
}
