package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	slowArrived, release := make(chan struct{}, 10), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		slowArrived <- struct{}{}
		<-release
	}))
	t.Cleanup(slow.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	fast := newReceiver(t)
	// The POSTs' timeout is long, so the slow endpoint is slow, not down.
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, slow.URL, false), endpoint(t, fast.URL, false)}, Timeout: time.Hour})
	first, second := b.stage(t, "first"), b.stage(t, "second")

	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(context.Background())
		done <- err
	}()
	<-slowArrived
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

	released = true
	close(release)
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
