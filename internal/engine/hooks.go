package engine

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Hooks hands events to subscribers: host logs, metrics, auditors of
// refusals. The engine, the MCP server and the HTTP front emit into one
// Hooks. Delivery never blocks an emitter and cannot change an answer:
// each subscriber reads its own bounded buffer on a goroutine of its own,
// an event that finds the buffer full is dropped and counted, a panicking
// subscriber is recovered and counted, and events are values that hold
// nothing an emitter reads back.
//
// A nil *Hooks is valid and delivers nothing. Hooks is safe for
// concurrent use.
type Hooks struct {
	mu     sync.RWMutex
	subs   []*Subscription
	closed bool
}

// NewHooks returns Hooks without subscribers.
func NewHooks() *Hooks { return &Hooks{} }

// SubscriberBufferDefault is a subscription's buffer when Subscribe is
// given none.
const SubscriberBufferDefault = 4096

// Subscription is one subscriber's delivery.
type Subscription struct {
	h       *Hooks
	events  chan Event
	fn      func(Event)
	done    chan struct{}
	open    bool // guarded by h.mu
	dropped atomic.Uint64
	panics  atomic.Uint64
}

// Subscribe delivers each event emitted from now on to fn, in the order
// emitted, on the subscription's own goroutine, through a buffer of
// buffer events (SubscriberBufferDefault when buffer <= 0). fn must not
// close its own subscription. On closed Hooks, the subscription is closed
// already.
func (h *Hooks) Subscribe(buffer int, fn func(Event)) *Subscription {
	if buffer <= 0 {
		buffer = SubscriberBufferDefault
	}
	s := &Subscription{h: h, events: make(chan Event, buffer), fn: fn, done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.done)
		return s
	}
	s.open = true
	h.subs = append(h.subs, s)
	go s.run()
	return s
}

func (s *Subscription) run() {
	defer close(s.done)
	for ev := range s.events {
		s.deliver(ev)
	}
}

func (s *Subscription) deliver(ev Event) {
	defer func() {
		if recover() != nil {
			s.panics.Add(1)
		}
	}()
	s.fn(ev)
}

// Dropped counts the events this subscription dropped because its buffer
// was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Panics counts the events whose delivery panicked.
func (s *Subscription) Panics() uint64 { return s.panics.Load() }

// Close ends the subscription: the events it buffered are delivered, then
// its goroutine ends. Close waits for that. It is safe to call more than
// once, and concurrently.
func (s *Subscription) Close() {
	h := s.h
	h.mu.Lock()
	if s.open {
		s.open = false
		h.subs = slices.DeleteFunc(h.subs, func(x *Subscription) bool { return x == s })
		close(s.events)
	}
	h.mu.Unlock()
	<-s.done
}

// Close closes every subscription, delivering what each buffered, and
// refuses new ones: events emitted afterwards reach no one. It is safe to
// call more than once.
func (h *Hooks) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	h.subs = nil
	for _, s := range subs {
		s.open = false
		close(s.events)
	}
	h.mu.Unlock()
	for _, s := range subs {
		<-s.done
	}
}

// Emit hands ev to every subscriber without waiting: a subscriber whose
// buffer is full misses it, and counts it dropped.
func (h *Hooks) Emit(ev Event) {
	if h == nil {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.subs {
		select {
		case s.events <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}
