package ontology

import (
	"slices"
	"testing"
)

// TestEnvironments: an action whose environments leave out the config's
// is withdrawn at load — no tool, no action — and reported as unserved,
// while the scopes map and groups that name it still load; one served
// here, or naming none, stays; an empty list is a problem at its path;
// and an unserved call's upstream needs a URL where it is served, not
// here.
func TestEnvironments(t *testing.T) {
	t.Parallel()
	const describes = "describe_object, describe_action, list_policies, errors_explain"
	actions := replace("    policy: {roles: [support]}\n", "    policy: {roles: [support]}\n    environments: [production, sandbox]\n")(base) + `  purge:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    environments: [sandbox]
    execute: {http: {upstream: carrier, method: DELETE, path: /all}}
`
	src := add("environment: production\n" +
		"upstreams:\n  carrier: {base_urls: {sandbox: \"https://sandbox.example.com\"}}\n" +
		"scopes:\n  orders:read: [check_approval, " + describes + ", order_get, order_list, list_resources, describe_resource, manage_resource]\n  orders:write: [cancel_order, purge]\n" +
		"surface: {default: meta}\ngroups:\n  orders: {description: d, tools: [cancel_order, purge]}\n")(actions)
	cfg, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Actions["purge"]; ok || cfg.Actions["cancel_order"] == nil {
		t.Fatalf("actions %v", cfg.Actions)
	}
	for _, tool := range cfg.Tools() {
		if tool.Name == "purge" {
			t.Fatal("purge is still a tool")
		}
	}
	got := cfg.Unserved()
	if len(got) != 1 || got[0].Path != "actions.purge" || !slices.Equal(got[0].Environments, []string{"sandbox"}) {
		t.Fatalf("unserved %+v", got)
	}
	if a, ok := cfg.UnservedAction("purge"); !ok || a.Execute.HTTP == nil {
		t.Fatal("the unserved declaration is not kept")
	}
	if _, ok := cfg.UnservedAction("cancel_order"); ok {
		t.Fatal("a served action reported unserved")
	}

	// In its environment it is served, as is an action naming none.
	cfg, err = Parse([]byte(replace("environment: production", "environment: sandbox")(src)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Actions["purge"] == nil || cfg.Actions["cancel_order"] == nil || len(cfg.Unserved()) != 0 {
		t.Fatalf("in sandbox: actions %v, unserved %v", cfg.Actions, cfg.Unserved())
	}

	for _, tt := range []struct{ name, src, path string }{
		{"empty", replace("environments: [sandbox]", "environments: []")(src), "actions.purge.environments"},
		{"no URL where served", replace("environments: [sandbox]", "environments: [staging]")(src), "actions.purge.execute.http.upstream"},
	} {
		_, err := Parse([]byte(tt.src))
		if paths := problemPaths(err); !slices.Equal(paths, []string{tt.path}) {
			t.Errorf("%s: %v, want one problem at %s", tt.name, err, tt.path)
		}
	}
}
