package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// declared counts the constants of the named type declared in file.
func declared(t *testing.T, file, typ string) int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); ok && id.Name == typ {
					n += len(v.Names)
				}
			}
		}
	}
	return n
}

// TestClosedListsAreComplete holds Statuses and Diagnostics to the
// constants outcome.go declares: each list names each constant once (a
// typed list can hold nothing else), so a status or diagnostic added there
// reaches every reader of the lists, redact among them.
func TestClosedListsAreComplete(t *testing.T) {
	t.Parallel()
	statuses := engine.Statuses()
	if n := declared(t, "outcome.go", "Status"); len(statuses) != n || len(slices.Compact(slices.Sorted(slices.Values(statuses)))) != n {
		t.Errorf("outcome.go declares %d statuses; Statuses() lists %v", n, statuses)
	}
	diagnostics := engine.Diagnostics()
	n := declared(t, "outcome.go", "Diagnostic") - 1 // DiagnosticNone is no diagnostic
	if len(diagnostics) != n || len(slices.Compact(slices.Sorted(slices.Values(diagnostics)))) != n ||
		slices.Contains(diagnostics, engine.DiagnosticNone) {
		t.Errorf("outcome.go declares %d diagnostics besides none; Diagnostics() lists %v", n, diagnostics)
	}
}
