package ontology

import (
	"errors"
	"strings"
	"testing"
)

// TestAValueWhereAVariableIsNamedIsNotRepeated: each *_env key names the
// environment variable holding a secret. The easy mistake is to write the
// secret itself there — the datasource's URL, the webhook's whsec_, the
// checkpoint's private key — and the refusal must not print it back: config
// check prints it, and serve writes it to the host log as it refuses to
// start. Every such key is refused at load, key_env too (the checkpoint
// key's refusal at serve's start would otherwise say "names <the key>,
// which is not set").
func TestAValueWhereAVariableIsNamedIsNotRepeated(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-Sekr1t"
	for _, tt := range []struct{ name, extra, path string }{
		{"datasource.url_env", "datasource: {url_env: \"postgres://orangerail:" + secret + "@db.example.com/orders\"}\n", "datasource.url_env"},
		{"sql_query.url_env", "sql_query: {enabled: true, url_env: \"postgres://reader:" + secret + "@db.example.com/orders\"}\n", "sql_query.url_env"},
		{"webhooks.secret_env", "webhooks: [{url: \"https://hooks.example.com/in\", secret_env: \"whsec_" + secret + "\"}]\n", "webhooks.0.secret_env"},
		{"desk.client_secret_env", "desk: {client_id: desk, client_secret_env: \"" + secret + "\"}\n", "desk.client_secret_env"},
		{"identity.oidc.issuer_env", "identity: {oidc: {issuer_env: \"https://client:" + secret + "@id.example.com\", audience: a, tenant_claim: org}}\n", "identity.oidc.issuer_env"},
		{"audit.checkpoint.key_env", "audit: {checkpoint: {key_env: \"PRIVATE+KEY+orangerail/s+0f1e2d3c+" + secret + "\"}}\n", "audit.checkpoint.key_env"},
	} {
		_, err := Parse([]byte(base + tt.extra))
		var problems Problems
		if !errors.As(err, &problems) {
			t.Errorf("%s: Parse = %v, want a problem at %s", tt.name, err, tt.path)
			continue
		}
		at := false
		for _, p := range problems {
			at = at || p.Path == tt.path
		}
		if !at {
			t.Errorf("%s: problems %v, want one at %s", tt.name, problems, tt.path)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the refusal repeats the value written where a variable is named:\n%v", tt.name, err)
		}
	}
}
