package front_test

import (
	"net/http"
	"testing"

	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestBrowserOriginsRefused: with identity.refuse_browser_origins, a
// request carrying an Origin (even one http.allowed_origins allows) is
// refused with a valid token; without it, that request is served.
func TestBrowserOriginsRefused(t *testing.T) {
	t.Parallel()
	const origin = "https://app.example.com"
	allow := func(c *ontology.Config) { c.HTTP.AllowedOrigins = []string{origin} }
	open := newDoor(t, front.NewMemoryLimiter(), allow)
	if resp, _ := post(t, open.url, open.token(t, "agent"), callGet, "Origin", origin); resp.StatusCode != http.StatusOK {
		t.Fatalf("without refuse_browser_origins, an allowed origin: %d", resp.StatusCode)
	}
	closed := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		allow(c)
		c.Identity.RefuseBrowserOrigins = true
	})
	token := closed.token(t, "agent")
	resp, m := post(t, closed.url, token, callGet, "Origin", origin)
	if resp.StatusCode != http.StatusForbidden || errorCode(m) != "X_IDENTITY_ORIGIN_REFUSED" {
		t.Fatalf("a browser origin with a valid token: %d %s", resp.StatusCode, errorCode(m))
	}
	if resp, _ := post(t, closed.url, token, callGet); resp.StatusCode != http.StatusOK {
		t.Fatalf("the same token without an Origin: %d", resp.StatusCode)
	}
	if closed.served.Load() != 1 {
		t.Fatalf("the handler served %d requests, want 1", closed.served.Load())
	}
}

// TestAllowedNetworksProxyInside: behind trusted proxies the socket's peer
// is a proxy, so it never stands in for a client the proxies did not name
// — a chain shorter than the hops, an entry that is no address: with the
// proxy inside an allowed network, such a request is refused, not
// admitted as the proxy.
func TestAllowedNetworksProxyInside(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.Identity.AllowedNetworks = []string{"127.0.0.0/8", "::1/128"} // the proxy's, the test's own
	})
	token := f.token(t, "agent")
	for _, xff := range []string{"unknown", "_hidden", "198.51.100.7:4711", "[2001:db8::7]:4711", "not an address", ""} {
		header := []string{"X-Forwarded-For", xff}
		if xff == "" {
			header = nil // no entry at all
		}
		resp, m := post(t, f.url, token, callGet, header...)
		if resp.StatusCode != http.StatusForbidden || errorCode(m) != "X_IDENTITY_NETWORK_REFUSED" {
			t.Errorf("X-Forwarded-For %q: %d %s, want 403 X_IDENTITY_NETWORK_REFUSED", xff, resp.StatusCode, errorCode(m))
		}
	}
	if resp, m := post(t, f.url, token, callGet, "X-Forwarded-For", "127.0.0.1:4711"); resp.StatusCode != http.StatusOK {
		t.Errorf("a client inside the networks: %d %s", resp.StatusCode, errorCode(m))
	}
}

// TestAllowedNetworks: with identity.allowed_networks, a valid token is
// served from an address inside a listed network and refused from one
// outside, the address read as the front reads it: behind
// trusted_proxy_hops proxies, the entry the outermost trusted proxy added,
// never one the client wrote before it.
func TestAllowedNetworks(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.Identity.AllowedNetworks = []string{"203.0.113.0/24", "2001:db8::/32"}
	})
	token := f.token(t, "agent")
	for _, tt := range []struct {
		xff  string
		want int
	}{
		{"203.0.113.7", http.StatusOK},
		{"2001:db8::7", http.StatusOK},
		{"198.51.100.7, 203.0.113.7", http.StatusOK},
		{"198.51.100.7", http.StatusForbidden},
		{"203.0.113.7, 198.51.100.7", http.StatusForbidden}, // the client wrote the first entry
		{"203.0.113.7:4711", http.StatusOK},                 // a proxy that writes the port
		{"[2001:db8::7]:4711", http.StatusOK},
		{"198.51.100.7:4711", http.StatusForbidden},
	} {
		resp, m := post(t, f.url, token, callGet, "X-Forwarded-For", tt.xff)
		if resp.StatusCode != tt.want {
			t.Errorf("X-Forwarded-For %q: %d, want %d", tt.xff, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusForbidden && errorCode(m) != "X_IDENTITY_NETWORK_REFUSED" {
			t.Errorf("X-Forwarded-For %q: %s", tt.xff, errorCode(m))
		}
	}
	// A forged token from outside is refused as a bad token: the policy is
	// not told to whoever holds no valid token.
	if resp, m := post(t, f.url, "forged", callGet, "X-Forwarded-For", "198.51.100.7"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged token from outside: %d %s", resp.StatusCode, errorCode(m))
	}

	// Without trusted hops X-Forwarded-For is not read: the socket's peer
	// (loopback here) is the address.
	direct := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.Identity.AllowedNetworks = []string{"203.0.113.0/24"}
	})
	tok := direct.token(t, "agent")
	if resp, m := post(t, direct.url, tok, callGet, "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != http.StatusForbidden || errorCode(m) != "X_IDENTITY_NETWORK_REFUSED" {
		t.Errorf("a loopback peer claiming an allowed address: %d %s", resp.StatusCode, errorCode(m))
	}
	loopback := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.Identity.AllowedNetworks = []string{"127.0.0.0/8", "::1/128"}
	})
	if resp, _ := post(t, loopback.url, loopback.token(t, "agent"), callGet, "X-Forwarded-For", "198.51.100.7"); resp.StatusCode != http.StatusOK {
		t.Errorf("a loopback peer inside 127.0.0.0/8: %d", resp.StatusCode)
	}
}

