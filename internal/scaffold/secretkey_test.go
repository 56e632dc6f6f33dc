package scaffold

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestKeyColumnsInCamelCaseAreSecrets: a private or access key is named a
// secret (the README's "API or private key") however its name is spelled:
// private_key, privateKey, PrivateKeyPem, accesskey. As they were, the
// camel-case and run-together spellings were fields of the draft, served
// to every caller who lists the table, while apiToken and clientSecret
// were left out.
func TestKeyColumnsInCamelCaseAreSecrets(t *testing.T) {
	t.Parallel()
	url := datasourceOf(t, `CREATE TABLE integrations (id int PRIMARY KEY, org_id text NOT NULL, label text,
		"privateKey" text, "PrivateKeyPem" text, "accessKey" text, privatekey_der bytea, accesskey text,
		"accessKeyId" text, private_key text, "signingKey" text, hmac_key bytea, "encryptionKey" bytea, totp_seed text, passphrase text)`)
	got, err := Generate(context.Background(), url, Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	o := accepted(t, url, got).Objects["integrations"]
	if o == nil {
		t.Fatalf("integrations is no object:\n%s", got)
	}
	// An access key's id is about one, as token_id is.
	if want := []string{"id", "org_id", "label", "accessKeyId"}; !slices.Equal(o.Fields, want) {
		t.Fatalf("fields %v, want %v:\n%s", o.Fields, want, got)
	}
	if !strings.Contains(string(got), `left out "privateKey", "PrivateKeyPem", "accessKey", "privatekey_der", "accesskey", "private_key", "signingKey", "hmac_key", "encryptionKey", "totp_seed", "passphrase": their names say they hold secrets`) {
		t.Fatalf("the draft does not name the secrets it left out:\n%s", got)
	}
}
