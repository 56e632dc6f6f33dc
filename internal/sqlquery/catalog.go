package sqlquery

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/sqlguard"
)

// GuardCatalog is the layer that resolves every call against the catalog.
const GuardCatalog = "catalog"

// volatileAllowed are the VOLATILE built-ins a query may call, by name in
// pg_catalog: each only reads a clock or a random source and changes
// nothing, in the database or outside it.
var volatileAllowed = []string{"random", "gen_random_uuid", "clock_timestamp"}

// candidate is one function, operator or cast of the catalog a call may
// resolve to, and what the catalog layer judges it by. A cast's candidates
// are one per function converting to the type: its name and schema are
// the type's.
type candidate struct {
	name, schema string
	onPath       bool // its schema is on the query's search path
	// args: a function's parameters, of which defaults may be left out and,
	// when variadic, the last may take any number; an operator's operands;
	// a cast's one.
	args, defaults int
	variadic       bool
	volatile       bool
	extension      bool   // it, or an operator's or cast's function, is an extension's
	funcSchema     string // an operator's or cast's function's schema
}

// The catalog, read as the role agent SQL runs as, with its search path:
// every function, operator and type bearing a name the statement calls.
//
// A cast to a type may call any function converting to it (pg_cast) or the
// type's input function (a literal's conversion), chosen by the source
// type, which only planning knows; so each is a candidate — but for a cast
// from an unheld type: an extension's type that no column of the schemas
// holds. A value of one can come only from the extension's functions or a
// cast to it, which are judged as calls of their own. Likewise an operator
// whose operands are all of unheld types (an extension's own =) is no
// candidate. Without that exception, an extension in a schema would refuse
// every = and every ::text.
const (
	// unheldTypes is a CTE of the unheld types, for the queries below.
	unheldTypes = `WITH unheld AS (
		SELECT d.objid AS oid FROM pg_depend d
		WHERE d.deptype = 'e' AND d.classid = 'pg_type'::regclass AND NOT EXISTS (
			SELECT 1 FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid JOIN pg_namespace rn ON rn.oid = r.relnamespace
			WHERE a.atttypid = d.objid AND NOT a.attisdropped AND rn.nspname = ANY (current_schemas(false))))
	`
	catalogFunctions = `SELECT p.proname, n.nspname, n.nspname = ANY (current_schemas(true)),
		p.pronargs, p.pronargdefaults, p.provariadic <> 0, p.provolatile = 'v',
		EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'),
		n.nspname
	FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE p.proname = ANY ($1)`
	catalogOperators = unheldTypes + `SELECT o.oprname, n.nspname, n.nspname = ANY (current_schemas(true)),
		CASE WHEN o.oprleft = 0 THEN 1 ELSE 2 END, 0, false, p.provolatile = 'v',
		EXISTS (SELECT 1 FROM pg_depend d WHERE d.deptype = 'e' AND
			((d.classid = 'pg_operator'::regclass AND d.objid = o.oid) OR (d.classid = 'pg_proc'::regclass AND d.objid = p.oid))),
		pn.nspname
	FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
		JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace pn ON pn.oid = p.pronamespace
	WHERE o.oprname = ANY ($1)
		AND NOT ((o.oprleft = 0 OR o.oprleft IN (SELECT oid FROM unheld)) AND o.oprright IN (SELECT oid FROM unheld))`
	catalogCasts = unheldTypes + `SELECT t.typname, n.nspname, n.nspname = ANY (current_schemas(true)),
		1, 0, false, p.provolatile = 'v',
		EXISTS (SELECT 1 FROM pg_depend d WHERE d.deptype = 'e' AND d.classid = 'pg_proc'::regclass AND d.objid = p.oid),
		pn.nspname
	FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		CROSS JOIN LATERAL (
			SELECT t.typinput AS fn
			UNION
			SELECT c.castfunc FROM pg_cast c
			WHERE c.casttarget = t.oid AND c.castfunc <> 0 AND c.castsource NOT IN (SELECT oid FROM unheld)
		) f
		JOIN pg_proc p ON p.oid = f.fn JOIN pg_namespace pn ON pn.oid = p.pronamespace
	WHERE t.typname = ANY ($1)`
)

// catalogQueries reads each kind of call's candidates.
var catalogQueries = map[sqlguard.CallKind]string{
	sqlguard.CallFunction: catalogFunctions,
	sqlguard.CallOperator: catalogOperators,
	sqlguard.CallCast:     catalogCasts,
}

