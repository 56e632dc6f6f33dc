package devissuer_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/devissuer"
)

// The people and clients every test issuer knows.
const (
	username = "ada"
	password = "correct horse battery staple"
	subject  = "person-ada"

	deskClient   = "desk" // confidential, authorization code
	deskSecret   = "desk-secret"
	deskRedirect = "http://127.0.0.1:9/approvals/callback"
	spaClient    = "spa" // public, authorization code
	spaRedirect  = "http://127.0.0.1:9/spa"
	cliClient    = "cli" // public, device grant only
)

func accountClaims() map[string]any {
	return map[string]any{"org_id": "acme", "roles": []any{"approver"}, "kind": "human", "name": "Ada"}
}

// fixture is an issuer served over HTTP with one account and three clients.
type fixture struct {
	issuer   *devissuer.Issuer
	url      string
	provider *oidc.Provider
}

func newFixture(t *testing.T, cfg devissuer.Config) *fixture {
	t.Helper()
	iss, err := devissuer.NewWithConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := iss.AddAccount(devissuer.Account{Username: username, Password: password, Subject: subject, Claims: accountClaims()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []devissuer.Client{
		{ID: deskClient, Secret: deskSecret, RedirectURIs: []string{deskRedirect}},
		{ID: spaClient, RedirectURIs: []string{spaRedirect}},
		{ID: cliClient},
	} {
		if err := iss.AddClient(c); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(iss.Handler())
	t.Cleanup(srv.Close)
	provider, err := oidc.NewProvider(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{issuer: iss, url: srv.URL, provider: provider}
}

func (f *fixture) oauth(clientID, secret, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirect,
		Endpoint: f.provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID}}
}

// browser is an HTTP client with its own cookies that does not follow
// redirects, so a test sees where the issuer sends it.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is one response the browser got.
type page struct {
	url    string
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{url: req.URL.String(), status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(u string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(u string, form url.Values, header http.Header) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		req.Header[k] = vs
	}
	return b.do(req)
}

// submit fills the page's form like a person would: the form's own fields
// (hidden ones included), then fill on top (the typed fields and the
// button pressed), posted to the form's action.
func (b *browser) submit(p page, fill map[string]string) page {
	b.t.Helper()
	action, values := parseForm(b.t, p.body)
	for k, v := range fill {
		values.Set(k, v)
	}
	target, err := url.Parse(p.url)
	if err != nil {
		b.t.Fatal(err)
	}
	to, err := target.Parse(action)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.post(to.String(), values, nil)
}

// parseForm returns the action and the named inputs of the page's form.
func parseForm(t *testing.T, body string) (string, url.Values) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var action string
	var found bool
	values := url.Values{}
	var walk func(n *html.Node, inForm bool)
	walk = func(n *html.Node, inForm bool) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
			}
			switch {
			case n.Data == "form" && !found:
				found, inForm, action = true, true, attrs["action"]
				if !strings.EqualFold(attrs["method"], "post") {
					t.Fatalf("the form's method is %q, want post", attrs["method"])
				}
			case n.Data == "input" && inForm && attrs["name"] != "":
				values.Set(attrs["name"], attrs["value"])
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inForm)
		}
	}
	walk(doc, false)
	if !found {
		t.Fatalf("no form on the page:\n%s", body)
	}
	return action, values
}

// signIn opens authURL, signs in and returns the URL the issuer redirects
// to.
func signIn(t *testing.T, b *browser, authURL, user, pass string) *url.URL {
	t.Helper()
	login := b.get(authURL)
	if login.status != http.StatusOK {
		t.Fatalf("login page: status %d:\n%s", login.status, login.body)
	}
	return redirected(t, b.submit(login, map[string]string{"username": user, "password": pass, "action": "sign_in"}))
}

func redirected(t *testing.T, p page) *url.URL {
	t.Helper()
	if p.status != http.StatusSeeOther {
		t.Fatalf("status %d, want a 303 redirect:\n%s", p.status, p.body)
	}
	u, err := url.Parse(p.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// oauthError returns the OAuth error code and HTTP status of err.
func oauthError(t *testing.T, err error) (string, int) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not an OAuth error", err)
	}
	return re.ErrorCode, re.Response.StatusCode
}

// tokenCall posts to the token endpoint without an OAuth library, to see
// exactly what a client would.
func tokenCall(t *testing.T, f *fixture, form url.Values) (int, map[string]any) {
	t.Helper()
	p := newBrowser(t).post(f.provider.Endpoint().TokenURL, form, nil)
	var body map[string]any
	if err := json.Unmarshal([]byte(p.body), &body); err != nil {
		t.Fatalf("token endpoint answered %d with non-JSON %q", p.status, p.body)
	}
	if p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("token endpoint Cache-Control = %q, want no-store", p.header.Get("Cache-Control"))
	}
	return p.status, body
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
