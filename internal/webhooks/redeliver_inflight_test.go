package webhooks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestRedeliveryOfAnInFlightMessageKeepsItsLease: an operator redelivers a
// message while a worker is still sending it (its endpoint has not
// answered). The redelivery cleared the lease, so a second worker claimed
// the message and sent it again while the first send was in flight. It is
// refused, coded, and the message is sent once; once the attempt ends the
// same redelivery is accepted.
func TestRedeliveryOfAnInFlightMessageKeepsItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// The first request blocks until the test releases it; any later one
	// is answered at once.
	r := newHeldEndpoint(t, func(n int32) bool { return n == 1 })
	ep := endpoint(t, r.URL, false)
	first := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	second := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	b.stage(t, "sent once")

	done := make(chan error, 1)
	go func() {
		_, err := first.RunOnce(ctx)
		done <- err
	}()
	<-r.arrived // the first send is in flight
	msgs, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookQueued, 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("queued: %+v %v", msgs, err)
	}
	_, redeliverErr := webhooks.Redeliver(ctx, b.runtime, "acme", msgs[0].ID.String(), b.clock.Now())
	if _, err := second.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.requests.Load(); n != 1 {
		t.Fatalf("the endpoint was sent the message %d times while the first send was in flight, want once (redelivery: %v)", n, redeliverErr)
	}
	var coded *errcode.Error
	if !errors.As(redeliverErr, &coded) || coded.Code != errcode.WebhookInFlight {
		t.Fatalf("redelivering an in-flight message: %v, want %s", redeliverErr, errcode.WebhookInFlight)
	}

	r.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The attempt ended: the redelivery is accepted now.
	if _, err := webhooks.Redeliver(ctx, b.runtime, "acme", msgs[0].ID.String(), b.clock.Now()); err != nil {
		t.Fatalf("redelivering after the attempt ended: %v", err)
	}
}
