package policy_test

import (
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
)

// TestActionsLoad writes the actions of every operation of every corpus
// document — each acceptable finding accepted, so that as many as can be
// served are written — and loads the file as orangerail does: whatever a
// description holds, what the compiler writes is a config that loads.
func TestActionsLoad(t *testing.T) {
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, name := range corpusNames(t) {
		t.Run(name, func(t *testing.T) {
			f := load(t, name)
			first := compile(t, name, "svc", nil)
			accept := map[string]string{}
			for _, tool := range first.Tools {
				accept[tool.Name] = "accepted by the test"
			}
			m := compile(t, name, "svc", accept)
			// In staging, every written action is served (production withholds
			// the destructive ones).
			out, err := policy.Emit(m, f.Doc, all, policy.EmitOptions{BaseURL: "https://api.example.com/v1", Environment: "staging"})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ontology.Parse(out.YAML)
			if err != nil {
				t.Fatalf("the actions file does not load: %v", err)
			}
			if len(cfg.Actions) != len(out.Written) {
				t.Fatalf("%d actions loaded, %d written", len(cfg.Actions), len(out.Written))
			}
			for _, s := range out.Skipped {
				if tool := m.Tool(s.Tool); tool != nil && tool.Status.Value == policy.StatusServable && !strings.Contains(s.Reason, "built-in") {
					t.Errorf("%s is servable and was skipped: %s", s.Tool, s.Reason)
				}
			}
			written += len(out.Written)
		})
	}
	if written < 300 {
		t.Fatalf("only %d actions written across the corpus", written)
	}
}
