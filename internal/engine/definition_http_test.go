package engine_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

const httpAction = `service: s
upstreams:
  carrier: {base_url: "https://carrier.example.com"}
actions:
  create_label:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {approval: required}
    execute:
      http:
        upstream: carrier
        method: POST
        path: /orders/{order_id}/labels
        body: {order: ":order_id"}
`

// TestHTTPDefinitionHash: an http action is hashed with its member alone,
// {"http": …}, defaults filled; the hash is pinned so that an approval
// staged today executes after an upgrade, and any change to the call —
// its path, its retry policy — voids it.
func TestHTTPDefinitionHash(t *testing.T) {
	t.Parallel()
	hash := func(src string) string {
		t.Helper()
		cfg, err := ontology.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(engine.DefinitionHash(cfg.Actions["create_label"]))
	}
	const pinned = "4336c8f52fec5547bb0fd399c317f3ba77424f24ff64bbaa8748b419113ce21f"
	if got := hash(httpAction); got != pinned {
		t.Fatalf("create_label hashes to %s, pinned %s", got, pinned)
	}
	for _, edit := range [][2]string{
		{"/labels", "/label"},
		{"        body:", "        retry: never\n        body:"},
		{"        body:", "        max_attempts: 2\n        body:"},
	} {
		if hash(strings.Replace(httpAction, edit[0], edit[1], 1)) == pinned {
			t.Errorf("%q -> %q leaves the hash unchanged", edit[0], edit[1])
		}
	}
	// The base URL is the deployment's, not the action's: moving the
	// upstream voids no approval.
	if hash(strings.Replace(httpAction, "carrier.example.com", "carrier.internal.example.com", 1)) != pinned {
		t.Error("the upstream's URL changed the hash")
	}
}

// TestPresentedSchemesHash: the schemes a call presents are part of its
// definition: naming them, or changing which, voids approvals staged
// under the old definition, for the execute and a target read alike;
// leaving auth out keeps the hash an action had before calls could name
// their schemes.
func TestPresentedSchemesHash(t *testing.T) {
	t.Parallel()
	base := strings.Replace(httpAction, `  carrier: {base_url: "https://carrier.example.com"}`,
		`  carrier: {base_url: "https://carrier.example.com", auth: {k: {type: api_key, in: header, name: X-K}, b: {type: bearer}}}`, 1)
	hash := func(src string) string {
		t.Helper()
		cfg, err := ontology.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(engine.DefinitionHash(cfg.Actions["create_label"]))
	}
	if got := hash(base); got != "4336c8f52fec5547bb0fd399c317f3ba77424f24ff64bbaa8748b419113ce21f" {
		t.Fatalf("a call presenting every scheme by default hashes to %s: not what it did before auth existed", got)
	}
	seen := map[string]string{hash(base): "absent"}
	for _, auth := range []string{"[]", "[k]", "[b]", "[k, b]"} {
		for _, where := range []string{"execute", "target"} {
			src := strings.Replace(base, "        body:", "        auth: "+auth+"\n        body:", 1)
			if where == "target" {
				src = strings.Replace(base, "    policy:", "    target: {upstream: carrier, get: {path: \"/orders/{order_id}\", auth: "+auth+"}}\n    policy:", 1)
			}
			h := hash(src)
			if prev, ok := seen[h]; ok {
				t.Errorf("%s auth: %s hashes as %s does", where, auth, prev)
			}
			seen[h] = where + " " + auth
		}
	}
}
