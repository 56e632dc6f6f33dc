package front_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/engine/enginetest"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// counting is the real OIDC resolver, counting the tokens it is asked to
// verify.
type counting struct {
	*identity.Resolver
	calls atomic.Int32
}

func (c *counting) Resolve(ctx context.Context, token string) (*identity.Caller, error) {
	c.calls.Add(1)
	return c.Resolver.Resolve(ctx, token)
}

type fixture struct {
	url      string
	issuer   *devissuer.Issuer
	issuerAt string
	resolver *counting
	served   atomic.Int32
	hooks    *engine.Hooks
	events   *enginetest.Recorder
}

// token mints a valid token for subject in tenant acme.
func (f *fixture) token(t *testing.T, subject string) string {
	t.Helper()
	tok, err := f.issuer.Token(devissuer.Claims{Issuer: f.issuerAt, Subject: subject, Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// newDoor serves a front whose MCP endpoint answers 200 with the caller's
// subject; cfgEdit adjusts the example config. Tokens are verified as the
// app verifies them, by mcp.Authenticator.
func newDoor(t *testing.T, limiter front.Limiter, cfgEdit func(*ontology.Config)) *fixture {
	t.Helper()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id"}
	// Not the test server's own URL: the front names the configured one.
	cfg.HTTP.PublicURL = publicURL
	if cfgEdit != nil {
		cfgEdit(cfg)
	}
	admission, err := identity.AdmissionOf(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{Admission: admission})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{issuer: iss, issuerAt: issuerSrv.URL, resolver: &counting{Resolver: resolver}, hooks: engine.NewHooks(), events: &enginetest.Recorder{}}
	f.hooks.Subscribe(0, f.events.Record)
	t.Cleanup(f.hooks.Close)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.served.Add(1)
		_, _ = io.WriteString(w, front.CallerFrom(r.Context()).Subject)
	})
	h := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(f.resolver), Limiter: limiter,
		Logger: slog.New(slog.DiscardHandler), Hooks: f.hooks})
	mount(h, cfg, echo)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// mount mounts the routes as the app does, endpoint in place of the MCP
// handler.
func mount(h *front.Front, cfg *ontology.Config, endpoint http.Handler) {
	h.Mount(mcpPath, endpoint, front.Policy{
		Auth: front.AuthBearer, Resource: mcpPath, CheckOrigin: true,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, OneMessage: true,
		Rate: front.ToolCalls(func(tool string, _ map[string]any) front.Class {
			if strings.HasSuffix(tool, "_get") {
				return front.ClassRead
			}
			return front.ClassWrite
		}),
	})
	metadata := h.Metadata(mcpPath)
	h.MountMetadata(front.MetadataPath(mcpPath), metadata)
	h.MountMetadata(front.MetadataPath(""), metadata)
	h.Mount("GET /healthz", front.Healthz(), front.Policy{})
	h.Mount("GET /readyz", h.Readyz(func(context.Context) error { return nil }), front.Policy{})
}

// mcpPath is where the tests mount MCP, as the app does.
const mcpPath = "/mcp"

// reply is what a test reads of a response: its body is read and closed
// by the helper that made the request.
type reply struct {
	StatusCode int
	Header     http.Header
}

func replyOf(resp *http.Response) *reply {
	return &reply{StatusCode: resp.StatusCode, Header: resp.Header}
}

func post(t *testing.T, url, token, body string, header ...string) (*reply, map[string]any) {
	t.Helper()
	resp, b := request(t, http.MethodPost, url+mcpPath, token, body, append([]string{"Content-Type", "application/json"}, header...)...)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, m
}

// hostPost is post with the request's Host header set to host.
func hostPost(t *testing.T, url, token, host, body string, header ...string) (*reply, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+mcpPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return replyOf(resp), m
}

// request sends one request, with a bearer token unless token is empty and
// the header's name-value pairs, and returns the reply and its body, read
// and closed.
func request(t *testing.T, method, url, token, body string, header ...string) (*reply, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return replyOf(resp), b
}

func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	code, _ := data["code"].(string)
	if fix, _ := data["fix"].(string); fix == "" {
		return code + " (no fix)"
	}
	return code
}

// publicURL is the URL the test fronts are configured to be reached at.
const publicURL = "https://mcp.example.com"

const callGet = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1"}}}`
const callAction = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cancel_order","arguments":{}}}`

