package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// cli runs the orangerail command line in-process.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// oneLine checks that a failure is one line naming the code and a fix.
func oneLine(t *testing.T, stderr, code string) {
	t.Helper()
	if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 {
		t.Fatalf("stderr is not one line:\n%s", stderr)
	}
	if !strings.Contains(stderr, code) || !strings.Contains(stderr, "Fix: ") {
		t.Fatalf("stderr %q does not name %s and a fix", stderr, code)
	}
	if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
		t.Fatalf("stderr has a stack trace: %s", stderr)
	}
}

func TestBadDatabaseInput(t *testing.T) {
	t.Parallel()
	empty := testdb.NewEmpty(t)
	tests := []struct {
		name string
		url  string
		code string
	}{
		{"malformed URL", "postgres://orangerail:s3cret@[::1", "X_DATABASE_URL_INVALID"},
		{"no URL", "", "X_DATABASE_URL_INVALID"},
		{"unreachable", "postgres://postgres:s3cret@127.0.0.1:1/x?sslmode=disable&connect_timeout=5", "X_DATABASE_UNREACHABLE"},
		{"unmigrated", empty, "X_DATABASE_UNMIGRATED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := cli(t, "audit", "verify", "--database-url", tt.url)
			if code != exitError {
				t.Fatalf("exit %d, want %d", code, exitError)
			}
			oneLine(t, stderr, tt.code)
			if strings.Contains(stderr, "s3cret") {
				t.Fatalf("stderr leaks the password: %s", stderr)
			}
		})
	}
}

