package ontology

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
)

func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "orders", "orangerail.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	var names []string
	for _, tool := range cfg.Tools() {
		names = append(names, tool.Name)
	}
	want := []string{"check_approval", "describe_object", "describe_action", "list_policies", "errors_explain", "customer_get", "customer_list", "order_get", "order_list", "product_get", "product_list",
		"add_order_note", "cancel_order", "create_return_label", "update_shipping_address"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	// The shipping upstream: loopback in the demo's environment (make run
	// points it at its own carrier), the key placed by its scheme, and a
	// POST retried only under one idempotency key.
	label := cfg.Actions["create_return_label"]
	if h := label.Execute.HTTP; h == nil || h.BaseURL().String() != "http://127.0.0.1:8089" || h.Retry != RetryWithIdempotencyKey ||
		h.IdempotencyHeader() != "Idempotency-Key" || label.Policy.Approval != ApprovalRequired || !slices.Equal(label.Policy.Roles, []string{"support"}) {
		t.Fatalf("create_return_label = %+v", label)
	}
	if slots := cfg.CredentialSlots(); len(slots) != 1 || slots[0].Env != "SHIPPING_KEY_CREDENTIAL" || slots[0].Type != AuthAPIKey {
		t.Fatalf("credential slots = %+v", slots)
	}
	if cfg.Approvals.TTL != Duration(24*time.Hour) || !*cfg.Approvals.FourEyes || cfg.Preset != PresetApprovalForWrites {
		t.Fatalf("approvals/preset = %+v %s", cfg.Approvals, cfg.Preset)
	}
	if got := cfg.Objects["customer"].ReadAccess; got.Kind != ReadRoles || !slices.Equal(got.Roles, []string{"support", "approver"}) {
		t.Fatalf("customer read access = %+v", got)
	}
	if cfg.Objects["product"].List.MaxLimit != ListMaxLimitDefault {
		t.Fatalf("default max_limit not applied")
	}
	a := cfg.Actions["cancel_order"]
	if a.InputSchema() == nil || a.WhereProgram() == nil || a.Policy.Approval != ApprovalRequired {
		t.Fatalf("cancel_order not compiled: %+v", a)
	}
	if cfg.Actions["add_order_note"].Policy.Approval != ApprovalNone {
		t.Fatalf("default approval policy not applied")
	}
	// The demo's auditor reads and never writes: no action of the example
	// is open to it.
	for name, a := range cfg.Actions {
		if len(a.Policy.Roles) == 0 || slices.Contains(a.Policy.Roles, cfg.Approvals.AuditorRole) {
			t.Errorf("%s: roles %v, want roles stated and without %s", name, a.Policy.Roles, cfg.Approvals.AuditorRole)
		}
	}
}

// base is a minimal valid config the broken fixtures start from.
const base = `service: s
objects:
  order:
    table: orders
    key: id
    tenant_column: org_id
    fields: [id, status]
    list: {filters: {status: [eq]}, sort: [id]}
actions:
  cancel_order:
    description: d
    target: {object: order, key_from: order_id}
    input: {type: object, properties: {order_id: {type: string}}}
    where: target.status == "paid"
    policy: {roles: [support]}
    execute: {sql: "UPDATE orders SET status = 'x' WHERE id = :order_id"}
`

func TestBaseFixtureIsValid(t *testing.T) {
	t.Parallel()
	if _, err := Parse([]byte(base)); err != nil {
		t.Fatalf("base fixture: %v", err)
	}
}

// TestApproverRoles: an action's approver roles default to
// approvals.approver_role, and a declared list is kept.
func TestApproverRoles(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(add("approvals: {approver_role: lead}\n")(base)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["cancel_order"].Policy.ApproverRoles; len(got) != 1 || got[0] != "lead" || cfg.Approvals.AuditorRole != AuditorRoleDefault {
		t.Fatalf("approver roles %v, auditor role %q", got, cfg.Approvals.AuditorRole)
	}
	cfg, err = Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {approval: required, approver_roles: [ops, finance]}")(base)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["cancel_order"].Policy.ApproverRoles; len(got) != 2 || got[0] != "ops" || got[1] != "finance" {
		t.Fatalf("approver roles %v", got)
	}
}

