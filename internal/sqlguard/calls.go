package sqlguard

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// CallKind says what a Call calls.
type CallKind int

// The kinds of call.
const (
	// CallFunction calls a function by name: f(x), x.f, (x).f.
	CallFunction CallKind = iota
	// CallOperator calls an operator's function: a + b, x LIKE y, = ANY.
	CallOperator
	// CallCast converts to the named type (x::t, CAST(x AS t), t 'lit'),
	// which calls a cast's function or the type's input function.
	CallCast
)

// Call is one function, operator or cast a statement may call, as the
// parse tree names it: the catalog layer resolves each against the live
// catalog.
type Call struct {
	Schema string // the schema the call names, or "" to use the search path
	// Name is the function's, operator's or cast's target type's name, as
	// Postgres compares it.
	Name string
	// Args is how many arguments the call passes: a function's, an
	// operator's operands (1 for a prefix operator, 2 otherwise), a cast's
	// one.
	Args int
	Kind CallKind
	// Optional marks a name Postgres resolves as a call only when it is no
	// column (x.f, (x).f): no function of that name is not an error.
	Optional bool
}

// Calls lists the calls of statement, one that Check accepted: every
// function call, field selection that may be one (x.f, (x).f call f(x)),
// operator (a + b, OPERATOR(s.+), x = ANY (…), IN, LIKE…) and explicit cast
// (x::t, CAST(x AS t), t 'literal'), in the order they stand, repeats
// included. Casts Postgres inserts by itself, between types an expression
// mixes, stand nowhere in the statement and are not listed.
func Calls(statement string) ([]Call, error) {
	tree, err := pg.Parse(statement)
	if err != nil {
		return nil, &Refusal{Rule: RuleSyntax}
	}
	var calls []Call
	for _, raw := range tree.Stmts {
		collect(raw.Stmt.ProtoReflect(), &calls)
	}
	return calls, nil
}

// collect appends the calls of m and every message under it.
func collect(m protoreflect.Message, calls *[]Call) {
	switch n := m.Interface().(type) {
	case *pg.FuncCall:
		if c, ok := named(n.Funcname); ok {
			c.Args = len(n.Args)
			*calls = append(*calls, c)
		}
	case *pg.ColumnRef:
		// Only a part after the first may call (see check).
		for _, f := range n.Fields[min(1, len(n.Fields)):] {
			if name := f.GetString_().GetSval(); name != "" {
				*calls = append(*calls, Call{Name: name, Args: 1, Optional: true})
			}
		}
	case *pg.A_Indirection:
		for _, f := range n.Indirection {
			if name := f.GetString_().GetSval(); name != "" {
				*calls = append(*calls, Call{Name: name, Args: 1, Optional: true})
			}
		}
	case *pg.A_Expr:
		if c, ok := named(n.Name); ok && operatorName(c.Name) {
			c.Kind, c.Args = CallOperator, 2
			if n.Lexpr == nil {
				c.Args = 1
			}
			*calls = append(*calls, c)
		}
	case *pg.SubLink:
		if c, ok := named(n.OperName); ok && operatorName(c.Name) {
			c.Kind, c.Args = CallOperator, 2
			*calls = append(*calls, c)
		}
	case *pg.TypeCast:
		if c, ok := named(n.GetTypeName().GetNames()); ok {
			c.Kind, c.Args = CallCast, 1
			*calls = append(*calls, c)
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			list := v.List()
			for i := 0; i < list.Len(); i++ {
				collect(list.Get(i).Message(), calls)
			}
		case fd.IsMap():
		case fd.Message() != nil:
			collect(v.Message(), calls)
		}
		return true
	})
}

// named reads a qualified name: its last part, and the schema before it.
func named(parts []*pg.Node) (Call, bool) {
	if len(parts) == 0 {
		return Call{}, false
	}
	c := Call{Name: parts[len(parts)-1].GetString_().GetSval()}
	if len(parts) > 1 {
		c.Schema = parts[len(parts)-2].GetString_().GetSval()
	}
	return c, c.Name != ""
}

// operatorName says whether name is an operator's, not a keyword the
// grammar stores in the same place (BETWEEN, SIMILAR…, whose operators
// stand as operators or calls of their own in the tree).
func operatorName(name string) bool {
	return strings.Trim(name, "+-*/<>=~!@#%^&|`?") == ""
}
