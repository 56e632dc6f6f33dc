package browsertest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/browsertest"
	"github.com/orangerail/orangerail/internal/devissuer"
)

func TestMain(m *testing.M) { browsertest.Main(m) }

// TestSignInAtTheDevIssuerInABrowser signs in through the development
// issuer's login page as a person would: the page loads under its
// Content-Security-Policy with its stylesheet, the form is typed into and
// submitted, and the browser lands on the client's redirect URI with a code
// and the state, a code the client then exchanges.
func TestSignInAtTheDevIssuerInABrowser(t *testing.T) {
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)

	// The client's redirect URI: it records what the browser brought.
	arrived := make(chan url.Values, 1)
	client := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- r.URL.Query():
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>back</title><p id="back">back at the client</p>`))
	}))
	t.Cleanup(client.Close)
	const username, password = "ada", "correct horse battery staple"
	if err := iss.AddAccount(devissuer.Account{Username: username, Password: password, Subject: "person-ada",
		Claims: map[string]any{"org_id": "acme"}}); err != nil {
		t.Fatal(err)
	}
	config := &oauth2.Config{ClientID: "desk", RedirectURL: client.URL + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: issuerSrv.URL + "/authorize", TokenURL: issuerSrv.URL + "/token"}, Scopes: []string{"openid"}}
	if err := iss.AddClient(devissuer.Client{ID: config.ClientID, RedirectURIs: []string{config.RedirectURL}}); err != nil {
		t.Fatal(err)
	}
	verifier, state := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()

	ctx := browsertest.New(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(config.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))),
		chromedp.WaitVisible(chromedp.ID("username")),
	); err != nil {
		t.Fatal(err)
	}
	// The stylesheet loaded under the CSP (style-src 'self').
	banner, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector(".banner")).backgroundColor`))
	if err != nil || banner != "rgb(255, 210, 77)" {
		t.Errorf("the banner's background is %q (%v): the stylesheet did not apply", banner, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
	); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "login.png")
	browsertest.Screenshot(ctx, t, shot)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("the screenshot is not a PNG (%d bytes, %v)", len(png), err)
	}

	// The wait is bounded below the tab's timeout, so that a redirect the
	// browser refuses (a CSP form-action that leaves the client's origin
	// out blocks it) is reported with where the browser stopped.
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(wait,
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("back")),
	); err != nil {
		at, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("after sign-in the browser did not reach the client: %v; it is at %s", err, at)
	}
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	landed, err := url.Parse(location)
	if err != nil {
		t.Fatal(err)
	}
	q := landed.Query()
	if landed.Scheme+"://"+landed.Host+landed.Path != config.RedirectURL || q.Get("state") != state || q.Get("code") == "" {
		t.Fatalf("the browser landed at %s; want %s with the state and a code", location, config.RedirectURL)
	}
	if got := <-arrived; got.Get("code") != q.Get("code") {
		t.Fatalf("the client received %v", got)
	}
	if _, err := config.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(verifier)); err != nil {
		t.Fatalf("the code the browser brought does not exchange: %v", err)
	}
}

// TestTabsDoNotShareCookies: two calls to New are two browsers as far as
// a site can tell.
func TestTabsDoNotShareCookies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "who", Value: "first", Path: "/"})
		}
		c, _ := r.Cookie("who")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		value := "none"
		if c != nil {
			value = c.Value
		}
		_, _ = w.Write([]byte(`<!doctype html><p id="who">` + value + `</p>`))
	}))
	t.Cleanup(srv.Close)
	read := func(ctx context.Context, path string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path)); err != nil {
			t.Fatal(err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("who")))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	first, second := browsertest.New(t), browsertest.New(t)
	read(first, "/set")
	if got := read(first, "/"); got != "first" {
		t.Fatalf("the first tab lost its cookie: %q", got)
	}
	if got := read(second, "/"); got != "none" {
		t.Fatalf("the second tab sees the first one's cookie: %q", got)
	}
}

func TestPathFailsWithTheInstallCommand(t *testing.T) {
	t.Setenv("CHROMIUM", filepath.Join(t.TempDir(), "no-such-browser"))
	_, err := browsertest.Path()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(browsertest.InstallCommand)) {
		t.Fatalf("Path without a browser: %v", err)
	}
}
