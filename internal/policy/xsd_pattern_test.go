package policy_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

// TestXSDPatternsMeanWhatXMLSchemaMeans: a WSDL's pattern facet is an XML
// Schema regular expression, a third dialect: ^ and $ are characters, \s
// is [ \t\n\r] alone, . leaves out \n and \r alone, \d is every Unicode
// decimal digit. The compiler anchored the facet and read it as ECMA-262,
// so a code ending in a literal $ was refused and the same code without
// it accepted, a U+00A0 was taken as XML Schema's \s, U+2028 refused as
// XML Schema's ., and Arabic-Indic digits refused as \d. A facet that
// cannot be written so (\i, XML's name characters) is left to the
// upstream, with a note that says so.
func TestXSDPatternsMeanWhatXMLSchemaMeans(t *testing.T) {
	facet := func(name, pattern string) string {
		return `<xs:element name="` + name + `" minOccurs="0"><xs:simpleType><xs:restriction base="xs:string">` +
			`<xs:pattern value="` + pattern + `"/></xs:restriction></xs:simpleType></xs:element>`
	}
	v, out := wsdlInput(t, `<xs:element name="Pay"><xs:complexType><xs:sequence>`+
		facet("amount", `\d+$`)+facet("caret", `^\d{2}`)+facet("space", `a\sb`)+facet("dot", `a.b`)+facet("name", `\i\c*`)+
		`</xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"amount": "12$"}`, true},
		{`{"amount": "\u0661\u0662$"}`, true},
		{`{"amount": "12"}`, false},
		{`{"amount": "$"}`, false},
		{`{"caret": "^12"}`, true},
		{`{"caret": "12"}`, false},
		{`{"space": "a\tb"}`, true},
		{`{"space": "a\u00a0b"}`, false},
		{`{"space": "a\u2028b"}`, false},
		{`{"dot": "a\u2028b"}`, true},
		{`{"dot": "a\u00a0b"}`, true},
		{`{"dot": "a\rb"}`, false},
		{`{"dot": "a\nb"}`, false},
		{`{"name": "9 not a name"}`, true}, // left to the upstream
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's pattern matches, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's pattern does not match, is accepted", tt.input)
		}
	}
	if !hasNote(out.Notes, "Pay", `\i`) {
		t.Errorf("no note on the pattern \\i\\c* left to the upstream: %+v", out.Notes)
	}
}

func hasNote(notes []policy.Skipped, tool, text string) bool {
	for _, n := range notes {
		if n.Tool == tool && strings.Contains(n.Reason, text) {
			return true
		}
	}
	return false
}

// TestXSDPatternFacetsCombine: XML Schema ORs the pattern facets of one
// derivation step and ANDs those of different steps (XSD 1.0 Part 2,
// 4.3.4). The compiler kept the last facet alone: a code the first of two
// facets allows was refused, and one its base's pattern refuses accepted.
func TestXSDPatternFacetsCombine(t *testing.T) {
	v, _ := wsdlInput(t, `<xs:simpleType name="Code"><xs:restriction base="xs:string"><xs:pattern value="[A-Z]{3}"/></xs:restriction></xs:simpleType>
    <xs:element name="Pay"><xs:complexType><xs:sequence>
      <xs:element name="code"><xs:simpleType><xs:restriction base="tns:Code">
        <xs:pattern value="A.*"/><xs:pattern value="B.*"/>
      </xs:restriction></xs:simpleType></xs:element>
    </xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		code string
		ok   bool
	}{
		{"ABC", true},
		{"BCD", true},
		{"CDE", false},
		{"Bcd", false},
		{"AB", false},
	} {
		err := validate(t, v, `{"code": "`+tt.code+`"}`)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's patterns allow, is refused: %v", tt.code, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's patterns refuse, is accepted", tt.code)
		}
	}
}

// wsdlInput compiles the input of Pay, an operation whose input element
// (tns:Pay) and its types are schema, as the server compiles it.
func wsdlInput(t *testing.T, schema string) (*ontology.Validator, *policy.Emitted) {
	t.Helper()
	src := `<?xml version="1.0"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:t" targetNamespace="urn:t" name="T">
  <types><xs:schema targetNamespace="urn:t" elementFormDefault="qualified">
    ` + schema + `
    <xs:element name="PayResponse"><xs:complexType><xs:sequence><xs:element name="ok" type="xs:string"/></xs:sequence></xs:complexType></xs:element>
  </xs:schema></types>
  <message name="In"><part name="p" element="tns:Pay"/></message>
  <message name="Out"><part name="p" element="tns:PayResponse"/></message>
  <portType name="P"><operation name="Pay"><input message="tns:In"/><output message="tns:Out"/></operation></portType>
  <binding name="B" type="tns:P"><soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="Pay"><soap:operation soapAction="urn:t#Pay"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation></binding>
  <service name="S"><port name="Port" binding="tns:B"><soap:address location="https://example.com/soap"/></port></service>
</definitions>`
	doc, err := wsdl.Parse([]byte(src), "t.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	out := edgeEmit(t, edgeCompile(t, doc, map[string]string{"Pay": "accepted by the test"}), doc, "")
	var file struct {
		Actions map[string]struct {
			Input map[string]any `yaml:"input"`
		} `yaml:"actions"`
	}
	if err := yaml.Unmarshal(out.YAML, &file); err != nil {
		t.Fatal(err)
	}
	if _, err := ontology.Parse(out.YAML); err != nil {
		t.Fatal(err)
	}
	a, ok := file.Actions["Pay"]
	if !ok {
		t.Fatalf("Pay is not written: %v", out.Skipped)
	}
	v, err := ontology.CompileSchema("urn:test:Pay", a.Input)
	if err != nil {
		t.Fatal(err)
	}
	return v, out
}
