package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestSlowEndpointDoesNotHoldTheOthers: an endpoint that has not answered
// yet does not keep the round's other endpoint from being sent the same
// messages. The round sent each message to its endpoints one after the
// other, so every endpoint after a slow one waited as long as it took.
// The slow endpoint is first in the config and answers only when the test
// lets it; the other is sent both messages, in order, meanwhile.
func TestSlowEndpointDoesNotHoldTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slow := newHeldEndpoint(t, func(int32) bool { return true })
	fast := newReceiver(t)
	// The POSTs' timeout is long, so the slow endpoint is slow, not down.
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, slow.URL, false), endpoint(t, fast.URL, false)}, Timeout: time.Hour})
	first, second := b.stage(t, "first"), b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(context.Background())
		done <- err
	}()
	<-slow.arrived
	// Only a failsafe, so that the defect fails the test rather than hang
	// it: with the fix the fast endpoint's messages come without waiting
	// on any timer.
	failsafe := time.After(30 * time.Second)
	for range 2 {
		select {
		case <-fast.arrived:
		case <-failsafe:
			t.Fatalf("the fast endpoint was sent %d of 2 messages while the slow one had not answered", len(fast.deliveries()))
		}
	}
	got := approvalIDs(t, fast.deliveries())
	if len(got) != 2 || got[0] != first || got[1] != second {
		t.Fatalf("the fast endpoint was sent %v, want %v in order", got, []string{first, second})
	}

	slow.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookDelivered, 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("delivered: %d %v, want both", len(msgs), err)
	}
	for _, m := range msgs {
		if len(m.DeliveredTo) != 2 {
			t.Errorf("message %s delivered to %v, want both endpoints", m.ID, m.DeliveredTo)
		}
	}
}

// approvalIDs are the approvals of ds, in the order they were sent.
func approvalIDs(t *testing.T, ds []delivery) []string {
	t.Helper()
	var ids []string
	for _, d := range ds {
		var p struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.Data.ID)
	}
	return ids
}

// TestMessageIsRecordedOnceEveryEndpointIsPastIt: a message every endpoint
// has answered is recorded delivered, and released, while a slow endpoint
// is still sent a later message of the round. The round recorded nothing
// until its slowest endpoint was done with every message: the first
// message, sent everywhere, stayed leased (its redelivery refused
// X_WEBHOOK_IN_FLIGHT, "being sent now") for as long as the slow endpoint
// took over the others, and a crash meanwhile sent it everywhere again.
func TestMessageIsRecordedOnceEveryEndpointIsPastIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// The slow endpoint answers the first message at once and holds the
	// second until the test lets it go.
	slow := newHeldEndpoint(t, func(n int32) bool { return n == 2 })
	fast := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, slow.URL, false), endpoint(t, fast.URL, false)}, Timeout: time.Hour})
	b.stage(t, "first")
	b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	// Each endpoint has been sent the second message, so each is past the
	// first: whichever passed it last recorded it before sending on.
	failsafe := time.After(30 * time.Second)
	for _, arrived := range []<-chan struct{}{slow.arrived, slow.arrived, fast.arrived, fast.arrived} {
		select {
		case <-arrived:
		case <-failsafe:
			t.Fatal("the endpoints were not sent both messages")
		}
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	first := msgs[1] // newest first
	if first.State != store.WebhookDelivered || len(first.DeliveredTo) != 2 {
		t.Fatalf("the first message, answered by both endpoints, is %s (delivered to %v) while the slow endpoint is sent the second, want delivered to both",
			first.State, first.DeliveredTo)
	}
	if _, err := webhooks.Redeliver(ctx, b.runtime, "acme", first.ID.String(), b.clock.Now()); err != nil {
		t.Fatalf("redelivering the first message, which no worker is sending: %v", err)
	}

	slow.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	delivered, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookDelivered, 10)
	if err != nil || len(delivered) != 1 || delivered[0].ID != msgs[0].ID || len(delivered[0].DeliveredTo) != 2 {
		t.Fatalf("delivered: %+v %v, want the second message, to both endpoints", delivered, err)
	}
}

// TestMessageNotOwedToTheSlowEndpointIsNotHeldByIt: a message the slow
// endpoint is not owed (it does not subscribe to its event) is recorded
// and released once the endpoints owed it have answered. The slow
// endpoint's sender counted as "not past" every message after the one it
// was held on, owed to it or not, so a message sent everywhere it was
// owed stayed queued and leased (its redelivery refused
// X_WEBHOOK_IN_FLIGHT, a crash sending it again) until the slow endpoint
// answered a message that was not its own.
func TestMessageNotOwedToTheSlowEndpointIsNotHeldByIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	slow := newHeldEndpoint(t, func(int32) bool { return true })
	fast := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{
		endpoint(t, slow.URL, false, store.WebhookApprovalPending), endpoint(t, fast.URL, false),
	}, Timeout: time.Hour})
	// Pending (both), rejected (the fast endpoint's only), pending (both).
	first := b.stage(t, "first")
	view, err := b.engine.ShowApproval(ctx, "acme", first)
	if err != nil {
		t.Fatal(err)
	}
	if out := b.engine.Decide(ctx, &engine.Caller{Subject: "alice@example.com", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman},
		engine.Decision{ApprovalID: first, Approve: false, Digest: view.Digest, Note: "no"}); out.Status != engine.StatusOK {
		t.Fatalf("reject: %s %v", out.Status, out.Err)
	}
	b.stage(t, "third")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	// The fast endpoint is sent the third message, so it is past the
	// rejection, which no other endpoint is owed.
	failsafe := time.After(30 * time.Second)
	for _, arrived := range []<-chan struct{}{slow.arrived, fast.arrived, fast.arrived, fast.arrived} {
		select {
		case <-arrived:
		case <-failsafe:
			t.Fatal("the endpoints were not sent their messages")
		}
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	rejection := msgs[1] // newest first
	if rejection.Event != store.WebhookApprovalRejected {
		t.Fatalf("the second message is %s, want the rejection", rejection.Event)
	}
	if rejection.State != store.WebhookDelivered || len(rejection.DeliveredTo) != 1 {
		t.Fatalf("the rejection, owed only to the fast endpoint, which answered it, is %s (delivered to %v) while the slow endpoint holds an earlier message, want delivered",
			rejection.State, rejection.DeliveredTo)
	}

	slow.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	delivered, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookDelivered, 10)
	if err != nil || len(delivered) != 3 {
		t.Fatalf("delivered: %d %v, want all three", len(delivered), err)
	}
}

// heldEndpoint is an endpoint that holds each request hold picks (by its
// number, from 1) until the test releases them, and answers the others at
// once; each request's arrival is signalled on arrived.
type heldEndpoint struct {
	URL      string
	arrived  chan struct{}
	requests atomic.Int32
	// release lets every held request answer; it may be called again, and
	// is at cleanup.
	release func()
}

func newHeldEndpoint(t *testing.T, hold func(n int32) bool) *heldEndpoint {
	t.Helper()
	h := &heldEndpoint{arrived: make(chan struct{}, 10)}
	released := make(chan struct{})
	var once sync.Once
	h.release = func() { once.Do(func() { close(released) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		n := h.requests.Add(1)
		h.arrived <- struct{}{}
		if hold(n) {
			<-released
		}
	}))
	h.URL = srv.URL
	// Released before the server closes, which waits on its handlers.
	t.Cleanup(srv.Close)
	t.Cleanup(h.release)
	return h
}
