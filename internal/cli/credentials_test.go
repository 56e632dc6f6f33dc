package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestConfigCheckCredentials: config check lists each scheme's credential
// with the calls that present it, so that a scheme no call presents, or
// one only some calls send, reads as what it is.
func TestConfigCheckCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(file, []byte(`service: shop
upstreams:
  carrier:
    base_url: https://carrier.example.com
    auth:
      key: {type: api_key, in: header, name: X-Key}
      bot: {type: bearer}
      spare: {type: basic}
actions:
  label:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: POST, path: /labels, auth: [key, bot]}}
  ping:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: GET, path: /ping, auth: []}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARRIER_KEY_CREDENTIAL", "k")
	t.Setenv("CARRIER_SPARE_CREDENTIAL", "u:p")
	code, out, stderr := cli(t, "config", "check", file, "--database-url", "")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"upstreams.carrier.auth.key: api_key credential from CARRIER_KEY_CREDENTIAL (or CARRIER_KEY_CREDENTIAL_FILE): set, presented by actions.label.execute.http\n",
		"upstreams.carrier.auth.spare: basic credential from CARRIER_SPARE_CREDENTIAL (or CARRIER_SPARE_CREDENTIAL_FILE): set, presented by no call\n",
		"upstreams.carrier.auth.bot: bearer credential from CARRIER_BOT_CREDENTIAL (or CARRIER_BOT_CREDENTIAL_FILE): unset, so the scheme is omitted from every request\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = cli(t, "config", "check", file, "--database-url", "", "--json")
	var report struct {
		Credentials []struct {
			Path        string
			PresentedBy []string `json:"presented_by"`
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitOK {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	got := map[string][]string{}
	for _, c := range report.Credentials {
		got[c.Path] = c.PresentedBy
	}
	want := map[string][]string{"upstreams.carrier.auth.bot": {"actions.label.execute.http"},
		"upstreams.carrier.auth.key": {"actions.label.execute.http"}, "upstreams.carrier.auth.spare": {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("--json credentials presented by %v, want %v", got, want)
	}
}

// TestConfigCheckUnserved: config check names each action the
// environment withdraws, and where it is served.
func TestConfigCheckUnserved(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(file, []byte(`service: shop
environment: production
upstreams:
  carrier:
    base_urls: {sandbox: "https://sandbox.carrier.example.com", production: "https://carrier.example.com"}
actions:
  label:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    environments: [production, sandbox]
    execute: {http: {upstream: carrier, method: POST, path: /labels}}
  purge:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    environments: [sandbox]
    execute: {http: {upstream: carrier, method: DELETE, path: /labels}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "config", "check", file, "--database-url", "")
	if code != exitOK || !strings.Contains(out, "actions.purge: not served in environment \"production\"; served in [sandbox]\n") || strings.Contains(out, "actions.label:") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
}

// pingAction is a config's one action, a public upstream's GET, for the
// config check tests whose subject is elsewhere.
const pingAction = `upstreams:
  carrier: {base_url: https://carrier.example.com}
actions:
  ping:
    description: d
    input: {type: object, properties: {}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: GET, path: /ping}}
`

// TestConfigCheckWarnsOfAReadableKey: config check says what serve warns
// of as it opens — a checkpoint key_file its group or others may read —
// as a warning, not a problem (the exit stays 0), in text and in --json;
// a key only its owner reads is not mentioned.
func TestConfigCheckWarnsOfAReadableKey(t *testing.T) {
	dir := t.TempDir()
	skey, _, err := checkpoint.GenerateKey("audit.example.com")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(key, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "orangerail.yaml")
	if err := os.WriteFile(file, []byte(`service: shop
audit: {checkpoint: {key_file: `+key+`}}
`+pingAction), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: audit.checkpoint.key_file: mode -rw-r--r-- may be read by other users of this host"
	for _, tc := range []struct {
		mode   os.FileMode
		warned bool
	}{{0o600, false}, {0o644, true}} {
		if err := os.Chmod(key, tc.mode); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := cli(t, "config", "check", file, "--database-url", "")
		if code != exitOK || strings.Contains(out, warning) != tc.warned || strings.Contains(out, "warning") != tc.warned || strings.Contains(out, skey) {
			t.Errorf("mode %v: exit %d, warned %v, want %v\n%s%s", tc.mode, code, strings.Contains(out, warning), tc.warned, out, stderr)
		}
		code, out, _ = cli(t, "config", "check", file, "--database-url", "", "--json")
		var report struct {
			Warnings []struct{ Path, Message string }
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitOK || (len(report.Warnings) == 1) != tc.warned ||
			(tc.warned && report.Warnings[0].Path != "audit.checkpoint.key_file") {
			t.Errorf("mode %v --json: exit %d %v\n%s", tc.mode, code, err, out)
		}
	}
}

// TestConfigCheckReadsStandardInput: config check - reads the config from
// standard input (a file named "-" was opened and not found), bounded as
// a file is, and names it standard input.
func TestConfigCheckReadsStandardInput(t *testing.T) {
	config := []byte("service: shop\n" + pingAction)
	code, out, stderr := runWithStdin(t, config, "config", "check", "-", "--database-url", "")
	if code != exitOK || !strings.HasPrefix(out, "standard input: 0 problem(s)") {
		t.Fatalf("a sound config on stdin: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runWithStdin(t, append(config, "servce: typo\n"...), "config", "check", "-", "--database-url", "")
	if code != exitFindings || !strings.Contains(out, "servce") || !strings.Contains(out, "standard input: 1 problem(s)") {
		t.Fatalf("a config with a problem on stdin: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = runWithStdin(t, bytes.Repeat([]byte("#"), ontology.MaxConfigBytes+1), "config", "check", "-", "--database-url", "")
	if code != exitError || !strings.Contains(stderr, "standard input") || !strings.Contains(stderr, "longer than") {
		t.Fatalf("a config past the bound on stdin: exit %d %s", code, stderr)
	}
}

// TestConfigCheckRefusesUnsetVariables: a variable serve opens with —
// the datasource's URL, sql_query's, the desk's client secret — that is
// not set is a problem, as serve refuses to open without it; config check
// passed such a config, and checked the catalog against no URL rather
// than the one given.
func TestConfigCheckRefusesUnsetVariables(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(file, []byte(`service: shop
identity: {oidc: {issuer: "https://id.example.com", audience: a, tenant_claim: org, human: {claim: kind, values: [human]}}}
datasource: {url_env: ORANGERAIL_TEST_UNSET_DATASOURCE}
sql_query: {enabled: true, roles: [analyst], url_env: ORANGERAIL_TEST_UNSET_QUERY}
desk: {client_id: desk, client_secret_env: ORANGERAIL_TEST_UNSET_DESK}
`+pingAction), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "config", "check", file, "--database-url", "")
	for _, want := range []string{
		"datasource.url_env: names ORANGERAIL_TEST_UNSET_DATASOURCE, which is not set",
		"sql_query.url_env: names ORANGERAIL_TEST_UNSET_QUERY, which is not set",
		"desk.client_secret_env: names ORANGERAIL_TEST_UNSET_DESK, which is not set",
		": 3 problem(s)",
	} {
		if code != exitFindings || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s%s", code, want, out, stderr)
		}
	}
	url := testdb.New(t)
	if code, out, stderr := cli(t, "config", "check", file, "--database-url", url); code != exitFindings || !strings.Contains(out, "catalog checked against") {
		t.Errorf("the URL given is not the one checked: exit %d\n%s%s", code, out, stderr)
	}
}

// TestConfigCheckWarnsOfAStatementOfEveryTenant: an action's statement
// that never reads the caller's tenant would change every tenant's rows
// of a table they share: config check warns of it at the statement's
// path, in text and --json, and the exit stays 0; the example's
// statements, each kept to its tenant, are warned of not at all.
func TestConfigCheckWarnsOfAStatementOfEveryTenant(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(dir, "example.yaml")
	if err := os.WriteFile(example, orders.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "config", "check", example, "--database-url", ""); code != exitOK || strings.Contains(out, "warning") {
		t.Fatalf("the example: exit %d\n%s%s", code, out, stderr)
	}
	unscoped := filepath.Join(dir, "unscoped.yaml")
	if err := os.WriteFile(unscoped, ontologytest.Apply(t, orders.Config,
		ontologytest.Set("actions.cancel_order.execute.sql", "UPDATE orders SET status = 'cancelled' WHERE id = :order_id")), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: actions.cancel_order.execute.sql: the statement never reads the caller's tenant"
	code, out, stderr := cli(t, "config", "check", unscoped, "--database-url", "")
	if code != exitOK || strings.Count(out, "warning") != 1 || !strings.Contains(out, warning) {
		t.Fatalf("a statement of every tenant: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = cli(t, "config", "check", unscoped, "--database-url", "", "--json")
	var report struct {
		Warnings []struct{ Path, Message string }
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitOK || len(report.Warnings) != 1 ||
		report.Warnings[0].Path != "actions.cancel_order.execute.sql" {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
}
