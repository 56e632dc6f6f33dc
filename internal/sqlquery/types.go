package sqlquery

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/sqlguard"
)

// Table is a relation a query may read, with the columns it may read.
type Table struct {
	Schema  string   `json:"schema"`
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// typeInfo is what the catalog says of a type a column has.
type typeInfo struct {
	name     string // pg_type's typname
	elem     uint32 // an array's element type; 0 for any other type
	elemName string
	elemBase uint32 // the element type, or the type it is a domain over
}

// typeName is the name Column.Type gives a type.
func (t typeInfo) typeName() string {
	if t.elem != 0 {
		return t.elemName + "[]"
	}
	return t.name
}

// catalogTypes reads what readTypes returns. An array is a type of the
// array category with an element type (as to_jsonb tells one).
const catalogTypes = `SELECT t.oid, t.typname, coalesce(e.oid, 0), coalesce(e.typname, ''),
		coalesce(CASE WHEN e.typtype = 'd' THEN e.typbasetype ELSE e.oid END, 0)
	FROM pg_catalog.pg_type t LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
	WHERE t.oid = ANY ($1::pg_catalog.oid[])`

// readTypes reads from the catalog the types of the given OIDs. A column's
// type is read here rather than from pgx's map of the types it knows, so
// that an enum, a domain's array or an extension's type is named and
// classified as Postgres has it.
func readTypes(ctx context.Context, tx pgx.Tx, oids []uint32) (map[uint32]typeInfo, error) {
	types := map[uint32]typeInfo{}
	if len(oids) == 0 {
		return types, nil
	}
	rows, err := tx.Query(ctx, catalogTypes, oids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var oid uint32
		var t typeInfo
		if err := rows.Scan(&oid, &t.name, &t.elem, &t.elemName, &t.elemBase); err != nil {
			return nil, err
		}
		types[oid] = t
	}
	return types, rows.Err()
}

// catalogTables lists every column the current role may read of every
// relation in the given schemas, in the schemas' order, by relation name
// and column position. Nothing here reads a row, or a count of rows. A
// column of a domain is listed by the type the domain is over, as an
// answer's column is (Postgres describes a result's column so).
const catalogTables = `SELECT n.nspname, c.relname, a.attname, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
	FROM pg_catalog.pg_class c
	JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
	WHERE n.nspname = ANY ($1) AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
		AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')
		AND pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')
	ORDER BY pg_catalog.array_position($1, n.nspname::text), c.relname, a.attnum`

// readTables reads what Tables returns, as AgentRole with its search path
// and in a read-only transaction, as a query runs, but bound to no tenant:
// the catalog is the same for every tenant.
func (q *Querier) readTables(ctx context.Context) ([]Table, error) {
	conn, _, err := q.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schemas []string
	for _, s := range q.cfg.Schemas {
		if !sqlguard.SystemSchema(s) { // the parse layer refuses their relations
			schemas = append(schemas, s)
		}
	}
	var tables []Table
	err = q.inTx(ctx, conn, 0, func(ctx context.Context, tx pgx.Tx) error { // the catalog: no tenant's rows
		rows, err := tx.Query(ctx, catalogTables, schemas)
		if err != nil {
			return err
		}
		var oids []uint32
		var types []uint32 // by column, in order
		for rows.Next() {
			var schema, relation, name string
			var oid uint32
			if err := rows.Scan(&schema, &relation, &name, &oid); err != nil {
				rows.Close()
				return err
			}
			if n := len(tables); n == 0 || tables[n-1].Schema != schema || tables[n-1].Name != relation {
				tables = append(tables, Table{Schema: schema, Name: relation})
			}
			t := &tables[len(tables)-1]
			t.Columns = append(t.Columns, Column{Name: name})
			types = append(types, oid)
			if !slices.Contains(oids, oid) {
				oids = append(oids, oid)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		names, err := readTypes(ctx, tx, oids)
		if err != nil {
			return err
		}
		i := 0
		for _, t := range tables {
			for c := range t.Columns {
				t.Columns[c].Type = names[types[i]].typeName()
				i++
			}
		}
		return nil
	})
	return tables, err
}
