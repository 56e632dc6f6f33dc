package engine_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/ontology"
)

// pinnedDefinitions are the definition hashes of the example's actions as
// orangerail computed them before execute became a union of effect kinds
// (and refund_order, the example's cancel_order declared not_implemented).
// An approval stores its action's hash when it is staged and executes only
// while the hash is unchanged, so a change here strands every approval
// staged before an upgrade.
var pinnedDefinitions = map[string]string{
	"add_order_note":          "270141f5590bcc5d5cf133dbd65d58596fb821a54e7d68babcba55966d55112e",
	"cancel_order":            "fa1a8cec223db448b5fb29bace940279a45af49a06dd10dc9925268b5a1de8b2",
	"create_return_label":     "88af06275103ea031e5e8fdffdc17bdb35bf60d68b28e0b63cb929d7078d8a58",
	"update_shipping_address": "267ffa6bac7d7d6e2c622b46cc184e335fc83456f5e5376e9c76cc83a4083a64",
	"refund_order":            "e5264add1c0b2cc92990fcf3bf6a3298294c21cd46a2fd1e36dbc6ac73f7bc03",
}

// editExample returns the example's config with edit applied to its YAML
// document, parsed. A path edit expects but the example lacks fails the
// test rather than testing nothing.
func editExample(t testing.TB, edit func(doc map[string]any)) *ontology.Config {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(orders.Config, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	text, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// member returns the mapping at path in doc, failing the test when any
// step is missing.
func member(t testing.TB, doc map[string]any, path ...string) map[string]any {
	t.Helper()
	node := doc
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			t.Fatalf("the example has no mapping at %v", path)
		}
		node = next
	}
	return node
}

// withRefund adds refund_order: the example's cancel_order, declared
// not_implemented.
func withRefund(t testing.TB) func(doc map[string]any) {
	return func(doc map[string]any) {
		actions := member(t, doc, "actions")
		refund := maps.Clone(member(t, doc, "actions", "cancel_order"))
		refund["execute"] = map[string]any{"not_implemented": true}
		actions["refund_order"] = refund
	}
}

// TestDefinitionHashesArePinned: the example's declarations hash as they
// did before the upgrade, so approvals staged then still execute.
func TestDefinitionHashesArePinned(t *testing.T) {
	t.Parallel()
	cfg := editExample(t, withRefund(t))
	if got, want := slices.Sorted(maps.Keys(cfg.Actions)), slices.Sorted(maps.Keys(pinnedDefinitions)); !slices.Equal(got, want) {
		t.Fatalf("actions %v, pinned %v", got, want)
	}
	// The previous release's example declared add_order_note with no
	// policy, which deny by default no longer loads; the example now names
	// roles: [support]. Who may call is part of the definition, so the
	// note is hashed as that release declared it: the hash itself must not
	// have changed.
	note := *cfg.Actions["add_order_note"]
	note.Policy.Roles = nil
	cfg.Actions["add_order_note"] = &note
	for name, a := range cfg.Actions {
		if got := hex.EncodeToString(engine.DefinitionHash(a)); got != pinnedDefinitions[name] {
			t.Errorf("%s: definition hash %s, pinned %s", name, got, pinnedDefinitions[name])
		}
	}
}

// TestApprovalStagedBeforeUpgradeExecutes writes an approval as the
// previous release left it — its definition hash the pinned one — and
// executes it.
func TestApprovalStagedBeforeUpgradeExecutes(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	input := json.RawMessage(`{"order_id": "o-1001", "reason": "staged before the upgrade"}`)
	canonical, err := jcs.Canonicalize(input)
	if err != nil {
		t.Fatal(err)
	}
	pinned, _ := hex.DecodeString(pinnedDefinitions["cancel_order"])
	if _, err := b.admin.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ('acme')"); err != nil {
		t.Fatal(err)
	}
	var id string
	err = b.admin.QueryRow(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
		VALUES (gen_random_uuid(), 'acme', 'cancel_order', 'agent-7', $1, $2, $3, now() + interval '1 hour') RETURNING id::text`,
		string(canonical), engine.InputDigest(b.engine, "acme", "cancel_order", canonical), pinned).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	approve(t, b.engine, "acme", id)
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "cancelled" {
		t.Fatal("the order was not cancelled")
	}
}

// TestDefinitionHashTellsScopesApart: a call's token scopes absent (the
// scheme's), [] (none: the server's default) and a list ask for different
// tokens, so each hashes apart and an approval staged under one does not
// execute under another; absent hashes as before scopes existed.
func TestDefinitionHashTellsScopesApart(t *testing.T) {
	t.Parallel()
	cfg := editExample(t, func(map[string]any) {})
	base := cfg.Actions["create_return_label"]
	if base.Execute.HTTP == nil {
		t.Fatal("the example's create_return_label is no http call")
	}
	with := func(scopes []string) string {
		a := *base
		h := *base.Execute.HTTP
		h.Scopes = scopes
		a.Execute.HTTP = &h
		return hex.EncodeToString(engine.DefinitionHash(&a))
	}
	absent, none, some := with(nil), with([]string{}), with([]string{"labels:read"})
	if absent != pinnedDefinitions["create_return_label"] {
		t.Errorf("absent scopes hash %s, pinned %s", absent, pinnedDefinitions["create_return_label"])
	}
	if absent == none || none == some || absent == some {
		t.Errorf("absent %s, [] %s, [labels:read] %s: want three hashes", absent, none, some)
	}
	// A soap call's, and a target read's, alike.
	soap := func(scopes []string) string {
		a := *base
		a.Execute = ontology.Execute{SOAP: &ontology.SOAPExecute{Upstream: "shipping", Scopes: scopes}}
		return hex.EncodeToString(engine.DefinitionHash(&a))
	}
	if absent, none, some := soap(nil), soap([]string{}), soap([]string{"labels:read"}); absent == none || none == some || absent == some {
		t.Errorf("soap: absent %s, [] %s, [labels:read] %s: want three hashes", absent, none, some)
	}
	target := func(scopes []string) string {
		a := *base
		a.Target = &ontology.Target{Get: &ontology.HTTPExecute{Path: "/x", Scopes: scopes}}
		return hex.EncodeToString(engine.DefinitionHash(&a))
	}
	if absent, none, some := target(nil), target([]string{}), target([]string{"labels:read"}); absent == none || none == some || absent == some {
		t.Errorf("target.get: absent %s, [] %s, [labels:read] %s: want three hashes", absent, none, some)
	}
}
