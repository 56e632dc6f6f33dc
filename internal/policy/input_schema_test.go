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
