package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
)

type fixture struct {
	issuer   *devissuer.Issuer
	url      string
	resolver *identity.Resolver
	clock    *clock
	// jwks counts the requests for the issuer's keys.
	jwks atomic.Int32
	// jwksDown, while set, answers those requests 503.
	jwksDown atomic.Bool
	// jwksCacheControl, when set, is the Cache-Control of the keys.
	jwksCacheControl atomic.Value
	// discovery counts the requests for the discovery document, and
	// discoveryDown, while set, answers them 503.
	discovery     atomic.Int32
	discoveryDown atomic.Bool
}

// clock is a test's time, moved by hand; it starts at the real time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T, edit func(*ontology.OIDC)) *fixture {
	t.Helper()
	return setupWith(t, edit, identity.ResolverOptions{})
}

// setupWith serves a development issuer, counting its key fetches, and a
// resolver for it on the fixture's clock.
func setupWith(t *testing.T, edit func(*ontology.OIDC), opts identity.ResolverOptions) *fixture {
	t.Helper()
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{issuer: iss, clock: &clock{t: time.Now()}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jwks":
			f.jwks.Add(1)
			if f.jwksDown.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			if cc, _ := f.jwksCacheControl.Load().(string); cc != "" {
				w.Header().Set("Cache-Control", cc)
			}
		case "/.well-known/openid-configuration":
			f.discovery.Add(1)
			if f.discoveryDown.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
		}
		iss.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	cfg := ontology.OIDC{Issuer: srv.URL, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: "kind", Values: []string{"human"}}}
	if edit != nil {
		edit(&cfg)
	}
	if opts.NowFunc == nil {
		opts.NowFunc = f.clock.Now
	}
	if f.resolver, err = identity.NewResolver(cfg, opts); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) claims(extra map[string]any) devissuer.Claims {
	base := map[string]any{"org_id": "acme", "roles": []string{"support"}, "scope": "orders:read orders:write"}
	for k, v := range extra {
		base[k] = v
	}
	return devissuer.Claims{Issuer: f.url, Subject: "agent-7", Audience: "orangerail", Expiry: time.Now().Add(time.Hour), Extra: base}
}

