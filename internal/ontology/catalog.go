package ontology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orangerail/orangerail/internal/store"
)

// DiagnosticSchemaMismatch classifies a config that names tables, columns
// or statements the datasource does not have.
const DiagnosticSchemaMismatch = "datasource_schema_mismatch"

// DiagnosticPrivilegeMissing classifies a config that names tables or
// columns the datasource's login may not read (SELECT): each read of
// them would be refused with permission denied.
const DiagnosticPrivilegeMissing = "datasource_privilege_missing"

// Conn is what the catalog check needs of a datasource connection.
type Conn interface {
	store.DBTX
	Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error)
	Deallocate(ctx context.Context, name string) error
}

// QuotedTable returns an object's table as a quoted, possibly
// schema-qualified identifier.
func (o *Object) QuotedTable() string {
	return pgx.Identifier(strings.Split(o.Table, ".")).Sanitize()
}

// ValueKind is how a value an agent sends for a column is checked before
// any SQL runs: by the column's type, as the live catalog names it.
type ValueKind string

// The value kinds.
const (
	// ValueText columns (text, varchar, char(n), name) take any string,
	// number or boolean, as its text.
	ValueText ValueKind = "text"
	// ValueInteger columns (smallint, integer, bigint) take a whole number
	// in the column's range, as a JSON number or a string of digits.
	ValueInteger ValueKind = "integer"
	// ValueNumeric columns take a number, as a JSON number or a string in
	// JSON's number form, its exponent within what Postgres parses.
	ValueNumeric ValueKind = "numeric"
	// ValueFloat columns (real, double precision) take a number the
	// column's size holds.
	ValueFloat ValueKind = "float"
	// ValueBoolean columns take true or false.
	ValueBoolean ValueKind = "boolean"
	// ValueTimestamptz columns take an RFC 3339 time with its offset.
	ValueTimestamptz ValueKind = "timestamptz"
	// ValueTimestamp columns take a date and time without an offset.
	ValueTimestamp ValueKind = "timestamp"
	// ValueDate columns take a date, YYYY-MM-DD.
	ValueDate ValueKind = "date"
	// ValueUUID columns take a UUID.
	ValueUUID ValueKind = "uuid"
	// ValueOther is every other type (enums, arrays, json, inet, ...): the
	// value goes to Postgres as text, which refuses what the type cannot
	// hold. An enum's labels are not copied: they change without a restart.
	ValueOther ValueKind = "other"
)

// Column is a table column as the live catalog describes it.
type Column struct {
	Kind ValueKind
	// Bits is an integer's or a float's size: 16, 32 or 64; else 0.
	Bits int
	// TypeOID is the type values are compared as: a domain's base type.
	TypeOID uint32
	// Nullable is false when the column, or a domain it is of, says NOT
	// NULL: a read never returns null for it.
	Nullable bool
	// MaxLength is a varchar(n)'s or char(n)'s n, in characters; 0 when
	// the type declares none.
	MaxLength int
	// JSON is set for json and jsonb: reads return the value itself.
	JSON bool
	// Readable says the login that read the catalog may read the column
	// (SELECT on its table, or on it).
	Readable bool
}

// varlenaHeader is what Postgres adds to a varchar's or char's declared
// length in its type modifier (VARHDRSZ).
const varlenaHeader = 4

// ColumnOf classifies a column by its (base) type's OID: built-in OIDs are
// fixed, so a type of the same name in another schema is never mistaken
// for one.
func ColumnOf(r *store.CatalogColumn) Column {
	oid := r.TypeOID
	c := Column{Kind: ValueOther, TypeOID: oid, Nullable: r.Nullable, Readable: r.Readable}
	switch oid {
	case pgtype.VarcharOID, pgtype.BPCharOID:
		if r.TypeModifier > varlenaHeader {
			c.MaxLength = int(r.TypeModifier - varlenaHeader)
		}
	case pgtype.JSONOID, pgtype.JSONBOID:
		c.JSON = true
	}
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		c.Kind = ValueText
	case pgtype.Int2OID:
		c.Kind, c.Bits = ValueInteger, 16
	case pgtype.Int4OID:
		c.Kind, c.Bits = ValueInteger, 32
	case pgtype.Int8OID:
		c.Kind, c.Bits = ValueInteger, 64
	case pgtype.NumericOID:
		c.Kind = ValueNumeric
	case pgtype.Float4OID:
		c.Kind, c.Bits = ValueFloat, 32
	case pgtype.Float8OID:
		c.Kind, c.Bits = ValueFloat, 64
	case pgtype.BoolOID:
		c.Kind = ValueBoolean
	case pgtype.TimestamptzOID:
		c.Kind = ValueTimestamptz
	case pgtype.TimestampOID:
		c.Kind = ValueTimestamp
	case pgtype.DateOID:
		c.Kind = ValueDate
	case pgtype.UUIDOID:
		c.Kind = ValueUUID
	}
	return c
}

