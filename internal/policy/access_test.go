package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// accessDoc is a description with an oauth2 scheme (scopes a, b, c), an
// apiKey header, http basic and a query apiKey named api_key, and two
// operations — a POST write and a GET read — under the security given
// (YAML, "" for none). extra is added to both operations.
func accessDoc(t *testing.T, security, extra string) *apidoc.Document {
	t.Helper()
	sec := ""
	if security != "" {
		sec = "      security: " + security + "\n"
	}
	src := `openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /things:
    post:
      operationId: writeThing
` + sec + extra + `      responses: {"204": {description: done}}
    get:
      operationId: getThing
` + sec + extra + `      responses: {"204": {description: done}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {authorizationCode: {authorizationUrl: "https://a.example", tokenUrl: "https://t.example", scopes: {a: a, b: b, c: c}}}}
    key: {type: apiKey, in: header, name: X-Key}
    qkey: {type: apiKey, in: query, name: api_key}
    basic: {type: http, scheme: basic}
`
	doc, err := openapi.Parse([]byte(src), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func schemeNames(tp *policy.ToolPolicy) []string {
	var out []string
	for _, s := range tp.RequiredSchemes.Value {
		out = append(out, s.Scheme)
	}
	return out
}

// TestLeastPrivilegeCorpus holds spec 001's "Least privilege, chosen
// rather than unioned" — "scoped alternatives are preferred, and a
// scopeless winner is reported as a concern rather than accepted" — and
// "An authorization concern is fatal only for a tool that changes state"
// to the corpus's own cases (INDEX.md).
func TestLeastPrivilegeCorpus(t *testing.T) {
	t.Run("discord list_my_guilds", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "discord-api.json"), "list_my_guilds")
		if !slices.Equal(tp.RequiredScopes.Value, []string{"guilds"}) || !slices.Equal(schemeNames(tp), []string{"OAuth2"}) {
			t.Fatalf("scopes %v schemes %v, want [guilds] through OAuth2", tp.RequiredScopes.Value, schemeNames(tp))
		}
		for _, want := range []string{"Narrowest of 2 alternatives, using OAuth2", "union across alternatives would have granted guilds", "rejected BotToken(no scopes)"} {
			if !strings.Contains(tp.RequiredScopes.Rule, want) {
				t.Errorf("the rule %q does not say %q", tp.RequiredScopes.Rule, want)
			}
		}
		if finding(tp, policy.UnresolvedScopeless) != nil {
			t.Error("a scoped winner reported as scopeless")
		}
	})
	t.Run("discord get_my_oauth2_authorization", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "discord-api.json"), "get_my_oauth2_authorization")
		if f := finding(tp, policy.UnresolvedBroadScopes); f == nil || f.Fatal {
			t.Errorf("broad_scopes: %+v, want a non-fatal finding on a read", f)
		}
	})
	t.Run("discord get_gateway [{}, BotToken]", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "discord-api.json"), "get_gateway")
		if len(tp.RequiredSchemes.Value) != 0 || len(tp.RequiredScopes.Value) != 0 {
			t.Errorf("schemes %v scopes %v, want anonymous", schemeNames(tp), tp.RequiredScopes.Value)
		}
		if f := finding(tp, policy.UnresolvedUnauthenticated); f == nil || f.Fatal {
			t.Errorf("unauthenticated: %+v, want a non-fatal finding on a read", f)
		}
	})
	t.Run("openai scopeless bearer on a write", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "openai-api.yaml"), "deleteModel")
		if f := finding(tp, policy.UnresolvedScopeless); f == nil || !f.Fatal || !f.Acceptable {
			t.Fatalf("scopeless: %+v, want fatal and acceptable", f)
		}
		if tp.Status.Value != policy.StatusFailsClosed {
			t.Errorf("status %s", tp.Status.Value)
		}
		if tp := tool(t, corpusManifest(t, "openai-api.yaml"), "listModels"); finding(tp, policy.UnresolvedScopeless) == nil || finding(tp, policy.UnresolvedScopeless).Fatal {
			t.Error("a scopeless read: want a non-fatal finding")
		}
	})
	t.Run("swagger-petstore3 getPetById", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "swagger-petstore3.yaml"), "getPetById")
		if !slices.Equal(schemeNames(tp), []string{"petstore_auth"}) || len(tp.RequiredScopes.Value) == 0 {
			t.Fatalf("schemes %v scopes %v, want petstore_auth's", schemeNames(tp), tp.RequiredScopes.Value)
		}
		if !strings.Contains(tp.RequiredScopes.Rule, "rejected api_key(no scopes)") {
			t.Errorf("the rule %q does not name the rejected api_key", tp.RequiredScopes.Rule)
		}
	})
	t.Run("twilio security: []", func(t *testing.T) {
		m := corpusManifest(t, "twilio-iam-v1.yaml")
		if f := finding(tool(t, m, "CreateToken"), policy.UnresolvedUnauthenticated); f == nil || !f.Fatal || !f.Acceptable {
			t.Errorf("CreateToken (POST): %+v, want fatal and acceptable", f)
		}
		if f := finding(tool(t, m, "ListRolePermission"), policy.UnresolvedUnauthenticated); f == nil || f.Fatal {
			t.Errorf("ListRolePermission (GET): %+v, want not fatal", f)
		}
	})
	t.Run("slack pseudo-scope none", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "slack-web-api.json"), "api_test")
		if len(tp.RequiredScopes.Value) != 0 || finding(tp, policy.UnresolvedScopeless) == nil {
			t.Errorf("scopes %v, want none and a scopeless finding", tp.RequiredScopes.Value)
		}
	})
	t.Run("google Oauth2 AND Oauth2c", func(t *testing.T) {
		tp := tool(t, corpusManifest(t, "google-oauth2-v2.yaml"), "oauth2_userinfo_get")
		if !slices.Equal(schemeNames(tp), []string{"Oauth2", "Oauth2c"}) {
			t.Fatalf("schemes %v, want both (AND)", schemeNames(tp))
		}
		if f := finding(tp, policy.UnresolvedUnplaceableScheme); f == nil || !strings.Contains(f.Detail, "one Authorization header") {
			t.Errorf("unplaceable: %+v, want the two Authorization headers named", f)
		}
	})
}

