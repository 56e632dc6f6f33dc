// Package store is orangerail's own database as the rest of the service
// sees it: every static statement (queries/, generated into internal/db,
// which no other package imports), named noun-first so related operations
// sort together, taking and returning this package's types, with every
// failure translated once, by InterpretError, into this package's sentinel
// errors.
//
// A Store runs on whatever executor it is given: a pool, one connection, or
// a transaction. Transactions, and the tenant each one names, are begun
// elsewhere (database.InTenant), because the same rule scopes the team's
// datasource, whose SQL is not the store's.
package store

import (
	"context"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/db"
)

// TenantSetting is the transaction setting that names a transaction's
// tenant (database.InTenant sets it): Row Level Security reads it, and so
// does an action's statement that keeps to the caller's rows.
const TenantSetting = "orangerail.tenant_id"

// TenantIDPattern is the form of a tenant id: letters, digits, '.', '_'
// and '-', first a letter or digit, at most 128 characters. No separator
// a key may be built with (':', '@', '/', a space) can appear in one. The
// check constraint tenants_id_format (migrations/00005) holds the database
// to the same pattern; a test keeps them equal.
var TenantIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// DBTX is what a Store runs statements on: a *pgxpool.Pool, a *pgx.Conn
// or a pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store runs orangerail's statements on one executor. It holds nothing but
// the executor, so making one per transaction costs nothing worth saving;
// it is as safe for concurrent use as its executor (a pool is, a
// transaction is not).
type Store struct {
	x DBTX
	q *db.Queries
}

// New returns a Store that runs on x.
func New(x DBTX) *Store { return &Store{x: x, q: db.New()} }

// one converts the single row a statement returned, or interprets its
// error.
func one[R, T any](row *R, err error, convert func(*R) *T) (*T, error) {
	if err != nil {
		return nil, InterpretError(err)
	}
	return convert(row), nil
}

// all converts every row a statement returned, or interprets its error.
func all[R, T any](rows []*R, err error, convert func(*R) *T) ([]*T, error) {
	if err != nil {
		return nil, InterpretError(err)
	}
	out := make([]*T, len(rows))
	for i, r := range rows {
		out[i] = convert(r)
	}
	return out, nil
}

// counted is all for a query that returns its first rows, each carrying
// the count of every row it matched (count(*) OVER ()): the rows, and
// that count.
func counted[R, T any](rows []*R, err error, total func(*R) int64, convert func(*R) *T) ([]*T, int64, error) {
	out, err := all(rows, err, convert)
	if err != nil || len(rows) == 0 {
		return out, 0, err
	}
	return out, total(rows[0]), nil
}
