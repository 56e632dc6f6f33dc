package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/store"
)

// Records are sealed after commit. AppendAudit inserts a record unsealed,
// in the transaction of the change it records, and takes no lock; a
// sealer then gives each tenant's committed records their seq and link in
// batches, one short transaction per tenant per batch
// (orangerail.audit_seal), so a tenant's writers never queue on its chain
// head across their commits. Every replica seals; one seals a tenant at a
// time, and the others pass over it.

const (
	// SealBatchSize bounds the records one sealing transaction seals.
	SealBatchSize = 4096
	// DefaultSealLagBound is how long a record may stay unsealed before
	// the verifiers report it, counted from when it was written by the
	// database's clock. It is far above the sealing interval: a record is
	// written before its transaction commits, and only then can it be
	// sealed, so a finding must mean that no replica sealed, not that a
	// transaction ran long: it is above a transaction's bound with the
	// default limits (lock_timeout + 2 × statement_timeout + 5s: 70s).
	DefaultSealLagBound = 2 * time.Minute
	// sealTenantsPerRound bounds the tenants one round of Seal reads.
	sealTenantsPerRound = 1000
)

// SealTenant seals every record of tenant that committed before it was
// called and returns how many it sealed. It waits for a sealer that holds
// the tenant meanwhile, so when it returns, what committed before is
// sealed: a reader that must see every record in seq order (a listing of
// the audit log) seals first.
func SealTenant(ctx context.Context, conn database.TxBeginner, tenant string) (int, error) {
	return sealTenant(ctx, conn, tenant, true)
}

func sealTenant(ctx context.Context, conn database.TxBeginner, tenant string, wait bool) (int, error) {
	total := 0
	batch := int32(SealBatchSize)
	for {
		n := 0
		// READ COMMITTED: each statement of audit_seal sees what committed
		// before it, the head the last sealer left included.
		err := database.InTenant(ctx, conn, tenant, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			// A batch whose connection died sealed nothing, or (its
			// COMMIT took effect, its answer lost) sealed it whole: either
			// way the next try seals from the head as it is then. Only
			// the count of a lost answer's batch is not added up.
			database.Repeatable(tx)
			var err error
			n, err = store.New(tx).AuditSeal(ctx, batch, wait)
			return err
		})
		if batch > 1 && errors.Is(store.InterpretError(err), store.ErrStatementTimeout) {
			// The batch outlasted the store's statement_timeout and
			// sealed nothing: a smaller one fits. Tried again at the same
			// size, every round would meet the same timeout, and a
			// backlog would never be sealed.
			batch /= 2
			continue
		}
		if err != nil {
			return total, fmt.Errorf("seal tenant %s: %w", tenant, err)
		}
		total += n
		if n < int(batch) {
			return total, nil
		}
	}
}

// Seal seals the committed records of every tenant that has unsealed
// ones, the longest waiting first, and returns how many it sealed. A
// tenant another sealer holds is left to it. One tenant's failure leaves
// the others to be sealed; the errors are joined.
func Seal(ctx context.Context, conn database.TxBeginner) (int, error) {
	tenants, err := unsealedTenants(ctx, conn)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, t := range tenants {
		n, err := sealTenant(ctx, conn, t.TenantID, false)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

func unsealedTenants(ctx context.Context, conn database.TxBeginner) ([]*store.AuditUnsealedTenant, error) {
	tenants, err := readOnly(ctx, conn, func(st *store.Store) ([]*store.AuditUnsealedTenant, error) {
		return st.AuditUnsealedTenants(ctx, sealTenantsPerRound)
	})
	if err != nil {
		return nil, fmt.Errorf("seal: list tenants: %w", err)
	}
	return tenants, nil
}

// Sealer seals every interval until stopped.
type Sealer struct {
	conn database.TxBeginner
	loop *periodic.Loop
}

// StartSealer starts sealing on conn as c says: every c.Interval
// (ontology.SealIntervalDefault when zero), its failures told to c.Log as
// "audit sealing" unless c.What names them, and to c.OnError.
func StartSealer(conn database.TxBeginner, c periodic.Config) *Sealer {
	if c.Interval <= 0 {
		c.Interval = ontology.SealIntervalDefault
	}
	c.What = cmp.Or(c.What, "audit sealing")
	return &Sealer{conn: conn, loop: periodic.Start(c, func(ctx context.Context) error {
		_, err := Seal(ctx, conn)
		return err
	})}
}

// Stop stops the sealer and, within ctx, seals what is left, so a replica
// that shuts down leaves nothing of its own unsealed.
func (s *Sealer) Stop(ctx context.Context) error {
	s.loop.Stop()
	_, err := Seal(ctx, s.conn)
	return err
}

// SealLag is how long the oldest committed record still awaiting its seal,
// of any tenant, has waited since it was written, by the database's clock
// (no replica's clock, which may be off): zero when every committed record
// is sealed. It reads one row, no tenant's records, so a metrics scrape
// may call it.
func SealLag(ctx context.Context, conn database.TxBeginner) (time.Duration, error) {
	oldest, err := readOnly(ctx, conn, func(st *store.Store) ([]*store.AuditUnsealedTenant, error) {
		return st.AuditUnsealedTenants(ctx, 1)
	})
	if err != nil {
		return 0, fmt.Errorf("seal lag: %w", err)
	}
	if len(oldest) == 0 {
		return 0, nil
	}
	return oldest[0].Waited, nil
}
