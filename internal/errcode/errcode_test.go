package errcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

func TestTableIsComplete(t *testing.T) {
	t.Parallel()
	seen := map[Code]bool{}
	shape := regexp.MustCompile(`^X_[A-Z0-9_]+$`)
	for _, e := range All() {
		if seen[e.Code] {
			t.Errorf("%s is declared twice", e.Code)
		}
		seen[e.Code] = true
		if !shape.MatchString(string(e.Code)) || e.Cause == "" || e.Fix == "" {
			t.Errorf("%s: code, cause and fix must all be set", e.Code)
		}
		if got, ok := Explain(string(e.Code)); !ok || got != e {
			t.Errorf("Explain(%s) = %v, %v", e.Code, got, ok)
		}
	}
	err := New(DatabaseTooNew, "at 9", nil)
	if Of(err) != DatabaseTooNew || err.Fix() == "" {
		t.Fatalf("Of/Fix: %v %q", Of(err), err.Fix())
	}
}

// TestEveryCodeIsExplained reads this package's source: every Code constant
// declared must have its entry in the table.
func TestEveryCodeIsExplained(t *testing.T) {
	t.Parallel()
	file, err := parser.ParseFile(token.NewFileSet(), "errcode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if ident, ok := vs.Type.(*ast.Ident); !ok || ident.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				code, _ := strconv.Unquote(lit.Value)
				declared++
				if _, ok := Explain(code); !ok {
					t.Errorf("%s is declared but not explained in the table", code)
				}
			}
		}
	}
	if declared != len(All()) {
		t.Fatalf("%d codes declared, %d explained", declared, len(All()))
	}
}
