package webhooks_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestABlackholedEndpointDoesNotStarveTheOthers: an endpoint that never
// answers (a firewall dropping its packets) costs the worker one timeout
// a round, not one a message. It cost one per message and per retry: with
// eight messages queued, the endpoint that answers at once heard of the
// last one eight timeouts (80 seconds at the default) after the first,
// and each retry of each message spent the worker another, so a modest
// stream of approvals made the backlog, and every endpoint's delay, grow
// without bound.
func TestABlackholedEndpointDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var (
		mu   sync.Mutex
		hung int
	)
	release := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		hung++
		mu.Unlock()
		<-release
	}))
	t.Cleanup(dead.Close)
	t.Cleanup(func() { close(release) })
	healthy := newReceiver(t)
	const timeout = 300 * time.Millisecond
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, dead.URL, false), endpoint(t, healthy.URL, false)}, Timeout: timeout})
	const staged = 8
	for i := range staged {
		b.stage(t, fmt.Sprintf("reason %d", i))
	}
	start := time.Now()
	if n := b.runOnce(t, w); n != staged {
		t.Fatalf("handled %d, want %d", n, staged)
	}
	took := time.Since(start)
	if n := len(healthy.deliveries()); n != staged {
		t.Fatalf("the healthy endpoint was sent %d, want %d", n, staged)
	}
	mu.Lock()
	defer mu.Unlock()
	if hung != 1 {
		t.Fatalf("the endpoint that never answers was waited on %d times in one round (%s, the healthy endpoint waiting), want once", hung, took)
	}
	// Every message is still owed to it: retried, not given up.
	msgs, err := webhooks.List(t.Context(), b.runtime, "acme", "queued", 20)
	if err != nil || len(msgs) != staged {
		t.Fatalf("queued after the round: %d %v", len(msgs), err)
	}
	for _, m := range msgs {
		if len(m.DeliveredTo) != 1 || m.LastError == nil {
			t.Fatalf("message %s: delivered to %v, last error %v", m.ID, m.DeliveredTo, deref(m.LastError))
		}
	}
}