// resolve is the catalog layer: it resolves every call of statement against
// the live catalog, in the query's own read-only transaction, as the role
// agent SQL runs as and with its search path, before the statement runs.
//
// A name is resolved to every candidate Postgres could choose for it — each
// function or operator of that name and a fitting number of arguments, on
// the search path (pg_catalog and the schemas) or in the schema the call
// names — rather than to the one Postgres would pick by argument types,
// which only planning knows: if every candidate is safe, so is the one
// chosen. A call is refused (volatile_function) when any candidate is
// VOLATILE and not in volatileAllowed; (unresolved_function) when no
// candidate fits, or one is an extension's member or lies outside pg_catalog
// and the schemas. A field selection (x.f) may be a column, so it is judged
// only by the functions that bear its name.
func (q *Querier) resolve(ctx context.Context, tx pgx.Tx, statement string) error {
	calls, err := sqlguard.Calls(statement)
	if err != nil {
		return err
	}
	names := map[sqlguard.CallKind][]string{}
	for _, c := range calls {
		names[c.Kind] = append(names[c.Kind], c.Name)
	}
	found := map[sqlguard.CallKind][]candidate{}
	for kind, query := range catalogQueries {
		if len(names[kind]) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, query, names[kind])
		if err != nil {
			return err
		}
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.name, &c.schema, &c.onPath, &c.args, &c.defaults, &c.variadic, &c.volatile, &c.extension, &c.funcSchema); err != nil {
				rows.Close()
				return err
			}
			found[kind] = append(found[kind], c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for _, call := range calls {
		if err := q.judge(call, found[call.Kind]); err != nil {
			return err
		}
	}
	return nil
}

// judge refuses a call that may resolve to a function or operator no query
// may call, or to none.
func (q *Querier) judge(call sqlguard.Call, catalog []candidate) error {
	what := "function " + call.Name
	switch call.Kind {
	case sqlguard.CallOperator:
		what = "operator " + call.Name
	case sqlguard.CallCast:
		what = "cast to type " + call.Name
	}
	if call.Schema != "" {
		what = fmt.Sprintf("%s in schema %s", what, call.Schema)
		if !q.callable(call.Schema) {
			return &sqlguard.Refusal{Rule: sqlguard.RuleUnresolved, Detail: fmt.Sprintf("%s: only pg_catalog and %s may be called into", what, strings.Join(q.cfg.Schemas, ", "))}
		}
	}
	fits := 0
	for _, c := range catalog {
		if c.name != call.Name || (call.Schema == "" && !c.onPath) || (call.Schema != "" && c.schema != call.Schema) || !c.fits(call.Args) {
			continue
		}
		fits++
		switch {
		case c.extension:
			return &sqlguard.Refusal{Rule: sqlguard.RuleUnresolved, Detail: fmt.Sprintf("%s may resolve to an extension's, in schema %s, which no query may call", what, c.schema)}
		case !q.callable(c.schema) || !q.callable(c.funcSchema):
			return &sqlguard.Refusal{Rule: sqlguard.RuleUnresolved, Detail: fmt.Sprintf("%s may resolve to one in schema %s: only pg_catalog and %s may be called into", what, c.schema, strings.Join(q.cfg.Schemas, ", "))}
		case c.volatile && !(c.schema == "pg_catalog" && call.Kind == sqlguard.CallFunction && slices.Contains(volatileAllowed, c.name)):
			return &sqlguard.Refusal{Rule: sqlguard.RuleVolatile, Detail: fmt.Sprintf("%s may resolve to a VOLATILE one (%s.%s), which may change state; of those only %s may be called", what, c.schema, c.name, strings.Join(volatileAllowed, ", "))}
		}
	}
	if fits == 0 && !call.Optional {
		return &sqlguard.Refusal{Rule: sqlguard.RuleUnresolved, Detail: fmt.Sprintf("no %s taking %d argument(s) is on the search path (pg_catalog, %s)", what, call.Args, strings.Join(q.cfg.Schemas, ", "))}
	}
	return nil
}

// fits says whether a call passing n arguments may resolve to c.
func (c candidate) fits(n int) bool {
	switch {
	case n == c.args:
		return true
	case c.variadic && n >= c.args-1:
		return true
	default:
		return n < c.args && n >= c.args-c.defaults
	}
}

// callable says whether functions in schema may be called: pg_catalog and
// the configured schemas (unless a system one).
func (q *Querier) callable(schema string) bool {
	return schema == "pg_catalog" || (slices.Contains(q.cfg.Schemas, schema) && !sqlguard.SystemSchema(schema))
}
