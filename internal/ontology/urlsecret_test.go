package ontology

import (
	"errors"
	"strings"
	"testing"
)

// TestURLRefusalsNeverRepeatAPassword: a URL refused because it holds a
// user (or for any other reason) is named in the refusal without its
// password. config check prints the refusal, and serve's start writes it
// to the host log: the very credential the rule keeps out of the config
// would be copied into both.
func TestURLRefusalsNeverRepeatAPassword(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-Sekr1t"
	for _, tt := range []struct{ name, config string }{
		{"an upstream's base_url", replace("https://carrier.example.com/api/v1/", "https://svc:"+secret+"@carrier.example.com/api/v1/")(httpBase)},
		{"an upstream's base_url, plain http", replace("https://carrier.example.com/api/v1/", "http://svc:"+secret+"@carrier.example.com/api/v1/")(httpBase)},
		{"an upstream's base_urls", replace("    base_url: https://carrier.example.com/api/v1/", "    base_urls: {prod: \"https://svc:"+secret+"@carrier.example.com\"}\nenvironment: prod\n")(httpBase)},
		{"a token_url", replace("    base_url:", "    auth: {oauth: {type: oauth2_client_credentials, token_url: \"https://id:"+secret+"@idp.example.com/token\"}}\n    base_url:")(httpBase)},
		{"the public URL", base + "http: {listen: \"0.0.0.0:8080\", public_url: \"https://u:" + secret + "@mcp.example.com\"}\n"},
		{"the OTLP endpoint", base + "tracing: {enabled: true, otlp_endpoint: \"https://u:" + secret + "@otel:4318\"}\n"},
		{"an upstream's base_url with a key in its query", replace("https://carrier.example.com/api/v1/", "https://carrier.example.com/api/v1/?api_key="+secret)(httpBase)},
		{"a URL that does not parse", replace("https://carrier.example.com/api/v1/", "https://svc:"+secret+" @carrier.example.com/")(httpBase)},
		{"a URL without its scheme", base + "tracing: {enabled: true, otlp_endpoint: \"u:" + secret + "@otel:4318\"}\n"},
		{"the issuer, plain http", base + "identity: {oidc: {issuer: \"http://u:" + secret + "@idp.example.com\", audience: a, tenant_claim: org}}\n"},
	} {
		_, err := Parse([]byte(tt.config))
		if _, ok := errors.AsType[Problems](err); !ok {
			t.Errorf("%s: Parse = %v, want problems", tt.name, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the refusal repeats the password:\n%v", tt.name, err)
		}
	}
}
