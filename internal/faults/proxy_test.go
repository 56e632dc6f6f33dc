package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// proxied is a bundle whose engine reaches Postgres through a TCP proxy
// (toxiproxy, in process) that a test poisons with toxics.
type proxied struct {
	*bundle
	proxy *toxiproxy.Proxy
}

// The proxy runs' limits, short: a call into a black hole waits them out.
const (
	proxyLockTimeout      = 500 * time.Millisecond
	proxyStatementTimeout = time.Second
	// blackHoleDeadline bounds a call whose every connection goes silent:
	// each transaction it runs ends at database.Limits' client-side
	// deadline (a lock wait, two statements and a 5s grace), and a call
	// that fails runs two — its own, and the one recording its failure —
	// with slack for -race on a shared machine.
	blackHoleDeadline = 2*(proxyLockTimeout+2*proxyStatementTimeout+5*time.Second) + 5*time.Second
)

// shortLimits sets the proxy runs' limits.
var shortLimits = ontologytest.Set("limits", map[string]string{"lock_timeout": proxyLockTimeout.String(), "statement_timeout": proxyStatementTimeout.String()})

// setupProxied serves the example as setup does, with the engine's pool
// opened by database.Open on a URL that names the proxy, the config edited
// further by edits.
func setupProxied(t *testing.T, edits ...ontologytest.Edit) *proxied {
	t.Helper()
	dbURL, proxyURL, proxy := proxiedDatabase(t)
	admin := testdb.Pool(t, dbURL)
	runtime := testdb.RuntimePool(t, proxyURL)

	cfg := ontologytest.Parse(t, orders.Config, append([]ontologytest.Edit{
		shortLimits,
		ontologytest.Set("actions.add_order_note.policy.approval", "required")}, edits...)...)
	catalog, err := cfg.ReadCatalog(context.Background(), runtime)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: runtime, Effects: effects.Factories(), Catalog: catalog, Key: key,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &proxied{bundle: &bundle{admin: admin, runtime: runtime, killer: faults.NewKiller(admin), engine: e}, proxy: proxy}
}

// proxiedDatabase makes a database with the example's tables and starts a
// proxy (toxiproxy, in process) in front of its server: dbURL reaches it
// directly, proxyURL through the proxy.
func proxiedDatabase(t *testing.T) (dbURL, proxyURL string, proxy *toxiproxy.Proxy) {
	t.Helper()
	dbURL = testdb.New(t)
	if _, err := testdb.Pool(t, dbURL).Exec(context.Background(), orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	proxy = toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	u.Host = proxy.Listen
	return dbURL, u.String(), proxy
}

// poison adds a toxic to the proxy's traffic toward Postgres and returns
// the function that removes it.
func (p *proxied) poison(t *testing.T, kind string, attributes map[string]any) func() {
	t.Helper()
	return p.poisonStream(t, "upstream", kind, attributes)
}

// poisonStream adds a toxic to the proxy's traffic in one direction:
// "upstream" toward Postgres, "downstream" back from it.
func (p *proxied) poisonStream(t *testing.T, stream, kind string, attributes map[string]any) func() {
	t.Helper()
	body, err := json.Marshal(map[string]any{"name": kind, "type": kind, "stream": stream, "toxicity": 1, "attributes": attributes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := p.proxy.Toxics.RemoveToxic(context.Background(), kind); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProxyResetPeer: every connection through the proxy is reset as it
// sends: calls fail, classified, and once the network heals the same pool
// — no restart — serves the lifecycle to its end.
func TestProxyResetPeer(t *testing.T) {
	t.Parallel()
	p := setupProxied(t)
	input := json.RawMessage(`{"order_id": "o-1001", "note": "fault-reset-peer"}`)
	heal := p.poison(t, "reset_peer", map[string]any{"timeout": 0})
	out := p.call(t, "stage while reset", func(ctx context.Context) *engine.Outcome { return p.engine.Call(ctx, agent, "add_order_note", input) })
	if out.OK() {
		t.Fatalf("a stage through a resetting network answered %s", out.Status)
	}
	heal()
	executedOnce(t, p.lifecycle(t, "fault-reset-peer"))
	faults.Require(t, p.admin, noteEffect)
	for _, l := range p.log {
		t.Log(l)
	}
}

// TestProxyLatency: a slow network (latency on every packet toward
// Postgres) slows the lifecycle and changes nothing else.
func TestProxyLatency(t *testing.T) {
	t.Parallel()
	p := setupProxied(t)
	heal := p.poison(t, "latency", map[string]any{"latency": 50, "jitter": 25})
	executedOnce(t, p.lifecycle(t, "fault-latency"))
	heal()
	faults.Require(t, p.admin, noteEffect)
	for _, l := range p.log {
		t.Log(l)
	}
}

// TestProxyBlackHole: the network toward Postgres swallows everything and
// answers nothing, closing nothing (a partition, a hung host): an
// in-flight call must end, classified, within the deadline its limits
// make, and after the network heals the pool serves the lifecycle to its
// end. No limit the server keeps reaches a statement it never received:
// before database.Limits bounded a transaction on the client's side too,
// the call waited until the network healed.
func TestProxyBlackHole(t *testing.T) {
	t.Parallel()
	p := setupProxied(t)
	input := json.RawMessage(`{"order_id": "o-1001", "note": "fault-black-hole"}`)
	heal := p.poison(t, "timeout", map[string]any{"timeout": 0})
	done := make(chan *engine.Outcome, 1)
	start := time.Now()
	go func() { done <- p.engine.Call(context.Background(), agent, "add_order_note", input) }()
	select {
	case out := <-done:
		p.log = append(p.log, fmt.Sprintf("stage into a black hole: %s %s (%v) in %s", out.Status, out.Diagnostic, out.Err, time.Since(start)))
		if out.OK() || !classified(out) {
			t.Errorf("a stage into a black hole answered %s %q (%v)", out.Status, out.Diagnostic, out.Err)
		}
	case <-time.After(blackHoleDeadline):
		t.Errorf("a stage into a black hole still waits after %s", blackHoleDeadline)
		heal()
		<-done
		heal = func() {}
	}
	heal()
	executedOnce(t, p.lifecycle(t, "fault-black-hole"))
	faults.Require(t, p.admin, noteEffect)
	for _, l := range p.log {
		t.Log(l)
	}
}

// TestReadinessFollowsAnOutage: a serving runtime whose database goes
// away (every connection through the proxy reset) answers /readyz 503, and
// 200 again once the network heals, with no restart: the pool makes new
// connections by itself.
func TestReadinessFollowsAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, proxyURL, proxy := proxiedDatabase(t)
	p := &proxied{proxy: proxy}

	cfg := ontologytest.Parse(t, orders.Config, shortLimits)
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: proxyURL, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	f := front.New(front.Config{Ontology: cfg, Logger: slog.New(slog.DiscardHandler)})
	f.Mount("GET /readyz", f.Readyz(rt.Ready), front.Policy{})
	readyz := func() int {
		rec := httptest.NewRecorder()
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(reqCtx))
		return rec.Code
	}

	if code := readyz(); code != http.StatusOK {
		t.Fatalf("before the outage: /readyz %d, want 200", code)
	}
	heal := p.poison(t, "reset_peer", map[string]any{"timeout": 0})
	// Connections the pool holds are cut as they send: every one fails.
	for range 3 {
		if code := readyz(); code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage: /readyz %d, want 503", code)
		}
	}
	heal()
	deadline := time.Now().Add(10 * time.Second)
	for code := readyz(); code != http.StatusOK; code = readyz() {
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: /readyz still %d, want 200 without a restart", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