func TestBrokenConfigs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(string) string
		paths []string // every problem's path, sorted
	}{
		{"unknown top-level key", add("servce: typo\n"), []string{"servce"}},
		{"unknown nested key", replace("    policy: {roles: [support]}", "    policy: {aproval: required}"), []string{"actions.cancel_order.policy.aproval"}}, //nolint:misspell // the typo is the test
		{"bad preset", add("preset: yolo\n"), []string{"preset"}},
		{"bad ttl", add("approvals: {ttl: soon}\n"), []string{"approvals.ttl"}},
		{"a ttl of the form, too long to hold", add("approvals: {ttl: 99999999999h}\n"), []string{"approvals.ttl"}},
		{"a NaN", replace("service: s\n", "service: .nan\n"), []string{"service"}},
		{"an infinity", add("limits: {max_input_bytes: -.Inf}\n"), []string{"limits.max_input_bytes"}},
		{"a clock skew too long to hold", add("identity: {oidc: {issuer: \"https://id.example.com\", audience: a, tenant_claim: org, clock_skew: 9999999999999s}}\n"), []string{"identity.oidc.clock_skew"}},
		{"retention not days", add("approvals: {seal_inputs: true, retention: 90days}\n"), []string{"approvals.retention"}},
		{"retention negative", add("approvals: {seal_inputs: true, retention: -1h}\n"), []string{"approvals.retention"}},
		{"retention in days, too long to hold", add("approvals: {seal_inputs: true, retention: 99999d}\n"), []string{"approvals.retention"}},
		{"retention of the form, too long to hold", add("approvals: {seal_inputs: true, retention: 9999999h}\n"), []string{"approvals.retention"}},
		{"a webhook retention not a duration", add("webhook_retention: a month\n"), []string{"webhook_retention"}},
		{"a webhook retention negative", add("webhook_retention: -1h\n"), []string{"webhook_retention"}},
		{"a webhook retention of none", add("webhook_retention: 0d\n"), []string{"webhook_retention"}},
		{"a webhook retention under the prune's hour", add("webhook_retention: 59m59s\n"), []string{"webhook_retention"}},
		{"a webhook retention too long to hold", add("webhook_retention: 99999d\n"), []string{"webhook_retention"}},
		{"a ttl no person could decide in", add("approvals: {ttl: 1ms}\n"), []string{"approvals.ttl"}},
		{"a ttl just under a second", add("approvals: {ttl: 999ms}\n"), []string{"approvals.ttl"}},
		// A zero duration read as absent took the default: 24h for a ttl
		// of 0s, 30s of leeway for a clock_skew of 0s, 10s for an
		// upstream's timeout of 0s.
		{"a ttl of zero", add("approvals: {ttl: 0s}\n"), []string{"approvals.ttl"}},
		{"a seal interval of zero", add("audit: {seal_interval: 0ms}\n"), []string{"audit.seal_interval"}},
		{"a checkpoint interval of zero", add("audit: {checkpoint: {key_env: K, interval: 0h0m}}\n"), []string{"audit.checkpoint.interval"}},
		{"a flush interval of zero", add("http: {rate_limits: {flush_interval: 0s}}\n"), []string{"http.rate_limits.flush_interval"}},
		{"a clock skew of zero", add("identity: {oidc: {issuer: \"https://id.example.com\", audience: a, tenant_claim: org, clock_skew: 0s}}\n"), []string{"identity.oidc.clock_skew"}},
		{"a clock skew past five minutes", add("identity: {oidc: {issuer: \"https://id.example.com\", audience: a, tenant_claim: org, clock_skew: 5m1s}}\n"), []string{"identity.oidc.clock_skew"}},
		{"sealed input sent to a webhook", add("approvals: {seal_inputs: true}\nwebhooks: [{url: \"https://hooks.example.com/in\", secret_env: HOOK, include_input: true}]\n"), []string{"webhooks.0.include_input"}},
		{"tool name too long", replace("  cancel_order:", "  "+strings.Repeat("x", 65)+":"), []string{"actions." + strings.Repeat("x", 65)}},
		{"tool name with a space", replace("  cancel_order:", "  \"cancel order\":"), []string{"actions.cancel order"}},
		{"colliding tool names", replace("  cancel_order:", "  order_get:"), []string{"actions.order_get"}},
		{"collision with check_approval", replace("  cancel_order:", "  check_approval:"), []string{"actions.check_approval"}},
		{"collision with describe_object", replace("  cancel_order:", "  describe_object:"), []string{"actions.describe_object"}},
		{"unknown target object", replace("{object: order,", "{object: ordr,"), []string{"actions.cancel_order.target.object"}},
		{"key_from not an input", replace("key_from: order_id", "key_from: id"), []string{"actions.cancel_order.target.key_from"}},
		{"invalid input schema", replace("{type: object, properties: {order_id: {type: string}}}", "{type: object, properties: {order_id: {type: strin}}}"), []string{"actions.cancel_order.input"}},
		{"input not an object", replace("{type: object, properties: {order_id: {type: string}}}", "{type: string}"), []string{"actions.cancel_order.execute.sql", "actions.cancel_order.input", "actions.cancel_order.target.key_from"}},
		{"where does not compile", replace(`target.status == "paid"`, `target.status ==`), []string{"actions.cancel_order.where"}},
		{"where not boolean", replace(`target.status == "paid"`, `target.status`), []string{"actions.cancel_order.where"}},
		{"where names an unknown variable", replace(`target.status == "paid"`, `order.status == "paid"`), []string{"actions.cancel_order.where"}},
		{"param not an input", replace("WHERE id = :order_id", "WHERE id = :order_id AND x = :nope"), []string{"actions.cancel_order.execute.sql"}},
		{"key not a field", replace("    key: id", "    key: pk"), []string{"objects.order.key"}},
		{"filter not a field", replace("{status: [eq]}", "{state: [eq]}"), []string{"objects.order.list.filters.state"}},
		{"bad filter op", replace("{status: [eq]}", "{status: [like]}"), []string{"objects.order.list.filters.status.0"}},
		{"sort not a field", replace("sort: [id]", "sort: [idx]"), []string{"objects.order.list.sort.0"}},
		{"link to an unknown object", add("links:\n  l: {from: order.id, to: customer.id}\n"), []string{"links.l.to"}},
		{"read access typo", replace("    fields: [id, status]", "    fields: [id, status]\n    read_access: everyone"), []string{"objects.order.read_access"}},
		{"missing required", replace("    tenant_column: org_id\n", ""), []string{"objects.order"}},
		{"sql_query without roles", add("sql_query: {enabled: true}\n"), []string{"sql_query.roles"}},
		{"sql_query reading system schemas", add("sql_query: {enabled: true, roles: [auditor], schemas: [orangerail, pg_catalog, information_schema]}\n"),
			[]string{"sql_query.schemas.1", "sql_query.schemas.2"}},
		{"an action named like the SQL tool", func(s string) string {
			return add("sql_query: {enabled: true, roles: [auditor]}\n")(replace("  cancel_order:", "  sql_query:")(s))
		}, []string{"actions.sql_query"}},
		{"redact_audit not an input", replace("    where:", "    redact_audit: [card]\n    where:"), []string{"actions.cancel_order.redact_audit.0"}},
		{"redact_audit pointer not an input", replace("    where:", "    redact_audit: [/card/number]\n    where:"), []string{"actions.cancel_order.redact_audit.0"}},
		{"redact_audit pointer inside a string", replace("    where:", "    redact_audit: [order_id, /order_id/x]\n    where:"), []string{"actions.cancel_order.redact_audit.1"}},
		{"redact_audit pointer with a bad escape", replace("    where:", "    redact_audit: [\"/order~2id\"]\n    where:"), []string{"actions.cancel_order.redact_audit.0"}},
		{"redact_prior pointer not a field", replace("    where:", "    redact_prior: [/status, /secret/x]\n    where:"), []string{"actions.cancel_order.redact_prior.1"}},
		{"redact_prior pointer with a bad escape", replace("    where:", "    redact_prior: [\"/status~\"]\n    where:"), []string{"actions.cancel_order.redact_prior.0"}},
		{"redact_result pointer with a bad escape", replace("    where:", "    redact_result: [/rows/0/id, \"/rows/~x\"]\n    where:"), []string{"actions.cancel_order.redact_result.1"}},
		{"public_url missing off loopback", add("http: {listen: \"0.0.0.0:8080\"}\n"), []string{"http.public_url"}},
		{"public_url missing with a malformed listen", add("http: {listen: \"127.0.0.1\"}\n"), []string{"http.public_url"}},
		{"public_url relative", add("http: {public_url: mcp.example.com}\n"), []string{"http.public_url"}},
		{"public_url not http", add("http: {public_url: \"ftp://mcp.example.com\"}\n"), []string{"http.public_url"}},
		{"public_url with a query", add("http: {public_url: \"https://mcp.example.com/?a=1\"}\n"), []string{"http.public_url"}},
		{"public_url with an empty query", add("http: {public_url: \"https://mcp.example.com?\"}\n"), []string{"http.public_url"}},
		{"public_url with a fragment", add("http: {public_url: \"https://mcp.example.com#x\"}\n"), []string{"http.public_url"}},
		{"public_url with a path", add("http: {public_url: \"https://gw.example.com/orangerail\"}\n"), []string{"http.public_url"}},
		{"public_url with a user", add("http: {public_url: \"https://u:p@mcp.example.com\"}\n"), []string{"http.public_url"}},
		{"public_url without a host", add("http: {public_url: \"https://:443\"}\n"), []string{"http.public_url"}},
		{"a desk without identity.oidc", add("desk: {client_id: desk}\n"), []string{"desk"}},
		{"a desk over plain http off loopback", add("identity: {oidc: {issuer: https://id.example.com, audience: orangerail, tenant_claim: org_id, human: {claim: kind, values: [human]}}}\n" +
			"desk: {client_id: desk}\nhttp: {public_url: \"http://desk.corp.example\"}\n"), []string{"http.public_url"}},
		// Without the rule every caller is an agent: nobody signs in.
		{"a desk without a person rule", add("identity: {oidc: {issuer: https://id.example.com, audience: orangerail, tenant_claim: org_id}}\n" +
			"desk: {client_id: desk}\n"), []string{"identity.oidc.human"}},
		{"a desk without a client id", add("desk: {client_secret_env: DESK_SECRET}\n"), []string{"desk"}},
		{"a desk secret env that is no variable name", add("desk: {client_id: desk, client_secret_env: \"$X\"}\n"), []string{"desk.client_secret_env"}},
		{"an allowed network that is no CIDR", add("identity: {allowed_networks: [10.0.0.0/8, 10.1.2.3, 10.0.0.0/33]}\n"), []string{"identity.allowed_networks.1", "identity.allowed_networks.2"}},
		{"an allowed network with host bits", add("identity: {allowed_networks: [\"2001:db8::/32\", 10.1.2.3/8]}\n"), []string{"identity.allowed_networks.1"}},
		{"translation prefixes that are none", add("http: {translation_prefixes: [\"2001:db8:64::/96\", 10.0.0.0/8, \"2001:db8::/33\", \"2001:db8::1/64\", \"::ffff:0:0/96\", \"2001:db8::\", \"fe80::%eth0/64\"]}\n"),
			[]string{"http.translation_prefixes.1", "http.translation_prefixes.2", "http.translation_prefixes.3", "http.translation_prefixes.4", "http.translation_prefixes.5", "http.translation_prefixes.6"}},
		{"no allowed networks at all", add("identity: {allowed_networks: []}\n"), []string{"identity.allowed_networks"}},
		{"trusted proxies that are none", add("http: {trusted_proxy_hops: 1, trusted_proxies: [10.0.0.0/8, 10.1.2.3/8, proxy.internal]}\n"),
			[]string{"http.trusted_proxies.1", "http.trusted_proxies.2"}},
		{"trusted proxies with no hops", add("http: {trusted_proxies: [10.0.0.0/8]}\n"), []string{"http.trusted_proxies"}},
		{"refuse_browser_origins not a boolean", add("identity: {refuse_browser_origins: sometimes}\n"), []string{"identity.refuse_browser_origins"}},
		{"a lock timeout of zero", add("limits: {lock_timeout: 0s}\n"), []string{"limits.lock_timeout"}},
		{"a statement timeout under a millisecond", add("limits: {statement_timeout: 500us}\n"), []string{"limits.statement_timeout"}},
		{"a timeout past a day", add("limits: {lock_timeout: 25h, statement_timeout: 90000s}\n"), []string{"limits.lock_timeout", "limits.statement_timeout"}},
		{"a timeout that is no duration", add("limits: {lock_timeout: soon}\n"), []string{"limits.lock_timeout"}},
		{"an execute of two kinds", replace(`execute: {sql:`, `execute: {not_implemented: true, sql:`), []string{"actions.cancel_order.execute"}},
		{"an execute of no kind", replace(`execute: {sql: "UPDATE orders SET status = 'x' WHERE id = :order_id"}`, `execute: {}`), []string{"actions.cancel_order.execute"}},
		{"an execute of an unknown kind", replace(`execute: {sql: "UPDATE orders SET status = 'x' WHERE id = :order_id"}`, `execute: {smtp: {to: x}}`), []string{"actions.cancel_order.execute.smtp"}},
		{"a webhook over plain http off loopback", add("webhooks: [{url: \"http://hooks.example.com/in\", secret_env: HOOK_SECRET}]\n"), []string{"webhooks.0.url"}},
		{"a webhook URL with a user", add("webhooks: [{url: \"https://u:p@hooks.example.com/in\", secret_env: HOOK_SECRET}]\n"), []string{"webhooks.0.url"}},
		{"a webhook URL that is relative", add("webhooks: [{url: /in, secret_env: HOOK_SECRET}]\n"), []string{"webhooks.0.url"}},
		{"a webhook without its secret's variable", add("webhooks: [{url: \"https://hooks.example.com/in\"}]\n"), []string{"webhooks.0"}},
		{"a webhook secret's variable misnamed", add("webhooks: [{url: \"https://hooks.example.com/in\", secret_env: \"whsec_abc\"}]\n"), []string{"webhooks.0.secret_env"}},
		{"a webhook event unknown", add("webhooks: [{url: \"https://hooks.example.com/in\", secret_env: S, events: [approval.pending, approval.consumed]}]\n"), []string{"webhooks.0.events.1"}},
		{"two webhooks to one URL", add("webhooks: [{url: \"https://hooks.example.com/in\", secret_env: A}, {url: \"https://hooks.example.com/in\", secret_env: B}]\n"), []string{"webhooks.1.url"}},
		{"approver_roles empty", replace("    policy: {roles: [support]}", "    policy: {approval: required, approver_roles: []}"), []string{"actions.cancel_order.policy.approver_roles"}},
		{"approver_roles repeated", replace("    policy: {roles: [support]}", "    policy: {approval: required, approver_roles: [a, a]}"), []string{"actions.cancel_order.policy.approver_roles"}},
		{"auditor_role empty", add("approvals: {auditor_role: \"\"}\n"), []string{"approvals.auditor_role"}},
		{"an action with no policy", replace("    policy: {roles: [support]}\n", ""), []string{"actions.cancel_order.policy"}},
		{"an action whose policy names nobody", replace("    policy: {roles: [support]}", "    policy: {approval: none, approver_roles: [lead]}"), []string{"actions.cancel_order.policy", "actions.cancel_order.policy.approver_roles"}},
		{"approver_roles where no call waits", replace("    policy: {roles: [support]}", "    policy: {roles: [support], approver_roles: [lead]}"), []string{"actions.cancel_order.policy.approver_roles"}},
		{"an action whose policy is empty", replace("    policy: {roles: [support]}", "    policy: {}"), []string{"actions.cancel_order.policy"}},
		{"a destructive action without approval", replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    destructive: true"), []string{"actions.cancel_order.policy.approval"}},
		{"a destructive action with approval none", replace("    policy: {roles: [support]}", "    policy: {roles: [support], approval: none}\n    destructive: true"), []string{"actions.cancel_order.policy.approval"}},
		{"a waiver that waives nothing", replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    approval_waived: because"), []string{"actions.cancel_order.approval_waived"}},
		{"a waiver beside required approval", replace("    policy: {roles: [support]}", "    policy: {approval: required}\n    destructive: true\n    approval_waived: because"), []string{"actions.cancel_order.approval_waived"}},
		{"an empty waiver", replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    destructive: true\n    approval_waived: \"\""), []string{"actions.cancel_order.approval_waived"}},
		{"a blank waiver", replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    destructive: true\n    approval_waived: \"  \""), []string{"actions.cancel_order.approval_waived"}},
		{"a default its own schema refuses", replace("{order_id: {type: string}}", "{order_id: {type: string}, reason: {type: string, maxLength: 3, default: toolong}}"), []string{"actions.cancel_order.input.properties.reason.default"}},
		{"a nested default its own schema refuses", replace("{order_id: {type: string}}", "{order_id: {type: string}, meta: {type: object, properties: {n: {type: integer, default: x}}}}"), []string{"actions.cancel_order.input.properties.meta.properties.n.default"}},
		{"several problems at once", func(s string) string {
			return replace("    key: id", "    key: pk")(replace(`target.status == "paid"`, `target.status`)(s))
		}, []string{"actions.cancel_order.where", "objects.order.key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.edit(base)))
			var problems Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Parse = %v, want Problems", err)
			}
			var paths []string
			for _, p := range problems {
				paths = append(paths, p.Path)
				if p.Message == "" {
					t.Errorf("problem at %q has no message", p.Path)
				}
			}
			paths = slices.Compact(paths)
			if !slices.Equal(paths, tt.paths) {
				t.Fatalf("problem paths = %q, want %q\n%v", paths, tt.paths, err)
			}
		})
	}
}

