package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
)

// inputOf is the input schema the actions file gives tool, compiled as
// the server compiles it.
func inputOf(t *testing.T, spec, tool string, accept map[string]string) *ontology.Validator {
	t.Helper()
	doc := edgeParse(t, []byte(spec))
	out := edgeEmit(t, edgeCompile(t, doc, accept), doc, "")
	var file struct {
		Actions map[string]struct {
			Input map[string]any `yaml:"input"`
		} `yaml:"actions"`
	}
	if err := yaml.Unmarshal(out.YAML, &file); err != nil {
		t.Fatal(err)
	}
	a, ok := file.Actions[tool]
	if !ok {
		t.Fatalf("%s is not written: %v", tool, out.Skipped)
	}
	v, err := ontology.CompileSchema("urn:test:"+tool, a.Input)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func validate(t *testing.T, v *ontology.Validator, input string) error {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(input), &doc); err != nil {
		t.Fatal(err)
	}
	return v.Validate(doc)
}

// TestRequiredOfAComposedPropertyIsKept: a schema may require a property
// its allOf part declares (a create body adding its own members to a
// shared base); JSON Schema's required names a member whatever declares
// it. The compiler kept only the required names the schema declared
// itself, so a body without email, which the API refuses, was accepted.
// A readOnly one is still not required of the agent.
func TestRequiredOfAComposedPropertyIsKept(t *testing.T) {
	spec := keyed + `paths:
  /users:
    post:
      operationId: createUser
      requestBody:
        required: true
        content:
          application/json:
            schema:
              allOf: [{$ref: "#/components/schemas/UserBase"}]
              type: object
              properties:
                password: {type: string}
              required: [email, password, id]
      responses: {"201": {description: ok}}
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: X-Key}
  schemas:
    UserBase:
      type: object
      properties:
        id: {type: string, readOnly: true}
        email: {type: string}
`
	spec = strings.Replace(spec, "components:\n  securitySchemes:\n    k: {type: apiKey, in: header, name: X-Key}\n", "", 1)
	v := inputOf(t, spec, "createUser", map[string]string{"createUser": "the key is ours"})
	if err := validate(t, v, `{"body": {"email": "a@example.com", "password": "pw"}}`); err != nil {
		t.Errorf("a body without the readOnly id is refused: %v", err)
	}
	if err := validate(t, v, `{"body": {"password": "pw"}}`); err == nil {
		t.Error("a body without the required email, which the API refuses, is accepted")
	}
}

// TestPatternsMeanWhatECMAMeans: an OpenAPI pattern is ECMA-262; the
// input is validated with RE2, which reads some of the same text
// otherwise: \s is ASCII in RE2 and takes in U+00A0, U+FEFF and the line
// separators in ECMA; . takes in \r, U+2028 and U+2029 in RE2 and not in
// ECMA; \A is an A in ECMA and the start of the text in RE2. A pattern is
// asserted as ECMA reads it, or — when it cannot be written so RE2 reads
// it alike — not asserted, left to the upstream. The compiler kept each
// pattern as it was: a value the API takes was refused, and one it
// refuses accepted.
func TestPatternsMeanWhatECMAMeans(t *testing.T) {
	spec := keyed + `paths:
  /notes:
    post:
      operationId: createNote
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                space: {type: string, pattern: "^x\\sy$"}
                nonspace: {type: string, pattern: "^\\S+$"}
                inclass: {type: string, pattern: "^[\\s-]+$"}
                dot: {type: string, pattern: "^x.y$"}
                letter: {type: string, pattern: "^\\Ax$"}
                digits: {type: string, pattern: "^\\d{2}\\b"}
      responses: {"201": {description: ok}}
`
	v := inputOf(t, spec, "createNote", map[string]string{"createNote": "the key is ours"})
	for _, tt := range []struct {
		input string
		ok    bool
	}{
		{`{"space": "x\u00a0y"}`, true},
		{`{"space": "x\ufeffy"}`, true},
		{`{"space": "x\u2028y"}`, true},
		{`{"space": "x y"}`, true},
		{`{"space": "xzy"}`, false},
		{`{"nonspace": "a\u00a0b"}`, false},
		{`{"nonspace": "ab"}`, true},
		{`{"inclass": "\u3000-\u00a0"}`, true},
		{`{"inclass": "a"}`, false},
		{`{"dot": "x\ry"}`, false},
		{`{"dot": "x\u2028y"}`, false},
		{`{"dot": "x\ny"}`, false},
		{`{"dot": "xzy"}`, true},
		{`{"letter": "Ax"}`, true},
		{`{"digits": "12 a"}`, true},
		{`{"digits": "123"}`, false},
	} {
		err := validate(t, v, `{"body": `+tt.input+`}`)
		if tt.ok && err != nil {
			t.Errorf("%s, which ECMA's pattern matches, is refused: %v", tt.input, err)
		}
		if !tt.ok && err == nil {
			t.Errorf("%s, which ECMA's pattern does not match, is accepted", tt.input)
		}
	}
}
