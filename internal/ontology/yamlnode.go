package ontology

import "go.yaml.in/yaml/v3"

// MappingValue returns the value under key in the YAML mapping m, or nil
// when m is not a mapping or has no such key. It serves the tools that
// edit a config as a YAML tree, keeping its comments and order (the demo,
// the benchmarks, tests' config edits).
func MappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
