package ontology

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// soapBase is a valid config with one upstream and one soap action.
const soapBase = `service: s
upstreams:
  carrier:
    base_url: https://carrier.example.com/api/
actions:
  create_label:
    description: d
    input:
      type: object
      properties: {order_id: {type: string}, weight: {type: number}, lines: {type: array, items: {type: string}}}
    policy: {approval: required}
    execute:
      soap:
        upstream: carrier
        path: /LabelService.svc
        version: 1.1
        action: urn:carrier/CreateLabel
        operation: {namespace: "urn:carrier:labels", name: CreateLabel}
        headers: {X-Weight: ":weight"}
        body:
          - OrderId: ":order_id"
          - Parcel:
              - Weight: ":weight"
              - Kind: return
          - Line: ":lines"
          - Lines: {list: ":lines"}
`

// TestSOAPExecute: a soap execute loads with an http call's defaults, its
// endpoint resolved and its body template read in order, a list type's
// element ({list: …}) told from a repeated one.
func TestSOAPExecute(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(soapBase))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Actions["create_label"]
	s := a.Execute.SOAP
	if a.Execute.Kind() != ExecuteSOAP || s.Version != SOAP11 || s.Safe || s.MaxAttempts != 3 || s.MaxBytes != HTTPMaxBytesDefault ||
		time.Duration(s.Deadline) != StatementTimeoutDefault || time.Duration(s.Timeout) != HTTPTimeoutDefault {
		t.Fatalf("defaults not applied: %+v", s)
	}
	if got := s.Endpoint().String(); got != "https://carrier.example.com/api/LabelService.svc" {
		t.Fatalf("endpoint %s", got)
	}
	want := []SOAPElement{
		{Name: "OrderId", Value: ":order_id"},
		{Name: "Parcel", Children: []SOAPElement{{Name: "Weight", Value: ":weight"}, {Name: "Kind", Value: "return"}}},
		{Name: "Line", Value: ":lines"},
		{Name: "Lines", Value: ":lines", Text: SOAPTextList},
	}
	if got := fmt.Sprint(s.Elements()); got != fmt.Sprint(want) {
		t.Fatalf("elements %s, want %s", got, fmt.Sprint(want))
	}
	// 1.2, quoted or not, loads as the string it names.
	cfg, err = Parse([]byte(strings.Replace(soapBase, "version: 1.1", `version: "1.2"`, 1)))
	if err != nil || cfg.Actions["create_label"].Execute.SOAP.Version != SOAP12 {
		t.Fatalf("1.2: %v", err)
	}
}

// TestBrokenSOAPExecutes: each rule the schema cannot say is a problem at
// the field's path.
func TestBrokenSOAPExecutes(t *testing.T) {
	t.Parallel()
	at := "actions.create_label.execute.soap"
	tests := []struct {
		name  string
		edit  func(string) string
		paths []string
	}{
		{"unknown upstream", replace("upstream: carrier", "upstream: carier"), []string{at + ".upstream"}},
		{"bad version", replace("version: 1.1", "version: \"1.10\""), []string{at + ".version"}},
		{"version as a number the schema refuses", replace("version: 1.1", "version: 2"), []string{at + ".version"}},
		{"namespace not a URI", replace(`namespace: "urn:carrier:labels"`, `namespace: labels`), []string{at + ".operation.namespace"}},
		{"a prefixed operation", replace("name: CreateLabel", "name: lab:CreateLabel"), []string{at + ".operation.name"}},
		{"an operation name with a space", replace("name: CreateLabel", `name: "Create Label"`), []string{at + ".operation.name"}},
		{"a quote in the action", replace("action: urn:carrier/CreateLabel", `action: 'urn:"x'`), []string{at + ".action"}},
		{"body ref not an input", replace(`OrderId: ":order_id"`, `OrderId: ":order"`), []string{at + ".body.0.OrderId"}},
		{"nested ref not an input", replace(`- Weight: ":weight"`, `- Weight: ":kg"`), []string{at + ".body.1.Parcel.0.Weight"}},
		{"list ref not an input", replace(`{list: ":lines"}`, `{list: ":line"}`), []string{at + ".body.3.Lines.list"}},
		{"a list of two keys", replace(`{list: ":lines"}`, `{list: ":lines", sep: ","}`), []string{at + ".body.3.Lines", at + ".body.3.Lines", at + ".body.3.Lines.sep"}},
		{"a list not text", replace(`{list: ":lines"}`, `{list: [a]}`), []string{at + ".body.3.Lines", at + ".body.3.Lines", at + ".body.3.Lines.list"}},
		{"a bad element name", replace("- Kind: return", "- \"<Kind>\": return"), []string{at + ".body.1.Parcel.1.<Kind>"}},
		{"two elements in one item", replace("- OrderId: \":order_id\"", "- {OrderId: \":order_id\", Other: x}"), []string{at + ".body.0"}},
		{"header ref not an input", replace(`":weight"}`, `":kg"}`), []string{at + ".headers.X-Weight"}},
		{"a SOAPAction header", replace("X-Weight:", "soapaction:"), []string{at + ".headers.soapaction"}},
		{"a Content-Type header", replace("X-Weight:", "Content-Type:"), []string{at + ".headers.Content-Type"}},
		{"a path with a parameter", replace("path: /LabelService.svc", "path: /{order_id}"), []string{at + ".path"}},
		{"deadline past statement_timeout", replace("        path:", "        deadline: 31s\n        path:"), []string{at + ".deadline"}},
		{"too many attempts", replace("        path:", "        max_attempts: 4\n        path:"), []string{at + ".max_attempts"}},
		{"no operation", replace("        operation: {namespace: \"urn:carrier:labels\", name: CreateLabel}\n", ""), []string{at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.edit(soapBase)))
			ps, ok := errors.AsType[Problems](err)
			if !ok {
				t.Fatalf("Parse = %v, want problems at %v", err, tt.paths)
			}
			var paths []string
			for _, p := range ps {
				paths = append(paths, p.Path)
			}
			if !slices.Equal(paths, tt.paths) {
				t.Fatalf("problems %v, want at %v", ps, tt.paths)
			}
		})
	}
}

// TestSOAPSchemaEnums: the schema's version enum is the Go list (each
// also admitted unquoted, as YAML reads 1.1 as a number).
func TestSOAPSchemaEnums(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["$defs"].(map[string]any)["action"].(map[string]any)["properties"].(map[string]any)["execute"].(map[string]any)["properties"].(map[string]any)["soap"].(map[string]any)["properties"].(map[string]any)
	var got []string
	for _, v := range props["version"].(map[string]any)["enum"].([]any) {
		got = append(got, fmt.Sprint(v))
	}
	want := append(stringsOf(SOAPVersions()), stringsOf(SOAPVersions())...)
	if !slices.Equal(got, want) {
		t.Errorf("version: schema %v, Go %v twice", got, SOAPVersions())
	}
}
