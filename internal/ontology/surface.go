package ontology

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/cel-go/cel"

	"github.com/orangerail/orangerail/internal/errcode"
)

// The meta surface (surface: and groups: in the config). A large catalog
// costs an agent's context one tool per object and action; a caller
// whose surface is meta is offered three tools instead — list_resources,
// describe_resource, manage_resource — and reaches every grouped tool
// through them, through the same gates. Tools named in no group stay
// flat beside them.

// The meta tools' names.
const (
	// ListResourcesTool lists the caller's grouped tools as plain text.
	ListResourcesTool = "list_resources"
	// DescribeResourceTool answers the full schemas of named resources'
	// tools.
	DescribeResourceTool = "describe_resource"
	// ManageResourceTool calls a grouped tool.
	ManageResourceTool = "manage_resource"
)

// Surface is how a caller's catalog is offered.
type Surface string

// The surfaces.
const (
	// SurfaceFlat offers one tool per tool the caller sees.
	SurfaceFlat Surface = "flat"
	// SurfaceMeta offers the meta tools in place of every grouped tool.
	SurfaceMeta Surface = "meta"
)

// SurfaceDefault is the surface of a caller no rule names.
const SurfaceDefault = SurfaceFlat

// Surfaces lists the surfaces, for messages.
func Surfaces() []Surface { return []Surface{SurfaceFlat, SurfaceMeta} }

// SurfaceConfig chooses each caller's surface: the first of Audiences
// whose roles and audience the caller matches, else Default.
type SurfaceConfig struct {
	Default   Surface        `yaml:"default"`
	Audiences []SurfaceRule  `yaml:"audiences"`
	Budget    *SurfaceBudget `yaml:"budget"`
}

// SurfaceRule names an audience and its surface.
type SurfaceRule struct {
	// Roles, when set, match authenticated callers holding one of them.
	Roles []string `yaml:"roles"`
	// Audience, when set, is a CEL predicate over caller that must also
	// hold.
	Audience string  `yaml:"audience"`
	Surface  Surface `yaml:"surface"`

	audience cel.Program
}

// AudienceProgram returns the rule's compiled audience predicate, or nil.
func (r *SurfaceRule) AudienceProgram() cel.Program { return r.audience }

// SurfaceBudget bounds what one audience's tools/list may cost an agent,
// in estimated tokens (orangerail surface measure).
type SurfaceBudget struct {
	MaxTokens int `yaml:"max_tokens"`
}

// Group is a resource of the meta surface: tools an agent finds and calls
// together.
type Group struct {
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Tools       []string `yaml:"tools"`
}

// defaultSurface is the configured default, or SurfaceDefault; rules are
// the engine's to evaluate (Engine.Surface), as they read the caller.
func (c *Config) defaultSurface() Surface {
	if c.Surface.Default == "" {
		return SurfaceDefault
	}
	return c.Surface.Default
}

// DefaultSurface is the surface of a caller no rule of surface.audiences
// matches.
func (c *Config) DefaultSurface() Surface { return c.defaultSurface() }

// MetaServed reports whether any caller may be served the meta surface:
// the default is meta, or some rule names it. Only then are the meta
// tools declared.
func (c *Config) MetaServed() bool {
	if c.defaultSurface() == SurfaceMeta {
		return true
	}
	for _, r := range c.Surface.Audiences {
		if r.Surface == SurfaceMeta {
			return true
		}
	}
	return false
}

// GroupOf returns the group holding the named tool, or "".
func (c *Config) GroupOf(tool string) string { return c.toolGroups[tool] }

// GroupNames lists the groups, sorted.
func (c *Config) GroupNames() []string { return slices.Sorted(maps.Keys(c.Groups)) }

// metaTools are the tools the meta surface declares, after the built-in
// describe tools.
func (c *Config) metaTools() []Tool {
	if !c.MetaServed() {
		return nil
	}
	return []Tool{{Name: ListResourcesTool, Kind: ToolListResources, Path: "surface"},
		{Name: DescribeResourceTool, Kind: ToolDescribeResource, Path: "surface"},
		{Name: ManageResourceTool, Kind: ToolManageResource, Path: "surface"}}
}

// isMetaTool reports whether t is one of the meta tools.
func isMetaTool(t Tool) bool {
	return t.Kind == ToolListResources || t.Kind == ToolDescribeResource || t.Kind == ToolManageResource
}

// validateSurface checks surface: and groups: against the tools the
// config makes (claimed, by name), and records each grouped tool's group.
func (c *Config) validateSurface(claimed map[string]Tool, add func(path, format string, args ...any)) {
	c.toolGroups = map[string]string{}
	for i := range c.Surface.Audiences {
		r, path := &c.Surface.Audiences[i], fmt.Sprintf("surface.audiences.%d", i)
		r.audience = audienceProgram(r.Audience, path+".audience", add)
	}
	switch served := c.MetaServed(); {
	case served && len(c.Groups) == 0:
		add("surface", "%s: a caller may be served the meta surface, but no groups are declared, so it would offer nothing behind its three tools: "+
			"declare groups: {NAME: {description: ..., tools: [...]}}, or serve flat", errcode.MCPSurfaceInvalid)
	case !served && len(c.Groups) > 0:
		add("groups", "%s: groups are declared but nobody is served the meta surface, which is all they shape: "+
			"set surface: {default: meta} or a surface.audiences rule with surface: meta, or remove groups", errcode.MCPSurfaceInvalid)
	}
	for _, group := range c.GroupNames() {
		if !toolNamePattern.MatchString(group) {
			add("groups."+group, "the group name %q is not 1 to 64 of [a-zA-Z0-9_-]", group)
		}
		for i, name := range c.Groups[group].Tools {
			at := fmt.Sprintf("groups.%s.tools.%d", group, i)
			t, ok := claimed[name]
			switch {
			case !ok || isMetaTool(t):
				add(at, "%s: no tool a group can hold is named %q: name one of this config's tools (%s)", errcode.MCPGroupUnknown, name, groupable(claimed))
			case c.toolGroups[name] != "":
				add(at, "%s: the tool %s is in groups.%s already; a tool is in one group", errcode.MCPGroupConflict, name, c.toolGroups[name])
			default:
				c.toolGroups[name] = group
			}
		}
	}
}

// groupable names the tools a group may hold, sorted, for a message.
func groupable(claimed map[string]Tool) string {
	tools := map[string]Tool{}
	for name, t := range claimed {
		if !isMetaTool(t) {
			tools[name] = t
		}
	}
	return toolList(tools)
}