// TestLeastPrivilegeSynthetic covers what the corpus shows only in part.
func TestLeastPrivilegeSynthetic(t *testing.T) {
	cases := []struct {
		name, security string
		scopes         []string
		schemes        []string
		kinds          []policy.UnresolvedKind // findings on both tools
		writeFatal     bool
	}{
		{"no security", "", []string{}, nil, []policy.UnresolvedKind{policy.UnresolvedUnauthenticated}, true},
		{"the fewest scopes win", "[{oauth: [a, b]}, {oauth: [c]}]", []string{"c"}, []string{"oauth"}, nil, false},
		{"scoped over scopeless", "[{key: []}, {oauth: [a, b]}]", []string{"a", "b"}, []string{"oauth"}, nil, false},
		{"fewer schemes among equals", "[{oauth: [a], basic: []}, {oauth: [b]}]", []string{"b"}, []string{"oauth"}, nil, false},
		{"the first written among equals", "[{oauth: [b]}, {oauth: [a]}]", []string{"b"}, []string{"oauth"}, nil, false},
		{"scopeless only", "[{key: []}, {basic: []}]", []string{}, []string{"key"}, []policy.UnresolvedKind{policy.UnresolvedScopeless}, true},
		{"an undeclared scheme", "[{ghost: []}, {oauth: [a]}]", []string{"a"}, []string{"oauth"}, []policy.UnresolvedKind{policy.UnresolvedUnknownScheme}, false},
		{"only undeclared schemes", "[{ghost: [a]}]", []string{}, nil, []policy.UnresolvedKind{policy.UnresolvedUnknownScheme, policy.UnresolvedUnauthenticated}, true},
		{"the pseudo-scope none", "[{oauth: [none]}]", []string{}, []string{"oauth"}, []policy.UnresolvedKind{policy.UnresolvedScopeless}, true},
		{"an undeclared scope", "[{oauth: [z]}]", []string{"z"}, []string{"oauth"}, []policy.UnresolvedKind{policy.UnresolvedUndeclaredScope}, false},
		{"every scope offered", "[{oauth: [a, b, c]}]", []string{"a", "b", "c"}, []string{"oauth"}, []policy.UnresolvedKind{policy.UnresolvedBroadScopes}, false},
		{"anonymous allowed", "[{key: []}, {}]", []string{}, nil, []policy.UnresolvedKind{policy.UnresolvedUnauthenticated}, true},
		{"security: []", "[]", []string{}, nil, []policy.UnresolvedKind{policy.UnresolvedUnauthenticated}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := compileDoc(t, accessDoc(t, c.security, ""), nil)
			for _, name := range []string{"writeThing", "getThing"} {
				tp := tool(t, m, name)
				if !slices.Equal(tp.RequiredScopes.Value, c.scopes) || !slices.Equal(schemeNames(tp), c.schemes) {
					t.Errorf("%s: scopes %v schemes %v, want %v %v (%s)", name, tp.RequiredScopes.Value, schemeNames(tp), c.scopes, c.schemes, tp.RequiredScopes.Rule)
				}
				fatal := false
				for _, k := range c.kinds {
					f := finding(tp, k)
					if f == nil {
						t.Errorf("%s: no %s finding in %+v", name, k, tp.Unresolved)
						continue
					}
					fatal = fatal || f.Fatal
				}
				if want := c.writeFatal && name == "writeThing"; fatal != want {
					t.Errorf("%s: an authorization finding fatal %v, want %v (fatal only for a tool that changes state)", name, fatal, want)
				}
				if want := map[bool]policy.Status{true: policy.StatusFailsClosed, false: policy.StatusServable}[c.writeFatal && name == "writeThing"]; tp.Status.Value != want {
					t.Errorf("%s: status %s, want %s", name, tp.Status.Value, want)
				}
			}
		})
	}
}

