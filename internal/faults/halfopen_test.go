package faults_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestProxyHalfOpen poisons the answers from Postgres while three agents
// run lifecycles, the statements toward it still arriving: a half-open
// network, where the server runs (and may commit) what it receives and
// the client hears nothing — the case where "done" is easiest to get
// wrong. answers_lost drops every answer, closing nothing, for longer
// than a transaction's client-side deadline; cut_mid_answer closes each
// connection once 4 KiB of answers crossed it, in the middle of whatever
// answer that is. Calls fail classified within the deadline, never hang;
// once the network heals the same pool serves every lifecycle to its end,
// each approval executed once, and the invariants hold (no effect
// without its records, none recorded that did not happen).
func TestProxyHalfOpen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		kind       string
		attributes map[string]any
		// lasting is how long the toxic stays: answers_lost's outlasts a
		// transaction's client-side deadline, so calls in flight meet it.
		lasting time.Duration
		// mustFail: some call fails while the toxic stays.
		mustFail bool
	}{
		{"answers_lost", "timeout", map[string]any{"timeout": 0}, proxyLockTimeout + 2*proxyStatementTimeout + 6*time.Second, true},
		{"cut_mid_answer", "limit_data", map[string]any{"bytes": 4096}, 5 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Agents execute at once: the example's budget would answer
			// some rate_limited, which is not this test's fault.
			p := setupProxied(t, ontologytest.Set("actions.add_order_note.budget",
				map[string]int{"per_minute": 100_000, "max_concurrent": 100, "per_day": 1_000_000}))
			p.deadline = blackHoleDeadline
			// Each agent runs lifecycles until the network healed, and at
			// least each.
			const agents, each = 3, 3
			var (
				wg     sync.WaitGroup
				healed atomic.Bool
			)
			for a := range agents {
				wg.Go(func() {
					for i := 0; i < each || !healed.Load(); i++ {
						note := fmt.Sprintf("fault-half-open-%s-%d-%d", c.name, a, i)
						polls, err := p.patientLifecycle(t, note)
						if err != nil {
							t.Error(err)
							return
						}
						oks := 0
						for _, poll := range polls {
							if poll.Status == engine.StatusOK {
								oks++
							}
						}
						if oks > 1 {
							t.Errorf("%s: %d polls said the approval executed", note, oks)
						}
					}
				})
			}
			time.Sleep(300 * time.Millisecond) // the traffic is under way
			p.logMu.Lock()
			before := len(p.log)
			p.logMu.Unlock()
			heal := p.poisonStream(t, "downstream", c.kind, c.attributes)
			time.Sleep(c.lasting)
			heal()
			healed.Store(true)
			wg.Wait()
			// The calls the toxic caught end within their deadline, some
			// after it lifted.
			failed := 0
			for _, l := range p.log[before:] {
				if !strings.Contains(l, "(<nil>)") {
					failed++
				}
			}
			t.Logf("%d calls failed from the toxic's start on", failed)
			if c.mustFail && failed == 0 {
				t.Error("no call failed from the toxic's start on: the fault never happened")
			}
			faults.Require(t, p.admin, noteEffect)
			for _, l := range p.log {
				t.Log(l)
			}
		})
	}
}
