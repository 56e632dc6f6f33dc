package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// desk is the app serving HTTP on a real database, with an OIDC issuer
// whose tokens the API verifies as the app verifies every token.
type desk struct {
	t        *testing.T
	base     string
	issuer   *devissuer.Issuer
	issuerAt string
	rt       *app.Runtime
	admin    *pgxpool.Pool
	key      []byte
}

// personClaim marks a token as a person's (identity.oidc.human).
const personClaim = "actor_type"

func newDesk(t *testing.T, edit func(*ontology.Config), settings func(*app.Settings)) *desk {
	t.Helper()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
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
		Human: &ontology.HumanRule{Claim: personClaim, Values: []string{"person"}}}
	cfg.HTTP.RateLimits.Store = ontology.RateLimitMemory
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.PublicURL = "http://" + ln.Addr().String()
	if edit != nil {
		edit(cfg)
	}
	key := bytes.Repeat([]byte{7}, engine.KeySize)
	s := app.Settings{Config: cfg, DatabaseURL: url, Key: key, Serve: true, SweepEvery: time.Hour}
	if settings != nil {
		settings(&s)
	}
	rt, err := app.Open(ctx, s)
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
	return &desk{t: t, base: cfg.HTTP.PublicURL, issuer: iss, issuerAt: issuerSrv.URL, rt: rt, admin: admin, key: key}
}

// token mints a token of subject in tenant with roles; person marks it a
// person's.
func (d *desk) token(subject, tenant string, person bool, roles ...string) string {
	d.t.Helper()
	extra := map[string]any{"org_id": tenant, "roles": roles}
	if person {
		extra[personClaim] = "person"
	}
	tok, err := d.issuer.Token(devissuer.Claims{Issuer: d.issuerAt, Subject: subject, Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: extra})
	if err != nil {
		d.t.Fatal(err)
	}
	return tok
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a *answer) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("not JSON (%d): %s", a.status, a.body)
	}
	return v
}

// code is the error code of a refusal.
func (a *answer) code(t *testing.T) string {
	t.Helper()
	e, _ := a.json(t)["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// message is the message of a refusal.
func (a *answer) message(t *testing.T) string {
	t.Helper()
	e, _ := a.json(t)["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (d *desk) do(method, path, token, body string) *answer {
	d.t.Helper()
	return d.doWith(method, path, token, body, nil)
}

// doWith is do with header's fields added to the request.
func (d *desk) doWith(method, path, token, body string, header http.Header) *answer {
	d.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.base+path, r)
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, values := range header {
		req.Header[name] = values
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// stage has caller call an action through the engine, as the MCP server
// does for a verified agent, and returns the approval's id.
func (d *desk) stage(e *engine.Engine, caller *engine.Caller, action, args string) string {
	d.t.Helper()
	out := e.Call(context.Background(), caller, action, json.RawMessage(args))
	if out.Status != engine.StatusApprovalPending {
		d.t.Fatalf("stage %s: %s %s %v", action, out.Status, out.Code, out.Err)
	}
	return out.ApprovalID.String()
}

// agent is a verified agent of tenant, as the resolver makes it.
func (d *desk) agent(subject, tenant string) *engine.Caller {
	return &engine.Caller{Subject: subject, Issuer: d.issuerAt, Tenant: tenant, Roles: []string{"support"},
		Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
}

// pastEngine is an engine on the desk's database whose clock runs almost a
// day behind, so the approvals it stages lapse at once.
func (d *desk) pastEngine() *engine.Engine {
	d.t.Helper()
	cfg := d.rt.Config
	catalog, err := cfg.ReadCatalog(context.Background(), d.rt.Store)
	if err != nil {
		d.t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: d.rt.Store, Effects: effects.Factories(), Catalog: catalog, Key: d.key,
		Mode: engine.ModeOf(cfg.Preset), NowFunc: func() time.Time { return time.Now().Add(-24*time.Hour + 200*time.Millisecond) }})
	if err != nil {
		d.t.Fatal(err)
	}
	return e
}

// waitLapsed waits until the database's clock passes the approval's
// expiry: expiry is a semantic, not a speed.
func (d *desk) waitLapsed(id string) {
	d.t.Helper()
	for lapsing := true; lapsing; {
		if err := d.admin.QueryRow(context.Background(), "SELECT expires_at > now() FROM orangerail.approvals WHERE id = $1", id).Scan(&lapsing); err != nil {
			d.t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHeadIsBilledAsARead: a GET route answers HEAD too, and a HEAD is a
// read: it was billed as a write, so a monitor polling the list with HEAD
// spent the person's allowance of decisions, and a decision was refused
// 429.
func TestHeadIsBilledAsARead(t *testing.T) {
	t.Parallel()
	d := newDesk(t, func(cfg *ontology.Config) {
		r := &cfg.HTTP.RateLimits
		r.ReadsPerMinute, r.WritesPerMinute = 1000, 1
	}, nil)
	alice := d.token("alice@example.com", "acme", true, "approver")
	for range 3 {
		if a := d.do(http.MethodHead, "/api/v1/approvals", alice, ""); a.status != http.StatusOK {
			t.Fatalf("HEAD the list: %d %s", a.status, a.body)
		}
	}
	// The one write of the minute is still the person's.
	id := d.stage(d.rt.Engine, d.agent("agent-7", "acme"), "cancel_order", `{"order_id": "o-1001", "reason": "customer asked"}`)
	if a := d.do(http.MethodPost, "/api/v1/approvals/"+id+"/decision", alice, `{"decision": "reject"}`); a.status != http.StatusOK {
		t.Fatalf("the minute's one decision, after three HEADs: %d %s", a.status, a.body)
	}
}
