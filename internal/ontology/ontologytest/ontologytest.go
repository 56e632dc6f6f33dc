// Package ontologytest edits ontology configs for tests through their YAML
// tree, never their text: an edit names the field it changes by path, so
// it cannot silently miss when the example's layout changes, and a path
// that is not there fails the test.
package ontologytest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
)

// Edit changes one config's YAML tree.
type Edit func(root *yaml.Node) error

// Set sets the value at a dotted path (actions.cancel_order.execute.sql)
// to v, encoded as YAML; missing mappings on the way are created.
func Set(path string, v any) Edit {
	return func(root *yaml.Node) error {
		var value yaml.Node
		if err := value.Encode(v); err != nil {
			return fmt.Errorf("set %s: %w", path, err)
		}
		parent, key, err := walk(root, path, true)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == key {
				parent.Content[i+1] = &value
				return nil
			}
		}
		parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &value)
		return nil
	}
}

// SetYAML sets the value at a dotted path to a YAML fragment, for values
// that are easier to write as YAML (or not valid, which a test of the
// loader wants).
func SetYAML(path, fragment string) Edit {
	return func(root *yaml.Node) error {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(fragment), &doc); err != nil {
			return fmt.Errorf("set %s: the fragment is not YAML: %w", path, err)
		}
		if len(doc.Content) != 1 {
			return fmt.Errorf("set %s: the fragment is not one YAML value", path)
		}
		parent, key, err := walk(root, path, true)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == key {
				parent.Content[i+1] = doc.Content[0]
				return nil
			}
		}
		parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, doc.Content[0])
		return nil
	}
}

// Delete removes the member at a dotted path, which must exist.
func Delete(path string) Edit {
	return func(root *yaml.Node) error {
		parent, key, err := walk(root, path, false)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == key {
				parent.Content = append(parent.Content[:i], parent.Content[i+2:]...)
				return nil
			}
		}
		return fmt.Errorf("delete %s: no such member", path)
	}
}

// walk returns the mapping holding the path's last key, and that key.
func walk(root *yaml.Node, path string, create bool) (*yaml.Node, string, error) {
	parts := strings.Split(path, ".")
	node := root
	if node.Kind == yaml.DocumentNode {
		node = node.Content[0]
	}
	for _, part := range parts[:len(parts)-1] {
		if node.Kind != yaml.MappingNode {
			return nil, "", fmt.Errorf("%s: %s is not in a mapping", path, part)
		}
		next := ontology.MappingValue(node, part)
		if next == nil {
			if !create {
				return nil, "", fmt.Errorf("%s: no member %s", path, part)
			}
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part}, next)
		}
		node = next
	}
	if node.Kind != yaml.MappingNode {
		return nil, "", fmt.Errorf("%s: the parent is not a mapping", path)
	}
	return node, parts[len(parts)-1], nil
}

// Apply returns base with the edits applied, as YAML text. It fails the
// test on an edit that does not apply.
func Apply(tb testing.TB, base []byte, edits ...Edit) []byte {
	tb.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(base, &root); err != nil {
		tb.Fatalf("ontologytest: the base config is not YAML: %v", err)
	}
	for _, e := range edits {
		if err := e(&root); err != nil {
			tb.Fatalf("ontologytest: %v", err)
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		tb.Fatalf("ontologytest: %v", err)
	}
	return out.Bytes()
}

// Parse returns base with the edits applied, loaded; it fails the test on
// any problem.
func Parse(tb testing.TB, base []byte, edits ...Edit) *ontology.Config {
	tb.Helper()
	cfg, err := ontology.Parse(Apply(tb, base, edits...))
	if err != nil {
		tb.Fatalf("ontologytest: the edited config does not load: %v", err)
	}
	return cfg
}
