package apidoc

import "testing"

// TestMembers: a schema composed of itself ends, each part's members are
// listed once, and alternatives are followed only when asked.
func TestMembers(t *testing.T) {
	a := &Schema{Properties: []Property{{Name: "id"}}}
	alt := &Schema{Properties: []Property{{Name: "token"}}}
	a.AllOf = []*Schema{a, {Properties: []Property{{Name: "name"}}, AllOf: []*Schema{a}}}
	a.OneOf = []*Schema{alt, a}
	names := func(ps []Property) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(a.Members(false)); len(got) != 2 || got[0] != "id" || got[1] != "name" {
		t.Fatalf("Members(false) = %v, want [id name]", got)
	}
	if got := names(a.Members(true)); len(got) != 3 || got[2] != "token" {
		t.Fatalf("Members(true) = %v, want [id name token]", got)
	}
	if got := (*Schema)(nil).Members(true); got != nil {
		t.Fatalf("a nil schema has members %v", got)
	}
}
