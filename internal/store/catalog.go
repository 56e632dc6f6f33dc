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
	// Enum is true when the type is an enum (its labels are not read:
	// they change without a restart).
	Enum bool
	// Readable is true when the login may read the column: SELECT on the
	// table, or on the column.
	Readable bool
}

// CatalogTableColumns lists a table's columns in their order.
func (s *Store) CatalogTableColumns(ctx context.Context, table string) ([]*CatalogColumn, error) {
	rows, err := s.q.CatalogTableColumns(ctx, s.x, table)
	return all(rows, err, func(r *db.CatalogTableColumnsRow) *CatalogColumn {
		return &CatalogColumn{Name: r.ColumnName, TypeOID: uint32(r.TypeOid), Nullable: r.Nullable, TypeModifier: r.TypeModifier, Enum: r.Enum, Readable: r.Readable} //nolint:gosec // an oid is 32 bits; the query widens it to int8
	})
}

// CatalogDatabaseName returns the name of the database the connection reads.
func (s *Store) CatalogDatabaseName(ctx context.Context) (string, error) {
	name, err := s.q.CatalogDatabaseName(ctx, s.x)
	return name, InterpretError(err)
}

// CatalogTable is a table's schema and name, unquoted.
type CatalogTable struct {
	Schema string
	Name   string
}

// CatalogScaffoldTables lists every ordinary or partitioned table outside
// the system schemas and orangerail's own.
func (s *Store) CatalogScaffoldTables(ctx context.Context) ([]*CatalogTable, error) {
	rows, err := s.q.CatalogScaffoldTables(ctx, s.x)
	return all(rows, err, func(r *db.CatalogScaffoldTablesRow) *CatalogTable {
		return &CatalogTable{Schema: r.SchemaName, Name: r.TableName}
	})
}

// CatalogShadowingNames lists the name of every relation, of any kind,
// outside public: the names a bare name in public may resolve elsewhere.
func (s *Store) CatalogShadowingNames(ctx context.Context) ([]string, error) {
	names, err := s.q.CatalogShadowingNames(ctx, s.x)
	return names, InterpretError(err)
}

// CatalogSchemaUsable reports whether the login may use the schema
// (USAGE), without which it reads none of its tables.
func (s *Store) CatalogSchemaUsable(ctx context.Context, schema string) (bool, error) {
	usable, err := s.q.CatalogSchemaUsable(ctx, s.x, schema)
	return usable, InterpretError(err)
}

// CatalogSequencesDenied returns, of the sequences named as regclass
// prints them, those the current role may not take values from (nextval
// needs USAGE or UPDATE).
func (s *Store) CatalogSequencesDenied(ctx context.Context, names []string) ([]string, error) {
	denied, err := s.q.CatalogSequencesDenied(ctx, s.x, names)
	return denied, InterpretError(err)
}

// CatalogPrimaryKey lists a quoted, possibly schema-qualified table's
// primary key columns in the key's order; none when it has no primary key.
func (s *Store) CatalogPrimaryKey(ctx context.Context, table string) ([]string, error) {
	cols, err := s.q.CatalogPrimaryKey(ctx, s.x, table)
	return cols, InterpretError(err)
}

// CatalogForeignKey is a foreign key: its columns, and the table and
// columns they reference, pair by pair.
type CatalogForeignKey struct {
	Constraint string
	Columns    []string
	Ref        CatalogTable
	RefColumns []string
}

// CatalogForeignKeys lists a quoted, possibly schema-qualified table's
// foreign keys of one or two columns, by constraint name.
func (s *Store) CatalogForeignKeys(ctx context.Context, table string) ([]*CatalogForeignKey, error) {
	rows, err := s.q.CatalogForeignKeys(ctx, s.x, table)
	return all(rows, err, func(r *db.CatalogForeignKeysRow) *CatalogForeignKey {
		return &CatalogForeignKey{Constraint: r.ConstraintName, Columns: r.ColumnNames, Ref: CatalogTable{Schema: r.RefSchema, Name: r.RefTable}, RefColumns: r.RefColumnNames}
	})
}
