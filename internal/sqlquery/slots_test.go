package sqlquery

import (
	"context"
	"errors"
	"testing"
)

// TestSlotsShareFairly: a tenant holds at most MaxPerTenant slots, the
// process at most MaxConcurrent, and a wait given up holds nothing.
func TestSlotsShareFairly(t *testing.T) {
	t.Parallel()
	s := newSlots()
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var releases []func()
	take := func(tenant string) {
		t.Helper()
		release, err := s.acquire(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	for range MaxPerTenant {
		take("acme")
	}
	// acme's share is taken: its next query waits, whatever is free.
	if _, err := s.acquire(cancelled, "acme"); !errors.Is(err, context.Canceled) {
		t.Fatalf("acme past its share: %v", err)
	}
	for range MaxConcurrent - MaxPerTenant {
		take("globex")
	}
	// Every slot is taken: a third tenant waits, and gives up holding none.
	if _, err := s.acquire(cancelled, "initech"); !errors.Is(err, context.Canceled) {
		t.Fatalf("past the process's slots: %v", err)
	}
	if len(s.global) != MaxConcurrent || len(s.tenant) != 2 || s.tenant["initech"] != nil {
		t.Fatalf("after the waits given up: %d slots held, tenants %v", len(s.global), s.tenant)
	}
	releases[0]()
	take("initech") // the slot acme freed
	for _, release := range releases[1:] {
		release()
	}
	if len(s.global) != 0 || len(s.tenant) != 0 {
		t.Fatalf("all released: %d slots held, tenants %v", len(s.global), s.tenant)
	}
}
