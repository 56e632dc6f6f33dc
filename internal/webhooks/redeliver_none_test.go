package webhooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestRedeliveryNoEndpointTakesIsNotDelivered: an operator redelivers a
// staging's message after the config stopped sending stagings to its
// endpoint. No endpoint configured takes it, so none is sent it: it is
// failed, not sent, as a message whose endpoints are all gone is. It was
// marked delivered, to no endpoint: `webhooks redeliver` said it was
// queued again and `webhooks list` then said it was delivered.
func TestRedeliveryNoEndpointTakesIsNotDelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}})
	b.stage(t, "sent once")
	b.runOnce(t, w)
	msgs, err := webhooks.List(ctx, b.runtime, "acme", store.WebhookDelivered, 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("delivered: %+v %v", msgs, err)
	}

	// The endpoint now takes decisions alone.
	decisions := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false, ontology.WebhookApprovalApproved)}, MaxAttempts: 1})
	if _, err := webhooks.Redeliver(ctx, b.runtime, "acme", msgs[0].ID.String(), b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if n := b.runOnce(t, decisions); n != 1 {
		t.Fatalf("handled %d, want the message redelivered", n)
	}
	if n := len(r.deliveries()); n != 1 {
		t.Fatalf("the endpoint was sent %d, want the first delivery alone", n)
	}
	after, err := webhooks.List(ctx, b.runtime, "acme", "", 10)
	if err != nil || len(after) != 1 {
		t.Fatalf("list: %+v %v", after, err)
	}
	if m := after[0]; m.State != store.WebhookFailed || m.LastError == nil || !strings.HasPrefix(*m.LastError, "not sent") {
		t.Fatalf("a redelivery no endpoint was sent is %s (delivered to %v, last error %s), want failed, not sent", m.State, m.DeliveredTo, deref(m.LastError))
	}
}