// TestUndeclaredSchemesOnly: where every alternative names a scheme the
// description does not declare, the call is not public — it needs a
// credential nobody can say how to present — and the finding must not
// claim that no credential is needed.
func TestUndeclaredSchemesOnly(t *testing.T) {
	tp := tool(t, compileDoc(t, accessDoc(t, "[{ghost: [a]}]", ""), nil), "writeThing")
	f := finding(tp, policy.UnresolvedUnauthenticated)
	if f == nil || !f.Fatal || strings.Contains(f.Detail, "no credential is needed") || !strings.Contains(f.Detail, "requires a credential") {
		t.Errorf("%+v: want a fatal finding that says a credential is required and cannot be presented", f)
	}
	if f := finding(tool(t, compileDoc(t, accessDoc(t, "[]", ""), nil), "writeThing"), policy.UnresolvedUnauthenticated); f == nil || !strings.Contains(f.Detail, "no credential is needed") {
		t.Errorf("security: [] %+v: want it said that no credential is needed", f)
	}
}

// TestAccept holds --accept to its word: a person's reason lifts the
// acceptable fatal findings (an unauthenticated or scopeless write), never
// the unacceptable ones, and names a tool that exists.
func TestAccept(t *testing.T) {
	const why = "the upstream is an internal mock"
	m := compileDoc(t, accessDoc(t, "[{key: []}]", ""), map[string]string{"writeThing": why})
	tp := tool(t, m, "writeThing")
	if tp.Status.Value != policy.StatusServable || !strings.Contains(tp.Status.Rule, why) {
		t.Errorf("status %s (%s), want servable, naming the reason", tp.Status.Value, tp.Status.Rule)
	}
	if f := finding(tp, policy.UnresolvedScopeless); f == nil || f.Accepted != why {
		t.Errorf("scopeless %+v, want accepted with the reason", f)
	}
	if f := finding(tool(t, m, "getThing"), policy.UnresolvedScopeless); f == nil || f.Accepted != "" {
		t.Errorf("a tool not named was accepted: %+v", f)
	}

	// A credential parameter is never acceptable: vonage's
	// getAccountBalance takes api_key and api_secret in its query.
	v := compile(t, "vonage-account.yaml", "vonage", map[string]string{"getAccountBalance": why})
	tp = tool(t, v, "getAccountBalance")
	if tp.Status.Value != policy.StatusFailsClosed {
		t.Errorf("status %s, want fails_closed: a credential parameter cannot be accepted", tp.Status.Value)
	}
	for _, u := range tp.Unresolved {
		if u.Kind == policy.UnresolvedCredentialParameter && (u.Accepted != "" || !u.Fatal || u.Acceptable) {
			t.Errorf("%+v: want fatal, not acceptable, not accepted", u)
		}
	}

	// An unsupported body (twilio's CreateToken takes a form) is never
	// acceptable, though its unauthenticated finding is.
	tw := compile(t, "twilio-iam-v1.yaml", "twilio", map[string]string{"CreateToken": why})
	tp = tool(t, tw, "CreateToken")
	if tp.Status.Value != policy.StatusFailsClosed || finding(tp, policy.UnresolvedUnauthenticated).Accepted != why || finding(tp, policy.UnresolvedUnsupported).Accepted != "" {
		t.Errorf("CreateToken accepted: status %s, %+v", tp.Status.Value, tp.Unresolved)
	}

	// A reason given for a tool with nothing to accept is recorded
	// nowhere: its status must not say a person accepted anything.
	scoped := tool(t, compileDoc(t, accessDoc(t, "[{oauth: [a]}]", ""), map[string]string{"writeThing": why}), "writeThing")
	if scoped.Status.Value != policy.StatusServable || strings.Contains(scoped.Status.Rule, "accepted") {
		t.Errorf("status %s: %q claims an acceptance nothing needed", scoped.Status.Value, scoped.Status.Rule)
	}

	if _, err := policy.Compile(accessDoc(t, "", ""), policy.Options{Service: "svc", Accept: map[string]string{"noSuchTool": why}}); err == nil || !strings.Contains(err.Error(), "noSuchTool") {
		t.Errorf("an Accept naming no tool: %v, want an error naming it", err)
	}
	// With several unknown names the error is the same on every run
	// (issue 15: the same input gives the same output).
	for range 20 {
		_, err := policy.Compile(accessDoc(t, "", ""), policy.Options{Service: "svc", Accept: map[string]string{"zz": why, "aa": why, "mm": why}})
		if err == nil || !strings.Contains(err.Error(), `"aa"`) {
			t.Fatalf("an Accept naming three unknown tools: %v, want the first by name, aa", err)
		}
	}
	if _, err := policy.Compile(accessDoc(t, "", ""), policy.Options{Service: "Bad Name"}); !errors.Is(err, policy.ErrService) {
		t.Errorf("a bad service name: %v", err)
	}
}

