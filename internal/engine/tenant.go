package engine

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// openedMax bounds how many tenants a process remembers having opened.
// Past it the memory starts again: forgetting one costs its next call one
// short transaction that finds the tenant there.
const openedMax = 1 << 16

// openedTenants are the tenants this process has opened (store.TenantOpen).
type openedTenants struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// openTenant makes sure caller's tenant exists, with its chain's head,
// before a call writes anything of it, in a short transaction of its own:
// once per tenant in this process. A new tenant's first writes used to
// make them in their own transactions, and a second call of the same new
// tenant waited on the first's insert for as long as that transaction ran
// (a direct action's effect on the service database runs in the
// transaction of its first record) — or failed at lock_timeout.
//
// Its failure is the call's: a database that cannot open the tenant
// cannot take its first record either, and the call fails now rather
// than after waiting out the limits a second time (a partition's calls
// end within the deadline two transactions make). Only an opening that
// committed is remembered.
func (e *Engine) openTenant(ctx context.Context, tenant string) error {
	o := &e.opened
	o.mu.Lock()
	_, ok := o.m[tenant]
	o.mu.Unlock()
	if ok {
		return nil
	}
	err := database.InTenant(ctx, e.store, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return store.New(tx).TenantOpen(ctx)
	})
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= openedMax {
		o.m = make(map[string]struct{})
	}
	o.m[tenant] = struct{}{}
	return nil
}
