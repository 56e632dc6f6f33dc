package cli

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/examples/orders/carrier"
	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestDemoServesTheDesk runs the demo as `make run` does and signs in to
// the desk it prints with a login it printed, through the development
// issuer's own login page: the facts name the desk and the logins, and
// they work.
func TestDemoServesTheDesk(t *testing.T) {
	written, out := runDemo(t)
	login, ok := written.Logins["approver"]["acme"]
	if !ok || login.Username == "" || login.Password == "" {
		t.Fatalf("logins = %+v", written.Logins)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := client.Get(written.DeskURL) // → the desk's sign-in → the issuer's login page
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	hidden := map[string]string{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		hidden[m[1]] = html.UnescapeString(m[2])
	}
	if hidden["request"] == "" || hidden["csrf"] == "" {
		t.Fatalf("no login form at %s:\n%s", resp.Request.URL, page)
	}
	form := url.Values{"request": {hidden["request"]}, "csrf": {hidden["csrf"]}, "username": {login.Username},
		"password": {login.Password}, "action": {"sign_in"}}
	resp, err = client.PostForm(resp.Request.URL.String(), form) // → the desk's callback → the desk
	if err != nil {
		t.Fatal(err)
	}
	page = readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), written.DeskURL) || !strings.Contains(page, "Pending approvals") {
		t.Fatalf("after signing in: %d at %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	if !strings.Contains(out.String(), written.DeskURL) || !strings.Contains(out.String(), login.Password) {
		t.Fatalf("the demo did not print the desk and its logins:\n%s", out.String())
	}
}

// TestDemoServesNoDeskOverPlainHTTP: at a public URL of plain http off
// loopback — where a config with a desk does not load, as its session
// cookie must travel over https — the demo serves no desk, and says so
// and how to decide instead.
func TestDemoServesNoDeskOverPlainHTTP(t *testing.T) {
	written, out := runDemoAt(t, "http://10.0.0.5:8080")
	if written.DeskURL != "" {
		t.Fatalf("the demo names a desk at %s", written.DeskURL)
	}
	if !strings.Contains(out.String(), "No approvers' desk at http://10.0.0.5:8080") || !strings.Contains(out.String(), "approver, tenant acme: username ") {
		t.Fatalf("the demo does not say it serves no desk, or the logins:\n%s", out.String())
	}
}

// runDemo runs the demo as `make run` does, on a database of its own, from
// a fresh working directory, until the test ends; it returns the facts the
// demo wrote once it serves, and what it printed.
func runDemo(t *testing.T) (*demoFacts, *logbuf.Buffer) {
	t.Helper()
	return runDemoAt(t, "")
}

