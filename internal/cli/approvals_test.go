package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/testdb"
)

// unsafeRune returns the first rune of s a terminal must not receive raw,
// newlines aside, or -1.
func unsafeRune(s string) rune {
	for _, r := range s {
		if r != '\n' && display.Unsafe(r) {
			return r
		}
	}
	return -1
}

// TestPrintApprovalEscapes pins what an approver reads when every text an
// agent or the database supplied is hostile: the spoof (a carriage return
// between JSON tokens, meant to overprint o-1001 with o-1002), escape
// sequences, C1 controls, bidirectional overrides and zero-width
// characters. Each shows as a visible escape; the input and the target are
// indented JSON.
func TestPrintApprovalEscapes(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	by, note := "bob\u200b", "ok\x1b[2K\rrejected"
	v := &engine.ApprovalView{
		ID:     uuid.MustParse("11111111-2222-3333-4444-555555555555"),
		Tenant: "acme", Action: "cancel_order\u202e", Status: "approved", RequestedBy: "agent\u2066-7",
		Input:  json.RawMessage("{\"order_id\":\"o-1001\",\r    \"reason\":\"Cancel o-1002 only\",\t\"memo\":\"\u202e1001-o\u202c \u009b2J\\u001b[2J\"}"),
		Digest: strings.Repeat("ab", 32), Effect: "The order is cancelled.", Rollback: "None.\nReally.",
		Target:    json.RawMessage(`{"id":"o-1001","status":"paid` + "\u200d" + `"}`),
		CreatedAt: at, ExpiresAt: at.Add(time.Hour), DecidedBy: &by, DecidedAt: &at, DecisionNote: &note,
	}
	var out bytes.Buffer
	printApproval(&out, v, "orangerail approvals approve ID --server URL --digest D")
	want := `approval 11111111-2222-3333-4444-555555555555 (approved)
  action:       "cancel_order\u202e"
  requested by: "agent\u2066-7" at 2025-01-02T03:04:05Z
  expires:      2025-01-02T04:04:05Z
  input (what executes, indented to read):
    {
      "order_id": "o-1001",
      "reason": "Cancel o-1002 only",
      "memo": "\u202e1001-o\u202c \u009b2J\u001b[2J"
    }
  digest:       abababababababababababababababababababababababababababababababab
  effect:       The order is cancelled.
  rollback:     "None.\nReally."
  target now:
    {
      "id": "o-1001",
      "status": "paid\u200d"
    }
  decided by:   "bob\u200b" at 2025-01-02T03:04:05Z ("ok\u001b[2K\rrejected")
`
	if out.String() != want {
		t.Fatalf("printApproval =\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	v.Status, v.TargetError = "pending\r", "pq: \x1b]0;owned\x07"
	printApproval(&out, v, "orangerail approvals approve ID --server URL --digest D")
	for _, line := range []string{
		`approval 11111111-2222-3333-4444-555555555555 ("pending\r")` + "\n",
		`  target now:   could not be read: "pq: \u001b]0;owned\u0007"` + "\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("printApproval lacks %q:\n%s", line, out.String())
		}
	}
	if r := unsafeRune(out.String()); r >= 0 {
		t.Fatalf("printApproval shows %U raw:\n%s", r, out.String())
	}

	out.Reset()
	if err := printApprovals(&out, []*engine.ApprovalView{v}); err != nil {
		t.Fatal(err)
	}
	table := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(table) != 2 || !strings.Contains(table[1], `"pending\r"`) || !strings.Contains(table[1], `"cancel_order\u202e"`) ||
		!strings.Contains(table[1], `"agent\u2066-7"`) || unsafeRune(out.String()) >= 0 {
		t.Fatalf("printApprovals =\n%s", out.String())
	}
}

