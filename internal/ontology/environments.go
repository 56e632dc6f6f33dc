package ontology

import (
	"maps"
	"slices"
)

// This file holds an action's environments: the deployments it is served
// in. An action not served in the config's environment is withdrawn once,
// at load, so that every surface — the tool lists, a call, describe,
// instructions, resources, staging and executing an approval — sees a
// config without it, and none has a check of its own to forget.

// UnservedAction is an action the config declares but withdrew at load:
// its environments do not include the config's.
type UnservedAction struct {
	Name string `json:"name"`
	// Path is its field path: actions.NAME.
	Path string `json:"path"`
	// Environments are those it is served in.
	Environments []string `json:"environments"`
}

// ServedIn reports whether the action is served in environment: it names
// no environments, or names that one.
func (a *Action) ServedIn(environment string) bool {
	return a.Environments == nil || slices.Contains(a.Environments, environment)
}

// Unserved lists the actions withdrawn in this environment, sorted by
// name: what config check reports.
func (c *Config) Unserved() []UnservedAction {
	out := []UnservedAction{}
	for _, name := range slices.Sorted(maps.Keys(c.unserved)) {
		out = append(out, UnservedAction{Name: name, Path: "actions." + name, Environments: slices.Clone(c.unserved[name].Environments)})
	}
	return out
}

// UnservedAction returns the declaration of an action withdrawn in this
// environment, and false for any other name: the engine refuses, and
// audits, an approval of one staged before the environment changed.
func (c *Config) UnservedAction(name string) (*Action, bool) {
	a, ok := c.unserved[name]
	return a, ok
}

// callEnvironments checks an action's environments and returns those its
// upstream calls must have a URL in: the config's when it is served
// here, else each one it is served in.
func (c *Config) callEnvironments(a *Action, path string, add func(path, format string, args ...any)) []string {
	switch {
	case a.Environments == nil:
		return []string{c.Environment}
	case len(a.Environments) == 0:
		add(path+".environments", "is empty, so the action would be served nowhere: name the environments it is served in, or remove the field")
		return nil // no environment to check its calls' URLs in
	case a.ServedIn(c.Environment):
		return []string{c.Environment}
	}
	return a.Environments
}

// withdrawUnserved moves each action not served in the config's
// environment out of Actions, once the whole config — those actions
// included, so that the scopes map and groups may name them — has been
// validated.
func (c *Config) withdrawUnserved() {
	for name, a := range c.Actions {
		if !a.ServedIn(c.Environment) {
			if c.unserved == nil {
				c.unserved = map[string]*Action{}
			}
			c.unserved[name] = a
			delete(c.Actions, name)
		}
	}
}
