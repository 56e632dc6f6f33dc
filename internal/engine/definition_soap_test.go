package engine_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

const soapAction = `service: s
upstreams:
  carrier: {base_url: "https://carrier.example.com"}
actions:
  create_label:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {approval: required}
    execute:
      soap:
        upstream: carrier
        version: "1.1"
        action: urn:carrier/CreateLabel
        operation: {namespace: "urn:carrier:labels", name: CreateLabel}
        body:
          - OrderId: ":order_id"
`

// TestSOAPDefinitionHash: a soap action is hashed with its member alone,
// {"soap": …}, defaults filled; the hash is pinned so that an approval
// staged today executes after an upgrade, and any change to the call —
// its operation, its action, its body, whether it is safe — voids it.
func TestSOAPDefinitionHash(t *testing.T) {
	t.Parallel()
	hash := func(src string) string {
		t.Helper()
		cfg, err := ontology.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(engine.DefinitionHash(cfg.Actions["create_label"]))
	}
	const pinned = "e0ee15f9df953af85505df843e3813fdae76064f956a7e268a458b60afcc9692"
	if got := hash(soapAction); got != pinned {
		t.Fatalf("create_label hashes to %s, pinned %s", got, pinned)
	}
	for _, edit := range [][2]string{
		{"name: CreateLabel", "name: CreateLabel2"},
		{`"urn:carrier:labels"`, `"urn:carrier:labels:v2"`},
		{"action: urn:carrier/CreateLabel", "action: urn:carrier/Other"},
		{`version: "1.1"`, `version: "1.2"`},
		{"- OrderId:", "- Order:"},
		{"        body:", "        safe: true\n        body:"},
		{"        body:", "        max_attempts: 1\n        body:"},
	} {
		if hash(strings.Replace(soapAction, edit[0], edit[1], 1)) == pinned {
			t.Errorf("%q -> %q leaves the hash unchanged", edit[0], edit[1])
		}
	}
	// The base URL is the deployment's, not the action's.
	if hash(strings.Replace(soapAction, "carrier.example.com", "carrier.internal.example.com", 1)) != pinned {
		t.Error("the upstream's URL changed the hash")
	}
}
