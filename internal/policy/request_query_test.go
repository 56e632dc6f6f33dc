package policy_test

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestArrayQueryIsNotSentOtherwiseThanDeclared: a Swagger 2.0 query array
// is sent as its collectionFormat says, csv by default (2.0 "Parameter
// Object": ?ids=a,b); only multi repeats the parameter, as 3.x's form
// style exploded does (explode: false is ?ids=a,b). orangerail's http
// effect repeats every array (?ids=a&ids=b), which an API reading csv
// reads as the one id "a", or refuses: such a parameter was bound anyway.
// It is left out, said, when optional, and fails closed when required.
func TestArrayQueryIsNotSentOtherwiseThanDeclared(t *testing.T) {
	spec := `swagger: "2.0"
info: {title: t, version: "1"}
host: api.example.com
schemes: [https]
paths:
  /things:
    get:
      operationId: listThings
      parameters:
        - {name: ids, in: query, type: array, items: {type: string}}
        - {name: tags, in: query, type: array, items: {type: string}, collectionFormat: pipes}
        - {name: kinds, in: query, type: array, items: {type: string}, collectionFormat: multi}
      responses: {"200": {description: ok}}
  /others:
    get:
      operationId: listOthers
      parameters:
        - {name: ids, in: query, required: true, type: array, items: {type: string}}
      responses: {"200": {description: ok}}
`
	doc := edgeParse(t, []byte(spec))
	out := edgeEmit(t, edgeCompile(t, doc, nil), doc, "")
	if !slices.Equal(out.Written, []string{"listThings"}) || len(out.Skipped) != 1 || !strings.Contains(out.Skipped[0].Reason, "csv") {
		t.Errorf("written %v, skipped %v: listOthers needs a csv array orangerail cannot send", out.Written, out.Skipped)
	}
	var file struct {
		Actions map[string]struct {
			Execute struct {
				HTTP struct {
					Query map[string]string `yaml:"query"`
				} `yaml:"http"`
			} `yaml:"execute"`
		} `yaml:"actions"`
	}
	if err := yaml.Unmarshal(out.YAML, &file); err != nil {
		t.Fatal(err)
	}
	var bound []string
	for k := range file.Actions["listThings"].Execute.HTTP.Query {
		bound = append(bound, k)
	}
	if !slices.Equal(bound, []string{"kinds"}) {
		t.Errorf("listThings binds the query parameters %v; ids (csv) and tags (pipes) would be sent repeated", bound)
	}

	rec, call := serveSpec(t, strings.Replace(spec, "  /others:\n    get:\n      operationId: listOthers\n      parameters:\n        - {name: ids, in: query, required: true, type: array, items: {type: string}}\n      responses: {\"200\": {description: ok}}\n", "", 1), nil)
	call("listThings", `{"kinds": ["k1", "k2"]}`)
	if len(rec.reqs) != 1 || !strings.Contains(rec.reqs[0].URI, "kinds=k1&kinds=k2") {
		t.Fatalf("the upstream got %v, want kinds repeated", rec.reqs)
	}
}