func TestChallenge(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), nil)
	resp, m := post(t, f.url, "", callGet)
	want := `Bearer realm="orangerail", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want || errorCode(m) != "X_MCP_UNAUTHORIZED" {
		t.Fatalf("no token: %d %q %v", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), m)
	}
	resp, _ = post(t, f.url, "forged", callGet)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want+`, error="invalid_token"` {
		t.Fatalf("bad token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, _ := post(t, f.url, f.token(t, "agent"), callGet); resp.StatusCode != http.StatusOK {
		t.Fatalf("good token: %d", resp.StatusCode)
	}
	// Two credentials in one request: which is meant is not guessed.
	req, err := http.NewRequest(http.MethodPost, f.url+mcpPath, strings.NewReader(callGet))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Add("Authorization", "Bearer "+f.token(t, "agent"))
	req.Header.Add("Authorization", "Bearer "+f.token(t, "agent"))
	two, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	two.Body.Close()
	if two.StatusCode != http.StatusUnauthorized || two.Header.Get("WWW-Authenticate") != want+`, error="invalid_token"` {
		t.Fatalf("two Authorization headers: %d %q", two.StatusCode, two.Header.Get("WWW-Authenticate"))
	}

	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		servers, _ := doc["authorization_servers"].([]any)
		if doc["resource"] != publicURL+"/mcp" || len(servers) != 1 || servers[0] != f.issuerAt ||
			fmt.Sprint(doc["scopes_supported"]) != "[orders:write]" {
			t.Fatalf("%s: %v", path, doc)
		}
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		resp, err := http.Get(f.url + path)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
}

// TestHostIsNotEchoed: the challenge and the protected-resource metadata
// name the configured public URL, whatever Host or forwarding headers a
// request claims — even behind trusted proxies. (The test server listens
// on loopback, where /mcp refuses a Host naming no loopback host before
// any challenge: that refusal echoes nothing either.)
func TestHostIsNotEchoed(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.HTTP.PublicURL = "https://mcp.example.com:8443/" // a trailing slash is not doubled
	})
	hostile := func(req *http.Request, host string) {
		req.Host = host
		req.Header.Set("X-Forwarded-Proto", "http")
		req.Header.Set("X-Forwarded-Host", "evil.example.com")
	}
	for _, host := range []string{"localhost:1", "evil.example.com"} {
		req, _ := http.NewRequest(http.MethodPost, f.url+mcpPath, strings.NewReader(callGet))
		hostile(req, host)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "evil") || strings.Contains(string(body), "localhost:1") {
			t.Fatalf("Host %s: the answer echoes it: %s", host, body)
		}
		if host == "evil.example.com" {
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), string(errcode.MCPHostRefused)) {
				t.Fatalf("Host %s over loopback: %d %s", host, resp.StatusCode, body)
			}
			continue
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="orangerail", resource_metadata="https://mcp.example.com:8443/.well-known/oauth-protected-resource/mcp"` {
			t.Fatalf("challenge: %q", got)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+"/.well-known/oauth-protected-resource/mcp", nil)
	hostile(req, "evil.example.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if doc["resource"] != "https://mcp.example.com:8443/mcp" {
		t.Fatalf("metadata: %v", doc)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.MaxBodyBytes = 4096
		c.HTTP.AllowedOrigins = []string{"https://console.example.com"}
	})
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"` + strings.Repeat("x", 5000) + `"}}}`
	resp, m := post(t, f.url, f.token(t, "agent"), big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(m) != "X_MCP_BODY_TOO_LARGE" {
		t.Fatalf("oversized: %d %v", resp.StatusCode, m)
	}
	if resp, _ := post(t, f.url, f.token(t, "agent"), callGet); resp.StatusCode != http.StatusOK {
		t.Fatalf("after an oversized body the server stopped serving: %d", resp.StatusCode)
	}
	for _, batch := range []string{"[" + callGet + "]", "  \n[" + callGet + "," + callGet + "]"} {
		resp, m = post(t, f.url, f.token(t, "agent"), batch, "MCP-Protocol-Version", "2025-03-26")
		if resp.StatusCode != http.StatusBadRequest || errorCode(m) != "X_MCP_PROTOCOL" {
			t.Fatalf("batch: %d %v", resp.StatusCode, m)
		}
	}
	// A body shorter than its Content-Length, the connection then half
	// closed: no message, let alone a batch.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"", mcpPath, strings.TrimPrefix(f.url, "http://"), f.token(t, "agent")); err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	short, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer short.Body.Close()
	shortBody, _ := io.ReadAll(short.Body)
	var shortAnswer map[string]any
	_ = json.Unmarshal(shortBody, &shortAnswer)
	if short.StatusCode != http.StatusBadRequest || errorCode(shortAnswer) != "X_MCP_INVALID_REQUEST" {
		t.Fatalf("a body shorter than its Content-Length: %d %s", short.StatusCode, shortBody)
	}
	resp, m = post(t, f.url, f.token(t, "agent"), callGet, "Origin", "https://evil.example.com")
	if resp.StatusCode != http.StatusForbidden || errorCode(m) != "X_MCP_ORIGIN_REFUSED" {
		t.Fatalf("foreign origin: %d %v", resp.StatusCode, m)
	}
	if resp, _ := post(t, f.url, f.token(t, "agent"), callGet, "Origin", "https://console.example.com"); resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed origin: %d", resp.StatusCode)
	}
	if f.served.Load() != 2 { // the two that passed every limit
		t.Fatalf("%d requests reached MCP, want 2", f.served.Load())
	}
}

// TestRateLimitsSharedAcrossReplicas runs two fronts on one database: their
// callers share one allowance per class, exactly — with a BatchLimiter too,
// whose share of limits this small is 0.
func TestRateLimitsSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, limiter := range replicaLimiters() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rateLimitsSharedAcrossReplicas(t, limiter)
		})
	}
}

// replicaLimiters makes the limiters replicas share, by name.
func replicaLimiters() map[string]func(*testing.T, *pgxpool.Pool) front.Limiter {
	return map[string]func(*testing.T, *pgxpool.Pool) front.Limiter{
		"postgres": func(_ *testing.T, pool *pgxpool.Pool) front.Limiter { return front.NewPostgresLimiter(pool) },
		"batch": func(t *testing.T, pool *pgxpool.Pool) front.Limiter {
			l := front.NewBatchLimiter(pool, front.BatchOptions{Share: ontology.RateLimits{}.Share, FlushInterval: 20 * time.Millisecond})
			t.Cleanup(func() { _ = l.Close(context.Background()) })
			return l
		},
	}
}

func rateLimitsSharedAcrossReplicas(t *testing.T, limiter func(*testing.T, *pgxpool.Pool) front.Limiter) {
	url := testdb.New(t)
	pool := testdb.RuntimePool(t, url)
	limits := func(c *ontology.Config) { c.HTTP.RateLimits.ReadsPerMinute, c.HTTP.RateLimits.WritesPerMinute = 6, 3 }
	a := newDoor(t, limiter(t, pool), limits)
	b := newDoor(t, limiter(t, pool), limits)
	// Both replicas trust one issuer, as behind one URL.
	b.issuer, b.issuerAt = a.issuer, a.issuerAt
	bResolver, err := identity.NewResolver(ontology.OIDC{Issuer: a.issuerAt, Audience: "orangerail", TenantClaim: "org_id"}, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.resolver.Resolver = bResolver
	agentToken := a.token(t, "agent")
	settle(t)

	statuses := func(body string, n int) []int {
		var out []int
		for i := range n {
			srv := a
			if i%2 == 1 {
				srv = b
			}
			resp, m := post(t, srv.url, agentToken, body)
			if resp.StatusCode == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") == "" || errorCode(m) != "X_MCP_RATE_LIMITED") {
				t.Fatalf("429 without Retry-After or code: %v %v", resp.Header, m)
			}
			out = append(out, resp.StatusCode)
		}
		return out
	}
	writes := statuses(callAction, 5)
	if count(writes, 200) != 3 || count(writes, 429) != 2 {
		t.Fatalf("writes across two replicas: %v", writes)
	}
	reads := statuses(callGet, 8)
	if count(reads, 200) != 6 || count(reads, 429) != 2 {
		t.Fatalf("reads across two replicas: %v", reads)
	}
	// A body that is not one request bills the write bucket, now spent.
	if resp, _ := post(t, a.url, agentToken, `{"jsonrpc":`); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an unclassifiable call: %d", resp.StatusCode)
	}
	// Another caller has its own allowance.
	if resp, _ := post(t, b.url, a.token(t, "other"), callAction); resp.StatusCode != http.StatusOK {
		t.Fatalf("another caller: %d", resp.StatusCode)
	}
}

// flood sends n requests from address (as a trusted proxy reports it)
// with token, and returns their statuses.
func flood(t *testing.T, url, token, address string, n int) []int {
	t.Helper()
	var out []int
	for range n {
		resp, m := post(t, url, token, callGet, "X-Forwarded-For", address)
		if resp.StatusCode == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") == "" || errorCode(m) != "X_MCP_AUTH_THROTTLED") {
			t.Fatalf("429 without Retry-After or code: %v %v", resp.Header, m)
		}
		out = append(out, resp.StatusCode)
	}
	return out
}

func count(codes []int, code int) (n int) {
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

// TestAnonymousFloodDoesNotLockOutTokens: requests without a token from
// one address (everyone behind one NAT) are throttled past the limit, and
// a valid token from that address still gets in; so does a bad token,
// which its own allowance refuses 401 as before.
func TestAnonymousFloodDoesNotLockOutTokens(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.TrustedProxyHops = 1 })
	settle(t)
	codes := flood(t, f.url, "", "203.0.113.7", 25) // the default limit is 20
	if count(codes, 401) != 20 || count(codes, 429) != 5 {
		t.Fatalf("token-less flood: %v", codes)
	}
	if resp, _ := post(t, f.url, f.token(t, "agent"), callGet, "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token from the flooding address: %d", resp.StatusCode)
	}
	if resp, m := post(t, f.url, "forged", callGet, "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != http.StatusUnauthorized || errorCode(m) != "X_MCP_UNAUTHORIZED" {
		t.Fatalf("a bad token from the flooding address: %d %v", resp.StatusCode, m)
	}
}

// TestBadTokenFloodDoesNotLockOutTokens: refused tokens from one address
// are throttled past the limit, a valid token from it still gets in, and
// so does a request without a token (which gets its challenge).
func TestBadTokenFloodDoesNotLockOutTokens(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.TrustedProxyHops = 1 })
	settle(t)
	codes := flood(t, f.url, "forged", "203.0.113.7", 25)
	if count(codes, 401) != 20 || count(codes, 429) != 5 {
		t.Fatalf("bad-token flood: %v", codes)
	}
	if resp, _ := post(t, f.url, f.token(t, "agent"), callGet, "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token from the flooding address: %d", resp.StatusCode)
	}
	if resp, _ := post(t, f.url, "", callGet, "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token from the flooding address: %d", resp.StatusCode)
	}
	// Another address has its own allowance.
	if codes := flood(t, f.url, "forged", "198.51.100.4", 1); codes[0] != http.StatusUnauthorized {
		t.Fatalf("a bad token from another address: %v", codes)
	}
	// Without trusted hops, the header is not believed: every request
	// comes from the socket's address.
	g := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.RateLimits.FailedAuthPerMinute = 2 })
	for _, xff := range []string{"10.0.0.1", "10.0.0.2"} {
		post(t, g.url, "forged", callGet, "X-Forwarded-For", xff)
	}
	if resp, _ := post(t, g.url, "forged", callGet, "X-Forwarded-For", "10.0.0.3"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a spoofed X-Forwarded-For escaped the limit: %d", resp.StatusCode)
	}
}

// TestFailedAuthCountsAnIPv6ClientByItsBlock: an IPv6 client that sends
// each guess from another address of its /64 is counted once, not once an
// address; another /64 has its own allowance, and an IPv4 client writing
// its address IPv4-mapped is the same client.
func TestFailedAuthCountsAnIPv6ClientByItsBlock(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.TrustedProxyHops = 1 })
	settle(t)
	var codes []int
	for i := range 25 {
		codes = append(codes, flood(t, f.url, "forged", fmt.Sprintf("2001:db8:7:9:%x::%x", i, i+1), 1)...)
	}
	if count(codes, 401) != 20 || count(codes, 429) != 5 {
		t.Fatalf("bad tokens from 25 addresses of one /64: %v", codes)
	}
	if codes := flood(t, f.url, "forged", "2001:db8:7:a::1", 1); codes[0] != http.StatusUnauthorized {
		t.Fatalf("a bad token from the next /64: %v", codes)
	}
	flood(t, f.url, "forged", "198.51.100.9", 20)
	if codes := flood(t, f.url, "forged", "[::ffff:198.51.100.9]:4711", 1); codes[0] != http.StatusTooManyRequests {
		t.Fatalf("an IPv4 client's address, IPv4-mapped, past its limit: %v", codes)
	}
}

// TestFailedAuthBehindTheOperatorsTranslator: behind a NAT64 translator
// of the operator's own prefix (http.translation_prefixes), each IPv4
// client is counted as itself, as behind 64:ff9b::/96 — not every client
// of the translator in one /64 — and is the same client as its IPv4
// address.
func TestFailedAuthBehindTheOperatorsTranslator(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.HTTP.TranslationPrefixes = []string{"2001:db8:64::/96"}
	})
	settle(t)
	codes := flood(t, f.url, "forged", "2001:db8:64::198.51.100.9", 25)
	if count(codes, 401) != 20 || count(codes, 429) != 5 {
		t.Fatalf("bad tokens from one translated client: %v", codes)
	}
	if codes := flood(t, f.url, "forged", "2001:db8:64::203.0.113.7", 1); codes[0] != http.StatusUnauthorized {
		t.Fatalf("another client behind the same translator: %v", codes)
	}
	if codes := flood(t, f.url, "forged", "198.51.100.9", 1); codes[0] != http.StatusTooManyRequests {
		t.Fatalf("the translated client's IPv4 address, past its limit: %v", codes)
	}
}

// TestFailedAuthSharedAcrossReplicas runs two fronts on one database: an
// address's failed authentications are counted once for both, each kind
// apart, and a valid token passes on either.
func TestFailedAuthSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, limiter := range replicaLimiters() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			failedAuthSharedAcrossReplicas(t, limiter)
		})
	}
}

func failedAuthSharedAcrossReplicas(t *testing.T, limiter func(*testing.T, *pgxpool.Pool) front.Limiter) {
	url := testdb.New(t)
	pool := testdb.RuntimePool(t, url)
	limits := func(c *ontology.Config) { c.HTTP.TrustedProxyHops, c.HTTP.RateLimits.FailedAuthPerMinute = 1, 6 }
	a := newDoor(t, limiter(t, pool), limits)
	b := newDoor(t, limiter(t, pool), limits)
	settle(t)
	var bad, anonymous []int
	for i := range 8 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		bad = append(bad, flood(t, srv.url, "forged", "203.0.113.7", 1)...)
		anonymous = append(anonymous, flood(t, srv.url, "", "203.0.113.7", 1)...)
	}
	if count(bad, 401) != 6 || count(bad, 429) != 2 {
		t.Fatalf("bad tokens across two replicas: %v", bad)
	}
	if count(anonymous, 401) != 6 || count(anonymous, 429) != 2 {
		t.Fatalf("requests without a token across two replicas: %v", anonymous)
	}
	for _, srv := range []*fixture{a, b} {
		if codes := flood(t, srv.url, srv.token(t, "agent"), "203.0.113.7", 1); codes[0] != http.StatusOK {
			t.Fatalf("a valid token from the throttled address: %v", codes)
		}
	}
}

// TestStoreUnreachable: with the counters unreadable, closed refuses and
// open serves.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	closed := newDoor(t, failing{}, nil)
	if resp, m := post(t, closed.url, closed.token(t, "agent"), callGet); resp.StatusCode != http.StatusServiceUnavailable || errorCode(m) != "X_MCP_LIMITS_UNAVAILABLE" {
		t.Fatalf("closed: %d %v", resp.StatusCode, m)
	}
	open := newDoor(t, failing{}, func(c *ontology.Config) { c.HTTP.RateLimits.OnStoreError = "open" })
	if resp, _ := post(t, open.url, open.token(t, "agent"), callGet); resp.StatusCode != http.StatusOK {
		t.Fatalf("open: %d", resp.StatusCode)
	}
}

// TestIssuerUnreachable: a token that cannot be verified because the
// issuer does not answer is not the client's fault: 503 with its own code,
// counted against no one.
func TestIssuerUnreachable(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.Identity.OIDC.Issuer = fmt.Sprintf("http://127.0.0.1:%d", testdb.FreePort(t))
		c.HTTP.RateLimits.FailedAuthPerMinute = 1
	})
	for range 3 {
		if resp, m := post(t, f.url, f.token(t, "agent"), callGet); resp.StatusCode != http.StatusServiceUnavailable || errorCode(m) != "X_MCP_IDENTITY_UNAVAILABLE" {
			t.Fatalf("issuer down: %d %v", resp.StatusCode, m)
		}
	}
}

type failing struct{}

func (failing) Hit(context.Context, string, int) (int, time.Time, error) {
	return 0, time.Time{}, errors.New("store down")
}

// settle waits, if needed, so a test's requests fall in one minute window:
// the windows are fixed, and a test straddling two would see two
// allowances.
func settle(t *testing.T) {
	t.Helper()
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
}

// TestClassIsReadAsTheSDKReadsIt: a body that names one tool to the front
// and another to the SDK (a member name in another case, or repeated)
// cannot bill a write as a read.
func TestClassIsReadAsTheSDKReadsIt(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.RateLimits.WritesPerMinute = 1 })
	settle(t)
	token := f.token(t, "agent")
	if resp, _ := post(t, f.url, token, callAction); resp.StatusCode != http.StatusOK {
		t.Fatalf("first write: %d", resp.StatusCode)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cancel_order","Name":"order_get"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cancel_order","name":"order_get"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"ping","params":{"name":"cancel_order"}}`,
		`{"jsonrpc":"2.0","id":1,"method":7,"params":{"name":"order_get"}}`,
		`{"jsonrpc":"2.0","id":1,"params":{"name":"order_get"}}`,
	} {
		if resp, _ := post(t, f.url, token, body); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s was billed as a read: %d", body, resp.StatusCode)
		}
	}
}

