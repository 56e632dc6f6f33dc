package ontology

import (
	"errors"
	"strings"
	"testing"
)

// TestAdvertisedIssuerURLsAreRefusedWithAUser: the issuer and
// identity.oidc.authorization_servers are published to anyone, in the
// protected-resource metadata (Access-Control-Allow-Origin: *), and the
// issuer is named in every discovery failure the host log records. A URL
// of them that holds a user and password — or is no URL at all — is
// refused at load, where it would otherwise be served verbatim; the
// refusal does not repeat the password.
func TestAdvertisedIssuerURLsAreRefusedWithAUser(t *testing.T) {
	const secret = "hunter2-Sekr1t"
	oidc := func(fields string) string {
		return base + "identity: {oidc: {" + fields + "audience: orangerail, tenant_claim: org_id}}\n"
	}
	if _, err := Parse([]byte(oidc("issuer: https://id.example.com, authorization_servers: [\"https://as.example.com\", \"http://127.0.0.1:9000\"], "))); err != nil {
		t.Fatalf("https authorization servers: %v", err)
	}
	t.Setenv("TEST_ORANGERAIL_USER_ISSUER", "https://client:"+secret+"@id.example.com")
	for _, tt := range []struct{ name, fields, path string }{
		{"an issuer with a user", "issuer: \"https://client:" + secret + "@id.example.com\", ", "identity.oidc.issuer"},
		{"an issuer_env with a user", "issuer_env: TEST_ORANGERAIL_USER_ISSUER, ", "identity.oidc.issuer_env"},
		{"an authorization server with a user", "issuer: https://id.example.com, authorization_servers: [\"https://client:" + secret + "@as.example.com\"], ", "identity.oidc.authorization_servers.0"},
		{"an authorization server that is no URL", "issuer: https://id.example.com, authorization_servers: [https://as.example.com, not a url], ", "identity.oidc.authorization_servers.1"},
		{"an authorization server over plain http", "issuer: https://id.example.com, authorization_servers: [\"http://as.example.com\"], ", "identity.oidc.authorization_servers.0"},
	} {
		cfg, err := Parse([]byte(oidc(tt.fields)))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != tt.path {
			got := ""
			if cfg != nil {
				got = cfg.Identity.OIDC.Issuer + " " + strings.Join(cfg.Identity.OIDC.AuthorizationServers, " ")
			}
			t.Errorf("%s: Parse = %v (advertising %s), want one problem at %s", tt.name, err, got, tt.path)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the refusal repeats the password: %v", tt.name, err)
		}
	}
}
