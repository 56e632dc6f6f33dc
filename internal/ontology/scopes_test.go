package ontology

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestCallScopes: a call narrows its oauth2_client_credentials scheme's
// scopes with its own scopes — sorted and each once, the same scope
// parameter for the same set — absent, requests the scheme's, and [],
// no scope at all (empty, not nil: the two ask for different tokens).
// Scopes on a call that presents no such scheme, a scope the
// scheme does not list (a call never widens them), and a scope RFC 6749
// §3.3 does not allow (empty, a space, a control character) are refused
// at their paths; a scheme's own unusable scope is refused at the scheme.
func TestCallScopes(t *testing.T) {
	t.Parallel()
	schemes := "    auth:\n      app: {type: oauth2_client_credentials, token_url: \"https://id.example.com/token\", scopes: [labels:read, labels:write, admin]}\n      key: {type: api_key, in: header, name: X-Api-Key}\n"
	withScopes := func(call string) string {
		src := replace("    base_url: https://carrier.example.com/api/v1/\n", "    base_url: https://carrier.example.com/api/v1/\n"+schemes)(httpBase)
		return replace("        method: POST\n", "        method: POST\n"+call)(src)
	}
	for _, tt := range []struct {
		call string
		want []string
	}{
		{"", nil},
		{"        scopes: [labels:write]\n", []string{"labels:write"}},
		{"        scopes: [labels:write, labels:read, labels:write]\n", []string{"labels:read", "labels:write"}},
		{"        auth: [app]\n        scopes: [admin]\n", []string{"admin"}},
		{"        scopes: []\n", []string{}},
		{"        auth: [app]\n        scopes: []\n", []string{}},
	} {
		cfg, err := Parse([]byte(withScopes(tt.call)))
		if err != nil {
			t.Fatalf("%q: %v", tt.call, err)
		}
		h := cfg.Actions["create_label"].Execute.HTTP
		if got := h.TokenScopes(); !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("%q: token scopes %#v, want %#v", tt.call, got, tt.want)
		}
		// As written, too: the definition hash covers Scopes, and
		// absent and [] must hash apart.
		if (h.Scopes == nil) != (tt.want == nil) {
			t.Errorf("%q: scopes as written %#v, want nil %v", tt.call, h.Scopes, tt.want == nil)
		}
	}
	at := "actions.create_label.execute.http.scopes"
	for _, tt := range []struct {
		call, path, says string
	}{
		{"        auth: [key]\n        scopes: [labels:read]\n", at, "presents no such scheme"},
		{"        auth: [key]\n        scopes: []\n", at, "presents no such scheme"},
		{"        scopes: [labels:read, labels:delete]\n", at + ".1", "never widens"},
		{"        scopes: [\"\"]\n", at + ".0", ""},
		{"        scopes: [\"labels:read labels:write\"]\n", at + ".0", "RFC 6749"},
		{"        scopes: [\" labels:read\"]\n", at + ".0", "RFC 6749"},
		{"        scopes: [\"labels:read\\n\"]\n", at + ".0", "RFC 6749"},
		{"        scopes: [\"labels:read\\t\"]\n", at + ".0", "RFC 6749"},
	} {
		_, err := Parse([]byte(withScopes(tt.call)))
		ps, ok := errors.AsType[Problems](err)
		var paths []string
		for _, p := range ps {
			paths = append(paths, p.Path)
		}
		if !ok || !slices.Contains(paths, tt.path) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v, want a problem at %s saying %q", tt.call, err, tt.path, tt.says)
		}
		for _, p := range paths {
			if !strings.HasPrefix(p, at) {
				t.Errorf("%q: a problem at %s, want only at %s", tt.call, p, at)
			}
		}
	}
	// The loader's own checks, past the schema: an empty or spaced scope
	// is refused by resolveScopes and CheckScope; an empty list is not.
	add := func(problems *[]string) func(path, format string, args ...any) {
		return func(path, _ string, _ ...any) { *problems = append(*problems, path) }
	}
	u := &Upstream{Auth: map[string]*UpstreamAuth{"app": {Type: AuthOAuth2ClientCredentials, Scopes: []string{"a", "b"}}, "key": {Type: AuthAPIKey}}}
	for _, tt := range []struct {
		presented, scopes []string
		paths             []string
	}{
		{[]string{"app"}, []string{}, nil},
		{[]string{"key"}, []string{}, []string{"p.scopes"}},
		{[]string{"app"}, []string{"", "a b", "b"}, []string{"p.scopes.0", "p.scopes.1"}},
		{[]string{"key"}, []string{"a"}, []string{"p.scopes"}},
		{[]string{"app"}, nil, nil},
	} {
		var got []string
		resolveScopes(u, "u", tt.presented, tt.scopes, "p", add(&got))
		if !slices.Equal(got, tt.paths) {
			t.Errorf("%v %q: problems at %v, want %v", tt.presented, tt.scopes, got, tt.paths)
		}
	}

	// The scheme's own scopes are sent too: one with a space would be
	// two scopes in the request.
	bad := replace("scopes: [labels:read, labels:write, admin]", "scopes: [labels:read, \"labels write\"]")(withScopes(""))
	if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "upstreams.carrier.auth.app.scopes.1") {
		t.Errorf("a scheme's scope holding a space: %v", err)
	}

	// A target read and a soap call narrow theirs too, at their paths.
	target := replace("    policy: {approval: required}\n", `    target:
      upstream: carrier
      get: {path: "/orders/{order_id}", scopes: [labels:read]}
    policy: {approval: required}
`)(withScopes("        scopes: [labels:write]\n"))
	cfg, err := Parse([]byte(target))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["create_label"].Target.Get.TokenScopes(); !slices.Equal(got, []string{"labels:read"}) {
		t.Errorf("the target read's scopes %q", got)
	}
	if cfg, err := Parse([]byte(replace("scopes: [labels:read]}", "scopes: []}")(target))); err != nil {
		t.Errorf("a target read asking for no scope: %v", err)
	} else if got := cfg.Actions["create_label"].Target.Get.TokenScopes(); got == nil || len(got) != 0 {
		t.Errorf("a target read's scopes: [] resolved to %#v, want empty, not nil", got)
	}
	if _, err := Parse([]byte(replace("scopes: [labels:read]}", "scopes: [nope]}")(target))); err == nil || !strings.Contains(err.Error(), "actions.create_label.target.get.scopes.0") {
		t.Errorf("a target read widening its scheme's scopes: %v", err)
	}
	soap := replace("    base_url: https://carrier.example.com/api/\n", "    base_url: https://carrier.example.com/api/\n"+schemes)(soapBase)
	soap = replace("        version: 1.1\n", "        version: 1.1\n        scopes: [admin, labels:read]\n")(soap)
	if cfg, err = Parse([]byte(soap)); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["create_label"].Execute.SOAP.TokenScopes(); !slices.Equal(got, []string{"admin", "labels:read"}) {
		t.Errorf("the soap call's scopes %q", got)
	}
	if cfg, err := Parse([]byte(replace("scopes: [admin, labels:read]", "scopes: []")(soap))); err != nil {
		t.Errorf("a soap call asking for no scope: %v", err)
	} else if s := cfg.Actions["create_label"].Execute.SOAP; s.Scopes == nil || s.TokenScopes() == nil || len(s.TokenScopes()) != 0 {
		t.Errorf("a soap call's scopes: [] resolved to %#v (written %#v), want empty, not nil", s.TokenScopes(), s.Scopes)
	}
	if _, err := Parse([]byte(replace("scopes: [admin, labels:read]", "scopes: [admin, other]")(soap))); err == nil || !strings.Contains(err.Error(), "actions.create_label.execute.soap.scopes.1") {
		t.Errorf("a soap call widening its scheme's scopes: %v", err)
	}
}