// TestPolicyIsPerRoute: each route is served within its own policy — a
// second bearer route's challenge names its own metadata, and it checks
// origins, caps bodies and bills only as its policy says — and a policy
// the front cannot enforce is refused at Mount.
func TestPolicyIsPerRoute(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), nil) // for its issuer
	// A front of its own, so that this test mounts what it needs.
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: f.issuerAt, Audience: "orangerail", TenantClaim: "org_id"}
	cfg.HTTP.PublicURL = publicURL
	h := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(f.resolver), Limiter: front.NewMemoryLimiter(), Logger: slog.New(slog.DiscardHandler)})
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		caller := "anonymous"
		if c := front.CallerFrom(r.Context()); c != nil {
			caller = c.Subject
		}
		_, _ = fmt.Fprintf(w, "%s %d", caller, len(body))
	})
	mount(h, cfg, echo)
	h.Mount("/api/v1/", echo, front.Policy{Auth: front.AuthBearer, Resource: "/api/v1"})
	h.Mount("GET /open", echo, front.Policy{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	do := func(method, path, token, body string, header ...string) (*reply, string) {
		t.Helper()
		resp, b := request(t, method, srv.URL+path, token, body, header...)
		return resp, string(b)
	}
	resp, _ := do(http.MethodPost, "/api/v1/approvals", "", "")
	if want := `Bearer realm="orangerail", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/api/v1"`; resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("the second route's challenge: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	token := f.token(t, "person")
	big := strings.Repeat("x", int(cfg.HTTP.MaxBodyBytes)+1)
	for range 3 { // neither origin-checked, capped nor billed
		if resp, got := do(http.MethodPost, "/api/v1/approvals", token, big, "Origin", "https://evil.example.com"); resp.StatusCode != http.StatusOK || got != fmt.Sprintf("person %d", len(big)) {
			t.Fatalf("the second route: %d %q", resp.StatusCode, got)
		}
	}
	if resp, _ := do(http.MethodPost, mcpPath, token, callGet, "Origin", "https://evil.example.com"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/mcp kept its own policy: %d", resp.StatusCode)
	}
	if resp, got := do(http.MethodGet, "/open", "", ""); resp.StatusCode != http.StatusOK || got != "anonymous 0" {
		t.Fatalf("an open route: %d %q", resp.StatusCode, got)
	}
	// A subtree's path without its slash is refused, not redirected to it.
	if resp, got := do(http.MethodPost, "/api/v1", token, "{}"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" ||
		!strings.Contains(got, string(errcode.RouteUnknown)) {
		t.Fatalf("POST /api/v1: %d %v %s", resp.StatusCode, resp.Header, got)
	}

	for name, p := range map[string]front.Policy{
		"bearer without a resource": {Auth: front.AuthBearer},
		"rate without bearer":       {MaxBodyBytes: 10, Rate: front.ToolCalls(func(string, map[string]any) front.Class { return front.ClassRead })},
		"rate without a body cap":   {Auth: front.AuthBearer, Resource: "/x", Rate: front.ToolCalls(func(string, map[string]any) front.Class { return front.ClassRead })},
		"batches without a body":    {OneMessage: true},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: mounted", name)
				}
			}()
			h.Mount("/"+strings.ReplaceAll(name, " ", "-"), echo, p)
		}()
	}
}