// TestPrintApprovalUnshownInput: a pending approval whose sealed input
// cannot be shown (unreadable here, or shredded) prints no input and no
// command to approve it — approving a digest beside no input approves
// nothing the person read — and says it may be rejected.
func TestPrintApprovalUnshownInput(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	v := &engine.ApprovalView{ID: uuid.MustParse("11111111-2222-3333-4444-555555555555"), Tenant: "acme", Action: "cancel_order",
		Status: "pending", RequestedBy: "agent-7", InputState: engine.InputUnreadable, Digest: strings.Repeat("ab", 32),
		CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	var out bytes.Buffer
	printApproval(&out, v, "orangerail approvals approve ID --server URL --digest D")
	for _, line := range []string{
		"  input:        cannot be shown (the sealed input is unreadable)\n",
		"\nIts input cannot be shown here, so it cannot be approved here; it may be rejected.\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("printApproval lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "approvals approve") || strings.Contains(out.String(), "null") {
		t.Errorf("printApproval offers to approve an input it did not show:\n%s", out.String())
	}
}

// TestApprovalsShowSpoof stages the spoof through the engine, as an agent
// would, and reads it back through the CLI: show, show --json, list, and
// an error, none with a control, bidirectional or invisible character raw.
func TestApprovalsShowSpoof(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	e := exampleEngine(t, url, make([]byte, engine.KeySize))
	agent := &engine.Caller{Subject: "agent\u200b-7", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	spoof := "{\"order_id\":\"o-1001\",\r    \"reason\":\"Cancel o-1002 only \u202e\u009b2J\"}"
	staged := e.Call(ctx, agent, "cancel_order", json.RawMessage(spoof))
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s %v %v", staged.Status, staged.Issues, staged.Err)
	}
	common := []string{"--break-glass", "--reason", "the desk is down", "--database-url", url, "--config", "../../examples/orders/orangerail.yaml", "--tenant", "acme"}
	run := func(args ...string) (int, string, string) {
		return cli(t, append(append([]string{"approvals"}, args...), common...)...)
	}

	code, out, stderr := run("show", staged.ApprovalID.String())
	if code != exitOK {
		t.Fatalf("show: exit %d %s", code, stderr)
	}
	input := "    {\n      \"order_id\": \"o-1001\",\n      \"reason\": \"Cancel o-1002 only \\u202e\\u009b2J\"\n    }\n"
	if !strings.Contains(out, input) || !strings.Contains(out, `requested by: "agent\u200b-7"`) {
		t.Fatalf("show does not show the input and requester escaped:\n%s", out)
	}
	if r := unsafeRune(out); r >= 0 {
		t.Fatalf("show prints %U raw:\n%s", r, out)
	}

	code, out, _ = run("show", staged.ApprovalID.String(), "--json")
	var view struct {
		RequestedBy string          `json:"requested_by"`
		Input       json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal([]byte(out), &view); code != exitOK || err != nil || view.RequestedBy != agent.Subject {
		t.Fatalf("show --json: exit %d, %v, requested_by %q:\n%s", code, err, view.RequestedBy, out)
	}
	var input1, input2 map[string]string
	if err := errors.Join(json.Unmarshal(view.Input, &input1), json.Unmarshal([]byte(spoof), &input2)); err != nil || input1["reason"] != input2["reason"] {
		t.Fatalf("show --json input %s is not the staged input (%v)", view.Input, err)
	}
	if r := unsafeRune(out); r >= 0 {
		t.Fatalf("show --json prints %U raw:\n%s", r, out)
	}

	code, out, _ = run("list")
	if code != exitOK || !strings.Contains(out, `"agent\u200b-7"`) || unsafeRune(out) >= 0 {
		t.Fatalf("list: exit %d:\n%s", code, out)
	}

	// An error naming what an operator typed stays one line, escaped.
	code, _, stderr = run("show", "x\x1b[2J\u202e")
	if code != exitError || unsafeRune(stderr) >= 0 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("show of a hostile id: exit %d %q", code, stderr)
	}
}

// TestApprovalsListStatus lists approvals of one status, and refuses a
// status there is none of, naming the statuses, instead of listing
// nothing as if no approval had it.
func TestApprovalsListStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	e := exampleEngine(t, url, make([]byte, engine.KeySize))
	agent := &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	staged := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id":"o-1001","reason":"x"}`))
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s %v", staged.Status, staged.Err)
	}
	list := func(status string, args ...string) (int, string, string) {
		return cli(t, append([]string{"approvals", "list", "--break-glass", "--reason", "r", "--status", status, "--database-url", url,
			"--config", "../../examples/orders/orangerail.yaml", "--tenant", "acme"}, args...)...)
	}
	if code, out, stderr := list("pending"); code != exitOK || !strings.Contains(out, staged.ApprovalID.String()) {
		t.Fatalf("list pending: exit %d %q %q", code, out, stderr)
	}
	if code, out, stderr := list("consumed"); code != exitOK || strings.Contains(out, staged.ApprovalID.String()) {
		t.Fatalf("list consumed: exit %d %q %q", code, out, stderr)
	}
	if code, out, stderr := list("aproved"); code != exitError || out != "" || !strings.Contains(stderr, `"aproved"`) || !strings.Contains(stderr, "pending") {
		t.Fatalf("list of a status there is none of: exit %d %q %q", code, out, stderr)
	}

	// More than --limit shows: the list says so, beside it.
	newer := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id":"o-1002","reason":"x"}`))
	if newer.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s %v", newer.Status, newer.Err)
	}
	const more = "approvals list: more approvals match than --limit 1 shows"
	code, out, stderr := list("pending", "--limit", "1")
	if code != exitOK || !strings.Contains(out, newer.ApprovalID.String()) || strings.Contains(out, staged.ApprovalID.String()) || !strings.Contains(stderr, more) {
		t.Fatalf("list --limit 1 of two: exit %d %q %q", code, out, stderr)
	}
	if code, out, stderr := list("pending", "--limit", "2", "--json"); code != exitOK || strings.Contains(stderr, "more approvals") || !strings.Contains(out, staged.ApprovalID.String()) {
		t.Fatalf("list --limit 2 of two: exit %d %q %q", code, out, stderr)
	}
}

