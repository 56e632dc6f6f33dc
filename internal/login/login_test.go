package login

import (
	"context"
	"errors"
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
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/devissuer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// issuer serves a development issuer with one person and the command
// line's public client, polled once a second.
func issuer(t *testing.T) *httptest.Server {
	t.Helper()
	iss, err := devissuer.NewWithConfig(devissuer.Config{DevicePollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.AddAccount(devissuer.Account{Username: "ada", Password: "correct horse", Subject: "ada@example.com",
		Claims: map[string]any{"org_id": "acme", "roles": []string{"approver"}, "kind": "human"}}); err != nil {
		t.Fatal(err)
	}
	if err := iss.AddClient(devissuer.Client{ID: ClientIDDefault}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// answer signs in at the device page the prompt named and approves or
// denies, as a person at a browser would.
func answer(t *testing.T, complete, decision string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.Get(complete)
	if err != nil {
		t.Error(err)
		return
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindSubmatch(page)
	code := regexp.MustCompile(`name="user_code"[^>]*value="([^"]*)"`).FindSubmatch(page)
	if m == nil || code == nil {
		t.Errorf("no device form at %s:\n%s", complete, page)
		return
	}
	form := url.Values{"csrf": {html.UnescapeString(string(m[1]))}, "user_code": {html.UnescapeString(string(code[1]))},
		"username": {"ada"}, "password": {"correct horse"}, "decision": {decision}}
	resp, err = c.PostForm(resp.Request.URL.String(), form)
	if err != nil {
		t.Error(err)
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the device page answered %d", resp.StatusCode)
	}
}

func TestDeviceSignInKeepsTheToken(t *testing.T) {
	t.Setenv(TokenEnv, "")
	srv := issuer(t)
	done := make(chan struct{})
	tok, err := Device(context.Background(), Options{Issuer: srv.URL, Prompt: func(uri, complete, userCode string) {
		if !strings.HasPrefix(uri, srv.URL) || !strings.Contains(complete, url.QueryEscape(userCode)) && !strings.Contains(complete, userCode) {
			t.Errorf("prompt: %q %q %q", uri, complete, userCode)
		}
		go func() { defer close(done); answer(t, complete, "approve") }()
	}})
	<-done
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("Device = %v, %v", tok, err)
	}

	path := filepath.Join(t.TempDir(), "conf", "token.json")
	if err := Save(path, srv.URL, tok); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("kept with mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Fatalf("its directory has mode %v, want 0700", dir.Mode().Perm())
	}
	got, from, err := Token(path, time.Now())
	if err != nil || got != tok.AccessToken || from != srv.URL {
		t.Fatalf("Token = %q from %q, %v", got, from, err)
	}
	// The environment wins, from an issuer unknown; an expired or exposed
	// token is refused.
	t.Setenv(TokenEnv, "from-the-environment")
	if got, from, _ := Token(path, time.Now()); got != "from-the-environment" || from != "" {
		t.Fatalf("Token with %s set = %q from %q", TokenEnv, got, from)
	}
	t.Setenv(TokenEnv, "")
	if _, _, err := Token(path, tok.Expiry.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired token: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Token(path, time.Now()); err == nil || !strings.Contains(err.Error(), "read by others") {
		t.Fatalf("a token others can read: %v", err)
	}
	if _, _, err := Token(filepath.Join(t.TempDir(), "none.json"), time.Now()); err == nil || !strings.Contains(err.Error(), "orangerail login") {
		t.Fatalf("no token: %v", err)
	}
}

func TestDeniedSignInKeepsNothing(t *testing.T) {
	srv := issuer(t)
	done := make(chan struct{})
	_, err := Device(context.Background(), Options{Issuer: srv.URL, Prompt: func(_, complete, _ string) {
		go func() { defer close(done); answer(t, complete, "deny") }()
	}})
	<-done
	var re *oauth2.RetrieveError
	if err == nil || !errors.As(err, &re) || re.ErrorCode != "access_denied" {
		t.Fatalf("a denied sign-in = %v", err)
	}
}

func TestIssuerWithoutDeviceGrant(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"issuer":"http://`+r.Host+`","authorization_endpoint":"http://`+r.Host+`/a","token_endpoint":"http://`+r.Host+`/t","jwks_uri":"http://`+r.Host+`/k"}`)
	}))
	defer srv.Close()
	_, err := Device(context.Background(), Options{Issuer: srv.URL, Prompt: func(string, string, string) { t.Error("prompted") }})
	if err == nil || !strings.Contains(err.Error(), TokenEnv) {
		t.Fatalf("an issuer without the device grant = %v", err)
	}
}
