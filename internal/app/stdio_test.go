package app

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// clock is a test's settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// TestStdioUnderAToken serves stdio as the caller of a development
// issuer's token: its tools, audit records naming its subject and never
// stamped dev_mode; a missing, forged or expired token refuses to start
// with X_STDIO_TOKEN_REFUSED; and once the session's token expires every
// request (tools/list, tools/call) is refused as unauthenticated.
func TestStdioUnderAToken(t *testing.T) {
	ctx := context.Background()
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	url := testdb.New(t)
	if _, err := testdb.Pool(t, url).Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id"}
	start := time.Now()
	clk := &clock{t: start}
	opts := identity.ResolverOptions{NowFunc: clk.now}
	mint := func(expiry time.Time) string {
		tok, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-7", Audience: "orangerail", Expiry: expiry,
			Extra: map[string]any{"org_id": "acme", "roles": []string{"support"}, "scope": "orders:write"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	refused := func(name, token string, want errcode.Code) {
		t.Helper()
		_, err := verifyStdioToken(ctx, cfg, token, opts)
		var coded *errcode.Error
		if !errors.As(err, &coded) || coded.Code != want {
			t.Fatalf("%s: %v, want %s", name, err, want)
		}
		if token != "" && strings.Contains(err.Error(), token) {
			t.Fatalf("%s: the error holds the token", name)
		}
	}
	refused("no token", "", errcode.StdioTokenRefused)
	refused("not a token", "not-a-token", errcode.StdioTokenRefused)
	refused("expired", mint(start.Add(-time.Hour)), errcode.StdioTokenRefused)
	forger, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := devissuer.SignWith(forger, devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-7", Audience: "orangerail",
		Expiry: start.Add(time.Hour), Extra: map[string]any{"org_id": "acme", "roles": []string{"support"}}})
	if err != nil {
		t.Fatal(err)
	}
	refused("forged", forged, errcode.StdioTokenRefused)
	noOIDC := *cfg
	noOIDC.Identity.OIDC = nil
	var coded *errcode.Error
	if _, err := verifyStdioToken(ctx, &noOIDC, mint(start.Add(time.Hour)), opts); !errors.As(err, &coded) || coded.Code != errcode.IdentityRequired {
		t.Fatalf("no identity.oidc: %v", err)
	}

	// A variable read from a file keeps its line's end.
	if _, err := verifyStdioToken(ctx, cfg, mint(start.Add(time.Hour))+"\n", opts); err != nil {
		t.Fatalf("a token ending in a newline: %v", err)
	}
	expiry := start.Add(10 * time.Minute)
	id, err := verifyStdioToken(ctx, cfg, mint(expiry), opts)
	if err != nil {
		t.Fatal(err)
	}
	if id.Caller.Subject != "agent-7" || id.Caller.Tenant != "acme" || id.Caller.DevMode {
		t.Fatalf("caller %+v", id.Caller.Caller)
	}
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: url, Key: make([]byte, engine.KeySize), Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	serverT, clientT := sdk.NewInMemoryTransports()
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.MCP.RunChecked(serveCtx, &id.Caller.Caller, id.Check, serverT) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the stdio session: %v", err)
		}
	})
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if want := rt.MCP.ToolNames(&id.Caller.Caller); strings.Join(names, ",") != strings.Join(want, ",") || len(want) == 0 {
		t.Fatalf("tools %v, want the token caller's %v", names, want)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "o-1001", "reason": "asked"}})
	if err != nil || res.IsError {
		t.Fatalf("cancel_order: %v %+v", err, res)
	}
	var records, foreign int
	if err := testdb.Pool(t, url).QueryRow(ctx,
		"SELECT count(*), count(*) FILTER (WHERE actor <> 'agent-7' OR dev_mode) FROM orangerail.audit").Scan(&records, &foreign); err != nil {
		t.Fatal(err)
	}
	if records == 0 || foreign != 0 {
		t.Fatalf("audit: %d records, %d not the token's caller or stamped dev_mode", records, foreign)
	}

	// Within the clock skew the token is still honoured, as over HTTP;
	// past it, every request is refused.
	clk.set(expiry.Add(identity.ClockSkewDefault + time.Second))
	if _, err := cs.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), string(errcode.StdioTokenRefused)) {
		t.Fatalf("tools/list after expiry: %v", err)
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}); err == nil ||
		!strings.Contains(err.Error(), string(errcode.StdioTokenRefused)) {
		t.Fatalf("tools/call after expiry: %v", err)
	}
}