func TestUnreadableConfigs(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"", "service: [", "- a\n- b\n", "1: x\n", "service: s\n\x00"} {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("Parse(%q) accepted", data)
		}
	}
	// An unquoted date is its text, as any other scalar the schema takes
	// as a string, not the timestamp YAML reads it as.
	if cfg, err := Parse([]byte(strings.Replace(base, "service: s\n", "service: 2024-01-01\n", 1))); err != nil || cfg.Service != "2024-01-01" {
		t.Errorf("a service named as a date: %v", err)
	}
	// A second document is refused, not dropped: its actions would not
	// be served, without a word.
	if _, err := Parse([]byte(base + "---\nactions: {x: {description: d}}\n")); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Errorf("a config of two documents: %v", err)
	}
	if _, err := Parse([]byte(base + "---\n")); err != nil {
		t.Errorf("a config closed by ---: %v", err)
	}
}

// TestConfigBoundBoundsMemory: a config within MaxConfigBytes is read in
// memory a server has. Reading costs some 150 bytes for each byte of a
// file of one-digit list items (the node tree, then its values, their
// JSON, the schema's check): at the old 64 MiB bound, some 12 GiB. Past
// MaxConfigNodes a file is refused, coded and at no path, before any copy
// is made; measured on a 2 MiB file and scaled to the bound. A config of
// MaxConfigNodes nodes and fewer still loads.
func TestConfigBoundBoundsMemory(t *testing.T) {
	const size = 2 << 20
	data := []byte(base + "x: [" + strings.Repeat("1,", size/2) + "1]\n")
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse(data)
	runtime.ReadMemStats(&after)
	var problems Problems
	if !errors.As(err, &problems) || len(problems) != 1 || !strings.Contains(problems[0].Message, "more than 500000 YAML nodes") {
		t.Fatalf("a file of a million list items: %v", err)
	}
	perByte := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(data))
	const budget = 1 << 30
	if atBound := perByte * MaxConfigBytes; atBound > budget {
		t.Errorf("Parse allocates %.0f bytes per byte of config: a file at MaxConfigBytes (%d MiB) costs some %.1f GiB, over %d GiB",
			perByte, MaxConfigBytes>>20, atBound/(1<<30), budget>>30)
	}
	// Just under the bound: refused for its unknown key, not its size.
	under := []byte(base + "x: [" + strings.Repeat("1,", MaxConfigNodes-200) + "1]\n")
	if _, err := Parse(under); err == nil || strings.Contains(err.Error(), "YAML nodes") {
		t.Errorf("a file under the node bound: %v", err)
	}
}

