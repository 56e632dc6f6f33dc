package ontology

import (
	"slices"
	"testing"
)

// TestLeadingZeroIntegersAreRefused: a plain integer with a leading zero
// (0100) is an octal 64 to the YAML 1.1 reading the loader does, and a
// decimal 100 to YAML 1.2 and to the person who wrote it: refused at its
// path, never read as a number other than the one a reader sees — in a
// limit, or in an input schema's bound that governs what an agent may
// send. 0o100, 0x40, a quoted "0100", 0 and 100 mean one thing each.
func TestLeadingZeroIntegersAreRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, src, path string }{
		{"a limit", add("limits: {max_input_bytes: 0100}\n")(base), "limits.max_input_bytes"},
		{"a negative one", replace("{order_id: {type: string}}", "{order_id: {type: string}, delta: {type: integer, minimum: -0100}}")(base),
			"actions.cancel_order.input.properties.delta.minimum"},
		{"an input bound", replace("{order_id: {type: string}}", "{order_id: {type: string}, amount: {type: integer, maximum: 0500}}")(base),
			"actions.cancel_order.input.properties.amount.maximum"},
	} {
		_, err := Parse([]byte(tt.src))
		if paths := problemPaths(err); !slices.Equal(paths, []string{tt.path}) {
			t.Errorf("%s: %v, want one problem at %s", tt.name, err, tt.path)
		}
	}
	cfg, err := Parse([]byte(replace("{order_id: {type: string}}", "{order_id: {type: string}, amount: {type: integer, maximum: 0o500, minimum: 0}}")(base) +
		"limits: {max_input_bytes: 0x100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Limits.MaxInputBytes; got != 256 {
		t.Errorf("max_input_bytes %d, want 256", got)
	}
	if got := cfg.Actions["cancel_order"].Input["properties"].(map[string]any)["amount"].(map[string]any)["maximum"]; got != 320 {
		t.Errorf("maximum %v (%T), want 320", got, got)
	}
}