// TestUnknownRoutesAreCoded: a path no route serves, a method its path
// does not take, and a path not written clean outside any subtree are
// refused in JSON with a code and no cache — never ServeMux's plain text,
// nor a redirect a client would follow with its body and its token.
func TestUnknownRoutesAreCoded(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), nil)
	token := f.token(t, "agent")
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/nowhere", http.StatusNotFound, ""},
		{http.MethodPost, "/nowhere/else", http.StatusNotFound, ""},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodDelete, "/readyz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPut, front.MetadataPath(mcpPath), http.StatusMethodNotAllowed, "GET, HEAD, OPTIONS"},
		{http.MethodPost, "/" + mcpPath, http.StatusNotFound, ""},
		{http.MethodPost, mcpPath + "/", http.StatusNotFound, ""},
		{http.MethodPost, "/x/.." + mcpPath, http.StatusNotFound, ""},
		{http.MethodPost, "/." + mcpPath, http.StatusNotFound, ""},
		{http.MethodGet, "//healthz", http.StatusNotFound, ""},
	} {
		what := c.method + " " + c.path
		resp, body := request(t, c.method, f.url+c.path, token, callGet, "Content-Type", "application/json")
		var m front.ErrorBody
		if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != c.status || m.Error.Code != errcode.RouteUnknown || m.Error.Fix == "" {
			t.Errorf("%s: %d %s, want %d %s", what, resp.StatusCode, body, c.status, errcode.RouteUnknown)
			continue
		}
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", what, got, c.allow)
		}
		if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %v", what, resp.Header)
		}
	}
	if n := f.served.Load(); n != 0 {
		t.Fatalf("the MCP endpoint served %d of the requests", n)
	}
	// The routes themselves are served as before.
	if resp, body := request(t, http.MethodGet, f.url+"/healthz", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, f.url, token, callGet); resp.StatusCode != http.StatusOK || f.served.Load() != 1 {
		t.Fatalf("POST %s: %d", mcpPath, resp.StatusCode)
	}
}

