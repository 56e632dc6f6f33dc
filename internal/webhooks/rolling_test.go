package webhooks_test

import (
	"testing"

	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestReplicaOnAnOlderConfigDoesNotFailAnotherReplicasMessage:
// during a rolling deploy that adds an endpoint, a replica already on the
// new config stages an approval, so its message is owed to the new
// endpoint. Any replica's worker may claim it (FOR UPDATE SKIP LOCKED); a
// replica still on the old config does not know the new endpoint and marks
// the message failed ("none of the endpoints configured when its event
// happened is configured now"), so the new endpoint is never sent it,
// though it is configured, on every replica, a minute later.
func TestReplicaOnAnOlderConfigDoesNotFailAnotherReplicasMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old, added := newReceiver(t), newReceiver(t)
	oldEp, addedEp := endpoint(t, old.URL, false), endpoint(t, added.URL+"/hook", false, store.WebhookApprovalPending)

	// The new replica's engine (its config names the added endpoint,
	// replacing the old one) stages: the message is owed to the added one.
	b.engine = b.open(t, addedEp)
	b.stage(t, "staged on the new replica")

	// The old replica's worker (its config names only the old endpoint)
	// claims the message first.
	oldWorker := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{oldEp}})
	b.runOnce(t, oldWorker)

	// The new replica's worker runs next (and later).
	newWorker := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{addedEp}})
	for range 3 {
		b.runOnce(t, newWorker)
		b.clock.Advance(webhooks.BackoffMax)
	}
	if n := len(added.deliveries()); n != 1 {
		msgs, _ := webhooks.List(t.Context(), b.runtime, "acme", "", 10)
		for _, m := range msgs {
			t.Logf("message %s state %s last_error %v", m.ID, m.State, deref(m.LastError))
		}
		t.Fatalf("the endpoint the message is owed to, configured on the replica that staged it, was sent it %d times, want 1", n)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestReplicaOnAnOlderConfigLeavesTheNewEndpointItsMessage: a message owed
// to an endpoint both configs name and to one only the newer names, taken
// first by a replica on the older config, is sent there to the endpoint it
// knows and left — not marked delivered — for a replica that names the
// other, which sends it there alone.
func TestReplicaOnAnOlderConfigLeavesTheNewEndpointItsMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kept, added := newReceiver(t), newReceiver(t)
	keptEp, addedEp := endpoint(t, kept.URL, false), endpoint(t, added.URL+"/hook", false)

	b.engine = b.open(t, keptEp, addedEp)
	b.stage(t, "staged on the new replica")

	oldWorker := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{keptEp}})
	b.runOnce(t, oldWorker)
	msgs, err := webhooks.List(t.Context(), b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].State == store.WebhookDelivered {
		t.Fatalf("after the old replica: %+v %v", msgs, err)
	}
	newWorker := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{keptEp, addedEp}})
	for range 3 {
		b.clock.Advance(webhooks.BackoffMax)
		b.runOnce(t, newWorker)
	}
	if k, a := len(kept.deliveries()), len(added.deliveries()); k != 1 || a != 1 {
		t.Fatalf("the endpoint both configs name was sent it %d times, the added one %d; want 1 and 1", k, a)
	}
	msgs, err = webhooks.List(t.Context(), b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].State != store.WebhookDelivered {
		t.Fatalf("at last: %+v %v", msgs, err)
	}
}