func (f *fixture) token(t *testing.T, c devissuer.Claims) string {
	t.Helper()
	tok, err := f.issuer.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestValidToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c, err := f.resolver.Resolve(context.Background(), f.token(t, f.claims(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "agent-7" || c.Tenant != "acme" || c.Kind != engine.ActorAgent ||
		!slices.Equal(c.Roles, []string{"support"}) || !slices.Equal(c.Scopes, []string{"orders:read", "orders:write"}) || c.Expires.IsZero() {
		t.Fatalf("caller %+v", c)
	}
	// Clocks a little apart: expired 10s ago, or valid from 10s hence, is
	// within the skew.
	for _, c := range []devissuer.Claims{
		withTimes(f.claims(nil), time.Now().Add(-10*time.Second), time.Time{}),
		withTimes(f.claims(nil), time.Now().Add(time.Hour), time.Now().Add(10*time.Second)),
	} {
		if _, err := f.resolver.Resolve(context.Background(), f.token(t, c)); err != nil {
			t.Fatalf("within the skew: %v", err)
		}
	}
	// Scopes as an array (scp), roles as a string, and a person.
	f2 := setup(t, func(o *ontology.OIDC) { o.ScopesClaim = "scp" })
	c, err = f2.resolver.Resolve(context.Background(), f2.token(t, f2.claims(map[string]any{
		"scp": []string{"a", "b"}, "roles": "approver support", "kind": "human"})))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Scopes, []string{"a", "b"}) || !slices.Equal(c.Roles, []string{"approver", "support"}) || c.Kind != engine.ActorHuman {
		t.Fatalf("caller %+v", c)
	}
	// The person's claim as an issuer sends groups: a list, a
	// space-separated string, or a whole string holding a space.
	f3 := setup(t, func(o *ontology.OIDC) {
		o.Human = &ontology.HumanRule{Claim: "groups", Values: []string{"staff", "Support Staff"}}
	})
	for groups, want := range map[any]engine.ActorKind{
		"staff": engine.ActorHuman, "admin staff": engine.ActorHuman, "Support Staff": engine.ActorHuman,
		"admin": engine.ActorAgent, "Support": engine.ActorAgent,
	} {
		c, err := f3.resolver.Resolve(context.Background(), f3.token(t, f3.claims(map[string]any{"groups": groups})))
		if err != nil || c.Kind != want {
			t.Errorf("groups %q: %v (%v), want %v", groups, c, err, want)
		}
	}
	for groups, want := range map[string]engine.ActorKind{"admin,staff": engine.ActorHuman, "admin": engine.ActorAgent} {
		c, err := f3.resolver.Resolve(context.Background(), f3.token(t, f3.claims(map[string]any{"groups": strings.Split(groups, ",")})))
		if err != nil || c.Kind != want {
			t.Errorf("groups %q as a list: %v (%v), want %v", groups, c, err, want)
		}
	}
}

func TestRefusedTokens(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	unpublished, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	signedUnpublished, err := devissuer.SignWith(unpublished, f.claims(nil))
	if err != nil {
		t.Fatal(err)
	}
	noTenant := f.claims(nil)
	delete(noTenant.Extra, "org_id")
	badTenant := f.claims(map[string]any{"org_id": "acme; DROP"})

	tests := []struct {
		name  string
		token string
	}{
		{"expired", f.token(t, withTimes(f.claims(nil), time.Now().Add(-time.Hour), time.Time{}))},
		{"expired beyond the skew", f.token(t, withTimes(f.claims(nil), time.Now().Add(-time.Minute), time.Time{}))},
		{"without exp", f.token(t, withTimes(f.claims(nil), time.Time{}, time.Time{}))},
		{"not yet valid", f.token(t, withTimes(f.claims(nil), time.Now().Add(2*time.Hour), time.Now().Add(time.Hour)))},
		{"wrong audience", f.token(t, withAudience(f.claims(nil), "someone-else"))},
		{"wrong issuer", f.token(t, withIssuer(f.claims(nil), "https://evil.example.com"))},
		{"unknown key", signedUnpublished},
		{"alg none", algNone(t, f.claims(nil))},
		{"HS256 with the public key as the secret", hs256(t, f, f.claims(nil))},
		{"no tenant", f.token(t, noTenant)},
		{"malformed tenant", f.token(t, badTenant)},
		{"garbage", "not.a.token"},
		{"tampered payload", tamper(f.token(t, f.claims(nil)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.resolver.Resolve(context.Background(), tt.token)
			if !errors.Is(err, identity.ErrInvalidToken) {
				t.Fatalf("Resolve = %+v, %v; want ErrInvalidToken", c, err)
			}
		})
	}
}

// TestKeyRotation: a token signed with a key the issuer has not published
// is refused; once the issuer publishes it, the same token verifies, with
// no restart, as soon as the keys may be fetched again.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err != nil {
		t.Fatal(err) // keys cached
	}
	next, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := devissuer.SignWith(next, f.claims(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.resolver.Resolve(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("a token of an unpublished key: %v", err)
	}
	f.issuer.Rotate(next)
	f.clock.Advance(identity.MinRefetchIntervalDefault)
	if _, err := f.resolver.Resolve(ctx, tok); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(map[string]any{"roles": "other"}))); err != nil {
		t.Fatalf("a new token of the new key: %v", err)
	}
	if n := f.jwks.Load(); n != 2 {
		t.Fatalf("%d key fetches, want 2 (the first, and the new key's)", n)
	}
}

// TestWithdrawnKeysStopVerifying: a key the issuer stops publishing, with
// no new key id to prompt a fetch, verifies no token once the keys are
// older than their maximum age — KeyMaxAgeDefault, or the max-age of the
// issuer's Cache-Control where shorter, never less than the interval
// between fetches — and until then does (the bound the README states). A
// fetch at that age that fails keeps the keys: the issuer's outage
// refuses no valid token.
func TestWithdrawnKeysStopVerifying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		cacheControl string
		bound        time.Duration
	}{
		{"", identity.KeyMaxAgeDefault},
		{"public, max-age=300", 5 * time.Minute},
		{"max-age=86400", identity.KeyMaxAgeDefault}, // longer than ours: ours
		{"no-cache", identity.MinRefetchIntervalDefault},
	} {
		f := setup(t, nil)
		f.jwksCacheControl.Store(c.cacheControl)
		withdrawn, err := devissuer.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		f.issuer.Rotate(withdrawn)
		signed := func(key *devissuer.Key, n int) string {
			t.Helper()
			claims := f.claims(map[string]any{"n": n}) // each token new: none is cached
			claims.Expiry = f.clock.Now().Add(time.Hour)
			tok, err := devissuer.SignWith(key, claims)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if _, err := f.resolver.Resolve(ctx, signed(withdrawn, 0)); err != nil {
			t.Fatal(err)
		}
		next, err := devissuer.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		f.issuer.Rotate(next)
		if !f.issuer.Withdraw(withdrawn.ID) {
			t.Fatal("the key was not withdrawn")
		}
		f.clock.Advance(c.bound - time.Second)
		if _, err := f.resolver.Resolve(ctx, signed(withdrawn, 1)); err != nil {
			t.Fatalf("%q: within the keys' age, a withdrawn key's token: %v", c.cacheControl, err)
		}
		f.clock.Advance(time.Second)
		if _, err := f.resolver.Resolve(ctx, signed(withdrawn, 2)); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("%q: %s after the keys were fetched, a withdrawn key's token: %v", c.cacheControl, c.bound, err)
		}
		if _, err := f.resolver.Resolve(ctx, signed(next, 3)); err != nil {
			t.Fatalf("%q: the new key's token: %v", c.cacheControl, err)
		}
		fetches := f.jwks.Load()
		f.jwksDown.Store(true)
		f.clock.Advance(c.bound)
		if _, err := f.resolver.Resolve(ctx, signed(next, 4)); err != nil {
			t.Fatalf("%q: with the keys past their age and the issuer down, a valid token: %v", c.cacheControl, err)
		}
		if n := f.jwks.Load(); n != fetches+1 {
			t.Fatalf("%q: %d key fetches past the keys' age, want 1", c.cacheControl, n-fetches)
		}
	}
}

