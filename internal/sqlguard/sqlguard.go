// Package sqlguard decides, on the real Postgres grammar, whether a
// statement an agent sent may run as a read-only query: exactly one SELECT,
// with no INTO, no locking clause, no data-modifying statement at any
// depth, no call into a banned function family anywhere in the tree —
// spelled as a call f(x) or as a field selection x.f or (x).f, which
// Postgres resolves as f(x) — no relation outside the schemas it may read,
// and no U& escapes. It is one of the read-only SQL tool's layers, not the
// only one: the statement still runs read-only, as a low-privilege role,
// under limits.
package sqlguard

import (
	"fmt"
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Rule names why a statement was refused. Refusals name the rule and
// never echo more of the statement than the agent sent.
type Rule string

// The rules.
const (
	RuleSyntax       Rule = "syntax"          // not valid Postgres SQL
	RuleOneStatement Rule = "one_statement"   // none, or more than one, statement
	RuleSelectOnly   Rule = "select_only"     // the statement is not a SELECT
	RuleInto         Rule = "no_into"         // SELECT … INTO creates a table
	RuleLocking      Rule = "no_locking"      // FOR UPDATE/SHARE takes row locks
	RuleModifying    Rule = "no_modifying"    // INSERT/UPDATE/DELETE/MERGE, e.g. in a CTE
	RuleFunction     Rule = "banned_function" // a call into a banned function family
	RuleUnicode      Rule = "no_unicode_escape"
	RuleTooLong      Rule = "too_long"
	RuleRelation     Rule = "relation_not_allowed" // a relation outside the allowed schemas, e.g. a catalog
	RuleParameter    Rule = "no_parameters"        // $1: the statement runs with none to bind
	// The catalog layer's rules (package sqlquery decides them, against the
	// live catalog, from the calls Calls lists).
	RuleVolatile   Rule = "volatile_function"   // a call that may resolve to a VOLATILE function or operator
	RuleUnresolved Rule = "unresolved_function" // a call the catalog cannot resolve, or only to a function outside pg_catalog and the schemas, or an extension's
)

// MaxLength bounds a statement, in bytes.
const MaxLength = 64 << 10

// bannedPrefixes are the function families no query may call, matched by
// prefix of the called name's last part, case-insensitively: server
// administration and files (pg_*), settings and roles (set_config), large
// objects (lo_*), other databases (dblink*), sequences (nextval, setval),
// functions that run SQL given as a string (query_to_xml and its
// kin, ts_stat, ts_rewrite, crosstab), and functions that look a name or
// an oid up in the catalogs the relation rule refuses (to_regrole,
// to_regclass…, regclass(text), format_type, obj_description and its kin;
// has_*_privilege, below): the whole server's roles, relations, types and
// comments, every tenant's among them.
var bannedPrefixes = []string{
	"pg_", "set_config", "lo_", "dblink", "nextval", "setval",
	"query_to_xml", "query_to_json", "table_to_xml", "cursor_to_xml", "schema_to_xml", "database_to_xml",
	"ts_stat", "ts_rewrite", "crosstab", "txid_", "binary_upgrade_",
	"to_reg", "format_type", "obj_description", "col_description", "shobj_description",
}

// catalogTypes are the object identifier types, whose values Postgres
// prints as the name of the object the oid names, looked up in the
// catalog (an oid cast to regrole prints a role's name, to regclass a
// relation's), and reads from a name the same way: no statement may cast
// to one, nor call a function named after one (regclass(text)) or by one
// (regroleout, whose argument an integer is cast to implicitly).
var catalogTypes = []string{
	"regclass", "regcollation", "regconfig", "regdictionary", "regnamespace", "regoper",
	"regoperator", "regproc", "regprocedure", "regrole", "regtype",
}

// Refusal is a statement the guard refused, and the rule it broke.
type Refusal struct {
	Rule   Rule
	Detail string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return string(r.Rule)
	}
	return fmt.Sprintf("%s: %s", r.Rule, r.Detail)
}

// Check returns the one statement of sql, without a trailing semicolon,
// when it may run, and a *Refusal otherwise. schemas are the schemas whose
// relations the statement may read (the search path it runs under): a
// relation named with a schema must name one of them, and no relation may
// be a catalog's.
func Check(sql string, schemas []string) (string, error) {
	if len(sql) > MaxLength {
		return "", &Refusal{Rule: RuleTooLong, Detail: fmt.Sprintf("longer than %d bytes", MaxLength)}
	}
	scan, err := pg.Scan(sql)
	if err != nil {
		return "", &Refusal{Rule: RuleSyntax}
	}
	for _, tok := range scan.Tokens {
		if tok.Token == pg.Token_UIDENT || tok.Token == pg.Token_USCONST {
			return "", &Refusal{Rule: RuleUnicode, Detail: "U& identifiers and strings are not accepted"}
		}
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		return "", &Refusal{Rule: RuleSyntax}
	}
	if len(tree.Stmts) != 1 {
		return "", &Refusal{Rule: RuleOneStatement, Detail: fmt.Sprintf("%d statements", len(tree.Stmts))}
	}
	raw := tree.Stmts[0]
	if raw.Stmt.GetSelectStmt() == nil {
		return "", &Refusal{Rule: RuleSelectOnly}
	}
	if err := (rules{schemas: schemas}).walk(raw.Stmt.ProtoReflect()); err != nil {
		return "", err
	}
	start, end := int(raw.StmtLocation), len(sql)
	if raw.StmtLen > 0 {
		end = start + int(raw.StmtLen)
	}
	return sql[start:end], nil
}

// rules are the rules a statement is held to, with what they depend on.
type rules struct {
	schemas []string // the schemas whose relations may be read
}