// TestEncodedBodiesAreRefused: a body sent with a Content-Encoding the
// front does not decode is refused 415 with its code, not read as the
// bytes it is (a parse error with no word of why); identity is no
// encoding.
func TestEncodedBodiesAreRefused(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), nil)
	token := f.token(t, "agent")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, callGet)
	_ = zw.Close()
	for _, enc := range []string{"gzip", "br", "identity, gzip"} {
		resp, m := post(t, f.url, token, gz.String(), "Content-Encoding", enc)
		if resp.StatusCode != http.StatusUnsupportedMediaType || errorCode(m) != string(errcode.ContentEncodingUnsupported) {
			t.Errorf("Content-Encoding %s: %d %v", enc, resp.StatusCode, m)
		}
	}
	if n := f.served.Load(); n != 0 {
		t.Fatalf("the endpoint served %d encoded bodies", n)
	}
	if resp, _ := post(t, f.url, token, callGet, "Content-Encoding", "identity, Identity"); resp.StatusCode != http.StatusOK || f.served.Load() != 1 {
		t.Fatalf("Content-Encoding identity: %d", resp.StatusCode)
	}
}

// TestRefusalsAreEvents: every refusal is a RequestRefused event — the
// host log's line is its subscriber — and every spent allowance a
// RateRefused event naming whose it was.
func TestRefusalsAreEvents(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.HTTP.RateLimits.WritesPerMinute, c.HTTP.RateLimits.FailedAuthPerMinute = 1, 1
	})
	settle(t)
	token := f.token(t, "agent")
	post(t, f.url, token, callGet, "Origin", "https://evil.example.com") // 403
	post(t, f.url, token, callAction)                                    // 200
	post(t, f.url, token, callAction)                                    // 429: writes
	flood(t, f.url, "", "203.0.113.7", 2)                                // 401, then 429: no token
	f.hooks.Close()

	var got []string
	for _, ev := range f.events.All() {
		switch ev := ev.(type) {
		case engine.RequestRefused:
			got = append(got, fmt.Sprintf("refused %s %d %s", ev.Path, ev.HTTPStatus, ev.Code))
		case engine.RateRefused:
			got = append(got, fmt.Sprintf("rate %s %s %q %q %q", ev.Allowance, ev.Code, ev.Tenant, ev.Actor, ev.Address))
		default:
			t.Errorf("an event the front does not emit: %#v", ev)
		}
	}
	want := []string{
		"refused /mcp 403 X_MCP_ORIGIN_REFUSED",
		`rate writes X_MCP_RATE_LIMITED "acme" "agent" ""`, "refused /mcp 429 X_MCP_RATE_LIMITED",
		"refused /mcp 401 X_MCP_UNAUTHORIZED",
		`rate no_token X_MCP_AUTH_THROTTLED "" "" "203.0.113.7"`, "refused /mcp 429 X_MCP_AUTH_THROTTLED",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant:\n%q", got, want)
	}
}

