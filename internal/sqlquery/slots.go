package sqlquery

import (
	"context"
	"sync"
)

// slots shares MaxConcurrent query slots among tenants, at most
// MaxPerTenant each: one tenant's burst (or its queries left waiting on a
// lock) can hold no more than its share, so another tenant's query always
// finds a slot free or next to be freed. It is safe for concurrent use.
type slots struct {
	global chan struct{}
	mu     sync.Mutex
	tenant map[string]*tenantSlots // only tenants with a query holding or awaiting a slot
}

type tenantSlots struct {
	held  chan struct{}
	users int // queries holding or awaiting one of held
}

func newSlots() *slots {
	return &slots{global: make(chan struct{}, MaxConcurrent), tenant: map[string]*tenantSlots{}}
}

// acquire waits for one of tenant's slots and then one of the process's,
// and returns the func that gives both back; or ctx's error, holding
// neither.
func (s *slots) acquire(ctx context.Context, tenant string) (release func(), err error) {
	s.mu.Lock()
	t := s.tenant[tenant]
	if t == nil {
		t = &tenantSlots{held: make(chan struct{}, MaxPerTenant)}
		s.tenant[tenant] = t
	}
	t.users++
	s.mu.Unlock()
	leave := func() {
		s.mu.Lock()
		if t.users--; t.users == 0 {
			delete(s.tenant, tenant)
		}
		s.mu.Unlock()
	}
	select {
	case t.held <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	select {
	case s.global <- struct{}{}:
	case <-ctx.Done():
		<-t.held
		leave()
		return nil, ctx.Err()
	}
	return func() {
		<-s.global
		<-t.held
		leave()
	}, nil
}