// TestIssuerOutageIsNotAmplified: while the issuer's discovery or its keys
// cannot be had (before they ever were), tokens — forged ones too, all at
// once or one after another — ask the issuer once, and again only after a
// backoff: 1s, doubling, at most 15s. Each is answered as the issuer's fault, not the
// token's, and once the issuer answers, tokens verify.
func TestIssuerOutageIsNotAmplified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, down := range []string{"discovery", "jwks"} {
		f := setup(t, nil)
		counter, flag := &f.discovery, &f.discoveryDown
		if down == "jwks" {
			counter, flag = &f.jwks, &f.jwksDown
		}
		flag.Store(true)
		resolve := func(n int) {
			t.Helper()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					tok := "x.y.z"
					if i%2 == 0 {
						tok = f.token(t, f.claims(map[string]any{"n": i}))
					}
					if _, err := f.resolver.Resolve(ctx, tok); err == nil || errors.Is(err, identity.ErrInvalidToken) {
						t.Errorf("%s down: %v, want the issuer's fault", down, err)
					}
				})
			}
			wg.Wait()
			for range n {
				if _, err := f.resolver.Resolve(ctx, "x.y.z"); err == nil || errors.Is(err, identity.ErrInvalidToken) {
					t.Errorf("%s down: %v, want the issuer's fault", down, err)
				}
			}
			if err := f.resolver.Ready(ctx); err == nil {
				t.Errorf("%s down: ready", down)
			}
		}
		for i, backoff := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second} {
			f.clock.Advance(backoff)
			resolve(20)
			if n := counter.Load(); n != int32(i+1) {
				t.Fatalf("%s down: %d requests to it after %d backoffs, want %d", down, n, i, i+1)
			}
		}
		flag.Store(false)
		if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err == nil {
			t.Fatalf("%s back within the backoff: the attempt was made", down)
		}
		f.clock.Advance(15 * time.Second)
		if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err != nil {
			t.Fatalf("%s back: %v", down, err)
		}
	}
}