// TestHandlerPanicIsContained: a mounted handler that panics is answered
// 500 with X_INTERNAL_ERROR and a correlation id — never the panic's text
// or the headers it had set — the panic and its stack go to the host log
// under that id, and the connection serves on. A deliberate abort
// (http.ErrAbortHandler) still aborts.
func TestHandlerPanicIsContained(t *testing.T) {
	t.Parallel()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.PublicURL = publicURL
	var logBuf strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.Write(p)
	}), nil))
	h := front.New(front.Config{Ontology: cfg, Logger: log})
	h.Mount("/boom", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Half-Built", "yes")
		panic("the secret panic text")
	}), front.Policy{MaxBodyBytes: 1024})
	h.Mount("/abort", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }), front.Policy{})
	h.Mount("/half", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		panic("cut short")
	}), front.Policy{})
	h.Mount("/ok", front.Healthz(), front.Policy{})
	h.Mount("/boom-api", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("the secret api panic") }), front.Policy{PlainErrors: true})
	srv := httptest.NewUnstartedServer(h)
	var closed atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the abort's own line
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{}}

	resp, m := send(t, client, srv.URL+"/boom")
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	correlation, _ := data["correlationId"].(string)
	if resp.StatusCode != http.StatusInternalServerError || errorCode(m) != "X_INTERNAL_ERROR" || correlation == "" ||
		resp.Header.Get("X-Half-Built") != "" || strings.Contains(fmt.Sprint(m), "secret") {
		t.Fatalf("the panic's answer: %d %v %v", resp.StatusCode, resp.Header, m)
	}
	logMu.Lock()
	logged := logBuf.String()
	logMu.Unlock()
	if !strings.Contains(logged, `"msg":"handler panic"`) || !strings.Contains(logged, correlation) ||
		!strings.Contains(logged, "the secret panic text") || !strings.Contains(logged, `"stack":"goroutine`) {
		t.Fatalf("the host log:\n%s", logged)
	}
	// A JSON API's answer names its correlation id too.
	resp, m = send(t, client, srv.URL+"/boom-api")
	e, _ = m["error"].(map[string]any)
	apiCorrelation, _ := e["correlation_id"].(string)
	logMu.Lock()
	logged = logBuf.String()
	logMu.Unlock()
	if resp.StatusCode != http.StatusInternalServerError || e["code"] != "X_INTERNAL_ERROR" || apiCorrelation == "" || apiCorrelation == correlation ||
		!strings.Contains(logged, apiCorrelation) || strings.Contains(fmt.Sprint(m), "secret") {
		t.Fatalf("the JSON API's panic answer: %d %v", resp.StatusCode, m)
	}
	if resp, _ := send(t, client, srv.URL+"/ok"); resp.StatusCode != http.StatusOK || closed.Load() != 0 {
		t.Fatalf("after the panic: %d, %d connections closed", resp.StatusCode, closed.Load())
	}
	if resp, err := client.Post(srv.URL+"/abort", "application/json", nil); err == nil {
		_ = resp.Body.Close()
		t.Fatal("a deliberate abort was answered")
	}
	// A panic after part of the answer went out ends the connection: the
	// client sees a cut answer, never one that looks complete.
	resp2, err := client.Post(srv.URL+"/half", "application/json", nil)
	if err == nil {
		_, err = io.ReadAll(resp2.Body)
		_ = resp2.Body.Close()
	}
	if err == nil {
		t.Fatal("a half-written answer read as complete")
	}
}

// send posts an empty JSON body and reads the JSON answer.
func send(t *testing.T, client *http.Client, url string) (*reply, map[string]any) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return replyOf(resp), m
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestIssuerMetadataNamesTheIssuer: where identity.oidc.authorization_servers
// sends MCP clients elsewhere, a resource people reach with the issuer's
// own tokens (the approvals API) still names the issuer, which is what
// verifies them.
func TestIssuerMetadataNamesTheIssuer(t *testing.T) {
	t.Parallel()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.PublicURL = publicURL
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: "https://id.example", Audience: "orangerail", AuthorizationServers: []string{"https://as.example"}}
	h := front.New(front.Config{Ontology: cfg, Logger: slog.New(slog.DiscardHandler)})
	for _, c := range []struct {
		handler http.Handler
		want    string
	}{{h.Metadata("/mcp"), "[https://as.example]"}, {h.IssuerMetadata("/api/v1"), "[https://id.example]"}} {
		want := c.want
		rec := httptest.NewRecorder()
		c.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || fmt.Sprint(doc["authorization_servers"]) != want {
			t.Errorf("authorization_servers %v (%v), want %s", doc["authorization_servers"], err, want)
		}
	}
}