func add(s string) func(string) string { return func(b string) string { return b + s } }

func replace(old, new string) func(string) string {
	return func(b string) string {
		if !strings.Contains(b, old) {
			panic("fixture does not contain " + old)
		}
		return strings.Replace(b, old, new, 1)
	}
}

// FuzzParse holds the loader to never panicking, and to refusing only
// with Problems, each saying what is wrong, the same way each time: any
// bytes give a config or Problems. It is seeded with the shipped example
// and hostile YAML: an alias bomb, deep nesting, duplicate keys, huge
// numbers, invalid UTF-8 and NUL bytes.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "orders", "orangerail.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(base))
	f.Add([]byte("service: s\nobjects: {o: {table: t, key: k, tenant_column: c, fields: [k]}}\n"))
	f.Add([]byte("{"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Add([]byte("service: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"))
	f.Add([]byte("service: " + strings.Repeat("{a: ", 200) + "1" + strings.Repeat("}", 200) + "\n"))
	f.Add([]byte("service: s\nservice: t\n"))
	f.Add([]byte(base + "limits: {max_input_bytes: 1e400}\nhttp: {max_body_bytes: 99999999999999999999999999}\n"))
	f.Add([]byte("service: \"\xff\xfe\"\n"))
	f.Add([]byte("service: s\n\x00"))
	f.Add([]byte(base + "approvals: {ttl: 0s, retention: 0d, seal_inputs: true}\naudit: {seal_interval: 0ms, checkpoint: {key_env: K, interval: 1h0m}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no error")
			}
			return
		}
		var problems Problems
		if !errors.As(err, &problems) || len(problems) == 0 {
			t.Fatalf("an error that is not Problems: %v", err)
		}
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("a problem at %q says nothing", p.Path)
			}
		}
		if _, again := Parse(data); again == nil || again.Error() != err.Error() {
			t.Fatalf("parsed again: %v, first %v", again, err)
		}
	})
}

