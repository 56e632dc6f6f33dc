package ontology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orangerail/orangerail/internal/store"
)

// DiagnosticSchemaMismatch classifies a config that names tables, columns
// or statements the datasource does not have.
const DiagnosticSchemaMismatch = "datasource_schema_mismatch"

// DiagnosticPrivilegeMissing classifies a config that names tables or
// columns the role its reads run as may not read (SELECT), or an action
// whose statement that role may not run (INSERT, UPDATE or DELETE on its
// table, EXECUTE on a function it calls, USAGE on a sequence it takes
// values from): each read or call would be refused with permission
// denied.
const DiagnosticPrivilegeMissing = "datasource_privilege_missing"

// DiagnosticRuntimeUnchecked warns that a config was checked as the
// login, where serve's reads and actions run as orangerail_runtime (on
// the service database), as the login may not act as that role: what the
// runtime may not do was not asked.
const DiagnosticRuntimeUnchecked = "datasource_runtime_unchecked"

// Conn is what the catalog check needs of a datasource connection.
type Conn interface {
	store.DBTX
	Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error)
	Deallocate(ctx context.Context, name string) error
	// Begin begins what an action's statement is tried in and rolled
	// back: a transaction on a connection, a savepoint in a transaction.
	Begin(ctx context.Context) (pgx.Tx, error)
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
// prepares (so its tables, columns and types are right); and that the
// role conn acts as may read each object and run each statement
// (mayNotRun), as its reads and calls run as that role. It returns the
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
		path := "actions." + name + ".execute.sql"
		if err := prepares(ctx, conn, a.Execute.SQL); err != nil {
			var pgErr *pgconn.PgError
			switch {
			case !errors.As(err, &pgErr):
				return nil, nil, err
			case pgErr.Code == pgerrcode.InsufficientPrivilege:
				// A schema the role may not use is refused as the
				// statement is parsed.
				ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s: role %s may not run the statement: %s; grant it that privilege",
					DiagnosticPrivilegeMissing, role, pgErr.Message)})
			default:
				ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s: the datasource cannot prepare the statement: %s", DiagnosticSchemaMismatch, pgErr.Message)})
			}
			continue
		}
		denied, err := mayNotRun(ctx, conn, a.Execute.SQL)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range denied {
			ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("%s: role %s %s", DiagnosticPrivilegeMissing, role, d)})
		}
	}
	return cat, ps.sorted(), nil
}

// privilegeCheck is the name a statement is prepared under (PREPARE, in
// the transaction it is tried in) while its privileges are tried.
const privilegeCheck = "orangerail_privilege_check"

// checkTenant is the tenant a statement is tried under: a call's
// transaction sets one, which the statement may read, and which its plan
// may read as it is made (current_setting, for an estimate). A UUID, so
// that a statement casting the tenant to one is tried too.
const checkTenant = "00000000-0000-0000-0000-000000000000"

// nextvalOf finds each nextval a plan shows (EXPLAIN VERBOSE), of a
// column's default or of the statement, its sequence as regclass prints
// it. An identity column's value is shown as nextval('…') without the
// cast: it takes its value without asking for USAGE.
var nextvalOf = regexp.MustCompile(`nextval\('((?:[^']|'')+)'::regclass\)`)

// mayNotRun tries, without running it, whether the role conn acts as may
// run an action's statement (which prepares), and says what it may not
// do. Postgres asks a statement's privileges only as it runs — INSERT,
// UPDATE, DELETE and SELECT on its tables and EXECUTE on the functions it
// calls as the executor starts, which EXPLAIN without ANALYZE does, and
// USAGE on a sequence as a value is taken, which nothing short of running
// does: so each nextval its plan shows is asked of the catalog. The plan
// is a generic one, its parameters left unknown (plan_cache_mode): one
// made for NULL arguments folds a strict function's call away unasked.
// Everything is tried in a transaction or savepoint of its own (conn's
// Begin), rolled back; nothing the statement would change is written,
// and a read-only transaction allows it. A statement that cannot be
// tried so (one PREPARE refuses, as CALL; one whose plan needs more than
// NULL arguments, as a NOT NULL domain's) is left to its calls.
func mayNotRun(ctx context.Context, conn Conn, sql string) ([]string, error) {
	bound, _, err := BindSQL(sql)
	if err != nil {
		return nil, err
	}
	outer, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = outer.Rollback(context.WithoutCancel(ctx)) }()
	try, err := outer.Begin(ctx)
	if err != nil {
		return nil, err
	}
	plan, prepared, refused, err := tryStatement(ctx, try, bound)
	if rerr := try.Rollback(ctx); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	if prepared {
		// A prepared statement outlives the savepoint it was made in.
		if _, err := outer.Exec(ctx, "DEALLOCATE "+privilegeCheck); err != nil {
			return nil, err
		}
	}
	switch {
	case refused != nil && refused.Code == pgerrcode.InsufficientPrivilege:
		return []string{"may not run the statement: " + refused.Message + "; grant it that privilege"}, nil
	case refused != nil:
		return nil, nil
	}
	var sequences []string
	for _, m := range nextvalOf.FindAllStringSubmatch(plan, -1) {
		if seq := strings.ReplaceAll(m[1], "''", "'"); !slices.Contains(sequences, seq) {
			sequences = append(sequences, seq)
		}
	}
	if len(sequences) == 0 {
		return nil, nil
	}
	names, err := store.New(outer).CatalogSequencesDenied(ctx, sequences)
	if err != nil {
		return nil, err
	}
	var denied []string
	for _, n := range names {
		denied = append(denied, fmt.Sprintf("may not take values (nextval) from sequence %s, as the statement or a column default of its table does; grant it USAGE on the sequence", n))
	}
	return denied, nil
}

// tryStatement prepares a bound statement in tx and explains it, under
// what a call's transaction sets, and returns its plan and whether it
// prepared; or refused, the database's refusal to prepare or explain it.
func tryStatement(ctx context.Context, tx pgx.Tx, bound string) (plan string, prepared bool, refused *pgconn.PgError, err error) {
	// SET, not set_config, which a hardened database may not let the
	// role execute.
	if _, err := tx.Exec(ctx, "SET LOCAL "+store.TenantSetting+" = '"+checkTenant+"'; SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return "", false, nil, err
	}
	if _, err := tx.Exec(ctx, "PREPARE "+privilegeCheck+" AS "+bound); err != nil {
		if errors.As(err, &refused) {
			return "", false, refused, nil
		}
		return "", false, nil, err
	}
	var params int
	if err := tx.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_catalog.pg_prepared_statements WHERE name = $1", privilegeCheck).Scan(&params); err != nil {
		return "", true, nil, err
	}
	explain := "EXPLAIN (VERBOSE) EXECUTE " + privilegeCheck
	if params > 0 {
		explain += "(" + strings.Repeat("NULL, ", params-1) + "NULL)"
	}
	rows, err := tx.Query(ctx, explain, pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		var lines []string
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		plan = strings.Join(lines, "\n")
	}
	if errors.As(err, &refused) {
		return "", true, refused, nil
	}
	return plan, true, nil, err
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
