package webhooks_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestLeaseCoversOneSenderNotEveryEndpoint: a claimed message's lease
// covers a round whose endpoints are sent the batch side by side (each
// sender at most Batch × Timeout), not one that sent it to them one after
// the other. It was Batch × endpoints × Timeout, so a message a crashed
// worker held waited that much longer for its retry. Three endpoints, a
// batch of two, an hour's timeout: the lease is at least the two hours one
// sender may take, and less than the six of three in turn.
func TestLeaseCoversOneSenderNotEveryEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := newHeldEndpoint(t, func(int32) bool { return true })
	a, c := newReceiver(t), newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, held.URL, false), endpoint(t, a.URL, false), endpoint(t, c.URL, false)},
		Timeout: time.Hour, Batch: 2})
	b.stage(t, "leased")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(context.Background())
		done <- err
	}()
	<-held.arrived
	msgs, err := webhooks.List(context.Background(), b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].LockedUntil == nil {
		t.Fatalf("messages: %+v %v, want one, leased", msgs, err)
	}
	// The clock has not moved since the claim.
	lease := msgs[0].LockedUntil.Sub(b.clock.Now())
	if lease < 2*time.Hour || lease >= 6*time.Hour {
		t.Errorf("the lease is %v, want at least a sender's batch (2h) and less than the endpoints' batches in turn (6h)", lease)
	}
	held.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNoPostOutlastsTheLease: a sender whose round has taken so long (the
// database stalled) that a POST could still be in flight when the lease
// ends does not start it: the message is retried, not sent by this worker
// while another, the lease ended, claims and sends it too. The clock moves
// on while the endpoint holds the first message, past the point where an
// hour's POST would end within the lease; the second message is not sent.
func TestNoPostOutlastsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	held := newHeldEndpoint(t, func(n int32) bool { return n == 1 })
	// A batch of two, an hour's timeout: a lease of two hours and its
	// margin.
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, held.URL, false)}, Timeout: time.Hour, Batch: 2})
	b.stage(t, "first")
	b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	<-held.arrived
	// Less than the timeout is left of the lease once the first answers.
	b.clock.Advance(90 * time.Minute)
	held.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := held.requests.Load(); n != 1 {
		t.Fatalf("the endpoint was sent %d messages, want only the first: the second's POST could have outlasted its lease", n)
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	first, second := msgs[1], msgs[0] // newest first
	if first.State != store.WebhookDelivered {
		t.Errorf("the first message, answered, is %s", first.State)
	}
	if second.State != store.WebhookQueued || second.LockedUntil != nil || second.LastError == nil || !strings.Contains(*second.LastError, "lease") {
		t.Errorf("the second message is %s (leased until %v, last error %v), want queued, released, its last error naming the lease", second.State, second.LockedUntil, second.LastError)
	}
}

// TestALostLeaseIsSaid: a round whose message's lease ended before it was
// marked (another worker may have claimed it) records nothing of it, and
// says so in the log, naming the endpoints it reached, which may be sent
// it again. The mark changed no row and no one was told.
func TestALostLeaseIsSaid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	held := newHeldEndpoint(t, func(int32) bool { return true })
	var log bytes.Buffer
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, held.URL, false)}, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	b.stage(t, "taken")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	<-held.arrived
	// Another worker's claim, the lease having ended: a lease of its own.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.webhook_outbox SET locked_until = locked_until + interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	held.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].State != store.WebhookQueued || msgs[0].LockedUntil == nil {
		t.Fatalf("messages: %+v %v, want the one, still held by the other claim", msgs, err)
	}
	if !strings.Contains(log.String(), "lease ended before its round did") || !strings.Contains(log.String(), held.URL) {
		t.Fatalf("the log does not say the delivery went unrecorded, naming the endpoint reached:\n%s", log.String())
	}
}

// TestALeaseShortMessageIsNotGivenUp: a message a sender did not send
// because its lease had too little left for a POST (TestNoPostOutlastsTheLease)
// was not attempted: the worker was slow, not the endpoint. On its last
// attempt it is still retried, due at once, like a message a stopping
// worker did not send, and the next round sends it. It was marked failed
// (its attempts spent, never sent on the last), or retried only after the
// endpoint's backoff, as if the endpoint had refused it.
func TestALeaseShortMessageIsNotGivenUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	held := newHeldEndpoint(t, func(n int32) bool { return n == 1 })
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, held.URL, false)}, Timeout: time.Hour, Batch: 2, MaxAttempts: 1})
	b.stage(t, "first")
	b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	<-held.arrived
	b.clock.Advance(90 * time.Minute)
	held.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	if second := msgs[0]; second.State != store.WebhookQueued {
		t.Fatalf("the second message, not sent for its lease on its last attempt, is %s (last error %q), want queued", second.State, deref(second.LastError))
	}
	// The clock has not moved: no backoff, the endpoint refused nothing.
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("the next round handled %d messages, want the second, due at once", n)
	}
	if n := held.requests.Load(); n != 2 {
		t.Fatalf("the endpoint was sent %d messages, want both", n)
	}
	if msgs, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookDelivered, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("delivered: %d %v, want both", len(msgs), err)
	}
}

// TestALeaseShortMessageAnotherEndpointFailedIsNotGivenUp: on its last
// attempt a message one endpoint was not sent for its lease, and another
// refused (500), is retried after that endpoint's backoff, not failed: the
// first endpoint was never attempted.
func TestALeaseShortMessageAnotherEndpointFailedIsNotGivenUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	held := newHeldEndpoint(t, func(n int32) bool { return n == 1 })
	refusing := newReceiver(t, 500, 500, 500, 500)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, held.URL, false), endpoint(t, refusing.URL, false)},
		Timeout: time.Hour, Batch: 2, MaxAttempts: 1})
	b.stage(t, "first")
	b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(ctx)
		done <- err
	}()
	<-held.arrived
	// The refusing endpoint was sent both while the lease was long.
	<-refusing.arrived
	<-refusing.arrived
	b.clock.Advance(90 * time.Minute)
	held.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	if second := msgs[0]; second.State != store.WebhookQueued || second.LastError == nil || !strings.Contains(*second.LastError, "lease") {
		t.Fatalf("the second message, not sent one endpoint for its lease on its last attempt, is %s (last error %q), want queued, naming the lease", second.State, deref(second.LastError))
	}
	// The refusing endpoint's backoff (a minute) holds.
	if n := b.runOnce(t, w); n != 0 {
		t.Fatalf("the next round handled %d messages, want none before the backoff", n)
	}
	b.clock.Advance(time.Minute)
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("after the backoff the round handled %d messages, want the second", n)
	}
	if n := held.requests.Load(); n != 2 {
		t.Fatalf("the held endpoint was sent %d messages, want both", n)
	}
}