// TestPolicyRefusalsAreNotThrottled: a valid token refused by policy is no
// failed authentication: refusals past failed_auth_per_minute are still
// answered 403, not 429, and do not spend the address's bad-token
// allowance; each request is verified once.
func TestPolicyRefusalsAreNotThrottled(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.HTTP.RateLimits.FailedAuthPerMinute = 1
		c.Identity.AllowedNetworks = []string{"203.0.113.0/24"}
		c.Identity.RefuseBrowserOrigins = true
		c.HTTP.AllowedOrigins = []string{"https://app.example.com"}
	})
	token := f.token(t, "agent")
	const outside = "198.51.100.7"
	for i := range 5 {
		if resp, m := post(t, f.url, token, callGet, "X-Forwarded-For", outside); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("refusal %d: %d %s", i, resp.StatusCode, errorCode(m))
		}
		if resp, m := post(t, f.url, token, callGet, "X-Forwarded-For", "203.0.113.7", "Origin", "https://app.example.com"); resp.StatusCode != http.StatusForbidden || errorCode(m) != "X_IDENTITY_ORIGIN_REFUSED" {
			t.Fatalf("origin refusal %d: %d %s", i, resp.StatusCode, errorCode(m))
		}
	}
	if got := f.resolver.calls.Load(); got != 10 {
		t.Fatalf("%d verifications for 10 requests", got)
	}
	// The address's first bad token is its first failed authentication.
	if resp, m := post(t, f.url, "forged", callGet, "X-Forwarded-For", outside); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the first forged token after policy refusals: %d %s", resp.StatusCode, errorCode(m))
	}
}

// TestTrustedProxiesBoundTheHeader: with http.trusted_proxies, the
// X-Forwarded-For a peer outside them writes is not read — it reached the
// server around its proxies, and is its own address — so it cannot name
// an address inside identity.allowed_networks; from a listed proxy the
// header is read as before.
func TestTrustedProxiesBoundTheHeader(t *testing.T) {
	t.Parallel()
	networks := func(proxies ...string) func(*ontology.Config) {
		return func(c *ontology.Config) {
			c.HTTP.TrustedProxyHops = 1
			c.HTTP.TrustedProxies = proxies
			c.Identity.AllowedNetworks = []string{"10.0.0.0/8"}
		}
	}
	// The test connects from loopback: outside 192.0.2.0/24, inside the
	// loopback networks.
	around := newDoor(t, front.NewMemoryLimiter(), networks("192.0.2.0/24"))
	if resp, m := post(t, around.url, around.token(t, "agent"), callGet, "X-Forwarded-For", "10.1.2.3"); resp.StatusCode != http.StatusForbidden ||
		errorCode(m) != "X_IDENTITY_NETWORK_REFUSED" {
		t.Errorf("a peer outside the proxies naming an allowed address: %d %s, want 403 X_IDENTITY_NETWORK_REFUSED", resp.StatusCode, errorCode(m))
	}
	through := newDoor(t, front.NewMemoryLimiter(), networks("127.0.0.0/8", "::1/128"))
	if resp, m := post(t, through.url, through.token(t, "agent"), callGet, "X-Forwarded-For", "10.1.2.3"); resp.StatusCode != http.StatusOK {
		t.Errorf("a listed proxy naming an allowed address: %d %s", resp.StatusCode, errorCode(m))
	}
	if resp, m := post(t, through.url, through.token(t, "agent"), callGet, "X-Forwarded-For", "198.51.100.7"); resp.StatusCode != http.StatusForbidden ||
		errorCode(m) != "X_IDENTITY_NETWORK_REFUSED" {
		t.Errorf("a listed proxy naming an address outside the networks: %d %s", resp.StatusCode, errorCode(m))
	}
}