// runDemoAt is runDemo with --public-url publicURL ("": the listener's).
func runDemoAt(t *testing.T, publicURL string) (*demoFacts, *logbuf.Buffer) {
	t.Helper()
	t.Chdir(t.TempDir()) // the demo keeps its state in ./.orangerail
	// The demo sets the carrier's key here for its runtime to read; the
	// test puts back what was there.
	t.Setenv(demoCarrierEnv, "")
	dbURL := testdb.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	found := &devdb.Database{URL: dbURL, Source: devdb.SourceEnv}
	if err := seedExample(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	facts, err := newDemoFacts(found)
	if err != nil {
		t.Fatal(err)
	}
	factsPath := filepath.Join(demoStateDir, "demo.json")
	out := &logbuf.Buffer{}
	done := make(chan error, 1)
	go func() { done <- serveDemo(ctx, out, found, facts, factsPath, "127.0.0.1:0", publicURL) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the demo: %v", err)
		}
	})
	var written demoFacts
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(factsPath); err == nil && json.Unmarshal(b, &written) == nil && written.MCPURL != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo wrote no mcp_url")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The facts are written just before they are printed.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "Press Ctrl-C to stop."); {
		if time.Now().After(deadline) {
			t.Fatalf("the demo printed:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &written, out
}

// bearer sends a token on every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestDemoReturnLabel runs the demo as `make run` does and takes the
// example's create_return_label through it as its printed facts allow: the
// agent calls it with the real MCP client over HTTP with the demo's token,
// a person approves it through the API with theirs, the agent's poll calls
// the demo's carrier, which places a label, the API key placed by the
// upstream's scheme; the audit log records the attempt and the success,
// and holds no key.
func TestDemoReturnLabel(t *testing.T) {
	facts, out := runDemo(t)
	ctx := t.Context()
	key := os.Getenv(demoCarrierEnv)
	if facts.CarrierURL == "" || len(key) != 32 {
		t.Fatalf("carrier %q, key of %d characters", facts.CarrierURL, len(key))
	}
	printed := out.String()
	if !strings.Contains(printed, facts.CarrierURL+"/openapi.json") || !strings.Contains(printed, `"name":"create_return_label"`) ||
		strings.Contains(printed, key) {
		t.Fatalf("the demo printed:\n%s", printed)
	}
	if written, err := os.ReadFile(filepath.Join(demoStateDir, "demo.json")); err != nil || strings.Contains(string(written), key) {
		t.Fatalf("demo.json holds the carrier's key (%v)", err)
	}

	agent, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: *facts.MCPURL, HTTPClient: &http.Client{Transport: bearer{facts.Tokens["agent"]["acme"]}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := res.StructuredContent.(map[string]any)
		if res.IsError || got == nil {
			b, _ := json.Marshal(res.Content)
			t.Fatalf("%s: %s", tool, b)
		}
		return got
	}
	staged := call("create_return_label", map[string]any{"order_id": "o-1003", "reason": "arrived damaged", "weight_grams": 1200})
	id, _ := staged["approvalId"].(string)
	if staged["status"] != "approval_pending" || id == "" {
		t.Fatalf("staged: %v", staged)
	}

	t.Setenv(login.TokenEnv, facts.Tokens["approver"]["acme"])
	code, shown, stderr := cli(t, "approvals", "show", id, "--json", "--server", facts.ServerURL)
	var view struct {
		Digest string `json:"digest"`
		Effect string `json:"effect"`
	}
	if code != exitOK || json.Unmarshal([]byte(shown), &view) != nil || !strings.Contains(view.Effect, "prepaid return label") {
		t.Fatalf("show: exit %d %s %s", code, shown, stderr)
	}
	if code, _, stderr := cli(t, "approvals", "approve", id, "--digest", view.Digest, "--server", facts.ServerURL); code != exitOK {
		t.Fatalf("approve: exit %d %s", code, stderr)
	}

	// A token `orangerail login` kept goes to the server only when it comes
	// from an issuer the server takes.
	t.Setenv(login.TokenEnv, "")
	kept := filepath.Join(t.TempDir(), "token.json")
	t.Setenv(login.TokenFileEnv, kept)
	for issuer, want := range map[string]int{facts.Issuer: exitOK, "https://issuer.example": exitError} {
		if err := login.Save(kept, issuer, &oauth2.Token{AccessToken: facts.Tokens["approver"]["acme"], Expiry: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		code, listed, stderr := cli(t, "approvals", "list", "--status", "consumed", "--server", facts.ServerURL)
		if code != want {
			t.Fatalf("list with a token kept from %s: exit %d %s %s", issuer, code, listed, stderr)
		}
		if want == exitError {
			oneLine(t, stderr, string(errcode.TokenIssuerMismatch))
		}
	}

	done := call("check_approval", map[string]any{"approvalId": id})
	result, _ := done["result"].(map[string]any)
	body, _ := result["body"].(map[string]any)
	labelID, _ := body["id"].(string)
	if done["status"] != "executed" || result["status"] != float64(http.StatusCreated) || !strings.HasPrefix(labelID, "lbl_") ||
		body["order_id"] != "o-1003" || body["weight_grams"] != float64(1200) || body["tracking_number"] == "" ||
		body["label_url"] != facts.CarrierURL+"/labels/"+labelID+"/pdf" {
		b, _ := json.Marshal(done)
		t.Fatalf("check_approval: %s", b)
	}

	// The carrier holds that label, for the account whose key the demo set.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, facts.CarrierURL+"/labels/"+labelID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(carrier.KeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(got, labelID) {
		t.Fatalf("the carrier's label: %d %s", resp.StatusCode, got)
	}

	pool, err := pgx.Connect(ctx, facts.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	rows, err := pool.Query(ctx, "SELECT phase, convert_from(entry, 'UTF8') FROM orangerail.audit WHERE tenant_id = 'acme' AND approval_id = $1 ORDER BY id", id)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for rows.Next() {
		var phase, entry string
		if err := rows.Scan(&phase, &entry); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(entry, key) {
			t.Fatalf("the %s record holds the carrier's key", phase)
		}
		if phase == "effect_attempt" && (!strings.Contains(entry, `"number":1`) || !strings.Contains(entry, `"status":201`)) {
			t.Fatalf("effect_attempt: %s", entry)
		}
		phases = append(phases, phase)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(phases, ","); got != "staged,approved,execution_started,effect_attempt,execution_succeeded" {
		t.Fatalf("audit phases %s", got)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDemoRefusesAnAddressNoClientCanBeToldOf: served off loopback, the
// demo must be told the URL clients reach it at, and one it cannot serve
// under is refused; each is a usage error, before anything is served.
func TestDemoRefusesAnAddressNoClientCanBeToldOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ listen, publicURL, says string }{
		{"0.0.0.0:0", "", "is not a loopback address: pass --public-url"},
		{"127.0.0.1:0", "ftp://demo.example", "--public-url: "},
	} {
		err := serveDemo(t.Context(), io.Discard, &devdb.Database{}, &demoFacts{}, filepath.Join(t.TempDir(), "demo.json"), tc.listen, tc.publicURL)
		if code := errcode.Of(err); code != errcode.Usage || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("--listen %s --public-url %q: %v (%s), want %s saying %q", tc.listen, tc.publicURL, err, code, errcode.Usage, tc.says)
		}
	}
}