// TestApprovalsBreakGlass decides around the API as the database owner,
// with a reason: the record names the database login, audit verify lists
// it; a runtime login is refused, and so is a decision without a reason.
func TestApprovalsBreakGlass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	e := exampleEngine(t, url, make([]byte, engine.KeySize))
	agent := &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	staged := e.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "asked"}`))
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s", staged.Status)
	}
	id := staged.ApprovalID.String()
	glass := func(dbURL string, args ...string) (int, string, string) {
		return cli(t, append(append([]string{"approvals"}, args...), "--tenant", "acme", "--config", "../../examples/orders/orangerail.yaml", "--database-url", dbURL)...)
	}
	// The approve command a show prints never holds the URL it was given,
	// which may hold a password: a placeholder unless it was $DATABASE_URL.
	// It shows what the API shows: the target now, what would be written,
	// whether the action is destructive.
	if _, shown, _ := glass(url, "show", id, "--break-glass", "--reason", "the desk is down"); !strings.Contains(shown, "--database-url OWNER_URL") ||
		strings.Contains(shown, url) || !strings.Contains(shown, "would write:") || !strings.Contains(shown, "(destructive)") || !strings.Contains(shown, `"status": "paid"`) {
		t.Fatalf("show's approve command: %s", shown)
	}
	_, out, _ := glass(url, "show", id, "--json", "--break-glass", "--reason", "the desk is down")
	var view struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.Digest == "" {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if code, _, stderr := glass(url, "approve", id, "--break-glass", "--digest", view.Digest); code != exitError || !strings.Contains(stderr, "X_APPROVALS_PATH") {
		t.Fatalf("no reason: exit %d %q", code, stderr)
	}
	// A mistyped tenant is refused, not listed as one with nothing.
	code, out, stderr := cli(t, "approvals", "list", "--break-glass", "--reason", "r", "--tenant", "acmee", "--config", "../../examples/orders/orangerail.yaml", "--database-url", url)
	if code != exitError || out != "" {
		t.Fatalf("break-glass list of an unknown tenant: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")

	admin := testdb.Pool(t, url)
	login := runtimeLogin(t, admin)
	if code, _, stderr := glass(testdb.WithUser(t, url, login, "pw"), "approve", id, "--break-glass", "--reason", "r", "--digest", view.Digest); code != exitError || !strings.Contains(stderr, "X_BREAK_GLASS_REFUSED") {
		t.Fatalf("a runtime login: exit %d %q", code, stderr)
	}

	// A row another session holds locked is waited on lock_timeout, not
	// forever: the decision fails, and the approval stays pending.
	locker, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "SELECT * FROM orangerail.approvals WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	locked := make(chan int, 1)
	go func() {
		code, _, _ := glass(url, "approve", id, "--break-glass", "--reason", "the desk is down", "--digest", view.Digest)
		locked <- code
	}()
	select {
	case code := <-locked:
		if code != exitError {
			t.Fatalf("a decision of a locked approval: exit %d", code)
		}
	case <-time.After(time.Minute):
		_ = locker.Rollback(ctx) // frees the command, whatever it then does
		<-locked
		t.Fatal("a decision of a locked approval still waited after a minute")
	}
	_ = locker.Rollback(ctx)
	code, out, stderr = glass(url, "approve", id, "--break-glass", "--reason", "the desk is down", "--digest", view.Digest)
	if code != exitOK || !strings.Contains(out, "approved "+id+" as postgres") {
		t.Fatalf("break-glass approve: exit %d %q %q", code, out, stderr)
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", url); code != exitOK || !strings.Contains(out, "the desk is down") {
		t.Fatalf("audit verify: exit %d\n%s", code, out)
	}
	if out := e.Check(ctx, agent, id); out.Status != engine.StatusOK {
		t.Fatalf("check after a break-glass approval: %s", out.Status)
	}
}

// TestApprovalsListLimitBounds: --limit is refused outside 1 to the API's
// page, before anything is asked: 0 read as the API's default, and as
// none breaking glass.
func TestApprovalsListLimitBounds(t *testing.T) {
	t.Parallel()
	for _, limit := range []string{"0", "-1", "201"} {
		code, out, stderr := cli(t, "approvals", "list", "--limit", limit, "--server", "http://127.0.0.1:1")
		if code != exitError || out != "" {
			t.Fatalf("--limit %s: exit %d\n%s%s", limit, code, out, stderr)
		}
		oneLine(t, stderr, "X_REQUEST_INVALID")
	}
}

// runtimeLogin makes a login of the runtime role, password "pw", that may
// read the schema's version (as every command checks it), dropped when
// the test ends: what an operator's command refuses to act as.
func runtimeLogin(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	return makeLogin(t, admin, "IN ROLE orangerail_runtime")
}

// makeLogin makes a login, password "pw", with the CREATE ROLE options
// given, that may read the schema's version, dropped when the test ends.
func makeLogin(t *testing.T, admin *pgxpool.Pool, options string) string {
	t.Helper()
	login := "cli_login_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+login+" LOGIN PASSWORD 'pw' "+options+"; GRANT SELECT ON orangerail_schema_version TO "+login); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+login)
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+login)
	})
	return login
}

// TestApprovalsKeptTokenUnusable: a kept token file others may read, or
// one orangerail did not write, is X_FILE_UNUSABLE naming the file — not
// X_MCP_UNAUTHORIZED, whose fix is about a request's header — and none
// kept is X_MCP_UNAUTHORIZED, saying to sign in. Nothing is sent.
func TestApprovalsKeptTokenUnusable(t *testing.T) {
	t.Setenv(login.TokenEnv, "")
	dir := t.TempDir()
	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		code string
	}{
		"open.json":    {`{"access_token":"t"}`, 0o644, "X_FILE_UNUSABLE"},
		"garbled.json": {`not a token`, 0o600, "X_FILE_UNUSABLE"},
		"missing.json": {"", 0, "X_MCP_UNAUTHORIZED"},
	} {
		path := filepath.Join(dir, name)
		if c.mode != 0 {
			if err := os.WriteFile(path, []byte(c.body), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil { // past the umask
				t.Fatal(err)
			}
		}
		t.Setenv(login.TokenFileEnv, path)
		code, out, stderr := cli(t, "approvals", "list", "--server", "http://127.0.0.1:1")
		if code != exitError || out != "" {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out, stderr)
		}
		oneLine(t, stderr, c.code)
		if c.code == "X_FILE_UNUSABLE" && !strings.Contains(stderr, path) {
			t.Errorf("%s: the error does not name the file: %s", name, stderr)
		}
	}
}
