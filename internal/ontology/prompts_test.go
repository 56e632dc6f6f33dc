package ontology

import (
	"errors"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

const promptOK = `prompts:
  triage:
    title: Triage
    description: d
    arguments:
      - {name: order_id, required: true}
      - {name: note}
    message: "Look at {{order_id}}; note: {{ note }}."
    roles: [support]
    audience: 'caller.tenant == "acme"'
`

// TestPromptsLoad: a prompt's arguments, message, roles and audience load,
// and its message renders each placeholder once, left to right, braces in
// a value kept as sent.
func TestPromptsLoad(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(add(promptOK)(base)))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prompts["triage"]
	if p == nil || len(p.Arguments) != 2 || !p.Arguments[0].Required || p.Arguments[1].Required || p.AudienceProgram() == nil {
		t.Fatalf("prompt = %+v", p)
	}
	if got := p.Render(map[string]string{"order_id": "{{note}}", "note": "x"}); got != "Look at {{note}}; note: x." {
		t.Fatalf("Render = %q", got)
	}
	if got := p.Render(map[string]string{"order_id": "o-1"}); got != "Look at o-1; note: ." {
		t.Fatalf("Render without the optional argument = %q", got)
	}
}

// TestPromptProblems: each bad prompt is a boot problem at its field path,
// with its stable code where the schema cannot say it.
func TestPromptProblems(t *testing.T) {
	t.Parallel()
	prompt := func(body string) string { return add("prompts:\n  triage:\n    description: d\n" + body)(base) }
	tests := []struct {
		name, config, path string
		code               errcode.Code // "" for the schema's own words
	}{
		{"unknown placeholder", prompt("    arguments: [{name: order_id}]\n    message: \"{{order_id}} {{orderid}}\"\n"),
			"prompts.triage.message", errcode.MCPPromptPlaceholderUnknown},
		{"a placeholder without arguments", prompt("    message: \"{{order_id}}\"\n"), "prompts.triage.message", errcode.MCPPromptPlaceholderUnknown},
		{"braces that are no placeholder", prompt("    arguments: [{name: a}]\n    message: \"{{a}} {{not one}}\"\n"),
			"prompts.triage.message", errcode.MCPPromptPlaceholderUnknown},
		{"duplicate argument", prompt("    arguments: [{name: a}, {name: a}]\n    message: \"{{a}}\"\n"),
			"prompts.triage.arguments.1.name", errcode.MCPPromptArgumentDuplicate},
		{"unused argument", prompt("    arguments: [{name: a}, {name: b}]\n    message: \"{{a}}\"\n"),
			"prompts.triage.arguments.1", errcode.MCPPromptArgumentUnused},
		{"audience not boolean", prompt("    message: m\n    audience: caller.tenant\n"), "prompts.triage.audience", ""},
		{"argument name not an identifier", prompt("    arguments: [{name: order-id}]\n    message: m\n"), "prompts.triage.arguments.0.name", ""},
		{"no message", prompt(""), "prompts.triage", ""},
		{"unknown key", prompt("    message: m\n    template: t\n"), "prompts.triage.template", ""},
		{"a name no host takes", add("prompts:\n  \"tri age\": {description: d, message: m}\n")(base), "prompts.tri age", ""},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.config))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != tt.path || !strings.Contains(problems[0].Message, string(tt.code)) {
			t.Errorf("%s: Parse = %v, want one problem (%s) at %s", tt.name, err, tt.code, tt.path)
		}
	}
}