// walk visits every message of the tree.
func (r rules) walk(m protoreflect.Message) error {
	if err := r.check(m.Interface()); err != nil {
		return err
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			list := v.List()
			for i := 0; i < list.Len() && err == nil; i++ {
				err = r.walk(list.Get(i).Message())
			}
		case fd.IsMap():
			// The parse tree has no maps.
		case fd.Message() != nil:
			err = r.walk(v.Message())
		}
		return err == nil
	})
	return err
}

// check applies the rules to one node.
func (r rules) check(node any) error {
	switch n := node.(type) {
	case *pg.SelectStmt:
		if n.IntoClause != nil {
			return &Refusal{Rule: RuleInto}
		}
		if len(n.LockingClause) > 0 {
			return &Refusal{Rule: RuleLocking}
		}
	case *pg.InsertStmt, *pg.UpdateStmt, *pg.DeleteStmt, *pg.MergeStmt:
		return &Refusal{Rule: RuleModifying}
	case *pg.ParamRef:
		// Postgres would refuse the bind as a protocol violation, which
		// says nothing of the statement to the agent.
		return &Refusal{Rule: RuleParameter, Detail: "the statement runs with no parameters: write each value as a literal"}
	case *pg.FuncCall:
		if len(n.Funcname) == 0 {
			return nil
		}
		return callable(n.Funcname[len(n.Funcname)-1].GetString_().GetSval(), "")
	case *pg.ColumnRef:
		// a.b is column b of relation a, or else the call b(a) (Postgres
		// reads a.b as b(a) when a is a column or a whole row); a.b.c may
		// likewise call c. Only the first part never names a function.
		for _, f := range n.Fields[min(1, len(n.Fields)):] {
			if err := callable(f.GetString_().GetSval(), "x.f calls f(x)"); err != nil {
				return err
			}
		}
	case *pg.RangeVar:
		return r.readable(n.Schemaname, n.Relname)
	case *pg.TypeName:
		// x::t, CAST(x AS t), t 'literal', and a column definition's type.
		if len(n.Names) > 0 {
			name := strings.ToLower(n.Names[len(n.Names)-1].GetString_().GetSval())
			if slices.Contains(catalogTypes, name) {
				return &Refusal{Rule: RuleRelation, Detail: fmt.Sprintf("a %s value is read from the catalog (its output is the name of the object an oid names): no statement may make one", name)}
			}
		}
	case *pg.A_Indirection:
		// (x).f selects field f of x, or else calls f(x); (x).f.g may call
		// g(f(x)).
		for _, f := range n.Indirection {
			if err := callable(f.GetString_().GetSval(), "(x).f calls f(x)"); err != nil {
				return err
			}
		}
	}
	return nil
}

// callable refuses a name that may resolve to a function in a banned
// family. It is the one place the function rule is decided: for a call's
// name, and for every name Postgres may resolve as a call (a part after a
// dot). how, when set, says how a name that is not spelled as a call calls
// one. Names are matched case-insensitively, which refuses more than
// Postgres would resolve (a quoted "PG_SLEEP" is not pg_sleep), never less.
func callable(name, how string) error {
	family := bannedFamily(strings.ToLower(name))
	if family == "" {
		return nil
	}
	detail := fmt.Sprintf("functions named %s may not be called", family)
	if how != "" {
		detail += fmt.Sprintf(", nor named after a dot (%s): leave %s unqualified or alias it", how, name)
	}
	return &Refusal{Rule: RuleFunction, Detail: detail}
}

// bannedFamily names the banned family a lower-cased function name is of
// (pg_*, regrole*, has_*_privilege …), or "". An object identifier type's
// name begins its family: the type's own functions (regclass(text),
// regroleout, whose argument an integer is cast to implicitly, with no
// cast written) look names up in the catalog as its values do.
func bannedFamily(lower string) string {
	for _, prefixes := range [...][]string{bannedPrefixes, catalogTypes} {
		for _, prefix := range prefixes {
			if strings.HasPrefix(lower, prefix) {
				return prefix + "*"
			}
		}
	}
	if strings.HasPrefix(lower, "has_") && strings.HasSuffix(lower, "_privilege") {
		return "has_*_privilege"
	}
	return ""
}

// readable refuses a relation outside the allowed schemas. A catalog
// relation describes the whole database — every tenant's row counts in
// pg_stat_user_tables, pg_class.reltuples, pg_statio_* — and Postgres
// cannot deny a role what PUBLIC may read, so it is refused here: a
// schema-qualified name must name an allowed schema, never a system one
// (pg_catalog, pg_toast, pg_temp…, information_schema), even if allowed;
// an unqualified name must not start with pg_, since pg_catalog is
// implicitly first on every search path and each of its relations is named
// pg_* (information_schema is never on the path unless named).
func (r rules) readable(schema, relation string) error {
	if schema == "" {
		if strings.HasPrefix(strings.ToLower(relation), "pg_") {
			return &Refusal{Rule: RuleRelation, Detail: fmt.Sprintf("%s is a catalog relation (pg_*); only relations in %s may be read", relation, strings.Join(r.schemas, ", "))}
		}
		return nil
	}
	if SystemSchema(schema) || !slices.Contains(r.schemas, schema) {
		return &Refusal{Rule: RuleRelation, Detail: fmt.Sprintf("schema %s may not be read; only relations in %s may be read", schema, strings.Join(r.schemas, ", "))}
	}
	return nil
}

// SystemSchema says whether a schema is Postgres's own — pg_catalog,
// pg_toast, pg_temp…, information_schema — whose relations no query may
// read, even if named among its schemas.
func SystemSchema(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasPrefix(lower, "pg_") || lower == "information_schema"
}
