package policy_test

import (
	"fmt"
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
// XML Schema's ., and Arabic-Indic digits refused as \d. \i and \c, XML's
// name characters, are checked (they were left to the upstream); a facet
// that cannot be written so (a block XML Schema does not name) is left
// to the upstream, with a note that says so.
func TestXSDPatternsMeanWhatXMLSchemaMeans(t *testing.T) {
	facet := func(name, pattern string) string {
		return `<xs:element name="` + name + `" minOccurs="0"><xs:simpleType><xs:restriction base="xs:string">` +
			`<xs:pattern value="` + pattern + `"/></xs:restriction></xs:simpleType></xs:element>`
	}
	v, out := wsdlInput(t, `<xs:element name="Pay"><xs:complexType><xs:sequence>`+
		facet("amount", `\d+$`)+facet("caret", `^\d{2}`)+facet("space", `a\sb`)+facet("dot", `a.b`)+facet("name", `\i\c*`)+
		facet("block", `\p{IsNoSuchBlock}+`)+facet("greek", `[\p{IsGreek}-[\p{Ll}]]+`)+
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
		{`{"name": "x-1.\u00b7"}`, true},
		{`{"name": "9x"}`, false},
		{`{"name": "x y"}`, false},
		{`{"greek": "\u0391\u03a9"}`, true},
		{`{"greek": "\u03b1"}`, false},
		{`{"greek": "A"}`, false},
		{`{"block": "anything"}`, true}, // left to the upstream
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's pattern matches, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's pattern does not match, is accepted", tt.input)
		}
	}
	if !hasNote(out.Notes, "Pay", `IsNoSuchBlock`) {
		t.Errorf("no note on the pattern \\p{IsNoSuchBlock}+ left to the upstream: %+v", out.Notes)
	}
	if hasNote(out.Notes, "Pay", `\i`) {
		t.Errorf("a note on the pattern \\i\\c*, which is checked: %+v", out.Notes)
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

// TestXSDFacetsCheckTheNormalisedValue: XML Schema checks a value's
// facets after the whitespace normalisation its type's whiteSpace facet
// names: xs:normalizedString replaces tab, newline and CR with a space;
// xs:token, the types derived from it and a type restricted to
// whiteSpace collapse also strip the value and collapse its runs of
// spaces. The compiler checked the raw value, so on an xs:token " AB "
// was refused by [A-Z]+, "AB  " by maxLength 3 and " A" by the
// enumeration A, all of which the upstream takes. A facet the compiled
// schema cannot check on the normalised value is left to the upstream,
// with a note; an xs:string's facets still check the value as sent.
func TestXSDFacetsCheckTheNormalisedValue(t *testing.T) {
	restrict := func(name, base, facets string) string {
		return `<xs:element name="` + name + `" minOccurs="0"><xs:simpleType><xs:restriction base="` + base + `">` +
			facets + `</xs:restriction></xs:simpleType></xs:element>`
	}
	v, out := wsdlInput(t, `<xs:simpleType name="Code"><xs:restriction base="xs:string"><xs:pattern value="[A-Z]{3}"/></xs:restriction></xs:simpleType>
    <xs:simpleType name="Letters"><xs:restriction base="tns:Code"><xs:pattern value="[A-Z]+"/></xs:restriction></xs:simpleType>
    <xs:element name="Pay"><xs:complexType><xs:sequence>`+
		restrict("code", "xs:token", `<xs:pattern value="[A-Z]+"/>`)+
		restrict("short", "xs:token", `<xs:maxLength value="3"/><xs:minLength value="1"/>`)+
		restrict("kind", "xs:token", `<xs:enumeration value="A"/><xs:enumeration value="B C"/>`)+
		restrict("digits", "xs:string", `<xs:whiteSpace value="collapse"/><xs:pattern value="[0-9]+"/>`)+
		restrict("derived", "tns:Letters", `<xs:whiteSpace value="collapse"/><xs:pattern value="A[A-Z]*"/>`)+
		restrict("words", "xs:token", `<xs:pattern value="[A-Z]+ [A-Z]+"/>`)+
		restrict("line", "xs:normalizedString", `<xs:pattern value="A B"/>`)+
		restrict("plain", "xs:string", `<xs:pattern value="[A-Z]+"/><xs:maxLength value="3"/><xs:enumeration value="AB"/><xs:enumeration value="A"/>`)+
		`</xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"code": " AB "}`, true},
		{`{"code": "\tAB\n"}`, true},
		{`{"code": "AB"}`, true},
		{`{"code": "A B"}`, false},
		{`{"code": " ab "}`, false},
		{`{"short": "AB  "}`, true},
		{`{"short": "ABCD"}`, true}, // maxLength left to the upstream
		{`{"short": ""}`, false},
		{`{"kind": " A"}`, true},
		{`{"kind": "A"}`, true},
		{`{"kind": "B \t C "}`, true},
		{`{"kind": "B C"}`, true},
		{`{"kind": "BC"}`, false},
		{`{"kind": "B"}`, false},
		{`{"kind": "A."}`, false},
		{`{"digits": " 12 "}`, true},
		{`{"digits": "1 2"}`, false},
		{`{"derived": " ABC "}`, true},
		{`{"derived": " BCD "}`, false},
		{`{"derived": " AB "}`, false},
		{`{"words": " AB   CD "}`, true}, // left to the upstream
		{`{"line": "A\tB"}`, true},       // left to the upstream
		{`{"plain": " A"}`, false},
		{`{"plain": "A "}`, false},
		{`{"plain": "AB"}`, true},
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, whose normalised value XML Schema's facets allow, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, whose normalised value XML Schema's facets refuse, is accepted", tt.input)
		}
	}
	// The enumeration is still there for the agent to read.
	var file struct {
		Actions map[string]struct {
			Input struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"input"`
		} `yaml:"actions"`
	}
	if err := yaml.Unmarshal(out.YAML, &file); err != nil {
		t.Fatal(err)
	}
	if kind := fmt.Sprint(file.Actions["Pay"].Input.Properties["kind"]); !strings.Contains(kind, "enum:[A B C]") {
		t.Errorf("the enumeration of kind is not written for the agent: %s", kind)
	}
	for _, want := range []string{"[A-Z]+ [A-Z]+", "A B", "maxLength 3"} {
		if !hasNote(out.Notes, "Pay", want) {
			t.Errorf("no note on the facet %s left to the upstream: %+v", want, out.Notes)
		}
	}
}

// TestXSDMinLengthOfACollapseType: a collapse type's minLength counts
// the value with its whitespace collapsed, so "  " (empty once collapsed)
// is refused by minLength 1 upstream. The compiler asserted minLength on
// the raw value, which took "  ", and said nothing of it: what the
// compiled schema cannot check exactly is noted, and the part it can (a
// value with no character but whitespace is empty) is asserted.
func TestXSDMinLengthOfACollapseType(t *testing.T) {
	v, out := wsdlInput(t, `<xs:element name="Pay"><xs:complexType><xs:sequence>
    <xs:element name="one" minOccurs="0"><xs:simpleType><xs:restriction base="xs:token"><xs:minLength value="1"/></xs:restriction></xs:simpleType></xs:element>
    <xs:element name="two" minOccurs="0"><xs:simpleType><xs:restriction base="xs:token"><xs:minLength value="2"/></xs:restriction></xs:simpleType></xs:element>
    <xs:element name="line" minOccurs="0"><xs:simpleType><xs:restriction base="xs:normalizedString"><xs:minLength value="2"/></xs:restriction></xs:simpleType></xs:element>
    </xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"one": "  "}`, false},
		{`{"one": "\t\n"}`, false},
		{`{"one": " A "}`, true},
		{`{"two": "   "}`, false},
		{`{"two": " AB "}`, true},
		{`{"two": "A B"}`, true},
		{`{"line": "\t "}`, true},
		{`{"line": "A"}`, false},
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, whose normalised value XML Schema's minLength allows, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, whose normalised value XML Schema's minLength refuses, is accepted", tt.input)
		}
	}
	if !hasNote(out.Notes, "Pay", "minLength 2") {
		t.Errorf("no note on the minLength 2 of a collapse type, checked on the raw value: %+v", out.Notes)
	}
	if hasNote(out.Notes, "Pay", "minLength 1 ") {
		t.Errorf("a note on the minLength 1 of a collapse type, which is asserted exactly: %+v", out.Notes)
	}
}

// TestXSDPatternOfADateIsAsserted: a date, time or dateTime collapses
// its whitespace, but its JSON Schema format refuses a value with any, so
// the value orangerail checks is its normalised value and its pattern is
// exact as XML Schema reads it. The compiler left a pattern that can
// match whitespace (".") to the upstream, where it had asserted it: a
// 2021 date was taken by a type whose pattern is "2020-.*".
func TestXSDPatternOfADateIsAsserted(t *testing.T) {
	v, out := wsdlInput(t, `<xs:simpleType name="Day"><xs:restriction base="xs:date"><xs:pattern value="2020-.*"/></xs:restriction></xs:simpleType>
    <xs:element name="Pay"><xs:complexType><xs:sequence>
    <xs:element name="day" minOccurs="0"><xs:simpleType><xs:restriction base="xs:date"><xs:pattern value="2020-.*"/></xs:restriction></xs:simpleType></xs:element>
    <xs:element name="at" minOccurs="0"><xs:simpleType><xs:restriction base="xs:dateTime"><xs:pattern value=".*Z"/></xs:restriction></xs:simpleType></xs:element>
    <xs:element name="from" minOccurs="0"><xs:simpleType><xs:restriction base="tns:Day"><xs:whiteSpace value="collapse"/><xs:pattern value=".*-01"/></xs:restriction></xs:simpleType></xs:element>
    </xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"day": "2020-02-03"}`, true},
		{`{"day": "2021-02-03"}`, false},
		{`{"at": "2020-02-03T10:00:00Z"}`, true},
		{`{"at": "2020-02-03T10:00:00+01:00"}`, false},
		{`{"from": "2020-02-01"}`, true},
		{`{"from": "2021-02-01"}`, false},
		{`{"from": "2020-02-03"}`, false},
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's pattern allows, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's pattern refuses, is accepted", tt.input)
		}
	}
	if hasNote(out.Notes, "Pay", "can match whitespace") {
		t.Errorf("a date's pattern is left to the upstream: %+v", out.Notes)
	}
}

// TestXSDPatternOfANonStringType: XML Schema checks a pattern facet on
// the lexical form of any simple type: a boolean's "true" or "false", a
// number's digits, a list's space-separated items. The compiler wrote
// the pattern on the JSON boolean, number or array it publishes, where
// JSON Schema's pattern applies to strings alone: nothing checked it and
// nothing said so. A boolean's lexical form is the literal orangerail
// sends, so its pattern is checked as the values it allows; a number's
// (the agent's own spelling) and a list's (the items the array holds,
// joined) are not in the JSON value, and are left to the upstream with a
// note.
func TestXSDPatternOfANonStringType(t *testing.T) {
	restrict := func(name, base, facets string) string {
		return `<xs:element name="` + name + `" minOccurs="0"><xs:simpleType><xs:restriction base="` + base + `">` +
			facets + `</xs:restriction></xs:simpleType></xs:element>`
	}
	v, out := wsdlInput(t, `<xs:simpleType name="Codes"><xs:list itemType="xs:token"/></xs:simpleType>
    <xs:simpleType name="Yes"><xs:restriction base="xs:boolean"><xs:pattern value="true|1"/></xs:restriction></xs:simpleType>
    <xs:simpleType name="Cents"><xs:restriction base="xs:integer"><xs:pattern value="\d{2} ?"/></xs:restriction></xs:simpleType>
    <xs:element name="Pay"><xs:complexType><xs:sequence>`+
		restrict("yes", "tns:Yes", "")+
		restrict("either", "xs:boolean", `<xs:pattern value="\p{Ll}+"/>`)+
		restrict("no", "tns:Yes", `<xs:pattern value="false"/>`)+
		restrict("count", "xs:integer", `<xs:pattern value="\d{3}"/>`)+
		restrict("amount", "xs:decimal", `<xs:pattern value="\d+\.\d{2}"/>`)+
		restrict("codes", "tns:Codes", `<xs:pattern value="[A-Z]{2}( [A-Z]{2})*"/>`)+
		restrict("cents", "tns:Cents", `<xs:pattern value="[1-9]\d"/>`)+
		`</xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"yes": true}`, true},
		{`{"yes": false}`, false},
		{`{"either": true}`, true},
		{`{"either": false}`, true},
		{`{"no": false}`, false}, // its base's pattern allows true alone, its own false alone
		{`{"no": true}`, false},
		{`{"count": 1234}`, true},    // left to the upstream
		{`{"amount": 1.5}`, true},    // left to the upstream
		{`{"codes": ["abc"]}`, true}, // left to the upstream
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's pattern allows or orangerail leaves to the upstream, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's pattern refuses, is accepted", tt.input)
		}
	}
	for _, want := range []string{`\\d{3}`, `\\d+\\.\\d{2}`, `[A-Z]{2}( [A-Z]{2})*`, `"\\d{2} ?"`, `[1-9]\\d`} {
		n := 0
		for _, note := range out.Notes {
			if note.Tool == "Pay" && strings.Contains(note.Reason, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d notes on the pattern %s left to the upstream, want 1: %+v", n, want, out.Notes)
		}
	}
	// What the agent reads holds no pattern on a value it does not apply to.
	if _, y, _ := strings.Cut(string(out.YAML), "\nactions:"); strings.Contains(y, `\d{3}`) || strings.Contains(y, `[A-Z]{2}`) {
		t.Errorf("a pattern JSON Schema does not apply is written:\n%s", y)
	}
}

// TestXSDPatternOfANillableBoolean: a nillable element's type is
// published with "null" beside it, and a boolean's pattern was checked
// only when the types were boolean alone: on a nillable boolean it was
// noted as a number's is ("its spelling is the agent's") and applied to
// nothing, so false passed a pattern that allows true alone. Its
// pattern is checked as the values it allows, null (xsi:nil, which has
// no lexical form to match) still allowed.
func TestXSDPatternOfANillableBoolean(t *testing.T) {
	v, out := wsdlInput(t, `<xs:simpleType name="Yes"><xs:restriction base="xs:boolean"><xs:pattern value="true|1"/></xs:restriction></xs:simpleType>
    <xs:element name="Pay"><xs:complexType><xs:sequence>
      <xs:element name="yes" minOccurs="0" nillable="true"><xs:simpleType><xs:restriction base="xs:boolean"><xs:pattern value="true|1"/></xs:restriction></xs:simpleType></xs:element>
      <xs:element name="either" minOccurs="0" nillable="true"><xs:simpleType><xs:restriction base="xs:boolean"><xs:pattern value="\p{Ll}+"/></xs:restriction></xs:simpleType></xs:element>
      <xs:element name="no" minOccurs="0" nillable="true"><xs:simpleType><xs:restriction base="tns:Yes"><xs:pattern value="false"/></xs:restriction></xs:simpleType></xs:element>
    </xs:sequence></xs:complexType></xs:element>`)
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"yes": true}`, true},
		{`{"yes": null}`, true},
		{`{"yes": false}`, false},
		{`{"either": true}`, true},
		{`{"either": false}`, true},
		{`{"either": null}`, true},
		{`{"no": null}`, true},
		{`{"no": true}`, false},
		{`{"no": false}`, false},
	} {
		err := validate(t, v, tt.input)
		if tt.ok && err != nil {
			t.Errorf("%s, which XML Schema's pattern allows, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which XML Schema's pattern refuses, is accepted", tt.input)
		}
	}
	if hasNote(out.Notes, "Pay", `true|1`) {
		t.Errorf("a note on a nillable boolean's pattern, which is checked: %+v", out.Notes)
	}
}
