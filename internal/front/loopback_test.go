package front_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestLoopbackOriginAndHost: on a loopback listener (http.listen), a
// request whose Origin and Host are loopback — localhost, 127.0.0.0/8,
// [::1], any port — is served, as the MCP conformance suite's
// DNS-rebinding scenario expects; an Origin or a Host naming another host
// is still refused (X_MCP_ORIGIN_REFUSED, X_MCP_HOST_REFUSED, 403). A
// listener off loopback keeps its rules: only http.allowed_origins, and a
// Host over a loopback connection still loopback, as go-sdk requires.
// identity.refuse_browser_origins still refuses every Origin.
func TestLoopbackOriginAndHost(t *testing.T) {
	t.Parallel()
	type attempt struct {
		name, host, origin string
		status             int
		code               string
	}
	run := func(t *testing.T, f *fixture, attempts []attempt) {
		t.Helper()
		u, err := url.Parse(f.url)
		if err != nil {
			t.Fatal(err)
		}
		token := f.token(t, "agent")
		for _, a := range attempts {
			host := a.host
			if host == "" {
				host = u.Host // the listener's own address, as a client dialling it sends
			}
			var header []string
			if a.origin != "" {
				header = []string{"Origin", a.origin}
			}
			resp, m := hostPost(t, f.url, token, host, callGet, header...)
			if resp.StatusCode != a.status || (a.code != "" && errorCode(m) != a.code) {
				t.Errorf("%s (Host %s, Origin %q): %d %v, want %d %s", a.name, host, a.origin, resp.StatusCode, m, a.status, a.code)
			}
		}
	}

	t.Run("loopback listener", func(t *testing.T) {
		t.Parallel()
		f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) { c.HTTP.Listen = "127.0.0.1:8080" })
		port := f.url[len("http://127.0.0.1:"):]
		run(t, f, []attempt{
			{name: "its own origin", origin: "http://127.0.0.1:" + port, status: http.StatusOK},
			{name: "localhost, another port", host: "localhost:" + port, origin: "http://localhost:3000", status: http.StatusOK},
			{name: "[::1]", host: "[::1]:" + port, origin: "https://[::1]:9", status: http.StatusOK},
			{name: "127.0.0.0/8", host: "127.1.2.3", origin: "http://127.1.2.3", status: http.StatusOK},
			{name: "no origin", status: http.StatusOK},
			{name: "a foreign origin", origin: "http://evil.example.com", status: http.StatusForbidden, code: "X_MCP_ORIGIN_REFUSED"},
			{name: "a look-alike origin", origin: "http://localhost.evil.example.com:" + port, status: http.StatusForbidden, code: "X_MCP_ORIGIN_REFUSED"},
			{name: "an opaque origin", origin: "null", status: http.StatusForbidden, code: "X_MCP_ORIGIN_REFUSED"},
			{name: "DNS rebinding", host: "evil.example.com", origin: "http://evil.example.com", status: http.StatusForbidden, code: "X_MCP_HOST_REFUSED"},
			{name: "a foreign Host, a loopback origin", host: "evil.example.com:" + port, origin: "http://127.0.0.1:" + port, status: http.StatusForbidden, code: "X_MCP_HOST_REFUSED"},
		})
	})

	t.Run("listener off loopback", func(t *testing.T) {
		t.Parallel()
		f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
			c.HTTP.Listen = "0.0.0.0:8080"
			c.HTTP.AllowedOrigins = []string{"https://console.example.com"}
		})
		port := f.url[len("http://127.0.0.1:"):]
		run(t, f, []attempt{
			{name: "no origin", status: http.StatusOK},
			{name: "an allowed origin", origin: "https://console.example.com", status: http.StatusOK},
			{name: "a loopback origin", origin: "http://127.0.0.1:" + port, status: http.StatusForbidden, code: "X_MCP_ORIGIN_REFUSED"},
			// The test's connection is over loopback, where go-sdk refuses
			// a foreign Host whatever the listener: so does the front.
			{name: "a foreign Host over loopback", host: "evil.example.com", status: http.StatusForbidden, code: "X_MCP_HOST_REFUSED"},
		})
	})

	t.Run("refuse_browser_origins", func(t *testing.T) {
		t.Parallel()
		f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
			c.HTTP.Listen = "127.0.0.1:8080"
			c.Identity.RefuseBrowserOrigins = true
		})
		port := f.url[len("http://127.0.0.1:"):]
		run(t, f, []attempt{
			{name: "no origin", status: http.StatusOK},
			{name: "a loopback origin", origin: "http://127.0.0.1:" + port, status: http.StatusForbidden, code: "X_IDENTITY_ORIGIN_REFUSED"},
		})
	})
}
