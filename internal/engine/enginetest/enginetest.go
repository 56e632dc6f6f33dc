// Package enginetest holds what tests of the engine's subscribers share.
package enginetest

import (
	"slices"
	"sync"

	"github.com/orangerail/orangerail/internal/engine"
)

// Recorder is a hooks subscriber keeping every event it is handed. It is
// safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

// Record keeps ev; subscribe it: hooks.Subscribe(n, r.Record).
func (r *Recorder) Record(ev engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// All returns the events kept so far, in the order they came.
func (r *Recorder) All() []engine.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}