// TestLimitsTimeouts: the lock and statement timeouts default when unset
// and keep what the file says.
func TestLimitsTimeouts(t *testing.T) {
	t.Parallel()
	for extra, want := range map[string][2]time.Duration{
		"":                                 {LockTimeoutDefault, StatementTimeoutDefault},
		"limits: {max_input_bytes: 100}\n": {LockTimeoutDefault, StatementTimeoutDefault},
		"limits: {lock_timeout: 250ms}\n":  {250 * time.Millisecond, StatementTimeoutDefault},
		"limits: {lock_timeout: 1ms, statement_timeout: 1h30m}\n": {time.Millisecond, 90 * time.Minute},
		"limits: {statement_timeout: 24h}\n":                      {LockTimeoutDefault, TimeoutMax},
	} {
		cfg, err := Parse([]byte(base + extra))
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		if lock, statement := cfg.Limits.Timeouts(); lock != want[0] || statement != want[1] {
			t.Errorf("%q: timeouts %s, %s; want %s, %s", extra, lock, statement, want[0], want[1])
		}
	}
	if lock, statement := (Limits{}).Timeouts(); lock != LockTimeoutDefault || statement != StatementTimeoutDefault {
		t.Errorf("unset limits: %s, %s", lock, statement)
	}
}

// TestPolicyMissing: an action with no policy does not load, and its
// problem names X_POLICY_MISSING at the policy's field path; a destructive
// action's written waiver loads, and is kept for display.
func TestPolicyMissing(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(replace("    policy: {roles: [support]}\n", "")(base)))
	var problems Problems
	if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != "actions.cancel_order.policy" ||
		!strings.Contains(problems[0].Message, string(errcode.PolicyMissing)) {
		t.Fatalf("Parse = %v, want one %s at actions.cancel_order.policy", err, errcode.PolicyMissing)
	}
	cfg, err := Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    destructive: true\n    approval_waived: the status flip is undone by hand")(base)))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Actions["cancel_order"]; a.ApprovalWaived != "the status flip is undone by hand" || a.Policy.Approval != ApprovalNone {
		t.Fatalf("waived action = %+v", a)
	}
}

// TestIdempotencyKeyShadowed: an idempotent action whose input already
// declares idempotencyKey does not load, X_MCP_IDEMPOTENCY_KEY_SHADOWED at
// that property's field path; the same input without idempotent: true
// loads, the name being reserved only where the key is offered.
func TestIdempotencyKeyShadowed(t *testing.T) {
	t.Parallel()
	shadowing := replace("{order_id: {type: string}}}", "{order_id: {type: string}, idempotencyKey: {type: string}}}")(base)
	_, err := Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {roles: [support]}\n    idempotent: true")(shadowing)))
	var problems Problems
	if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != "actions.cancel_order.input.properties.idempotencyKey" ||
		!strings.Contains(problems[0].Message, string(errcode.MCPIdempotencyShadowed)) {
		t.Fatalf("Parse = %v, want one %s at actions.cancel_order.input.properties.idempotencyKey", err, errcode.MCPIdempotencyShadowed)
	}
	if _, err := Parse([]byte(shadowing)); err != nil {
		t.Fatalf("a non-idempotent action's idempotencyKey property: %v", err)
	}
}

