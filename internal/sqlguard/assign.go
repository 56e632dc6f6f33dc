package sqlguard

import (
	"encoding/json"
	"strconv"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Assignment is one column a write statement sets, to a value known
// before it runs: parameter $Param, or the constant Const.
type Assignment struct {
	Column string
	// Param is the number of the $n parameter the column is set to; 0 when
	// it is set to Const.
	Param int
	// Const is the constant as JSON (a string, number, boolean or null)
	// when Param is 0.
	Const json.RawMessage
}

// Assignments returns the columns one UPDATE, or one INSERT of one VALUES
// row, sets, in the statement's order — when every one of them is set to a
// parameter or a constant (through casts). Otherwise, or for any other
// statement, it reports false: what the statement writes is then known
// only when it runs.
func Assignments(sql string) ([]Assignment, bool) {
	tree, err := pg.Parse(sql)
	if err != nil || len(tree.GetStmts()) != 1 {
		return nil, false
	}
	stmt := tree.GetStmts()[0].GetStmt()
	var out []Assignment
	switch {
	case stmt.GetUpdateStmt() != nil:
		for _, n := range stmt.GetUpdateStmt().GetTargetList() {
			t := n.GetResTarget()
			a, ok := assigned(t.GetName(), t.GetVal())
			if !ok || len(t.GetIndirection()) > 0 {
				return nil, false
			}
			out = append(out, a)
		}
	case stmt.GetInsertStmt() != nil:
		ins := stmt.GetInsertStmt()
		rows := ins.GetSelectStmt().GetSelectStmt().GetValuesLists()
		if len(rows) != 1 || len(ins.GetCols()) == 0 || ins.GetOnConflictClause() != nil {
			return nil, false
		}
		values := rows[0].GetList().GetItems()
		if len(values) != len(ins.GetCols()) {
			return nil, false
		}
		for i, n := range ins.GetCols() {
			t := n.GetResTarget()
			a, ok := assigned(t.GetName(), values[i])
			if !ok || len(t.GetIndirection()) > 0 {
				return nil, false
			}
			out = append(out, a)
		}
	default:
		return nil, false
	}
	return out, len(out) > 0
}

// assigned reads the value a column is set to, when it is a parameter or
// a constant.
func assigned(column string, v *pg.Node) (Assignment, bool) {
	for v.GetTypeCast() != nil {
		v = v.GetTypeCast().GetArg()
	}
	a := Assignment{Column: column}
	if p := v.GetParamRef(); p != nil {
		a.Param = int(p.GetNumber())
		return a, a.Param > 0
	}
	c := v.GetAConst()
	if c == nil {
		return a, false
	}
	switch {
	case c.GetIsnull():
		a.Const = json.RawMessage("null")
	case c.GetSval() != nil:
		a.Const, _ = json.Marshal(c.GetSval().GetSval())
	case c.GetIval() != nil:
		a.Const = json.RawMessage(strconv.FormatInt(int64(c.GetIval().GetIval()), 10))
	case c.GetFval() != nil:
		a.Const, _ = json.Marshal(c.GetFval().GetFval()) // exactly as written: no double holds every numeric
	case c.GetBoolval() != nil:
		a.Const = json.RawMessage(strconv.FormatBool(c.GetBoolval().GetBoolval()))
	default:
		return a, false
	}
	return a, true
}
