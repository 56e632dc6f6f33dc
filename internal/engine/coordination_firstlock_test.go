package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// TestSweepLockNeverWaitsOnAFirstSweep: a sweeper passes over a tenant
// another sweeper holds, without waiting. The first sweep of a tenant
// (every tenant's, right after migration 00065) creates its lock row, and
// a second sweeper's own first insert of that row waited on the first's
// uncommitted one — for the whole of the first's sweep transaction, or
// until its lock timeout failed the sweep.
func TestSweepLockNeverWaitsOnAFirstSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	held, release, holderDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holderDone <- database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			var before, after string
			if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&before); err != nil {
				return err
			}
			locked, err := store.New(tx).ApprovalSweepLock(ctx, "acme")
			if err != nil || !locked {
				t.Errorf("the first sweep of acme: locked %v, %v", locked, err)
			}
			// The sweep's own waits keep the transaction's lock timeout.
			if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&after); err != nil {
				return err
			}
			if after != before {
				t.Errorf("taking the sweep lock left the lock timeout %q; it was %q", after, before)
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	type result struct {
		locked bool
		err    error
	}
	second := make(chan result, 1)
	go func() {
		var r result
		r.err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
			r.locked, err = store.New(tx).ApprovalSweepLock(ctx, "acme")
			return err
		})
		second <- r
	}()
	waited := false
	select {
	case r := <-second:
		if r.err != nil || r.locked {
			t.Errorf("a second sweeper beside acme's first sweep: locked %v, %v; want passed over", r.locked, r.err)
		}
	case <-time.After(10 * time.Second):
		waited = true
		t.Errorf("a second sweeper waits for acme's first sweep to end, where it passes over a tenant another holds")
	}
	close(release)
	if err := <-holderDone; err != nil {
		t.Fatal(err)
	}
	if waited {
		<-second
	}
}
