package ontology

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestMappingValue(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: {b: 1}\nc: [x]\n"), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	if v := MappingValue(MappingValue(root, "a"), "b"); v == nil || v.Value != "1" {
		t.Fatalf("a.b = %v", v)
	}
	for _, tt := range []struct {
		name string
		m    *yaml.Node
		key  string
	}{{"an absent key", root, "z"}, {"a sequence", MappingValue(root, "c"), "x"}, {"the document node", &doc, "a"}, {"nil", nil, "a"}} {
		if v := MappingValue(tt.m, tt.key); v != nil {
			t.Errorf("%s: %v, want nil", tt.name, v)
		}
	}
}
