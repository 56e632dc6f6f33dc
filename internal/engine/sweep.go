package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// Sweep expires every tenant's lapsed approvals, auditing each expiry as
// the engine's other paths do (approval_expire), and returns how many it
// expired; with approvals.retention it also crypto-shreds the sealed
// inputs of approvals that ended longer ago (shredInputs). Expiry is eager
// so that no list shows a lapsed approval as pending. Replicas may sweep
// at once: a tenant is swept by one of them at a time (a row lock, held
// for the transaction, that another sweeper passes over without waiting,
// and no auditor may take), and an approval expired, decided or consumed
// by another transaction meanwhile is left as that one left it. First it
// gives back the budget slots this engine owes (owedReleases).
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	e.payOwed(ctx, "", "")
	tenants, err := Tenants(ctx, e.store)
	if err != nil {
		return 0, fmt.Errorf("sweep: list tenants: %w", err)
	}
	total := 0
	var errs []error
	for _, tenant := range tenants {
		// A batch of lapsed approvals (lapsedBatch) and of inputs to shred
		// (shredBatch) per transaction, until none is left: a backlog of
		// either is swept whatever its length.
		for more := true; more && ctx.Err() == nil; {
			var n int
			if n, more, err = e.sweepBatch(ctx, tenant); err != nil {
				// One tenant's failure leaves the others to be swept.
				errs = append(errs, fmt.Errorf("sweep tenant %s: %w", tenant, err))
				break
			}
			total += n
		}
	}
	return total, errors.Join(errs...)
}

// sweepBatch expires, in one transaction, a batch of tenant's lapsed
// approvals and shreds a batch of the inputs retention is over for, unless
// another sweeper holds the tenant. more reports a full batch of either.
func (e *Engine) sweepBatch(ctx context.Context, tenant string) (n int, more bool, err error) {
	err = database.InTenant(ctx, e.store, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		n, more = 0, false // the transaction may be run again
		locked, err := store.New(tx).ApprovalSweepLock(ctx, tenant)
		if err != nil || !locked {
			return err
		}
		if n, more, err = e.expireLapsedCount(ctx, tx, tenant); err != nil {
			return err
		}
		shredded, err := e.shredInputs(ctx, tx)
		if shredded > 0 {
			e.log.InfoContext(ctx, "sealed inputs shredded", "tenant", tenant, "count", shredded)
		}
		more = more || shredded == shredBatch
		return err
	})
	return n, more, err
}
