package effects_test

import (
	"testing"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestEveryKindRuns: each execute kind but not_implemented has an effect,
// and nothing else does.
func TestEveryKindRuns(t *testing.T) {
	t.Parallel()
	factories := effects.Factories()
	for _, kind := range ontology.ExecuteKinds() {
		_, ok := factories[kind]
		if want := kind != ontology.ExecuteNotImplemented; ok != want {
			t.Errorf("kind %q: has an effect %v, want %v", kind, ok, want)
		}
	}
	if len(factories) != len(ontology.ExecuteKinds())-1 {
		t.Errorf("%d factories for %d kinds", len(factories), len(ontology.ExecuteKinds()))
	}
}