// TestMigrateSaysWhatAnOwnerCouldNotDo: migrations run by a schema owner
// that is no superuser cannot take side-effect built-ins from PUBLIC (a
// REVOKE of a function it does not own only warns); migrate up and status
// list each, with the statement a superuser runs, and once a superuser
// ran them, list none.
func TestMigrateSaysWhatAnOwnerCouldNotDo(t *testing.T) {
	t.Parallel()
	ownerURL, admin := testdb.NewOwned(t)
	for _, sub := range []string{"up", "status"} {
		code, _, stderr := cli(t, "migrate", sub, "--database-url", ownerURL)
		if code != exitOK || !strings.Contains(stderr, "need a superuser") ||
			!strings.Contains(stderr, "PUBLIC may execute pg_catalog.pg_sleep(double precision): REVOKE EXECUTE ON FUNCTION pg_catalog.pg_sleep(double precision) FROM PUBLIC;") {
			t.Fatalf("migrate %s as an owner that is no superuser: exit %d\n%s", sub, code, stderr)
		}
	}
	var fixes []string
	rows, err := admin.Query(context.Background(), "SELECT fix FROM orangerail.hardening_gaps()")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var fix string
		if err := rows.Scan(&fix); err != nil {
			t.Fatal(err)
		}
		fixes = append(fixes, fix)
	}
	if rows.Err() != nil || len(fixes) == 0 {
		t.Fatalf("no gaps listed: %v", rows.Err())
	}
	if _, err := admin.Exec(context.Background(), strings.Join(fixes, "\n")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, "migrate", "status", "--database-url", ownerURL); code != exitOK || stderr != "" {
		t.Fatalf("status once a superuser ran the fixes: exit %d\n%s", code, stderr)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	url := testdb.NewEmpty(t)

	code, out, stderr := cli(t, "migrate", "up", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "applied") || stderr != "" {
		t.Fatalf("first up (a superuser's: nothing missing): exit %d, %q %q", code, out, stderr)
	}
	code, out, _ = cli(t, "migrate", "up", "--database-url", url)
	if code != exitOK || strings.Contains(out, "applied") {
		t.Fatalf("second up is not a no-op: exit %d, %q", code, out)
	}
	code, out, _ = cli(t, "migrate", "status", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "00001_foundation.sql") || !strings.Contains(out, "applied") {
		t.Fatalf("status: exit %d, %q", code, out)
	}

	// Down and up again round-trips.
	if code, out, stderr := cli(t, "migrate", "down", "--database-url", url); code != exitOK {
		t.Fatalf("down: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := cli(t, "audit", "verify", "--database-url", url); code != exitError || !strings.Contains(stderr, "X_DATABASE_UNMIGRATED") {
		t.Fatalf("verify after down: exit %d %q", code, stderr)
	}
	if code, _, stderr := cli(t, "migrate", "up", "--database-url", url); code != exitOK {
		t.Fatalf("up after down: exit %d %q", code, stderr)
	}

	// A database migrated by a newer binary is refused, by migrate and by
	// the commands that use it.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "INSERT INTO "+database.VersionTable+" (version_id, is_applied) VALUES (99, true)"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down"}, {"migrate", "status"}, {"audit", "verify"}} {
		code, _, stderr := cli(t, append(args, "--database-url", url)...)
		if code != exitError {
			t.Fatalf("%v on a newer database: exit %d", args, code)
		}
		oneLine(t, stderr, "X_DATABASE_TOO_NEW")
	}
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	pool := testdb.RuntimePool(t, url)
	for _, tenant := range []string{"acme", "globex"} {
		for i := range 3 {
			err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
				err := engine.AppendAudit(ctx, tx, &engine.Record{
					Tenant: tenant, At: time.Now(), CorrelationID: "c" + string(rune('0'+i)), Phase: engine.PhaseStaged,
					Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent},
				})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// Unsealed, the records are counted, and a finding only past the bound.
	code, out, stderr := cli(t, "audit", "verify", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "tenant acme: OK — 0 records, head at seq 0, 3 awaiting their seal") {
		t.Fatalf("unsealed: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--lag-bound", "1ns")
	if code != exitFindings || !strings.Contains(out, "3 record(s) unsealed past the bound") {
		t.Fatalf("unsealed past the bound: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = cli(t, "audit", "verify", "--database-url", url, "--lag-bound", "0s")
	if code != exitError {
		t.Fatalf("a bound of zero: exit %d", code)
	}
	oneLine(t, stderr, "X_AUDIT_LAG_BOUND_INVALID")
	if _, err := engine.Seal(ctx, pool); err != nil {
		t.Fatal(err)
	}

	code, out, stderr = cli(t, "audit", "verify", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "tenant acme: OK — 3 records, head at seq 3\n") || !strings.Contains(out, "tenant globex: OK") {
		t.Fatalf("clean: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = cli(t, "audit", "verify", "--database-url", url, "--tenant", "nobody")
	if code != exitError {
		t.Fatalf("unknown tenant: exit %d", code)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")
	code, _, stderr = cli(t, "audit", "verify", "--database-url", url, "--tenant", "bad tenant")
	if code != exitError {
		t.Fatalf("malformed tenant: exit %d", code)
	}
	oneLine(t, stderr, "X_TENANT_INVALID")

	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, `ALTER TABLE orangerail.audit DISABLE TRIGGER USER;
		UPDATE orangerail.audit SET entry = entry || '\x20'::bytea WHERE tenant_id = 'acme' AND seq = 2;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "audit", "verify", "--database-url", url)
	if code != exitFindings || !strings.Contains(out, "tenant acme: FAILED") || !strings.Contains(out, "chain broken at seq 2") ||
		!strings.Contains(out, "tenant globex: OK") {
		t.Fatalf("tampered: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--json")
	var reports []engine.Report
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if code != exitFindings || len(reports) != 1 || reports[0].Break == nil || reports[0].Break.Seq != 2 ||
		reports[0].Break.Problem != engine.ProblemHash {
		t.Fatalf("--json: exit %d, %s", code, out)
	}
	if !strings.Contains(out, `"expected_hash": "`) || strings.Contains(out, "==") {
		t.Fatalf("hashes are not hex in %s", out)
	}
}

func TestErrorsExplain(t *testing.T) {
	t.Parallel()
	code, out, _ := cli(t, "errors", "explain", "x_database_unreachable")
	if code != exitOK || !strings.Contains(out, "X_DATABASE_UNREACHABLE") || !strings.Contains(out, "fix:") {
		t.Fatalf("explain: exit %d %q", code, out)
	}
	// One table, two audiences: the CLI prints the operator's fix, never
	// the one the errors_explain tool tells an agent.
	entry, _ := errcode.Explain("X_FORBIDDEN")
	code, out, _ = cli(t, "errors", "explain", "X_FORBIDDEN")
	if code != exitOK || !strings.Contains(out, "fix:   "+entry.Fix+"\n") || entry.AgentFix == "" || strings.Contains(out, entry.AgentFix) {
		t.Fatalf("explain X_FORBIDDEN: exit %d %q", code, out)
	}
	code, _, stderr := cli(t, "errors", "explain", "X_NOPE")
	if code != exitError || !strings.Contains(stderr, "X_NOPE") {
		t.Fatalf("unknown code: exit %d %q", code, stderr)
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	for _, c := range root.Commands() {
		for _, sub := range append(c.Commands(), c) {
			path := strings.Fields(sub.CommandPath())[1:]
			code, out, _ := cli(t, append(path, "--help")...)
			if code != exitOK || !strings.Contains(out, "Usage:") {
				t.Errorf("%v --help: exit %d", path, code)
			}
		}
	}
}

func TestProgressPrinter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := progressPrinter(&buf)
	p(5, 10)
	p(6, 10) // within 100ms of the last line: not redrawn
	p(10, 10)
	out := buf.String()
	if !strings.Contains(out, "verifying: 5 / 10 records (50%)") || strings.Contains(out, "6 / 10") ||
		!strings.Contains(out, "verifying: 10 / 10 records (100%)") {
		t.Fatalf("progress output %q", out)
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	example := "../../examples/orders/orangerail.yaml"

	code, out, _ := cli(t, "config", "check", example, "--database-url", "")
	if code != exitOK || !strings.Contains(out, "0 problem(s); catalog not checked") {
		t.Fatalf("example without a database: exit %d\n%s", code, out)
	}

	// A destructive action that runs without approval loads with its
	// waiver, and the check shows the reason.
	waived := filepath.Join(t.TempDir(), "waived.yaml")
	exampleData, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(waived, ontologytest.Apply(t, exampleData, ontologytest.Set("actions.cancel_order.policy.approval", "none"),
		ontologytest.Set("actions.cancel_order.approval_waived", "support cancels unshipped orders on the phone")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "config", "check", waived, "--database-url", "")
	if code != exitOK || !strings.Contains(out, `actions.cancel_order.approval_waived: destructive, runs without approval; waived: "support cancels unshipped orders on the phone"`) {
		t.Fatalf("waived example: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "config", "check", waived, "--database-url", "", "--json")
	var waivers struct {
		Waivers []struct{ Path, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &waivers); err != nil || code != exitOK || len(waivers.Waivers) != 1 ||
		waivers.Waivers[0].Path != "actions.cancel_order.approval_waived" || waivers.Waivers[0].Reason != "support cancels unshipped orders on the phone" {
		t.Fatalf("waived example --json: exit %d %v\n%s", code, err, out)
	}
	// Without the waiver, the same policy does not load.
	if err := os.WriteFile(waived, ontologytest.Apply(t, exampleData, ontologytest.Set("actions.cancel_order.policy.approval", "none")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = cli(t, "config", "check", waived, "--database-url", ""); code != exitFindings || !strings.Contains(out, "actions.cancel_order.policy.approval:") ||
		!strings.Contains(out, "catalog not checked: the config has problems") {
		t.Fatalf("unwaived destructive action: exit %d\n%s", code, out)
	}
	// What serve reads from the environment and files as it opens — a
	// webhook's secret, the checkpoint key — is checked too: a config the
	// check passes is one serve opens.
	secrets := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(secrets, ontologytest.Apply(t, exampleData,
		ontologytest.SetYAML("webhooks", "[{url: 'https://hooks.example.com/x', secret_env: ORANGERAIL_TEST_UNSET_SECRET}]"),
		ontologytest.SetYAML("audit.checkpoint", "{key_file: /nonexistent/checkpoint.key}")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = cli(t, "config", "check", secrets, "--database-url", ""); code != exitFindings ||
		!strings.Contains(out, "webhooks.0.secret_env: the environment variable ORANGERAIL_TEST_UNSET_SECRET is not set") ||
		!strings.Contains(out, "audit.checkpoint.key_file: open /nonexistent/checkpoint.key") || !strings.Contains(out, "2 problem(s)") {
		t.Fatalf("secrets serve would refuse: exit %d\n%s", code, out)
	}

	url := testdb.New(t)
	code, out, _ = cli(t, "config", "check", example, "--database-url", url)
	if code != exitFindings || !strings.Contains(out, "objects.order.table: datasource_schema_mismatch") {
		t.Fatalf("example on an unseeded database: exit %d\n%s", code, out)
	}
	if err := seedExample(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = cli(t, "config", "check", example, "--database-url", url); code != exitOK {
		t.Fatalf("example on a seeded database: exit %d\n%s", code, out)
	}

	// Every problem is printed, not only the first.
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	mistyped := []ontologytest.Edit{
		ontologytest.Set("actions.cancel_order.target.key_from", "orderid"),
		ontologytest.Set("actions.update_shipping_address.target.key_from", "orderid"),
		ontologytest.Set("actions.add_order_note.target.key_from", "orderid"),
	}
	if err := os.WriteFile(broken, ontologytest.Apply(t, data, append(mistyped, ontologytest.Set("preset", "fast"))...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "config", "check", broken, "--json")
	var report struct {
		Problems []struct{ Path, Message string }
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != exitFindings || len(report.Problems) != 1 || report.Problems[0].Path != "preset" {
		// The schema refuses the preset before semantic checks run.
		t.Fatalf("broken preset: exit %d %+v", code, report)
	}
	if err := os.WriteFile(broken, ontologytest.Apply(t, data, append(mistyped, ontologytest.Set("preset", "sandbox"))...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "config", "check", broken)
	for _, want := range []string{"actions.add_order_note.target.key_from", "actions.cancel_order.target.key_from", "actions.update_shipping_address.target.key_from", "3 problem(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != exitFindings {
		t.Fatalf("exit %d", code)
	}

	if code, _, stderr := cli(t, "config", "check", filepath.Join(t.TempDir(), "none.yaml")); code != exitError || !strings.Contains(stderr, "none.yaml") {
		t.Fatalf("missing file: exit %d %q", code, stderr)
	}
	code, out, _ = cli(t, "config", "schema")
	if code != exitOK || !json.Valid([]byte(out)) {
		t.Fatalf("schema: exit %d", code)
	}
}

// exampleEngine seeds the orders example into the database at url and
// returns an engine serving it with key.
func exampleEngine(t *testing.T, url string, key []byte, edits ...ontologytest.Edit) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	if err := seedExample(ctx, url); err != nil {
		t.Fatal(err)
	}
	cfg := ontologytest.Parse(t, orders.Config, edits...)
	runtime := testdb.RuntimePool(t, url)
	catalog, err := cfg.ReadCatalog(ctx, runtime)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: runtime, Effects: effects.Factories(), Catalog: catalog, Key: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// servedExample serves the orders example over HTTP on the database at
// url, verifying tokens of a development issuer, and returns the public URL
// and a function minting a token of a person (roles) in tenant acme.
func servedExample(t *testing.T, url string) (string, func(subject string, roles ...string) string) {
	t.Helper()
	ctx := context.Background()
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: "kind", Values: []string{"human"}}}
	cfg.HTTP.RateLimits.Store = ontology.RateLimitMemory
	ln, err := app.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.PublicURL = "http://" + ln.Addr().String()
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: url, Key: make([]byte, engine.KeySize), Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.ServeHTTP(serveCtx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		rt.Close()
	})
	mint := func(subject string, roles ...string) string {
		tok, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: subject, Audience: "orangerail",
			Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme", "roles": roles, "kind": "human"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return cfg.HTTP.PublicURL, mint
}

// TestApprovalsCommands decides through the deployment's API as the person
// whose token the command sends, as the desk does: the audit record names
// that person, never a typed name, and the command `show` prints runs as
// printed.
func TestApprovalsCommands(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	e := exampleEngine(t, url, make([]byte, engine.KeySize))
	server, mint := servedExample(t, url)
	agent := &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	staged := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "asked"}`))
	other := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "asked"}`))
	if staged.Status != engine.StatusApprovalPending || other.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s %s", staged.Status, other.Status)
	}
	id := staged.ApprovalID.String()
	t.Setenv(login.TokenEnv, mint("alice@example.com", "approver"))
	t.Setenv(ServerEnv, "")
	run := func(args ...string) (int, string, string) {
		return cli(t, append(append([]string{"approvals"}, args...), "--server", server)...)
	}

	if code, _, stderr := cli(t, "approvals", "list"); code != exitError || !strings.Contains(stderr, "X_APPROVALS_PATH") {
		t.Fatalf("no --server: exit %d %q", code, stderr)
	}
	// What only the database path reads is refused through the API, not
	// ignored: the API's tenant is the token's, and a decision's words
	// are its --note.
	for _, args := range [][]string{{"list", "--tenant", "globex"}, {"reject", id, "--reason", "fraud"}} {
		if code, out, stderr := run(args...); code != exitError || out != "" || !strings.Contains(stderr, "X_APPROVALS_PATH") ||
			!strings.Contains(stderr, args[len(args)-2]+" is for --break-glass") {
			t.Fatalf("%v through the API: exit %d %q %q", args, code, out, stderr)
		}
	}
	code, out, stderr := run("list")
	if code != exitOK || strings.Count(out, "pending") != 2 || stderr != "" {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	// More than --limit shows: said beside the list, the newest listed.
	code, out, stderr = run("list", "--limit", "1")
	if code != exitOK || strings.Count(out, "pending") != 1 || !strings.Contains(out, other.ApprovalID.String()) ||
		!strings.Contains(stderr, "approvals list: more approvals match than --limit 1 shows") {
		t.Fatalf("list --limit 1 of two: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run("show", id)
	input := "    {\n      \"order_id\": \"o-1001\",\n      \"reason\": \"asked\"\n    }\n"
	if code != exitOK || !strings.Contains(out, input) || !strings.Contains(out, "The order is cancelled") ||
		!strings.Contains(out, `      "status": "paid",`) || !strings.Contains(out, "would write:") || !strings.Contains(out, "(destructive)") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	// The command show prints approves, run exactly as printed.
	printed := out[strings.LastIndex(out, "\n  ")+3 : len(out)-1]
	words := strings.Fields(printed)
	if self, _ := os.Executable(); words[0] != self || !slices.Contains(words, "--server") || !slices.Contains(words, "--digest") {
		t.Fatalf("the printed command %q", printed)
	}

	code, _, stderr = run("approve", id, "--digest", strings.Repeat("ab", 32))
	if code != exitError {
		t.Fatalf("approve with another digest: exit %d", code)
	}
	oneLine(t, stderr, "X_APPROVAL_ARGUMENTS_MISMATCH")
	if code, out, stderr = cli(t, words[1:]...); code != exitOK || !strings.Contains(out, "approved "+id+" as alice@example.com") {
		t.Fatalf("the printed approve: exit %d %q %q", code, out, stderr)
	}
	code, _, stderr = run("reject", id)
	if code != exitError {
		t.Fatalf("deciding twice: exit %d", code)
	}
	oneLine(t, stderr, "X_APPROVAL_DECIDED")
	if code, _, _ = run("reject", other.ApprovalID.String(), "--note", "not now"); code != exitOK {
		t.Fatalf("reject: exit %d", code)
	}
	if code, _, stderr = run("show", "not-an-id"); code != exitError || !strings.Contains(stderr, "X_APPROVAL_NOT_FOUND") {
		t.Fatalf("show of a bad id: exit %d %q", code, stderr)
	}
	t.Setenv(login.TokenEnv, "")
	t.Setenv(login.TokenFileEnv, filepath.Join(t.TempDir(), "none.json"))
	if code, _, stderr = run("list"); code != exitError || !strings.Contains(stderr, "orangerail login") {
		t.Fatalf("no token: exit %d %q", code, stderr)
	}

	// The person the token names is the audit record's actor.
	pool := testdb.Pool(t, url)
	var actor, kind string
	if err := pool.QueryRow(ctx, "SELECT actor, actor_kind FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'approved'", id).Scan(&actor, &kind); err != nil || actor != "alice@example.com" || kind != "human" {
		t.Fatalf("approved record actor %q %q (%v)", actor, kind, err)
	}
	if out := e.Check(ctx, agent, id); out.Status != engine.StatusOK {
		t.Fatalf("check after the CLI approved: %s", out.Status)
	}
}

func TestServeRefusals(t *testing.T) {
	t.Parallel()
	example := "../../examples/orders/orangerail.yaml"
	url := testdb.New(t)

	code, _, stderr := cli(t, "serve", "--config", example, "--database-url", url)
	if code != exitError || !strings.Contains(stderr, "X_IDENTITY_REQUIRED") {
		t.Fatalf("HTTP without identity: exit %d %q", code, stderr)
	}
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, []byte("service: s\nobjects: {o: {table: t}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cli(t, "serve", "--stdio", "--config", broken, "--database-url", url)
	if code != exitError || !strings.Contains(stderr, "X_CONFIG_INVALID") || !strings.Contains(stderr, "objects.o") {
		t.Fatalf("broken config: exit %d %q", code, stderr)
	}
	// Off loopback, the URL clients reach the server at must be named: it
	// is never taken from a request's Host.
	exampleText, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	public := filepath.Join(t.TempDir(), "public.yaml")
	if err := os.WriteFile(public, append(exampleText, "http: {listen: \"0.0.0.0:8080\"}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cli(t, "serve", "--config", public, "--database-url", url)
	if code != exitError || !strings.Contains(stderr, "X_CONFIG_INVALID") || !strings.Contains(stderr, "http.public_url") {
		t.Fatalf("no public URL off loopback: exit %d %q", code, stderr)
	}
	// The example on a database without its tables: the catalog check refuses.
	code, _, stderr = cli(t, "serve", "--stdio", "--config", example, "--database-url", url, "--key-file", filepath.Join(t.TempDir(), "k"))
	if code != exitError || !strings.Contains(stderr, "datasource_schema_mismatch") {
		t.Fatalf("unseeded datasource: exit %d %q", code, stderr)
	}
}

// serveConfig writes the orders example, each of edits applied to its
// text, to a file of its own, served over HTTP on 127.0.0.1:port with the
// tokens of issuer (the rate limits counted in memory) and extra appended,
// and returns the file's path.
func serveConfig(t *testing.T, issuer string, port int, extra string, edits ...func(string) string) string {
	t.Helper()
	example, err := os.ReadFile("../../examples/orders/orangerail.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(example)
	for _, edit := range edits {
		text = edit(text)
	}
	text += fmt.Sprintf("identity:\n  oidc: {issuer: %q, audience: orangerail, tenant_claim: org_id}\n"+
		"http: {listen: \"127.0.0.1:%d\", rate_limits: {store: memory}}\n", issuer, port) + extra
	config := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// runServe runs `serve --config config` on the database at url until ctx
// ends, its stderr to stderr, and sends its exit code on the channel.
func runServe(ctx context.Context, config, url string, stderr io.Writer) <-chan int {
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--config", config, "--database-url", url}, io.Discard, stderr)
	}()
	return done
}

// serveFixture is what a `serve` test runs against: a database holding the
// example's tables, a development issuer serving its keys, and the
// server's key in the environment (so the test cannot run in parallel).
// It returns the database's URL, the issuer, and the issuer's URL.
func serveFixture(t *testing.T) (string, *devissuer.Issuer, string) {
	t.Helper()
	url := testdb.New(t)
	if err := seedExample(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuer := httptest.NewServer(iss.Handler())
	t.Cleanup(issuer.Close)
	t.Setenv(app.SecretKeyEnv, strings.Repeat("ab", 32))
	return url, iss, issuer.URL
}

// TestServeHTTP runs `serve` over HTTP as an operator would: readiness
// waits for OIDC discovery, and a verified token reaches the tools.
func TestServeHTTP(t *testing.T) {
	ctx := context.Background()
	url, iss, issuerURL := serveFixture(t)

	start := func(issuer string) (base string, stop func()) {
		port := testdb.FreePort(t)
		ctx, cancel := context.WithCancel(ctx)
		done := runServe(ctx, serveConfig(t, issuer, port, ""), url, io.Discard)
		base = fmt.Sprintf("http://127.0.0.1:%d", port)
		for range 100 {
			if resp, err := http.Get(base + "/healthz"); err == nil {
				resp.Body.Close()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return base, func() {
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("serve exited %d", code)
			}
		}
	}
	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	base, stop := start(fmt.Sprintf("http://127.0.0.1:%d", testdb.FreePort(t)))
	if h, r := status(base+"/healthz"), status(base+"/readyz"); h != 200 || r != 503 {
		t.Fatalf("with the issuer down: healthz %d, readyz %d", h, r)
	}
	stop()

	base, stop = start(issuerURL)
	defer stop()
	if r := status(base + "/readyz"); r != 200 {
		t.Fatalf("readyz %d", r)
	}
	token, err := iss.Token(devissuer.Claims{Issuer: issuerURL, Subject: "agent-7", Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme", "roles": []string{"support"}}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `\"status\":\"paid\"`) {
		t.Fatalf("order_get over HTTP: %d %s", resp.StatusCode, body)
	}
}

func TestAuditorGrant(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	pool := testdb.RuntimePool(t, url)
	for _, tenant := range []string{"acme", "globex"} {
		err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			err := engine.AppendAudit(ctx, tx, &engine.Record{Tenant: tenant, At: time.Now(), CorrelationID: "c", Phase: engine.PhaseStaged,
				Actor: engine.Actor{Subject: "a", Kind: engine.ActorAgent}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	name := fmt.Sprintf("auditor_%d", time.Now().UnixNano()%1e9)
	admin := testdb.Pool(t, url)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DELETE FROM orangerail.auditor_grants WHERE role_name = $1", name)
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
	})
	t.Setenv("AUDITOR_PASSWORD", "correct horse battery staple")
	code, out, stderr := cli(t, "auditor", "grant", name, "--tenant", "acme", "--password-env", "AUDITOR_PASSWORD", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "audit_verify('acme')") || !strings.Contains(out, "orangerail audit verify --tenant acme)") ||
		!strings.Contains(out, "password is now the one in AUDITOR_PASSWORD, for every database of this cluster") {
		t.Fatalf("grant: exit %d %q %q", code, out, stderr)
	}
	t.Setenv("EMPTY_PASSWORD", "")
	if code, _, stderr = cli(t, "auditor", "grant", name, "--tenant", "acme", "--password-env", "EMPTY_PASSWORD", "--database-url", url); code != exitError {
		t.Fatalf("grant with an empty password: exit %d", code)
	}
	oneLine(t, stderr, "X_AUDITOR_PASSWORD_INVALID")
	var verifier string
	if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", name).Scan(&verifier); err != nil ||
		!regexp.MustCompile(`^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`).MatchString(verifier) ||
		strings.Contains(verifier, "staple") {
		t.Fatalf("stored password %q (%v)", verifier, err)
	}

	auditor, err := pgx.Connect(ctx, testdb.WithUser(t, url, name, "correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	defer auditor.Close(ctx)
	count := func(q string) int {
		var n int
		if err := auditor.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// acme's record, and the owner's records of this grant and of the
	// password it set.
	if count("SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme'") != 3 ||
		count("SELECT count(*) FROM orangerail.audit WHERE phase = 'auditor_granted' AND actor_kind = 'operator'") != 1 ||
		count("SELECT count(*) FROM orangerail.audit WHERE phase = 'auditor_password_set' AND actor_kind = 'operator'") != 1 ||
		count("SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'globex' OR set_config('orangerail.tenant_id', 'globex', false) IS NULL") != 0 ||
		count("SELECT count(*) FROM orangerail.audit_verify('acme')") != 0 {
		t.Fatal("the auditor does not see exactly its tenant")
	}
	if _, err := auditor.Exec(ctx, "DELETE FROM orangerail.audit"); err == nil {
		t.Fatal("an auditor deleted audit rows")
	}
	if _, err := auditor.Exec(ctx, "SELECT * FROM orangerail.tenants"); err == nil {
		t.Fatal("an auditor read the tenant list")
	}

	// The owner lists who may read what: every tenant's grants, or one's.
	if code, out, stderr := cli(t, "auditor", "list", "--database-url", url); code != exitOK || out != "TENANT  LOGIN\nacme    "+name+"\n" {
		t.Fatalf("auditor list: exit %d %q %q", code, out, stderr)
	}
	if code, out, _ := cli(t, "auditor", "list", "--tenant", "globex", "--json", "--database-url", url); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("auditor list of globex: exit %d %q", code, out)
	}
	if code, out, _ := cli(t, "auditor", "list", "--tenant", "acme", "--json", "--database-url", url); code != exitOK ||
		!strings.Contains(out, `"login": "`+name+`"`) || !strings.Contains(out, `"tenant": "acme"`) {
		t.Fatalf("auditor list of acme: exit %d %q", code, out)
	}
	// A login that is not the owner is told so, coded.
	if code, _, stderr := cli(t, "auditor", "list", "--database-url", testdb.WithUser(t, url, runtimeLogin(t, admin), "pw")); code != exitError {
		t.Fatalf("auditor list as the runtime's login: exit %d", code)
	} else {
		oneLine(t, stderr, "X_BREAK_GLASS_REFUSED")
	}

	// A revoke of a grant that is not there (a typo) revokes nothing and
	// says so: it is not reported as done.
	if code, out, stderr := cli(t, "auditor", "revoke", name, "--tenant", "acm", "--database-url", url); code != exitError || out != "" {
		t.Fatalf("revoke of a mistyped tenant: exit %d %q %q", code, out, stderr)
	} else {
		oneLine(t, stderr, "X_AUDITOR_GRANT_NOT_FOUND")
	}
	if count("SELECT count(*) FROM orangerail.audit") != 3 {
		t.Fatal("a refused revoke revoked the grant, or left a record")
	}
	if code, _, _ := cli(t, "auditor", "revoke", name, "--tenant", "acme", "--database-url", url); code != exitOK {
		t.Fatalf("revoke: exit %d", code)
	}
	if count("SELECT count(*) FROM orangerail.audit") != 0 {
		t.Fatal("a revoked auditor still reads the tenant")
	}

	for _, bad := range [][]string{{"Robert'); DROP", "--tenant", "acme"}, {"postgres", "--tenant", "acme"}, {name, "--tenant", "no tenant"}} {
		code, _, stderr := cli(t, append(append([]string{"auditor", "grant"}, bad...), "--database-url", url)...)
		if code != exitError || !(strings.Contains(stderr, "X_AUDITOR_INVALID") || strings.Contains(stderr, "X_TENANT_INVALID")) {
			t.Errorf("grant %v: exit %d %q", bad, code, stderr)
		}
	}
}

func TestDemoNeverPrintsAPassword(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	facts := &demoFacts{DatabaseURL: "postgres://alice:s3cret@127.0.0.1:5432/orangerail_demo", Config: "/x/orangerail.yaml", Self: "/x/orangerail",
		StdioCommand: []string{"/x/orangerail", "serve", "--stdio", "--database-url", "postgres://alice:s3cret@127.0.0.1:5432/orangerail_demo", "--dev-tenant", "acme"}}
	printDemo(&out, &devdb.Database{URL: facts.DatabaseURL}, facts, ".orangerail/demo.json")
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), `--database-url "$DATABASE_URL" --dev-tenant acme`) {
		t.Fatalf("demo output:\n%s", out.String())
	}
}

// TestDemoStdioEnvironment: the stdio command the demo prints carries its
// environment as assignments a shell reads as such, whatever the path
// holds, and the Claude Code line passes it with -e.
func TestDemoStdioEnvironment(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "it's here", "shipping.key")
	facts := &demoFacts{DatabaseURL: "postgres://127.0.0.1:5432/orangerail_demo", Config: "/x/orangerail.yaml", Self: "/x/orangerail",
		StdioCommand: []string{"printenv", "SHIPPING_KEY_CREDENTIAL_FILE"}, StdioEnv: map[string]string{"SHIPPING_KEY_CREDENTIAL_FILE": keyFile}}
	var out bytes.Buffer
	printDemo(&out, &devdb.Database{URL: facts.DatabaseURL}, facts, ".orangerail/demo.json")
	lines := strings.Split(out.String(), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Or connect over stdio") })
	if i < 0 || i+3 >= len(lines) {
		t.Fatalf("no stdio command printed:\n%s", out.String())
	}
	got, err := exec.CommandContext(t.Context(), "sh", "-c", strings.TrimSpace(lines[i+1])).Output()
	if err != nil || string(got) != keyFile+"\n" {
		t.Errorf("the printed stdio command %q ran with SHIPPING_KEY_CREDENTIAL_FILE=%q (%v), want %q", lines[i+1], got, err, keyFile)
	}
	if claude := strings.TrimSpace(lines[i+3]); !strings.HasPrefix(claude, "claude mcp add orangerail-stdio -e SHIPPING_KEY_CREDENTIAL_FILE=") ||
		!strings.HasSuffix(claude, " -- printenv SHIPPING_KEY_CREDENTIAL_FILE") {
		t.Errorf("the Claude Code line: %q", claude)
	}
}

// printedDemoAt is what printDemo prints for a demo served at server,
// with the desk serveDemo serves there (none over plain http off
// loopback: TestDemoServesNoDeskOverPlainHTTP) and an approver's login.
func printedDemoAt(t *testing.T, server string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	desk := server + "/desk"
	if ontology.PlainOffLoopback(u) {
		desk = ""
	}
	facts := &demoFacts{DatabaseURL: "postgres://127.0.0.1:5432/orangerail_demo", Config: "/x/orangerail.yaml", Self: "/x/orangerail",
		StdioCommand: []string{"/x/orangerail", "serve", "--stdio"}, ServerURL: server, DeskURL: desk, Issuer: "http://127.0.0.1:9999",
		Logins: map[string]map[string]demoLogin{"approver": {"acme": {Username: "alice", Password: "pw"}}}}
	var out bytes.Buffer
	printDemo(&out, &devdb.Database{URL: facts.DatabaseURL}, facts, ".orangerail/demo.json")
	return out.String()
}

// TestDemoSaysWhereTheDeskSignsIn: the demo's desk signs people in at the
// development issuer, on loopback: served at a public URL off it, the
// demo says who can sign in — a browser on this machine, over https — and
// over plain http, where it serves no desk, says so; the logins are
// printed for the commands either way.
func TestDemoSaysWhereTheDeskSignsIn(t *testing.T) {
	t.Parallel()
	for server, says := range map[string]string{
		"http://127.0.0.1:8080": "The approvers' desk (sign in at the development issuer): http://127.0.0.1:8080/desk",
		"https://demo.example":  "from a browser on this machine only): https://demo.example/desk",
		"http://10.0.0.5:8080":  "No approvers' desk at http://10.0.0.5:8080: it signs people in with a session cookie",
	} {
		if out := printedDemoAt(t, server); !strings.Contains(out, says) || !strings.Contains(out, "approver, tenant acme: username alice") {
			t.Errorf("%s: the demo does not say %q, or the login:\n%s", server, says, out)
		}
	}
}

// TestDemoSaysPlainHTTP: the demo served over plain http off loopback
// prints approvals commands that say they send the token in the clear
// (--plain-http), so that they run as printed; on loopback they do not.
func TestDemoSaysPlainHTTP(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]bool{"http://10.0.0.5:8080": true, "http://127.0.0.1:8080": false, "https://demo.example": false} {
		out := printedDemoAt(t, server)
		var commands int
		for line := range strings.Lines(out) {
			if !strings.Contains(line, " --server ") {
				continue
			}
			commands++
			if says, where := strings.Contains(line, "--plain-http"), strings.Contains(line, "--server "+server+" --plain-http"); says != want || says != where {
				t.Errorf("%s: %q says --plain-http: %v (after --server: %v)", server, line, says, where)
			}
		}
		if commands != 3 {
			t.Errorf("%s: %d approvals commands printed, want 3:\n%s", server, commands, out)
		}
	}
}

// TestServeStdioTokenRefusals: `serve --stdio --token-env VAR` verifies the
// token before serving anything, and refuses a missing, expired or foreign
// one in one coded line that never holds the token; the token names the
// caller, so the --dev-* flags are refused beside it.
func TestServeStdioTokenRefusals(t *testing.T) {
	url := testdb.New(t)
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	example, err := os.ReadFile("../../examples/orders/orangerail.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "orangerail.yaml")
	extra := fmt.Sprintf("identity:\n  oidc: {issuer: %q, audience: orangerail, tenant_claim: org_id}\n", issuerSrv.URL)
	if err := os.WriteFile(config, append(example, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(args ...string) (int, string) {
		code, _, stderr := cli(t, append([]string{"serve", "--config", config, "--database-url", url, "--key-file", filepath.Join(t.TempDir(), "k")}, args...)...)
		return code, stderr
	}
	const env = "ORANGERAIL_TEST_STDIO_TOKEN"
	t.Setenv(env, "")
	code, stderr := serve("--stdio", "--token-env", env)
	if code != exitError {
		t.Fatalf("no token: exit %d", code)
	}
	oneLine(t, stderr, "X_STDIO_TOKEN_REFUSED")
	expired, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-7", Audience: "orangerail",
		Expiry: time.Now().Add(-time.Hour), Extra: map[string]any{"org_id": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-7", Audience: "another-service",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{"expired": expired, "another audience": other} {
		t.Setenv(env, token)
		code, stderr := serve("--stdio", "--token-env", env)
		if code != exitError || strings.Contains(stderr, token) {
			t.Fatalf("%s: exit %d %q", name, code, stderr)
		}
		oneLine(t, stderr, "X_STDIO_TOKEN_REFUSED")
	}
	if code, stderr := serve("--stdio", "--token-env", env, "--dev-subject", "someone"); code != exitError ||
		!strings.Contains(stderr, "token-env") || !strings.Contains(stderr, "dev-subject") {
		t.Fatalf("--token-env with --dev-subject: exit %d %q", code, stderr)
	}
	if code, stderr := serve("--token-env", env); code != exitError || !strings.Contains(stderr, "--token-env") || !strings.Contains(stderr, "is for --stdio") {
		t.Fatalf("--token-env over HTTP: exit %d %q", code, stderr)
	} else {
		oneLine(t, stderr, "X_USAGE")
	}
}

// TestUsageErrorsAreCoded: a command line the command does not take — an
// unknown command or flag, a required flag missing, a flag's value of the
// wrong kind, an argument too many — is refused on one line under
// X_USAGE with its fix, as every other refusal is; nothing runs.
func TestUsageErrorsAreCoded(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nosuch"},
		{"audit", "verify", "--bogus"},
		{"policy", "compile", "x.yaml"},
		{"audit", "settle"},
		{"audit", "verify", "--lag-bound", "soon"},
		{"errors", "explain", "X_USAGE", "X_USAGE", "X_USAGE"},
		// A word naming none of a group's commands: it printed the
		// group's help and exited 0.
		{"approvals", "lsit"},
		{"audit", "verfy", "--tenant", "acme"},
		{"policy", "compiel", "x.yaml"},
		{"login"},
	} {
		code, out, stderr := cli(t, args...)
		if code != exitError || out != "" {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		oneLine(t, stderr, "X_USAGE")
		if !strings.Contains(stderr, "--help") {
			t.Fatalf("%v: %q says no fix", args, stderr)
		}
	}
	// A group named alone prints its help, as it did.
	if code, out, stderr := cli(t, "audit"); code != exitOK || !strings.Contains(out, "verify") || stderr != "" {
		t.Fatalf("audit alone: exit %d\n%s%s", code, out, stderr)
	}
}