// forgedWithKnownID signs with a key of the issuer's published id that is
// not the issuer's key: a bad signature under a known key id.
func forgedWithKnownID(t *testing.T, f *fixture, c devissuer.Claims) string {
	t.Helper()
	forger, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	forger.ID = f.issuer.KeyID()
	tok, err := devissuer.SignWith(forger, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestBadSignaturesFetchNoKeys: a token naming a key the issuer publishes,
// with a signature that key does not verify, is refused from the cache; it
// never makes the resolver fetch the keys again, however long since the
// last fetch.
func TestBadSignaturesFetchNoKeys(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		f.clock.Advance(identity.MinRefetchIntervalDefault)
		tok := forgedWithKnownID(t, f, f.claims(map[string]any{"n": i}))
		if i%2 == 1 {
			tok = tamper(f.token(t, f.claims(map[string]any{"n": i})))
		}
		if _, err := f.resolver.Resolve(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("bad signature %d: %v", i, err)
		}
	}
	if n := f.jwks.Load(); n != 1 {
		t.Fatalf("%d key fetches for 50 bad signatures under a known key id, want 1 (the first)", n)
	}
}

// TestUnknownKeyIDsFetchAtMostOncePerInterval: tokens naming key ids the
// issuer does not publish, sent all at once, fetch the keys at most once
// per interval, the first fetch included.
func TestUnknownKeyIDsFetchAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	unknown := func() {
		t.Helper()
		var tokens []string
		for range 50 {
			k, err := devissuer.NewKey()
			if err != nil {
				t.Fatal(err)
			}
			tok, err := devissuer.SignWith(k, f.claims(nil))
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, tok)
		}
		var wg sync.WaitGroup
		for _, tok := range tokens {
			wg.Go(func() {
				if _, err := f.resolver.Resolve(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
					t.Errorf("unknown key id: %v", err)
				}
			})
		}
		wg.Wait()
	}
	unknown()
	if n := f.jwks.Load(); n != 1 {
		t.Fatalf("%d key fetches within the first interval, want 1", n)
	}
	f.clock.Advance(identity.MinRefetchIntervalDefault)
	unknown()
	if n := f.jwks.Load(); n != 2 {
		t.Fatalf("%d key fetches after one interval, want 2", n)
	}
	unknown()
	if n := f.jwks.Load(); n != 2 {
		t.Fatalf("%d key fetches, still within the second interval, want 2", n)
	}

	// The interval is the resolver's to set.
	g := setupWith(t, nil, identity.ResolverOptions{MinRefetchInterval: 10 * time.Minute})
	if _, err := g.resolver.Resolve(ctx, g.token(t, g.claims(nil))); err != nil {
		t.Fatal(err)
	}
	next, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	g.issuer.Rotate(next)
	tok := g.token(t, g.claims(nil))
	g.clock.Advance(9 * time.Minute)
	if _, err := g.resolver.Resolve(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) || g.jwks.Load() != 1 {
		t.Fatalf("within a 10-minute interval: %v, %d fetches", err, g.jwks.Load())
	}
	g.clock.Advance(time.Minute)
	if _, err := g.resolver.Resolve(ctx, tok); err != nil || g.jwks.Load() != 2 {
		t.Fatalf("after it: %v, %d fetches", err, g.jwks.Load())
	}
}

// TestUnreachableKeysAreNotAnInvalidToken: while the issuer's keys cannot
// be fetched a first time, no token is blamed; once they can, tokens
// verify (after the backoff from the failed fetch,
// TestIssuerOutageIsNotAmplified).
func TestUnreachableKeysAreNotAnInvalidToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.jwksDown.Store(true)
	ctx := context.Background()
	tok := f.token(t, f.claims(nil))
	if err := f.resolver.Ready(ctx); err == nil {
		t.Fatal("ready without keys")
	}
	if _, err := f.resolver.Resolve(ctx, tok); err == nil || errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("keys unreachable: %v", err)
	}
	f.jwksDown.Store(false)
	f.clock.Advance(time.Second)
	if _, err := f.resolver.Resolve(ctx, tok); err != nil {
		t.Fatalf("keys reachable again: %v", err)
	}
}

