package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/engine"
)

// contract holds real answers to the OpenAPI document: each is validated
// against the schema the document gives its route and status, and every
// route and status the document names must have been seen.
type contract struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	seen     map[string]bool // "GET /approvals 200"
}

const documentURL = "https://orangerail.test/openapi.json"

func newContract(t *testing.T) *contract {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(api.Document, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.Document))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(documentURL, raw); err != nil {
		t.Fatal(err)
	}
	return &contract{doc: doc, compiler: c, seen: map[string]bool{}}
}

// pointer escapes a JSON pointer token.
func pointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// codeWords finds the error codes a description names.
var codeWords = regexp.MustCompile(`X_[A-Z0-9_]+`)

// check validates an answer to method on the document's path (as the
// document spells it, e.g. /approvals/{id}).
func (c *contract) check(t *testing.T, method, path string, a *answer) {
	t.Helper()
	paths, _ := c.doc["paths"].(map[string]any)
	item, ok := paths[path].(map[string]any)
	if !ok {
		t.Fatalf("the document has no path %s", path)
	}
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		t.Fatalf("the document has no %s %s", method, path)
	}
	responses, _ := op["responses"].(map[string]any)
	status := strconv.Itoa(a.status)
	resp, ok := responses[status].(map[string]any)
	if !ok {
		t.Fatalf("%s %s answered %d, which the document does not name: %s", method, path, a.status, a.body)
	}
	location := "#/paths/" + pointer(path) + "/" + strings.ToLower(method) + "/responses/" + status
	if ref, ok := resp["$ref"].(string); ok {
		location = ref
		name := strings.TrimPrefix(ref, "#/components/responses/")
		resp = c.doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
	}
	if a.header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s %d: Content-Type %q", method, path, a.status, a.header.Get("Content-Type"))
	}
	// A refusal's code is one its response's description names: a client
	// reads there what each status can mean.
	if a.status >= 400 {
		var refusal struct {
			Error struct{ Code string } `json:"error"`
		}
		description, _ := resp["description"].(string)
		if err := json.Unmarshal(a.body, &refusal); err != nil || !slices.Contains(codeWords.FindAllString(description, -1), refusal.Error.Code) {
			t.Errorf("%s %s %d: code %q, which the document's description of the answer does not name: %q", method, path, a.status, refusal.Error.Code, description)
		}
	}
	if headers, ok := resp["headers"].(map[string]any); ok {
		for h := range headers {
			if a.header.Get(h) == "" {
				t.Errorf("%s %s %d: no %s header", method, path, a.status, h)
			}
		}
	}
	schema, err := c.compiler.Compile(documentURL + location + "/content/application~1json/schema")
	if err != nil {
		t.Fatal(err)
	}
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("%s %s %d: not JSON: %s", method, path, a.status, a.body)
	}
	if err := schema.Validate(body); err != nil {
		t.Errorf("%s %s %d: the body does not match the document: %v\n%s", method, path, a.status, err, a.body)
	}
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d", method, path, a.status)] = true
	c.mu.Unlock()
}

// covered fails for every route and status of the document no answer was
// checked against.
func (c *contract) covered(t *testing.T) {
	t.Helper()
	var missing []string
	for path, item := range c.doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			for status := range op.(map[string]any)["responses"].(map[string]any) {
				key := fmt.Sprintf("%s %s %s", strings.ToUpper(method), path, status)
				if !c.seen[key] {
					missing = append(missing, key)
				}
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("no answer was checked for %d documented responses:\n%s\nseen: %v", len(missing), strings.Join(missing, "\n"),
			slices.Sorted(maps.Keys(c.seen)))
	}
}

// TestDocumentActorKindsAreTheEngines: the document's actor kinds are
// exactly the kinds the audit log accepts (engine.ActorKinds), so a
// record an operator made (break glass) is described, not a surprise.
func TestDocumentActorKindsAreTheEngines(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				AuditItem struct {
					Properties struct {
						ActorKind struct {
							Enum []string `json:"enum"`
						} `json:"actor_kind"`
					} `json:"properties"`
				} `json:"AuditItem"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.Document, &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range engine.ActorKinds() {
		kinds = append(kinds, string(k))
	}
	if got := doc.Components.Schemas.AuditItem.Properties.ActorKind.Enum; !slices.Equal(got, kinds) {
		t.Fatalf("the document's actor kinds %v, the engine's %v", got, kinds)
	}
}
