package policy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

// TestXSListIsOneElement: an element of an XML Schema list type (xs:list)
// is one element whose text is the items joined by single spaces, where a
// repeated element (maxOccurs > 1) is several elements; both are a JSON
// array to the agent. The compiler wrote a list's element as a repeated
// one ({codes: ":codes"}), so the soap effect sent ["AB","CD"] as two
// elements; it took an item holding whitespace, which the upstream reads
// as two items; and it wrote a list's length facets, which count items, as
// minLength and maxLength, which JSON Schema applies to strings alone, so
// an empty list that minLength 1 refuses was taken. The body template now
// says {list: …} for a list's element — at the top, inside a structure,
// of an enumerated or patterned item type — and its items and length are
// checked. A list's enumeration names lists of items, written as arrays.
func TestXSListIsOneElement(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "xs-list.wsdl"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := wsdl.Parse(src, "xs-list.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	out := edgeEmit(t, edgeCompile(t, doc, map[string]string{"Ship": "accepted by the test"}), doc, "")
	if _, err := ontology.Parse(out.YAML); err != nil {
		t.Fatalf("%v\n%s", err, out.YAML)
	}
	var file struct {
		Actions map[string]struct {
			Input   map[string]any `yaml:"input"`
			Execute struct {
				SOAP struct {
					Body []any `yaml:"body"`
				} `yaml:"soap"`
			} `yaml:"execute"`
		} `yaml:"actions"`
	}
	if err := yaml.Unmarshal(out.YAML, &file); err != nil {
		t.Fatal(err)
	}
	a, ok := file.Actions["Ship"]
	if !ok {
		t.Fatalf("Ship is not written: %v", out.Skipped)
	}
	body, _ := json.Marshal(a.Execute.SOAP.Body)
	const wantBody = `[{"codes":{"list":":codes"}},{"sizes":{"list":":sizes"}},{"some":{"list":":some"}},{"pair":{"list":":pair"}},` +
		`{"route":{"list":":route"}},{"steps":{"list":":steps"}},` +
		`{"parcel":[{"counts":{"list":":parcel_counts"}}]},{"line":":line"}]`
	if string(body) != wantBody {
		t.Errorf("body template\n%s\nwant\n%s", body, wantBody)
	}
	// The published schema: the items' pattern, the length facets as
	// minItems and maxItems, the enumeration as arrays.
	defs, _ := a.Input["$defs"].(map[string]any)
	item := `{"allOf":[{"type":"string"}],"pattern":"^[^ \\t\\n\\r]+$","type":"string"}`
	for name, want := range map[string]string{
		"Codes":     `{"items":` + item + `,"type":"array"}`,
		"SomeCodes": `{"items":` + item + `,"maxItems":3,"minItems":1,"type":"array"}`,
		"Pair":      `{"items":{"allOf":[{"pattern":"^(?:[A-Z]{2})$","type":"string"}],"pattern":"^[^ \\t\\n\\r]+$","type":"string"},"maxItems":2,"minItems":2,"type":"array"}`,
		"Routes":    `{"enum":[["AB","CD"],["EF"]],"items":` + item + `,"type":"array"}`,
		"Steps":     `{"enum":[[1,2]],"items":{"type":"integer"},"type":"array"}`,
	} {
		got, _ := json.Marshal(defs[name])
		if string(got) != want {
			t.Errorf("$defs.%s\n%s\nwant\n%s", name, got, want)
		}
	}
	v, err := ontology.CompileSchema("urn:test:Ship", a.Input)
	if err != nil {
		t.Fatal(err)
	}
	const base = `"codes": ["AB"], "parcel_counts": [1]`
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"codes": ["AB", "CD"], "parcel_counts": [1, 22]}`, true},
		{`{"codes": [], "parcel_counts": []}`, true}, // an xs:list without length facets may be empty
		{`{"codes": ["AB CD"], "parcel_counts": [1]}`, false},
		{`{"codes": ["AB\tCD"], "parcel_counts": [1]}`, false},
		{`{"codes": [" AB"], "parcel_counts": [1]}`, false},
		{`{"codes": [""], "parcel_counts": [1]}`, false},
		{`{"codes": "AB CD", "parcel_counts": [1]}`, false},
		{`{"codes": ["AB"], "parcel_counts": ["1 2"]}`, false},
		{`{` + base + `, "sizes": ["S", "M"]}`, true},
		{`{` + base + `, "sizes": ["L"]}`, false},
		{`{` + base + `, "some": ["A"]}`, true},
		{`{` + base + `, "some": ["A", "B", "C"]}`, true},
		{`{` + base + `, "some": []}`, false},
		{`{` + base + `, "some": ["A", "B", "C", "D"]}`, false},
		{`{` + base + `, "some": ["A B"]}`, false},
		{`{` + base + `, "pair": ["AB", "CD"]}`, true},
		{`{` + base + `, "pair": ["AB"]}`, false},
		{`{` + base + `, "pair": ["AB", "CD", "EF"]}`, false},
		{`{` + base + `, "pair": ["ab", "CD"]}`, false},
		{`{` + base + `, "route": ["AB", "CD"]}`, true}, // a list's enumeration names items
		{`{` + base + `, "route": ["EF"]}`, true},
		{`{` + base + `, "route": ["AB CD"]}`, false},
		{`{` + base + `, "route": ["AB"]}`, false},
		{`{` + base + `, "steps": [1, 2]}`, true},
		{`{` + base + `, "steps": [2, 1]}`, false},
		{`{` + base + `, "line": ["a b", "c"]}`, true}, // a repeated element's value may hold spaces
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which the upstream takes, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which the upstream refuses or reads as other items, is accepted", tt.input)
		}
	}
}

// TestRepeatedXSListIsNotWritten: an element of a list type that repeats
// (maxOccurs > 1) is several elements each holding a list, an array of
// arrays the body template cannot bind: the tool is not written, and
// said why, rather than sent as one element per inner item.
func TestRepeatedXSListIsNotWritten(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "xs-list.wsdl"))
	if err != nil {
		t.Fatal(err)
	}
	repeated := strings.Replace(string(src), `name="line" type="xs:string"`, `name="line" type="tns:Codes"`, 1)
	if repeated == string(src) {
		t.Fatal("the testdata has no element line to repeat a list")
	}
	doc, err := wsdl.Parse([]byte(repeated), "xs-list.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	out := edgeEmit(t, edgeCompile(t, doc, map[string]string{"Ship": "accepted by the test"}), doc, "")
	if !slices.ContainsFunc(out.Skipped, func(s policy.Skipped) bool {
		return s.Tool == "Ship" && strings.Contains(s.Reason, "repeats a list")
	}) {
		t.Fatalf("Ship is not skipped for its repeated list: skipped %+v\n%s", out.Skipped, out.YAML)
	}
}
