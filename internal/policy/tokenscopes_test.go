package policy_test

import (
	"slices"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// TestActionsAskForTheirOperationsScopes: an operation that presents an
// oauth2 clientCredentials scheme is written with the scopes its own
// security needs (execute.http.scopes) — an operation inheriting the
// document's security, the document's — and the upstream's scheme lists
// them all, so the written file loads and each action's token carries its
// operation's scopes, not every action's. An operation presenting another
// scheme is written with none.
func TestActionsAskForTheirOperationsScopes(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.0.3
info: {title: T, version: "1"}
servers: [{url: "https://api.example.com"}]
security: [{oauth: ["things:read"]}]
paths:
  /things:
    get:
      operationId: listThings
      responses: {"200": {description: ok}}
    post:
      operationId: createThing
      security: [{oauth: ["things:write", "things:read"]}]
      responses: {"201": {description: made}}
  /things/{id}:
    delete:
      operationId: deleteThing
      security: [{oauth: ["things:admin"]}]
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
    get:
      operationId: getThing
      security: [{key: []}]
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example/token", scopes: {"things:read": r, "things:write": w, "things:admin": a}}}}
    key: {type: apiKey, in: header, name: X-Api-Key}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, map[string]string{"deleteThing": "accepted by the test", "createThing": "accepted by the test"})
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the written file does not load: %v\n%s", err, out.YAML)
	}
	for action, want := range map[string][]string{
		"listThings":  {"things:read"},
		"createThing": {"things:read", "things:write"},
		"deleteThing": {"things:admin"},
		"getThing":    nil,
	} {
		a := cfg.Actions[action]
		if a == nil {
			t.Errorf("%s was not written: %+v\n%s", action, out.Skipped, out.YAML)
			continue
		}
		if got := a.Execute.HTTP.TokenScopes(); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s asks for %q, want %q\n%s", action, got, want, out.YAML)
		}
	}
	for _, u := range cfg.Upstreams {
		if got, want := u.Auth["oauth"].Scopes, []string{"things:admin", "things:read", "things:write"}; !slices.Equal(got, want) {
			t.Errorf("the scheme lists %q, want %q", got, want)
		}
	}
}

// TestTokenScopesAreTheSchemesOwn: an operation whose security requirement
// needs an oauth2 clientCredentials scheme AND another scheme asks the
// token endpoint for the oauth2 scheme's scopes alone. The other scheme's
// (an OpenAPI 3.1 apiKey's roles, an openIdConnect scheme's scopes) are
// not the token endpoint's to grant: asked for, the token would carry
// scopes the operation never asked of that scheme, or be refused as
// invalid_scope.
func TestTokenScopesAreTheSchemesOwn(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.1.0
info: {title: T, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /things:
    get:
      operationId: listThings
      security: [{oauth: ["things:read"], key: ["things:admin"]}]
      responses: {"200": {description: ok}}
    post:
      operationId: createThing
      security: [{oauth: ["things:write"]}]
      responses: {"201": {description: made}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example/token", scopes: {"things:read": r, "things:write": w}}}}
    key: {type: apiKey, in: header, name: X-Api-Key}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, map[string]string{"createThing": "accepted by the test"})
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the written file does not load: %v\n%s", err, out.YAML)
	}
	a := cfg.Actions["listThings"]
	if a == nil {
		t.Fatalf("listThings was not written: %+v\n%s", out.Skipped, out.YAML)
	}
	if got, want := a.Execute.HTTP.TokenScopes(), []string{"things:read"}; !slices.Equal(got, want) {
		t.Errorf("listThings's token asks for %q, want %q\n%s", got, want, out.YAML)
	}
	for _, u := range cfg.Upstreams {
		if got, want := u.Auth["oauth"].Scopes, []string{"things:read", "things:write"}; !slices.Equal(got, want) {
			t.Errorf("the scheme lists %q, want %q (its own scopes, not another scheme's)\n%s", got, want, out.YAML)
		}
	}
}

// TestUnusableScopeIsNotWritten: a description's scope that cannot be a
// scope of a token request (RFC 6749 §3.3: no space, quote, backslash or
// control character; a space separates scopes) is not written into the
// actions file, which the loader would refuse whole: the operation that
// needs it is skipped and named, and the others are written and load.
func TestUnusableScopeIsNotWritten(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.0.3
info: {title: T, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /things:
    get:
      operationId: listThings
      security: [{oauth: ["things:read"]}]
      responses: {"200": {description: ok}}
  /odd:
    get:
      operationId: listOdd
      security: [{oauth: ["odd scope"]}]
      responses: {"200": {description: ok}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example/token", scopes: {"things:read": r, "odd scope": o}}}}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil)
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the written file does not load: %v\n%s", err, out.YAML)
	}
	if cfg.Actions["listThings"] == nil {
		t.Errorf("listThings was not written: %+v", out.Skipped)
	}
	if cfg.Actions["listOdd"] != nil || !slices.ContainsFunc(out.Skipped, func(s policy.Skipped) bool { return s.Tool == "listOdd" }) {
		t.Errorf("listOdd, needing a scope no token request can carry, was written or not named skipped: %+v", out.Skipped)
	}
}

// TestScopelessReadDoesNotGetWriteScopes: an operation whose security needs
// its oauth2 clientCredentials scheme with no scope is not given a token
// requested with the scopes of every other written action: it is written
// scopes: [] (no scope parameter, the server's default), which loads as
// empty, not as absent (the scheme's list, here things:write).
func TestScopelessReadDoesNotGetWriteScopes(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.0.3
info: {title: T, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /things:
    get:
      operationId: listThings
      security: [{oauth: []}]
      responses: {"200": {description: ok}}
    post:
      operationId: createThing
      security: [{oauth: ["things:write"]}]
      responses: {"201": {description: made}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example/token", scopes: {"things:read": r, "things:write": w}}}}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, map[string]string{"createThing": "accepted by the test"})
	all, _ := policy.ParseSelectors([]string{"*"})
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the written file does not load: %v\n%s", err, out.YAML)
	}
	h := cfg.Actions["listThings"].Execute.HTTP
	asked := h.TokenScopes()
	if asked == nil {
		asked = h.UpstreamDecl().Auth["oauth"].Scopes
	}
	if slices.Contains(asked, "things:write") {
		t.Errorf("listThings (security: [{oauth: []}]) requests its token with %q\n%s", asked, out.YAML)
	}
	if h.Scopes == nil || len(h.Scopes) != 0 || asked == nil || len(asked) != 0 {
		t.Errorf("listThings is written scopes %#v (token scopes %#v), want [] — no scope parameter\n%s", h.Scopes, asked, out.YAML)
	}
	if got := cfg.Actions["createThing"].Execute.HTTP.TokenScopes(); !slices.Equal(got, []string{"things:write"}) {
		t.Errorf("createThing's token scopes %q, want [things:write]", got)
	}
}
