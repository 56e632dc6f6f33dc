package ontology

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/orangerail/orangerail/internal/errcode"
)

// Prompt is a message template the MCP server offers its clients
// (prompts/list, prompts/get): a person picks it in their host, fills in
// its arguments, and the host sends the message to its model. Like a
// tool, a prompt may be offered to some callers only.
type Prompt struct {
	Title       string           `yaml:"title"`
	Description string           `yaml:"description"`
	Arguments   []PromptArgument `yaml:"arguments"`
	// Message is the user message the prompt renders: its {{name}}
	// placeholders are replaced by the arguments of those names, once,
	// left to right (a value is never read for placeholders itself).
	Message string `yaml:"message"`
	// Roles, when set, offer the prompt to authenticated callers holding
	// one of them only.
	Roles []string `yaml:"roles"`
	// Audience, when set, is a CEL predicate over caller that must also
	// be true for the prompt to be offered.
	Audience string `yaml:"audience"`

	audience cel.Program
}

// PromptArgument is one value a prompt's message takes.
type PromptArgument struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
}

// AudienceProgram returns the prompt's compiled audience predicate, or nil
// when it has none.
func (p *Prompt) AudienceProgram() cel.Program { return p.audience }

// placeholderPattern is a {{name}} placeholder of a prompt's message;
// spaces inside the braces are allowed ({{ name }}).
var placeholderPattern = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Render returns the prompt's message with each placeholder replaced by
// the argument of its name (an optional argument not given is empty).
// Replacement is one pass over the template: braces in a value stay as
// they are. The caller checks args against Arguments first.
func (p *Prompt) Render(args map[string]string) string {
	return placeholderPattern.ReplaceAllStringFunc(p.Message, func(m string) string {
		return args[placeholderPattern.FindStringSubmatch(m)[1]]
	})
}

// validatePrompts checks each prompt: its name is one a host accepts, its
// arguments are named once each, its message uses each argument and names
// no other, its braces are all placeholders, and its audience compiles.
func (c *Config) validatePrompts(add func(path, format string, args ...any)) {
	for _, name := range slices.Sorted(maps.Keys(c.Prompts)) {
		p, path := c.Prompts[name], "prompts."+name
		if !toolNamePattern.MatchString(name) {
			add(path, "the prompt name %q is not 1 to 64 of [a-zA-Z0-9_-]", name)
		}
		declared := map[string]int{}
		for i, a := range p.Arguments {
			if first, ok := declared[a.Name]; ok {
				add(fmt.Sprintf("%s.arguments.%d.name", path, i), "%s: the argument %q is declared at arguments.%d already; name each argument once",
					errcode.MCPPromptArgumentDuplicate, a.Name, first)
				continue
			}
			declared[a.Name] = i
		}
		used := map[string]bool{}
		for _, m := range placeholderPattern.FindAllStringSubmatch(p.Message, -1) {
			arg := m[1]
			if _, ok := declared[arg]; !ok && !used[arg] {
				add(path+".message", "%s: the placeholder {{%s}} names no argument of this prompt: declare it under arguments, or correct the name (%s)",
					errcode.MCPPromptPlaceholderUnknown, arg, argumentList(declared))
			}
			used[arg] = true
		}
		// What is left of the message once its placeholders are taken out
		// must hold no braces: {{order id}} or {{name} would otherwise
		// reach the model as written, a placeholder nobody fills.
		if rest := placeholderPattern.ReplaceAllString(p.Message, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			add(path+".message", "%s: the message holds {{ or }} that is not a placeholder {{name}} of one argument (a name is a letter or _, then letters, digits or _)",
				errcode.MCPPromptPlaceholderUnknown)
		}
		for i, a := range p.Arguments {
			if declared[a.Name] == i && !used[a.Name] {
				add(fmt.Sprintf("%s.arguments.%d", path, i), "%s: the message has no {{%s}}, so the argument would be asked for and dropped: use it in the message, or remove it",
					errcode.MCPPromptArgumentUnused, a.Name)
			}
		}
		p.audience = audienceProgram(p.Audience, path+".audience", add)
	}
}

// argumentList names a prompt's arguments, sorted, for a problem's message.
func argumentList(declared map[string]int) string {
	if len(declared) == 0 {
		return "it declares none"
	}
	return "its arguments: " + strings.Join(slices.Sorted(maps.Keys(declared)), ", ")
}
