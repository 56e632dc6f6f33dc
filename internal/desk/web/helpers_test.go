package web_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/net/html"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

const (
	tenant   = "acme"
	password = "correct horse battery staple"
	clientID = "orangerail-desk"
	// The agent stages approvals for bob: four-eyes keeps bob from
	// deciding them.
	agentFor = "bob@example.com"
)

// fixture is a desk serving the example ontology, signed in through the
// development issuer, with three people: ada and bob, approvers, and
// carol, who holds no approver role; mallory, an agent account; and
// nobody and stray, people whose tokens name no tenant (no org_id, and
// one no tenant id).
type fixture struct {
	base      string // the desk's origin
	issuerURL string
	iss       *devissuer.Issuer
	rt        *app.Runtime
	admin     *pgxpool.Pool
	desk      *web.Desk
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t)
}

// newFixtureWith is newFixture with edits to the example's config.
func newFixtureWith(t *testing.T, edits ...ontologytest.Edit) *fixture {
	t.Helper()
	ctx := context.Background()
	dbURL := testdb.New(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	var handler http.Handler // set below, before any request
	deskSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(deskSrv.Close)

	extra := fmt.Sprintf("identity:\n  oidc: {issuer: %q, audience: orangerail, tenant_claim: org_id, human: {claim: kind, values: [human]}}\n"+
		"http: {public_url: %q}\ndesk: {client_id: %s, client_secret_env: DESK_SECRET}\n", issuerSrv.URL, deskSrv.URL, clientID)
	cfg, err := ontology.Parse(ontologytest.Apply(t, append(slices.Clip(orders.Config), extra...), edits...))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	admission, err := identity.AdmissionOf(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{Admission: admission})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "desk secret for tests"
	desk, err := web.New(web.Config{Ontology: cfg, ClientSecret: secret, Engine: rt.Engine, Store: rt.Store, Resolver: resolver,
		PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Served behind the front, as the app serves it.
	door := front.New(front.Config{Ontology: cfg, Limiter: &countingLimiter{hits: map[string]int{}}, Logger: slog.New(slog.DiscardHandler)})
	app.MountDesk(door, desk)
	handler = door
	if err := iss.AddClient(devissuer.Client{ID: clientID, Secret: secret, RedirectURIs: []string{deskSrv.URL + web.Path + "/callback"}}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []devissuer.Account{
		{Username: "ada", Subject: "ada@example.com", Claims: map[string]any{"org_id": tenant, "roles": []string{"approver"}, "kind": "human"}},
		{Username: "bob", Subject: agentFor, Claims: map[string]any{"org_id": tenant, "roles": []string{"approver", "support"}, "kind": "human"}},
		{Username: "carol", Subject: "carol@example.com", Claims: map[string]any{"org_id": tenant, "roles": []string{"support"}, "kind": "human"}},
		{Username: "fin", Subject: "fin@example.com", Claims: map[string]any{"org_id": tenant, "roles": []string{"finance"}, "kind": "human"}},
		{Username: "eve", Subject: "eve@example.com", Claims: map[string]any{"org_id": "globex", "roles": []string{"approver"}, "kind": "human"}},
		{Username: "mallory", Subject: "agent-9", Claims: map[string]any{"org_id": tenant, "roles": []string{"approver"}}},
		{Username: "nobody", Subject: "nobody@example.com", Claims: map[string]any{"roles": []string{"approver"}, "kind": "human"}},
		{Username: "stray", Subject: "stray@example.com", Claims: map[string]any{"org_id": "../globex", "roles": []string{"approver"}, "kind": "human"}},
		{Username: "nul", Subject: "nul@example.com", Claims: map[string]any{"org_id": tenant, "roles": []string{"approver", "support\x00"}, "kind": "human"}},
	} {
		a.Password = password
		if err := iss.AddAccount(a); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{base: deskSrv.URL, issuerURL: issuerSrv.URL, iss: iss, rt: rt, admin: testdb.Pool(t, dbURL), desk: desk}
}

// agent is the agent acting for bob.
var agent = &engine.Caller{Subject: agentFor, Tenant: tenant, Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}

// stage has the agent ask to cancel an order, through the engine as MCP
// would, and returns the approval's id.
func (f *fixture) stage(t *testing.T, order string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"order_id": order, "reason": "customer asked"})
	out := f.rt.Engine.Call(context.Background(), agent, "cancel_order", args)
	if out.Status != engine.StatusApprovalPending || out.ApprovalID == nil {
		t.Fatalf("staging: %+v", out)
	}
	return out.ApprovalID.String()
}

// client is a person's browser without a script engine: a cookie jar
// that does not follow redirects by itself.
type client struct {
	t    *testing.T
	f    *fixture
	http *http.Client
}

// response is one answer the client got.
type response struct {
	url    string
	status int
	header http.Header
	body   string
}

func (f *fixture) client(t *testing.T) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, f: f, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{url: req.URL.String(), status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (c *client) get(u string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

func (c *client) post(u string, form url.Values, header http.Header) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		req.Header[k] = vs
	}
	return c.do(req)
}

// follow follows redirects from r, resolving each Location against the
// URL it came from.
func (c *client) follow(r response) response {
	c.t.Helper()
	for range 10 {
		if r.status != http.StatusSeeOther && r.status != http.StatusFound {
			return r
		}
		from, _ := url.Parse(r.url)
		to, err := from.Parse(r.header.Get("Location"))
		if err != nil {
			c.t.Fatal(err)
		}
		r = c.get(to.String())
	}
	c.t.Fatal("too many redirects")
	return r
}

// signIn signs in as username through the issuer's login page and returns
// the page the desk lands on.
func (c *client) signIn(username string) response {
	c.t.Helper()
	login := c.follow(c.get(c.f.base + web.Path))
	if login.status != http.StatusOK || !strings.HasPrefix(login.url, c.f.issuerURL) {
		c.t.Fatalf("the desk did not send the browser to the issuer's login page: %d %s\n%s", login.status, login.url, login.body)
	}
	return c.follow(c.submit(login, "/authorize", map[string]string{"username": username, "password": password, "action": "sign_in"}))
}

// submit fills the page's form named key (its id, else its action): its
// own fields, then fill on top.
func (c *client) submit(p response, key string, fill map[string]string) response {
	c.t.Helper()
	f, ok := formsOf(c.t, p.body)[key]
	if !ok {
		c.t.Fatalf("no form %s on %s:\n%s", key, p.url, p.body)
	}
	for k, v := range fill {
		f.values.Set(k, v)
	}
	from, _ := url.Parse(p.url)
	to, err := from.Parse(f.action)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.post(to.String(), f.values, nil)
}

type form struct {
	action string
	values url.Values
}

// formsOf returns the POST forms of a page with their named inputs, by id,
// or by action when they have none.
func formsOf(t *testing.T, body string) map[string]*form {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]*form{}
	var walk func(n *html.Node, f *form)
	walk = func(n *html.Node, f *form) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
			}
			switch {
			case n.Data == "form" && strings.EqualFold(attrs["method"], "post"):
				f = &form{action: attrs["action"], values: url.Values{}}
				forms[cmp.Or(attrs["id"], attrs["action"])] = f
			case n.Data == "input" && f != nil && attrs["name"] != "":
				f.values.Set(attrs["name"], attrs["value"])
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, f)
		}
	}
	walk(doc, nil)
	return forms
}

// formToken is the session's form token as its pages carry it.
func formToken(t *testing.T, p response) string {
	t.Helper()
	f, ok := formsOf(t, p.body)[web.Path+"/signout"]
	if !ok || f.values.Get("form_token") == "" {
		t.Fatalf("no form token on %s:\n%s", p.url, p.body)
	}
	return f.values.Get("form_token")
}

// sessionCookie is the client's session cookie value.
func (c *client) sessionCookie() string {
	u, _ := url.Parse(c.f.base)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "orangerail_desk" {
			return ck.Value
		}
	}
	return ""
}

// countingLimiter counts every hit in one window that never ends, so a
// test's limit does not depend on the minute it runs in.
type countingLimiter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (l *countingLimiter) Hit(_ context.Context, bucket string, _ int) (int, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hits[bucket]++
	return l.hits[bucket], time.Now().Add(time.Minute), nil
}
