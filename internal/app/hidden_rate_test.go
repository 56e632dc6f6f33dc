package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAHiddenToolIsBilledAsAnAbsentOne: hidden ≠ forbidden holds at the
// front's allowances too. A tools/call of a tool the caller does not see
// must be billed as a call of a tool that does not exist (a write), or
// the caller learns which names are real tools kept from it: once its
// writes are spent, an absent tool answers 429 and a hidden read tool
// answers as unknown.
func TestAHiddenToolIsBilledAsAnAbsentOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.New(t)
	if _, err := testdb.Pool(t, dbURL).Exec(ctx, orders.Seed); err != nil {
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
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id"}
	r := &cfg.HTTP.RateLimits
	r.Store, r.ReadsPerMinute, r.WritesPerMinute, r.FailedAuthPerMinute = ontology.RateLimitMemory, 1000, 1, 1000
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: dbURL, Key: bytes.Repeat([]byte{7}, engine.KeySize), Serve: true, SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.routes(resolver)
	if err != nil {
		t.Fatal(err)
	}
	// An agent without the roles customer is read with: customer_get is
	// hidden from it.
	token, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-9", Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme", "scope": "orders:read"}})
	if err != nil {
		t.Fatal(err)
	}
	callTool := func(name string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{"id":"c-1"}}}`
		req := httptest.NewRequest(http.MethodPost, MCPPath, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	// The one write of the minute, spent on a tool that does not exist.
	if code, body := callTool("no_such_tool"); code != http.StatusOK {
		t.Fatalf("the first call: %d %s", code, body)
	}
	absentCode, absent := callTool("no_such_tool")
	hiddenCode, hidden := callTool("customer_get")
	if absentCode != http.StatusTooManyRequests || hiddenCode != absentCode {
		t.Fatalf("an absent tool answered %d %s\na hidden one %d %s", absentCode, absent, hiddenCode, hidden)
	}
}
