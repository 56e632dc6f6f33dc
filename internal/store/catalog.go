package store

import (
	"context"

	"github.com/orangerail/orangerail/internal/db"
)

// The catalog statements run on any database, the team's datasource
// included: they read only pg_catalog.

// CatalogTableExists reports whether a quoted, possibly schema-qualified
// table name resolves.
func (s *Store) CatalogTableExists(ctx context.Context, table string) (bool, error) {
	found, err := s.q.CatalogTableExists(ctx, s.x, table)
	return found, InterpretError(err)
}

// CatalogColumn is a table's column and the type its values are compared
// as: a domain's base type, through domains over domains, else its own.
type CatalogColumn struct {
	Name    string
	TypeOID uint32
	// Nullable is false when the column or a domain it is of says NOT NULL.
	Nullable bool
	// TypeModifier is the type's modifier (a varchar(n)'s is n+4); -1 for
	// none.
	TypeModifier int32
}

// CatalogTableColumns lists a table's columns in their order.
func (s *Store) CatalogTableColumns(ctx context.Context, table string) ([]*CatalogColumn, error) {
	rows, err := s.q.CatalogTableColumns(ctx, s.x, table)
	return all(rows, err, func(r *db.CatalogTableColumnsRow) *CatalogColumn {
		return &CatalogColumn{Name: r.ColumnName, TypeOID: uint32(r.TypeOid), Nullable: r.Nullable, TypeModifier: r.TypeModifier} //nolint:gosec // an oid is 32 bits; the query widens it to int8
	})
}
