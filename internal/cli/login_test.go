package cli

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/login"
)

// promptWriter hands the first verification URL `login` prints to a person
// who approves it at the issuer.
type promptWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	seen chan string
	once sync.Once
}

var completeURL = regexp.MustCompile(`\(or open (\S+)\)`)

func (p *promptWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	if m := completeURL.FindStringSubmatch(p.buf.String()); m != nil {
		p.once.Do(func() { p.seen <- m[1] })
	}
	return len(b), nil
}

// TestLoginKeepsAPersonsToken runs `orangerail login` against the
// development issuer while a person approves the code in a browser-like
// client: the token is kept owner-only, and the approvals commands send it.
func TestLoginKeepsAPersonsToken(t *testing.T) {
	iss, err := devissuer.NewWithConfig(devissuer.Config{DevicePollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.AddAccount(devissuer.Account{Username: "ada", Password: "pw of ada", Subject: "ada@example.com",
		Claims: map[string]any{"org_id": "acme", "roles": []string{"approver"}, "kind": "human"}}); err != nil {
		t.Fatal(err)
	}
	if err := iss.AddClient(devissuer.Client{ID: login.ClientIDDefault}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss.Handler())
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token.json")
	t.Setenv(login.TokenFileEnv, tokenFile)
	t.Setenv(login.TokenEnv, "")

	out := &promptWriter{seen: make(chan string, 1)}
	done := make(chan int, 1)
	go func() { done <- Run(context.Background(), []string{"login", "--issuer", srv.URL}, out, io.Discard) }()
	complete := <-out.seen

	jar, _ := cookiejar.New(nil)
	person := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := person.Get(complete)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindSubmatch(page)
	code := regexp.MustCompile(`name="user_code"[^>]*value="([^"]*)"`).FindSubmatch(page)
	if csrf == nil || code == nil {
		t.Fatalf("no device form:\n%s", page)
	}
	resp, err = person.PostForm(resp.Request.URL.String(), url.Values{"csrf": {html.UnescapeString(string(csrf[1]))},
		"user_code": {html.UnescapeString(string(code[1]))}, "username": {"ada"}, "password": {"pw of ada"}, "decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if c := <-done; c != exitOK {
		t.Fatalf("login: exit %d\n%s", c, out.buf.String())
	}
	info, err := os.Stat(tokenFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v", info, err)
	}
	tok, from, err := login.Token(tokenFile, time.Now())
	if err != nil || tok == "" || from != srv.URL {
		t.Fatalf("the kept token: %q from %q, %v", tok, from, err)
	}
	if c, _, stderr := cli(t, "login"); c != exitError || !strings.Contains(stderr, "--issuer") {
		t.Fatalf("login without an issuer: exit %d %q", c, stderr)
	}
	// An issuer the server would refuse is refused here too.
	if c, _, stderr := cli(t, "login", "--issuer", "http://10.0.0.5:8080"); c != exitError || !strings.Contains(stderr, "X_SERVER_INSECURE") ||
		!strings.Contains(stderr, "must be https") {
		t.Fatalf("login at a plain http issuer off loopback: exit %d %q", c, stderr)
	}
	// An issuer that does not answer, and one that refuses the client.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if c, _, stderr := cli(t, "login", "--issuer", closed.URL); c != exitError || !strings.Contains(stderr, "X_ISSUER_UNREACHABLE") {
		t.Fatalf("login at an issuer that does not answer: exit %d %q", c, stderr)
	}
	if c, _, stderr := cli(t, "login", "--issuer", srv.URL, "--client-id", "no-such-client"); c != exitError || !strings.Contains(stderr, "X_LOGIN_FAILED") {
		t.Fatalf("login as a client the issuer does not know: exit %d %q", c, stderr)
	}
	if tok, _, err := login.Token(tokenFile, time.Now()); err != nil || tok == "" {
		t.Fatalf("a failed login lost the kept token: %q %v", tok, err)
	}
	if c, _, stderr := cli(t, "login", "--issuer", "not a url"); c != exitError || !strings.Contains(stderr, "X_REQUEST_INVALID") || !strings.Contains(stderr, "is not a URL") {
		t.Fatalf("login at an issuer that is no URL: exit %d %q", c, stderr)
	}
}
