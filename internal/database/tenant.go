package database

import (
	"context"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/db"
	"github.com/orangerail/orangerail/internal/errcode"
)

// tenantIDPattern is the form of a tenant id. The check constraint
// tenants_id_format holds the database to the same pattern; a test keeps
// them equal.
var tenantIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// ValidateTenantID returns an X_TENANT_INVALID error unless id is a
// well-formed tenant id.
func ValidateTenantID(id string) error {
	if !tenantIDPattern.MatchString(id) {
		return errcode.New(errcode.TenantInvalid, "the tenant id is not of the accepted form", nil)
	}
	return nil
}

// TxBeginner begins transactions: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// InTenant runs fn in a transaction scoped to tenant, and commits when fn
// returns nil. It rolls back when fn fails or panics.
func InTenant(ctx context.Context, conn TxBeginner, tenant string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	if err := ValidateTenantID(tenant); err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	// After Commit, Rollback is a no-op; on an error or a panic it ends the
	// transaction.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := db.New().TenantScope(ctx, tx, tenant); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