// Catalog is what the datasource's live catalog says of each object's
// table: whether it exists, and its columns with their types. It does not
// change once read; it is safe for concurrent use.
type Catalog struct {
	// tables holds each object's table's columns, by object and column
	// name; an object whose table does not exist has no entry.
	tables map[string]map[string]Column
	// unusable holds each object whose table stands in a schema the
	// login may not use (USAGE): it reads none of the schema's tables.
	unusable map[string]bool
}

// Column returns the column under an object's field. ok is false when the
// object's table or the column does not exist.
func (c *Catalog) Column(object, field string) (col Column, ok bool) {
	col, ok = c.tables[object][field]
	return col, ok
}

// ReadCatalog reads each object's table's columns and their types from the
// datasource's live catalog.
func (c *Config) ReadCatalog(ctx context.Context, conn store.DBTX) (*Catalog, error) {
	cat := &Catalog{tables: map[string]map[string]Column{}, unusable: map[string]bool{}}
	q := store.New(conn)
	for _, name := range slices.Sorted(maps.Keys(c.Objects)) {
		table := c.Objects[name].QuotedTable()
		found, err := q.CatalogTableExists(ctx, table)
		if errors.Is(err, store.ErrPermission) {
			// to_regclass refuses a name in a schema the login may not
			// use; it is no table it may read.
			cat.unusable[name] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		rows, err := q.CatalogTableColumns(ctx, table)
		if err != nil {
			return nil, err
		}
		columns := make(map[string]Column, len(rows))
		for _, r := range rows {
			columns[r.Name] = ColumnOf(r)
		}
		cat.tables[name] = columns
	}
	return cat, nil
}

// CheckCatalog checks the config against the datasource's live catalog:
// every object's table and columns exist, and every action's statement
// prepares (so its tables, columns and types are right). It returns the
// catalog it read and every problem, each a DiagnosticSchemaMismatch or a
// DiagnosticPrivilegeMissing; an error means the check itself could not
// run.
func (c *Config) CheckCatalog(ctx context.Context, conn Conn) (*Catalog, Problems, error) {
	cat, err := c.ReadCatalog(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	// The role the reads run as, which a refusal names: the datasource's
	// login, or orangerail_runtime on the service database.
	var role string
	if err := conn.QueryRow(ctx, "SELECT current_user::text").Scan(&role); err != nil {
		return nil, nil, err
	}
	role = pgx.Identifier{role}.Sanitize()
	var ps Problems
	for _, name := range slices.Sorted(maps.Keys(c.Objects)) {
		o, path := c.Objects[name], "objects."+name
		columns, found := cat.tables[name]
		if cat.unusable[name] {
			schema := pgx.Identifier{strings.Split(o.Table, ".")[0]}.Sanitize()
			ps = append(ps, Problem{Path: path + ".table", Message: fmt.Sprintf("%s: role %s may not use (USAGE) schema %s of table %s; grant it USAGE on the schema and SELECT on the table",
				DiagnosticPrivilegeMissing, role, schema, o.QuotedTable())})
			continue
		}
		if !found {
			ps = append(ps, Problem{Path: path + ".table", Message: fmt.Sprintf("%s: the datasource has no table %s", DiagnosticSchemaMismatch, o.QuotedTable())})
			continue
		}
		missing := func(field, col string) {
			if _, ok := columns[col]; !ok {
				ps = append(ps, Problem{Path: path + "." + field, Message: fmt.Sprintf("%s: table %s has no column %q", DiagnosticSchemaMismatch, o.QuotedTable(), col)})
			}
		}
		missing("tenant_column", o.TenantColumn)
		for i, f := range o.Fields {
			missing(fmt.Sprintf("fields.%d", i), f)
		}
		if denied := unreadable(columns, append([]string{o.Key, o.TenantColumn}, o.Fields...)); len(denied) > 0 {
			ps = append(ps, Problem{Path: path + ".table", Message: fmt.Sprintf("%s: role %s may not read (SELECT) table %s (columns %s); grant it SELECT on them",
				DiagnosticPrivilegeMissing, role, o.QuotedTable(), strings.Join(denied, ", "))})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		a := c.Actions[name]
		if a.Execute.Kind() != ExecuteSQL {
			continue
		}
		if err := prepares(ctx, conn, a.Execute.SQL); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return nil, nil, err
			}
			ps = append(ps, Problem{Path: "actions." + name + ".execute.sql", Message: fmt.Sprintf("%s: the datasource cannot prepare the statement: %s", DiagnosticSchemaMismatch, pgErr.Message)})
		}
	}
	return cat, ps.sorted(), nil
}

// unreadable is each of names, once and quoted, that is a column the
// login may not read; a name that is no column is another problem.
func unreadable(columns map[string]Column, names []string) []string {
	var out []string
	for _, n := range names {
		q := fmt.Sprintf("%q", n)
		if col, ok := columns[n]; ok && !col.Readable && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// prepares prepares a statement under a throwaway name and drops it.
func prepares(ctx context.Context, conn Conn, sql string) error {
	bound, _, err := BindSQL(sql)
	if err != nil {
		return err
	}
	const name = "orangerail_catalog_check"
	if _, err := conn.Prepare(ctx, name, bound); err != nil {
		return err
	}
	return conn.Deallocate(ctx, name)
}