// TestCredentialParameters holds the rule that orangerail places
// credentials only from its environment (spec 001, "The credential, not
// only the scope"): a required credential parameter fails closed and
// cannot be accepted, an optional one is left out with a non-fatal
// finding, and a declared apiKey scheme's own parameter is the scheme's.
func TestCredentialParameters(t *testing.T) {
	v := tool(t, corpusManifest(t, "vonage-account.yaml"), "getAccountBalance")
	var names []string
	for _, u := range v.Unresolved {
		if u.Kind == policy.UnresolvedCredentialParameter {
			if !u.Fatal || u.Acceptable {
				t.Errorf("%+v: want fatal, not acceptable", u)
			}
			names = append(names, u.Detail)
		}
	}
	if len(names) != 2 || !strings.Contains(names[0], `"api_key"`) || !strings.Contains(names[1], `"api_secret"`) {
		t.Errorf("vonage getAccountBalance credential parameters: %q", names)
	}
	if v.Status.Value != policy.StatusFailsClosed {
		t.Errorf("vonage getAccountBalance: %s", v.Status.Value)
	}

	optional := "      parameters: [{name: access_token, in: query, schema: {type: string}}]\n"
	m := compileDoc(t, accessDoc(t, "[{oauth: [a]}]", optional), nil)
	if f := finding(tool(t, m, "writeThing"), policy.UnresolvedCredentialParameter); f == nil || f.Fatal || !strings.Contains(f.Detail, "left out") {
		t.Errorf("an optional credential parameter: %+v, want a non-fatal finding that it is left out", f)
	}
	required := "      parameters: [{name: client_secret, in: header, required: true, schema: {type: string}}]\n"
	m = compileDoc(t, accessDoc(t, "[{oauth: [a]}]", required), nil)
	if tp := tool(t, m, "getThing"); finding(tp, policy.UnresolvedCredentialParameter) == nil || tp.Status.Value != policy.StatusFailsClosed {
		t.Errorf("a required credential parameter on a read: %s, %+v", tp.Status.Value, tp.Unresolved)
	}
	own := "      parameters: [{name: api_key, in: query, required: true, schema: {type: string}}]\n"
	m = compileDoc(t, accessDoc(t, "[{qkey: []}]", own), nil)
	if f := finding(tool(t, m, "getThing"), policy.UnresolvedCredentialParameter); f != nil {
		t.Errorf("an apiKey scheme's own parameter is a finding: %+v", f)
	}

	// TaxCloud's credentials travel in the SOAP body, as optional
	// elements: left out, and said.
	tc := tool(t, corpusManifest(t, "taxcloud-taxcloud.wsdl"), "Lookup")
	found := false
	for _, u := range tc.Unresolved {
		found = found || (u.Kind == policy.UnresolvedCredentialParameter && strings.Contains(u.Detail, `"apiKey"`) && strings.Contains(u.Detail, "body"))
	}
	if !found {
		t.Errorf("taxcloud Lookup: no finding for the body's apiKey: %+v", tc.Unresolved)
	}
}
