package ontologytest

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/examples/orders"
)

func TestEdits(t *testing.T) {
	t.Parallel()
	cfg := Parse(t, orders.Config,
		Set("approvals.ttl", "1s"),
		Set("limits.max_input_bytes", 1024),
		SetYAML("actions.cancel_order.input.properties.reason", "{type: string, maxLength: 5}"),
		Delete("actions.cancel_order.rollback"),
	)
	if time.Duration(cfg.Approvals.TTL) != time.Second || cfg.Limits.MaxInputBytes != 1024 || cfg.Actions["cancel_order"].Rollback != "" {
		t.Fatalf("edits not applied: ttl %v, limit %d, rollback %q", cfg.Approvals.TTL, cfg.Limits.MaxInputBytes, cfg.Actions["cancel_order"].Rollback)
	}
	if !strings.Contains(string(Apply(t, orders.Config, SetYAML("preset", "sandbox"))), "preset: sandbox") {
		t.Fatal("SetYAML did not set a scalar")
	}
}

func TestEditsThatDoNotApply(t *testing.T) {
	t.Parallel()
	for name, e := range map[string]Edit{
		"delete a missing member":     Delete("actions.cancel_order.no_such_field"),
		"delete under a missing key":  Delete("no_such.section"),
		"set under a scalar":          Set("service.name", "x"),
		"a fragment that is not YAML": SetYAML("preset", "{unclosed"),
	} {
		var root yaml.Node
		if err := yaml.Unmarshal(orders.Config, &root); err != nil {
			t.Fatal(err)
		}
		if err := e(&root); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
}
