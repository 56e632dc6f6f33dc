package errcode

import (
	"regexp"
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
