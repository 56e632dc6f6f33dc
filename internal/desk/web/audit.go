package web

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
)

// auditRecords reads the tenant's chain head and one page of its records,
// in one read-only transaction naming the tenant (row security), once what
// committed before is sealed: the page lists sealed records, in seq order.
// A tenant without a chain has no head.
func (d *Desk) auditRecords(ctx context.Context, tenant string, p *store.AuditSearchParams) (*store.AuditLink, []*store.AuditSummary, error) {
	var head *store.AuditLink
	var records []*store.AuditSummary
	p.TenantID = tenant
	if _, err := engine.SealTenant(ctx, d.c.Store, tenant); err != nil {
		return nil, nil, err
	}
	err := database.InTenant(ctx, d.c.Store, tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		database.Repeatable(tx)
		st := store.New(tx)
		var err error
		head, err = st.AuditHead(ctx, tenant)
		if errors.Is(err, store.ErrNotFound) {
			head, err = nil, nil
		}
		if err != nil {
			return err
		}
		records, err = st.AuditSearch(ctx, p)
		return err
	})
	return head, records, err
}