// TestExecuteKinds: each execute member names its kind.
func TestExecuteKinds(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(base + `  refund_order:
    description: d
    input: {type: object}
    policy: {approval: required}
    execute: {not_implemented: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["cancel_order"].Execute.Kind(); got != ExecuteSQL {
		t.Errorf("cancel_order: kind %q", got)
	}
	if got := cfg.Actions["refund_order"].Execute.Kind(); got != ExecuteNotImplemented {
		t.Errorf("refund_order: kind %q", got)
	}
	if got := (Execute{}).Kind(); got != "" {
		t.Errorf("an empty execute: kind %q", got)
	}
}

// TestPublicURL: the URL clients reach the server at is the configured
// one, or, on a loopback listen only, http://<listen>.
// TestWebhooksConfig reads endpoints: loopback http allowed, events
// defaulting to every event.
func TestWebhooksConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(add("webhooks: [{url: \"http://127.0.0.1:9000/in\", secret_env: HOOK_SECRET}, {url: \"https://hooks.example.com/in\", secret_env: OTHER, events: [approval.approved], include_input: true}]\n")(base)))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Webhooks[0], cfg.Webhooks[1]
	if !a.Subscribes(WebhookApprovalExpired) || a.IncludeInput || b.Subscribes(WebhookApprovalPending) || !b.Subscribes(WebhookApprovalApproved) || !b.IncludeInput {
		t.Fatalf("webhooks read as %+v", cfg.Webhooks)
	}
}

func TestPublicURL(t *testing.T) {
	t.Parallel()
	for extra, want := range map[string]string{
		"":                                     "http://127.0.0.1:8080",
		"http: {listen: \"127.0.0.1:9000\"}\n": "http://127.0.0.1:9000",
		"http: {listen: \"localhost:9000\"}\n": "http://localhost:9000",
		"http: {listen: \"[::1]:9000\"}\n":     "http://[::1]:9000",
		"http: {listen: \"0.0.0.0:8080\", public_url: \"https://mcp.example.com\"}\n":   "https://mcp.example.com",
		"http: {listen: \":8080\", public_url: \"https://mcp.example.com:8443/\"}\n":    "https://mcp.example.com:8443/",
		"http: {listen: \"127.0.0.1:9000\", public_url: \"https://mcp.example.com\"}\n": "https://mcp.example.com",
	} {
		cfg, err := Parse([]byte(base + extra))
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		if cfg.HTTP.PublicURL != want {
			t.Errorf("%q: public URL %q, want %q", extra, cfg.HTTP.PublicURL, want)
		}
	}
}

// TestAllowedOriginsAsBrowsersSendThem: the front compares an Origin
// header with http.allowed_origins byte for byte, so an entry is held to
// the form a browser sends: one spelled otherwise loaded, matched no
// request, and each refusal told the operator to add the origin they had
// added.
func TestAllowedOriginsAsBrowsersSendThem(t *testing.T) {
	t.Parallel()
	if _, err := Parse([]byte(base + "http: {allowed_origins: [\"https://console.example.com\", \"http://localhost:3000\", \"https://[2001:db8::1]:8443\", \"https://xn--caf-dma.example\"]}\n")); err != nil {
		t.Fatalf("origins as browsers send them: %v", err)
	}
	for origin, fix := range map[string]string{
		"https://Console.example.com":     "https://console.example.com",
		"HTTPS://console.example.com":     "", // the schema's pattern
		"https://console.example.com:443": "https://console.example.com",
		"http://console.example.com:80":   "http://console.example.com",
		"https://[2001:db8:0:0::1]":       "https://[2001:db8::1]",
		"https://café.example":            "xn--",
		"https://console.example.com/":    "", // the schema's pattern
		"https://u@console.example.com":   "scheme://host[:port]",
	} {
		_, err := Parse([]byte(base + "http: {allowed_origins: [\"https://ok.example.com\", \"" + origin + "\"]}\n"))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != "http.allowed_origins.1" || !strings.Contains(problems[0].Message, fix) {
			t.Errorf("allowed origin %q: Parse = %v, want one problem at http.allowed_origins.1 saying %q", origin, err, fix)
		}
	}
}

// TestIdentityAdmission: identity.refuse_browser_origins and
// identity.allowed_networks load as written.
func TestIdentityAdmission(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(base + "identity: {refuse_browser_origins: true, allowed_networks: [10.0.0.0/8, \"2001:db8::/32\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Identity.RefuseBrowserOrigins || !slices.Equal(c.Identity.AllowedNetworks, []string{"10.0.0.0/8", "2001:db8::/32"}) {
		t.Fatalf("identity = %+v", c.Identity)
	}
}

// TestScopesMap: a scopes map grants each tool once, and, given at all,
// every tool; each breach is a boot problem with its stable code at its
// field path. A tool's scope is the map's, or, without a map, its
// action's policy.scope.
func TestScopesMap(t *testing.T) {
	t.Parallel()
	const describes = "describe_object, describe_action, list_policies, errors_explain"
	const covering = "scopes:\n  orders:read: [check_approval, " + describes + ", order_get, order_list]\n  orders:write: [cancel_order]\n"
	cfg, err := Parse([]byte(add(covering)(base)))
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{"order_get": "orders:read", "check_approval": "orders:read", "cancel_order": "orders:write"} {
		if got := cfg.ToolScope(tool); got != want {
			t.Errorf("ToolScope(%s) = %q, want %q", tool, got, want)
		}
	}
	if got := cfg.ScopeNames(); !slices.Equal(got, []string{"orders:read", "orders:write"}) {
		t.Errorf("ScopeNames = %v", got)
	}
	// Without a map, an action's policy.scope is its tool's, and nothing
	// else needs a scope.
	cfg, err = Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {roles: [support], scope: \"orders:write\"}")(base)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ToolScope("cancel_order") != "orders:write" || cfg.ToolScope("order_get") != "" || !slices.Equal(cfg.ScopeNames(), []string{"orders:write"}) {
		t.Fatalf("without a map: %q %q %v", cfg.ToolScope("cancel_order"), cfg.ToolScope("order_get"), cfg.ScopeNames())
	}
	// A map that names the action's scope may stand for its policy: deny
	// by default is met by the scope.
	if _, err := Parse([]byte(add(covering)(replace("    policy: {roles: [support]}", "    policy: {approval: none}")(base)))); err != nil {
		t.Fatalf("an action the map scopes, with approval: none: %v", err)
	}

	tests := []struct {
		name, config, path string
		code               errcode.Code
	}{
		{"unknown tool", add(covering + "  orders:admin: [order_delete]\n")(base), "scopes.orders:admin.0", errcode.MCPScopeUnknown},
		{"a tool under two scopes", add(covering + "  orders:all: [order_get]\n")(base), "scopes.orders:read.5", errcode.MCPScopeConflict},
		{"a tool under another scope than its policy's",
			add("scopes:\n  orders:read: [check_approval, " + describes + ", order_get, order_list]\n  orders:cancel: [cancel_order]\n")(
				replace("    policy: {roles: [support]}", "    policy: {roles: [support], scope: \"orders:write\"}")(base)),
			"scopes.orders:cancel.0", errcode.MCPScopeConflict},
		{"a tool under no scope", add("scopes:\n  orders:read: [check_approval, " + describes + ", order_get]\n  orders:write: [cancel_order]\n")(base), "scopes", errcode.MCPScopeUncovered},
		// The describe tools are tools like any other: a map grants them too.
		{"a describe tool under no scope", add("scopes:\n  orders:read: [check_approval, describe_action, list_policies, errors_explain, order_get, order_list]\n  orders:write: [cancel_order]\n")(base),
			"scopes", errcode.MCPScopeUncovered},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.config))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != tt.path || !strings.Contains(problems[0].Message, string(tt.code)) {
			t.Errorf("%s: Parse = %v, want one %s at %s", tt.name, err, tt.code, tt.path)
		}
	}
	// Not a scope token (RFC 6749 section 3.3): refused by the schema.
	if _, err := Parse([]byte(add("scopes:\n  \"orders write\": [check_approval, order_get, order_list, cancel_order]\n")(base))); err == nil {
		t.Fatal("a scope name with a space loaded")
	}
	// Nor is an action's own scope: no token's scope claim could carry
	// it, and the action loaded, never to be called.
	for _, scope := range []string{`"orders write"`, `"orders\"write"`, `"ordérs"`} {
		_, err := Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {roles: [support], scope: "+scope+"}")(base)))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != "actions.cancel_order.policy.scope" {
			t.Errorf("policy.scope %s: Parse = %v, want one problem at actions.cancel_order.policy.scope", scope, err)
		}
	}
}

// TestAudienceCompiles: an audience predicate sees caller and nothing
// else, and must be boolean; each problem is at its field path.
func TestAudienceCompiles(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(replace("    policy: {roles: [support]}", "    policy: {audience: 'caller.tenant == \"acme\"'}")(base)))
	if err != nil {
		t.Fatalf("an action named by its audience alone: %v", err)
	}
	if cfg.Actions["cancel_order"].AudienceProgram() == nil {
		t.Fatal("the audience was not compiled")
	}
	tests := map[string]string{
		"actions.cancel_order.policy.audience": replace("    policy: {roles: [support]}", "    policy: {roles: [support], audience: 'input.order_id == \"x\"'}")(base),
		"objects.order.audience":               replace("    fields: [id, status]\n", "    fields: [id, status]\n    audience: caller.tenant\n")(base),
		"sql_query.audience":                   add("sql_query: {enabled: true, roles: [auditor], audience: 'caller.roles.size() >'}\n")(base),
	}
	for path, config := range tests {
		_, err := Parse([]byte(config))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != path {
			t.Errorf("Parse = %v, want one problem at %s", err, path)
		}
	}
}

// TestIssuerFromTheEnvironment: identity.oidc.issuer_env reads the issuer
// URL from the environment at load; exactly one of issuer and issuer_env
// is set, the variable must be set, and what it holds is checked as an
// issuer is.
func TestIssuerFromTheEnvironment(t *testing.T) {
	oidc := func(fields string) string {
		return base + "identity: {oidc: {" + fields + "audience: orangerail, tenant_claim: org_id}}\n"
	}
	t.Setenv("TEST_ORANGERAIL_ISSUER", "https://id.example.com")
	c, err := Parse([]byte(oidc("issuer_env: TEST_ORANGERAIL_ISSUER, ")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity.OIDC.Issuer != "https://id.example.com" {
		t.Fatalf("issuer = %q, want the environment's", c.Identity.OIDC.Issuer)
	}
	t.Setenv("TEST_ORANGERAIL_BAD_ISSUER", "http://id.example.com")
	for _, tt := range []struct{ name, fields, path, says string }{
		{"unset", "issuer_env: TEST_ORANGERAIL_NO_SUCH_VARIABLE, ", "identity.oidc.issuer_env", "not set"},
		{"both", "issuer: https://id.example.com, issuer_env: TEST_ORANGERAIL_ISSUER, ", "identity.oidc.issuer_env", "one way"},
		{"neither", "", "identity.oidc", "issuer_env"},
		{"not an issuer", "issuer_env: TEST_ORANGERAIL_BAD_ISSUER, ", "identity.oidc.issuer_env", "$TEST_ORANGERAIL_BAD_ISSUER"},
		{"not a variable name", "issuer_env: 'not a name', ", "identity.oidc.issuer_env", ""},
	} {
		_, err := Parse([]byte(oidc(tt.fields)))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != tt.path || !strings.Contains(problems[0].Message, tt.says) {
			t.Errorf("%s: %v, want one problem at %s saying %q", tt.name, err, tt.path, tt.says)
		}
	}
}

// TestAuditCheckpoint: audit.checkpoint defaults its interval and origin,
// and refuses at its field paths a key named twice or not at all, an
// interval out of range and an origin with a space.
func TestAuditCheckpoint(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(base + "audit: {checkpoint: {key_env: ORANGERAIL_CHECKPOINT_KEY}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cp := cfg.Audit.Checkpoint; cp == nil || time.Duration(cp.Interval) != CheckpointIntervalDefault || cp.Origin != "orangerail/"+cfg.Service {
		t.Fatalf("defaults: %+v", cp)
	}
	if cfg, err := Parse([]byte(base)); err != nil || cfg.Audit.Checkpoint != nil {
		t.Fatalf("no section: %+v, %v", cfg.Audit.Checkpoint, err)
	}
	for extra, want := range map[string]string{
		"audit: {checkpoint: {key_env: K, key_file: /k}}\n":              "audit.checkpoint",
		"audit: {checkpoint: {interval: 1m}}\n":                          "audit.checkpoint",
		"audit: {checkpoint: {key_env: K, interval: 10ms}}\n":            "audit.checkpoint.interval",
		"audit: {checkpoint: {key_env: K, origin: \"two words\"}}\n":     "audit.checkpoint.origin",
		"audit: {checkpoint: {key_env: K, key_name: orangerail.test}}\n": "audit.checkpoint.key_name",
	} {
		_, err := Parse([]byte(base + extra))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != want {
			t.Errorf("%q: %v, want one problem at %s", extra, err, want)
		}
	}
}

// TestZeroDurationsAmongOtherProblems: a zero duration is refused at its
// path beside every other problem of the file, wherever it is written (an
// action's call, a map's entry, a pointer's); it hid them, the decoding
// stopping at the first.
func TestZeroDurationsAmongOtherProblems(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(replace("    execute: {sql: \"UPDATE orders SET status = 'x' WHERE id = :order_id\"}\n", "    execute: {http: {upstream: c, method: POST, path: /x, timeout: 0s}}\n")(base) +
		"approvals: {ttl: 0s}\naudit: {seal_interval: 0ms}\nlimits: {lock_timeout: 25h, idempotency_ttl: 0s}\nidentity: {allowed_networks: [10.1.2.3/8]}\n" +
		"upstreams: {c: {base_url: \"https://c.example.com\"}}\n"))
	var problems Problems
	if !errors.As(err, &problems) {
		t.Fatalf("Parse: %v", err)
	}
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	want := []string{"actions.cancel_order.execute.http.timeout", "approvals.ttl", "audit.seal_interval", "identity.allowed_networks.0",
		"limits.idempotency_ttl", "limits.lock_timeout"}
	if !slices.Equal(paths, want) {
		t.Fatalf("problems at %q, want %q\n%v", paths, want, err)
	}
}

// TestBodyBoundMakesRoomForTheInput: left out, http.max_body_bytes makes
// room for the largest input limits.max_input_bytes takes, and its
// envelope: an input the limit admits is not refused by the body's bound
// first, unrecorded (a 1 MiB body refused a 2 MB input the limit took).
// Written, it is kept: a body bound below the input's is the operator's
// tighter bound.
func TestBodyBoundMakesRoomForTheInput(t *testing.T) {
	t.Parallel()
	for extra, want := range map[string]int64{
		"":                                     MaxBodyBytesDefault,
		"limits: {max_input_bytes: 2000000}\n": 2000000 + BodyEnvelopeBytes,
		"limits: {max_input_bytes: 2000000}\nhttp: {max_body_bytes: 3000000}\n": 3000000,
		"http: {max_body_bytes: 4096}\n":                                        4096,
	} {
		cfg, err := Parse([]byte(base + extra))
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		if got := cfg.HTTP.MaxBodyBytes; got != want {
			t.Errorf("%q: max_body_bytes %d, want %d", extra, got, want)
		}
	}
}

// TestSealedInputsConfig reads approvals.seal_inputs and a retention in
// days or as a Go duration.
func TestSealedInputsConfig(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "36h": 36 * time.Hour} {
		cfg, err := Parse([]byte(add("approvals: {seal_inputs: true, retention: " + text + "}\n")(base)))
		if err != nil {
			t.Fatal(err)
		}
		if r := cfg.Approvals.Retention; !cfg.Approvals.SealInputs || r == nil || time.Duration(*r) != want {
			t.Fatalf("retention %s read as %v (sealed %v)", text, r, cfg.Approvals.SealInputs)
		}
	}
	// Zero is at once, not absent: "0d" kept every input for ever.
	for _, text := range []string{"0d", "0s"} {
		cfg, err := Parse([]byte(add("approvals: {seal_inputs: true, retention: " + text + "}\n")(base)))
		if err != nil || cfg.Approvals.Retention == nil || *cfg.Approvals.Retention != 0 {
			t.Fatalf("retention %s read as %v: %v", text, cfg.Approvals.Retention, err)
		}
	}
	cfg, err := Parse([]byte(base))
	if err != nil || cfg.Approvals.SealInputs || cfg.Approvals.Retention != nil {
		t.Fatalf("by default inputs are not sealed nor shredded: %+v %v", cfg.Approvals, err)
	}
}

// TestInvalidInputSchemaSaysWhere: an input schema the metaschema refuses
// is reported with where in it and why, not only that it is invalid.
func TestInvalidInputSchemaSaysWhere(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(replace("{type: object, properties: {order_id: {type: string}}}", "{type: object, properties: {order_id: {type: strin}}}")(base)))
	ps, _ := errors.AsType[Problems](err)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "at properties.order_id.type: ") || !strings.Contains(ps[0].Message, "must be one of") {
		t.Fatalf("%v", err)
	}
}

// TestWarnings: a statement that never reads the caller's tenant, and
// proxies trusted by their hops alone, are warned of at their paths; a
// statement that reads it, and proxies listed, are not.
func TestWarnings(t *testing.T) {
	t.Parallel()
	paths := func(edits ...func(string) string) []string {
		t.Helper()
		s := base
		for _, e := range edits {
			s = e(s)
		}
		cfg, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range cfg.Warnings() {
			got = append(got, w.Path)
		}
		return got
	}
	scoped := replace("WHERE id = :order_id", "WHERE id = :order_id AND org_id = current_setting('orangerail.tenant_id')")
	if got := paths(); !slices.Equal(got, []string{"actions.cancel_order.execute.sql"}) {
		t.Errorf("a statement of every tenant: %v", got)
	}
	if got := paths(scoped); len(got) != 0 {
		t.Errorf("a statement kept to its tenant: %v", got)
	}
	if got := paths(scoped, add("http: {trusted_proxy_hops: 1}\n")); !slices.Equal(got, []string{"http.trusted_proxy_hops"}) {
		t.Errorf("proxies trusted by their hops alone: %v", got)
	}
	if got := paths(scoped, add("http: {trusted_proxy_hops: 1, trusted_proxies: [10.0.0.0/8]}\n")); len(got) != 0 {
		t.Errorf("proxies listed: %v", got)
	}
	if got := paths(scoped, add("webhooks: [{url: 'https://h.example.com/h', secret_env: HOOK, include_input: true}]\n")); !slices.Equal(got, []string{"webhooks.0.include_input"}) {
		t.Errorf("inputs sent of every tenant: %v", got)
	}
	if got := paths(scoped, add("webhooks: [{url: 'https://h.example.com/h', secret_env: HOOK, include_input: true, tenants: [acme]}]\n")); len(got) != 0 {
		t.Errorf("inputs sent of the tenants listed: %v", got)
	}
}

// TestWebhookRouterIsWebhookRoutesFor: the router computes each tenant's
// routes once, and answers for every tenant — one an endpoint names, one
// none names — what WebhookRoutesFor answers.
func TestWebhookRouterIsWebhookRoutesFor(t *testing.T) {
	t.Parallel()
	hooks := []Webhook{
		{URL: "https://all.example/hook"},
		{URL: "https://acme.example/hook", Tenants: []string{"acme"}},
		{URL: "https://both.example/hook", Tenants: []string{"acme", "globex"}},
	}
	route := WebhookRouter(hooks)
	seen := map[string]bool{}
	for _, tenant := range []string{"acme", "globex", "initech", "a"} {
		got, want := route(tenant), WebhookRoutesFor(hooks, tenant)
		if got != want {
			t.Errorf("%s: routed %q, want %q", tenant, got, want)
		}
		seen[got] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct routes for acme, globex and the others, want 3", len(seen))
	}
	if got := WebhookRouter([]Webhook{{URL: "https://acme.example/hook", Tenants: []string{"acme"}}})("globex"); got != "{}" {
		t.Errorf("a tenant no endpoint serves is routed %q, want {}", got)
	}
}
