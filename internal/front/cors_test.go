package front_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestAllowedOriginsCallFromABrowser: a browser client of an origin
// http.allowed_origins lists can call: its preflight, which carries no
// token, is answered 204 with the methods and headers a Streamable HTTP
// client sends, and every answer to it — a call served, the challenge of
// a call without a token — names the origin and exposes the headers the
// client reads. An unlisted origin is refused and named in nothing; with
// identity.refuse_browser_origins no origin is named, preflight or not.
func TestAllowedOriginsCallFromABrowser(t *testing.T) {
	t.Parallel()
	const origin, other = "https://app.example.com", "https://evil.example.com"
	allow := func(c *ontology.Config) { c.HTTP.AllowedOrigins = []string{origin} }
	f := newDoor(t, front.NewMemoryLimiter(), allow)
	preflight := func(f *fixture, origin string) *reply {
		t.Helper()
		resp, _ := request(t, http.MethodOptions, f.url+mcpPath, "", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version")
		return resp
	}
	pre := preflight(f, origin)
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != origin ||
		pre.Header.Get("Access-Control-Allow-Methods") != "GET, POST, DELETE" ||
		pre.Header.Get("Access-Control-Allow-Headers") == "" || pre.Header.Get("Vary") != "Origin" {
		t.Fatalf("the preflight of an allowed origin: %d %v", pre.StatusCode, pre.Header)
	}
	resp, _ := post(t, f.url, f.token(t, "agent-7"), callGet, "Origin", origin)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		resp.Header.Get("Access-Control-Expose-Headers") == "" {
		t.Fatalf("a call of an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := post(t, f.url, "", callGet, "Origin", origin); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("a call of an allowed origin without a token: %d %v", resp.StatusCode, resp.Header)
	}
	if f.served.Load() != 1 {
		t.Fatalf("the handler served %d requests, want the one call", f.served.Load())
	}

	if pre := preflight(f, other); pre.StatusCode != http.StatusForbidden || pre.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("the preflight of an unlisted origin: %d %v", pre.StatusCode, pre.Header)
	}
	closed := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		allow(c)
		c.Identity.RefuseBrowserOrigins = true
	})
	if pre := preflight(closed, origin); pre.StatusCode == http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("refuse_browser_origins, a preflight: %d %v", pre.StatusCode, pre.Header)
	}
}

// TestMetadataPreflightFollowsAllowedOrigins: a browser's MCP client
// fetches the protected-resource metadata cross-origin with its
// MCP-Protocol-Version header, which needs a preflight. The metadata was
// mounted for GET alone, so the preflight was answered 405 and the
// client never read the document. It is answered as the MCP endpoint's:
// 204 naming an origin http.allowed_origins lists, 403 to another.
func TestMetadataPreflightFollowsAllowedOrigins(t *testing.T) {
	t.Parallel()
	const origin, other = "https://app.example.com", "https://evil.example.com"
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.AllowedOrigins = []string{origin} })
	for _, path := range []string{front.MetadataPath(mcpPath), front.MetadataPath("")} {
		preflight := func(origin string) *reply {
			t.Helper()
			resp, _ := request(t, http.MethodOptions, f.url+path, "", "", "Origin", origin,
				"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "mcp-protocol-version")
			return resp
		}
		if pre := preflight(origin); pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version") {
			t.Errorf("%s: the preflight of an allowed origin: %d %v", path, pre.StatusCode, pre.Header)
		}
		if pre := preflight(other); pre.StatusCode != http.StatusForbidden || pre.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: the preflight of an unlisted origin: %d %v", path, pre.StatusCode, pre.Header)
		}
	}
}