func TestIssuerMustBeHTTPS(t *testing.T) {
	t.Parallel()
	for issuer, ok := range map[string]bool{
		"https://idp.example.com": true,
		"http://127.0.0.1:8080":   true,
		"http://localhost:9000":   true,
		"http://[::1]:9000":       true,
		"http://idp.example.com":  false,
		"http://10.0.0.5":         false,
		"ftp://idp.example.com":   false,
		"idp.example.com":         false,
	} {
		_, err := identity.NewResolver(ontology.OIDC{Issuer: issuer, Audience: "a", TenantClaim: "t"}, identity.ResolverOptions{})
		if (err == nil) != ok {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
}

func TestDiscoveryFailureIsNotAnInvalidToken(t *testing.T) {
	t.Parallel()
	r, err := identity.NewResolver(ontology.OIDC{Issuer: "http://127.0.0.1:1", Audience: "a", TenantClaim: "t"}, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("discovery of a closed port succeeded")
	}
	if _, err := r.Resolve(context.Background(), "x.y.z"); err == nil || errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("an unreachable issuer blamed the token: %v", err)
	}
}

func withTimes(c devissuer.Claims, exp, nbf time.Time) devissuer.Claims {
	c.Expiry, c.NotBefore = exp, nbf
	return c
}

func withAudience(c devissuer.Claims, aud string) devissuer.Claims { c.Audience = aud; return c }

func withIssuer(c devissuer.Claims, iss string) devissuer.Claims { c.Issuer = iss; return c }

func payload(t *testing.T, c devissuer.Claims) []byte {
	t.Helper()
	m := map[string]any{"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience, "exp": c.Expiry.Unix()}
	for k, v := range c.Extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func algNone(t *testing.T, c devissuer.Claims) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload(t, c)) + "."
}

// hs256 signs with HMAC, using the issuer's public key as the secret: the
// classic algorithm-confusion attack.
func hs256(t *testing.T, f *fixture, c devissuer.Claims) string {
	t.Helper()
	var set jose.JSONWebKeySet
	resp, err := httptestGet(f.url + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp, &set); err != nil || len(set.Keys) == 0 {
		t.Fatal(err)
	}
	secret, err := json.Marshal(set.Keys[0])
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", set.Keys[0].KeyID))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(payload(t, c), &m)
	tok, err := jwt.Signed(signer).Claims(m).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	body = []byte(strings.Replace(string(body), `"acme"`, `"evil"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(body)
	return strings.Join(parts, ".")
}

func httptestGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// TestCachedTokenStillExpires: a token verified once is reused, but never
// past its expiry.
func TestCachedTokenStillExpires(t *testing.T) {
	t.Parallel()
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss.Handler())
	t.Cleanup(srv.Close)
	now := time.Now()
	clock := func() time.Time { return now }
	r, err := identity.NewResolver(ontology.OIDC{Issuer: srv.URL, Audience: "orangerail", TenantClaim: "org_id"}, identity.ResolverOptions{NowFunc: clock})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Token(devissuer.Claims{Issuer: srv.URL, Subject: "a", Audience: "orangerail", Expiry: now.Add(40 * time.Second),
		Extra: map[string]any{"org_id": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Resolve(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	first.Roles = append(first.Roles, "admin") // a caller's copy is its own
	second, err := r.Resolve(context.Background(), tok)
	if err != nil || slices.Contains(second.Roles, "admin") {
		t.Fatalf("cached: %+v %v", second, err)
	}
	now = now.Add(2 * time.Minute) // past exp and the skew
	if _, err := r.Resolve(context.Background(), tok); !errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("an expired token was served from the cache: %v", err)
	}
}

// TestMalformedDatesAreRefused: exp, nbf and iat are JSON numbers of
// seconds between 1970 and 9999, or the token is invalid — a date as a
// string, or one no clock reaches, is never read leniently.
func TestMalformedDatesAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	now := f.clock.Now()
	soon, past := float64(now.Add(time.Hour).Unix()), float64(now.Add(-time.Hour).Unix())
	for name, extra := range map[string]map[string]any{
		"nbf as a string":                      {"nbf": strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		"nbf as a string in the past":          {"nbf": strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)},
		"nbf of 1e300":                         {"nbf": 1e300},
		"nbf past int64":                       {"nbf": 1e19},
		"nbf negative":                         {"nbf": -past},
		"nbf zero":                             {"nbf": 0},
		"nbf null":                             {"nbf": nil},
		"nbf true":                             {"nbf": true},
		"nbf an array":                         {"nbf": []float64{past}},
		"exp as a string":                      {"exp": strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		"exp of 1e300":                         {"exp": 1e300},
		"exp in the year 10000":                {"exp": float64(253402300800)},
		"exp beyond 2^53":                      {"exp": float64(1 << 60)},
		"exp null":                             {"exp": nil},
		"iat as a string":                      {"iat": strconv.FormatInt(now.Unix(), 10)},
		"iat of 1e300":                         {"iat": 1e300},
		"iat negative":                         {"iat": -1.5},
		"iat an object":                        {"iat": map[string]any{"s": past}},
		"nbf the string 1e3 beside a good exp": {"nbf": "1e3", "exp": soon},
	} {
		c := f.claims(nil)
		for k, v := range extra {
			c.Extra[k] = v
		}
		if _, err := f.resolver.Resolve(ctx, f.token(t, c)); !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
	// Decimals are numbers like any other.
	c := f.claims(map[string]any{"exp": soon + 0.5, "nbf": past + 0.25, "iat": past + 0.75})
	caller, err := f.resolver.Resolve(ctx, f.token(t, c))
	if err != nil {
		t.Fatalf("decimal dates: %v", err)
	}
	if want := time.Unix(int64(soon), 5e8); !caller.Expires.Equal(want) {
		t.Fatalf("expires %v, want %v", caller.Expires, want)
	}
}

// TestHostileSubjectsAreRefused: every audit record names its caller, and
// the audit table cannot hold U+0000, so a token whose subject holds one
// would have blocked every call it made; other control characters, and
// the characters that change how the text around them shows or do not
// show at all, would reach the people who read the log.
func TestHostileSubjectsAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for name, subject := range map[string]string{
		"NUL":         "agent\x00-7",
		"escape":      "agent\x1b[2J",
		"CR":          "agent-7\rroot",
		"C1":          "agent\u0085",
		"over 255":    strings.Repeat("a", 256),
		"DEL":         "agent\x7f",
		"line feed":   "agent\n7",
		"tab":         "agent\t7",
		"NUL at once": "\x00",
		// Shown as another name, or not at all.
		"right-to-left override": "agent-7\u202egnp.exe",
		"isolate":                "alice\u2067bob",
		"line separator":         "agent-7\u2028alice",
		"paragraph separator":    "agent-7\u2029alice",
		"zero-width space":       "ad\u200bmin",
	} {
		c := f.claims(nil)
		c.Subject = subject
		if _, err := f.resolver.Resolve(context.Background(), f.token(t, c)); !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
	c := f.claims(nil)
	c.Subject = "user@example.com|Ünïcødé 名前"
	if caller, err := f.resolver.Resolve(context.Background(), f.token(t, c)); err != nil || caller.Subject != c.Subject {
		t.Fatalf("a plain subject: %+v %v", caller, err)
	}
}

// TestRotatedKeyDuringAnOutageIsNotAnInvalidToken: a token naming a key
// the cache lacks, while the issuer's keys cannot be fetched, is the
// issuer's fault: not an invalid token (which the front counts toward an
// address's bad-token throttle).
func TestRotatedKeyDuringAnOutageIsNotAnInvalidToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	if _, err := f.resolver.Resolve(ctx, f.token(t, f.claims(nil))); err != nil {
		t.Fatal(err) // keys cached
	}
	next, err := devissuer.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	f.issuer.Rotate(next)
	tok, err := devissuer.SignWith(next, f.claims(nil))
	if err != nil {
		t.Fatal(err)
	}
	f.jwksDown.Store(true)
	f.clock.Advance(identity.MinRefetchIntervalDefault)
	if _, err := f.resolver.Resolve(ctx, tok); err == nil || errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("a new key while the keys cannot be fetched: %v", err)
	}
	f.jwksDown.Store(false)
	f.clock.Advance(identity.MinRefetchIntervalDefault)
	if _, err := f.resolver.Resolve(ctx, tok); err != nil {
		t.Fatalf("once the keys can be fetched: %v", err)
	}
}

// TestKeysAreFetchedAsTheIssuerIs: the issuer must be https (or http on
// loopback), and so must where its keys are fetched from — the jwks_uri
// its discovery names, and any redirect on the way — else anyone on the
// path could serve keys that sign tokens for every tenant. Either is
// refused before a request is sent there.
func TestKeysAreFetchedAsTheIssuerIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		jwksURI func(base string) string
	}{
		{"a plain-http jwks_uri", func(string) string { return "http://keys.example.invalid/jwks" }},
		{"a redirect to plain http", func(base string) string { return base + "/redirect" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var plain atomic.Int32
			mux := http.NewServeMux()
			srv := httptest.NewTLSServer(mux)
			t.Cleanup(srv.Close)
			mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": tc.jwksURI(srv.URL),
					"authorization_endpoint": srv.URL + "/auth", "id_token_signing_alg_values_supported": []string{"RS256"}})
			})
			mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://keys.example.invalid/jwks", http.StatusFound)
			})
			client := srv.Client()
			inner := client.Transport
			client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Scheme == "http" {
					plain.Add(1)
				}
				return inner.RoundTrip(r)
			})
			r, err := identity.NewResolver(ontology.OIDC{Issuer: srv.URL, Audience: "orangerail", TenantClaim: "org_id"}, identity.ResolverOptions{HTTPClient: client})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Ready(context.Background())
			if !errors.Is(err, ontology.ErrIssuerInsecure) {
				t.Fatalf("Ready = %v, want the keys refused as insecure", err)
			}
			if n := plain.Load(); n != 0 {
				t.Fatalf("%d requests went out over plain http", n)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestIDTokensAreNoBearerTokens: where an issuer's client id is the
// audience, its ID tokens verify as access tokens would; one that says it
// is an ID token — an ID token's own claim (at_hash, c_hash), Keycloak's
// typ claim "ID", a header typ of another kind — is refused. A nonce
// alone (Keycloak's access tokens before 24 carry it), Keycloak's typ
// "Bearer", RFC 9068's at+jwt and an issuer's own access type are an
// access token's.
func TestIDTokensAreNoBearerTokens(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	with := func(typ string, extra map[string]any) string {
		c := f.claims(extra)
		c.Type = typ
		return f.token(t, c)
	}
	for name, token := range map[string]string{
		"at_hash":             with("", map[string]any{"at_hash": "77QmUPtjPfzWtF2AnpK9RQ", "nonce": "n-0S6_WzA2Mj"}),
		"c_hash":              with("", map[string]any{"c_hash": "LDktKdoQak3Pk0cnXxCltA"}),
		"Keycloak's typ ID":   with("", map[string]any{"typ": "ID"}),
		"a logout token":      with("logout+jwt", nil),
		"a typ of no kind":    with("id_token", nil),
		"an application/ typ": with("application/logout+jwt", nil),
		"a security event":    with("secevent+jwt", nil),
	} {
		if _, err := f.resolver.Resolve(context.Background(), token); !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
	for name, token := range map[string]string{
		"a nonce alone":          with("", map[string]any{"nonce": "n-0S6_WzA2Mj"}),
		"Keycloak's typ Bearer":  with("", map[string]any{"typ": "Bearer"}),
		"at+jwt":                 with("at+jwt", nil),
		"application/at+jwt":     with("application/AT+JWT", nil),
		"JWT":                    with("JWT", nil),
		"an issuer's own at+jwt": with("application/okta-internal-at+jwt", nil),
		"JOSE":                   with("JOSE", nil),
	} {
		if _, err := f.resolver.Resolve(context.Background(), token); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// rawIssuer serves discovery and the keys of an issuer whose tokens are
// signed over payloads written byte for byte (their members' order and
// spelling as an issuer writes them, which a Go map would sort), and a
// resolver for it.
func rawIssuer(t *testing.T) (url string, resolver *identity.Resolver, sign func(payload string) string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": url, "jwks_uri": url + "/jwks"})
		case "/jwks":
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	url = srv.URL
	resolver, err = identity.NewResolver(ontology.OIDC{Issuer: url, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: "kind", Values: []string{"human"}}}, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	return url, resolver, func(payload string) string {
		obj, err := signer.Sign([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := obj.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// TestRegisteredClaimsAreReadByTheirExactNames: iss, sub, aud and the dates
// are read into structs, whose names encoding/json matches in any case
// (and by Unicode folding: "ſub" is "sub"), the last member winning, while
// the tenant, roles and kind are read by their exact names. A token
// carrying, beside its registered claims, a custom claim spelled Sub, Aud
// or Exp — a claim mapper's, an attribute a user may edit — was taken as
// that subject, for that audience, until that date.
func TestRegisteredClaimsAreReadByTheirExactNames(t *testing.T) {
	t.Parallel()
	url, resolver, sign := rawIssuer(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	token := func(aud, extra string) string {
		return sign(fmt.Sprintf(`{"iss":%q,"sub":"agent-7","aud":%q,"exp":%d,"org_id":"acme"%s}`, url, aud, exp, extra))
	}
	if c, err := resolver.Resolve(ctx, token("orangerail", `,"nickname":"Sub"`)); err != nil || c.Subject != "agent-7" {
		t.Fatalf("a plain token: %+v %v", c, err)
	}
	for name, tok := range map[string]string{
		"Sub names another subject":          token("orangerail", `,"Sub":"alice"`),
		"SUB names another subject":          token("orangerail", `,"SUB":"alice"`),
		"ſub (long s) names another subject": token("orangerail", `,"ſub":"alice"`),
		"Aud names this API for another's":   token("billing-api", `,"Aud":"orangerail"`),
		"Iss repeats the issuer":             token("orangerail", fmt.Sprintf(`,"Iss":%q`, url)),
		"Exp moves the expiry to 2286":       token("orangerail", `,"Exp":9999999999`),
		"NBF":                                token("orangerail", `,"NBF":1`),
		"At_Hash":                            token("orangerail", `,"At_Hash":"77QmUPtjPfzWtF2AnpK9RQ"`),
	} {
		c, err := resolver.Resolve(ctx, tok)
		if !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: %+v %v, want ErrInvalidToken", name, c, err)
		}
	}
}

// TestOnlyCompactTokens: a bearer token is a JWS in compact serialization
// (three base64url parts joined by dots). The same signed token in the
// JSON serializations, which the JOSE library would verify, is refused as
// an invalid token before it is verified.
func TestOnlyCompactTokens(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	compact := f.token(t, f.claims(nil))
	if _, err := f.resolver.Resolve(context.Background(), compact); err != nil {
		t.Fatal(err)
	}
	p := strings.Split(compact, ".")
	flattened := fmt.Sprintf(`{"protected":%q,"payload":%q,"signature":%q}`, p[0], p[1], p[2])
	for name, token := range map[string]string{
		"flattened JSON": flattened,
		"general JSON":   fmt.Sprintf(`{"payload":%q,"signatures":[{"protected":%q,"signature":%q}]}`, p[1], p[0], p[2]),
		"JSON whose strings hold the compact form's dots": fmt.Sprintf(`{"x":".%s.","protected":%q,"payload":%q,"signature":%q}`, p[1], p[0], p[1], p[2]),
		"compact with a fourth part":                      compact + ".x",
		"compact with padding":                            compact + "=",
		"compact with whitespace":                         " " + compact,
	} {
		c, err := f.resolver.Resolve(context.Background(), token)
		if !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: Resolve = %+v, %v; want ErrInvalidToken", name, c, err)
		}
	}
}

// TestLoneSurrogatesAreRefused: encoding/json reads a lone UTF-16
// surrogate escape (\ud800) and a byte that is not UTF-8 as U+FFFD, so
// subjects "a\ud800" and "a\udc00" were one caller, and one "a\ufffd"; a
// claim the caller is formed from (its subject, tenant, roles, kind) is
// refused unless the issuer wrote it as text, and a surrogate pair is
// text.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	t.Parallel()
	url, resolver, sign := rawIssuer(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	token := func(sub, extra string) string {
		return sign(fmt.Sprintf(`{"iss":%q,"sub":"%s","aud":"orangerail","exp":%d,"org_id":"acme"%s}`, url, sub, exp, extra))
	}
	if c, err := resolver.Resolve(ctx, token(`agent-\ud83d\ude00`, "")); err != nil || c.Subject != "agent-😀" {
		t.Fatalf("a surrogate pair: %+v %v", c, err)
	}
	if c, err := resolver.Resolve(ctx, token(`agent-\\ud800`, "")); err != nil || c.Subject != `agent-\ud800` {
		t.Fatalf("an escaped backslash before ud800: %+v %v", c, err)
	}
	for name, tok := range map[string]string{
		"a lone high surrogate in sub":        token(`agent-\ud800`, ""),
		"a lone low surrogate in sub":         token(`agent-\udc00`, ""),
		"a high surrogate before text in sub": token(`agent-\ud800x`, ""),
		"two high surrogates in sub":          token(`agent-\ud800\ud800`, ""),
		"a reversed pair in sub":              token(`agent-\ude00\ud83d`, ""),
		"a byte that is not UTF-8 in sub":     token("agent-\xff", ""),
		"a lone surrogate in the roles":       token("agent-7", `,"roles":["support\ud800"]`),
		"a lone surrogate in the kind":        token("agent-7", `,"kind":"human\udfff"`),
	} {
		c, err := resolver.Resolve(ctx, tok)
		if !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: %+v %v, want ErrInvalidToken", name, c, err)
		}
	}
}

// TestUnreadableRolesAndScopesAreRefused: a role or scope holding a control
// or invisible character is no role a config names, and a NUL in one made
// the desk's session unstorable (Postgres refuses it in text): the token
// is refused, as ErrUnreadableClaims, an invalid token.
func TestUnreadableRolesAndScopesAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for name, extra := range map[string]map[string]any{
		"a NUL in a role":             {"roles": []string{"approver", "support\x00"}},
		"a control in a role string":  {"roles": "approver sup\x01port"},
		"a NUL in a scope":            {"scope": "orders:read orders:\x00write"},
		"a bidi override in a scope":  {"scp": []string{"orders:read\u202e"}, "scope": []string{"orders:read\u202e"}},
		"a line separator in a role":  {"roles": []string{"a\u2028b"}},
		"a zero-width space in roles": {"roles": []string{"appro\u200bver"}},
	} {
		c, err := f.resolver.Resolve(context.Background(), f.token(t, f.claims(extra)))
		if !errors.Is(err, identity.ErrInvalidToken) || !errors.Is(err, identity.ErrUnreadableClaims) {
			t.Errorf("%s: %+v %v, want ErrUnreadableClaims", name, c, err)
		}
	}
	c, err := f.resolver.Resolve(context.Background(), f.token(t, f.claims(map[string]any{"roles": []string{"Support Staff", "ü"}})))
	if err != nil || !slices.Equal(c.Roles, []string{"Support Staff", "ü"}) {
		t.Fatalf("plain roles: %+v %v", c, err)
	}
}
