package front_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestGoldenRefusals holds every refusal the front answers, and the
// protected-resource metadata, to the files under testdata/refusals: the
// status, the challenge and the body a client receives. Values that change
// per run (the issuer's port, Retry-After's seconds) are named, not kept.
func TestGoldenRefusals(t *testing.T) {
	t.Parallel()
	f := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.MaxBodyBytes = 4096
		c.HTTP.RateLimits.WritesPerMinute = 1
		c.HTTP.RateLimits.FailedAuthPerMinute = 1
	})
	token := f.token(t, "agent")
	type answer struct {
		Status          int            `json:"status"`
		WWWAuthenticate string         `json:"www_authenticate,omitempty"`
		RetryAfter      bool           `json:"retry_after,omitempty"`
		Body            map[string]any `json:"body"`
	}
	record := func(name string, resp *reply, body map[string]any) {
		t.Helper()
		a := answer{Status: resp.StatusCode, WWWAuthenticate: resp.Header.Get("WWW-Authenticate"),
			RetryAfter: resp.Header.Get("Retry-After") != "", Body: body}
		golden.JSON(t, filepath.Join("testdata", "refusals", name+".json"), a)
	}

	resp, m := post(t, f.url, "", callGet)
	record("no_token", resp, m)
	resp, m = post(t, f.url, "", callGet)
	record("no_token_throttled", resp, m)
	resp, m = post(t, f.url, "forged", callGet)
	record("bad_token", resp, m)
	resp, m = post(t, f.url, "forged", callGet)
	record("bad_token_throttled", resp, m)
	resp, m = post(t, f.url, token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"order_get","arguments":{"x":"`+strings.Repeat("x", 5000)+`"}}}`)
	record("body_too_large", resp, m)
	// The id is read from what was read of a body too large: after the
	// cut, it is not.
	resp, m = post(t, f.url, token, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"order_get","arguments":{"x":"`+strings.Repeat("x", 5000)+`"}},"id":1}`)
	record("body_too_large_id_unread", resp, m)
	resp, m = post(t, f.url, token, "["+callGet+"]")
	record("batch", resp, m)
	resp, m = post(t, f.url, token, callGet, "Origin", "https://evil.example.com")
	record("origin", resp, m)
	resp, m = hostPost(t, f.url, token, "evil.example.com", callGet)
	record("host_refused", resp, m)
	if resp, _ := post(t, f.url, token, callAction); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first write: %d", resp.StatusCode)
	}
	resp, m = post(t, f.url, token, strings.Replace(callAction, `"id":1`, `"id":"call-7"`, 1))
	record("rate_limited", resp, m)

	guarded := newDoor(t, front.NewMemoryLimiter(), func(c *ontology.Config) {
		c.HTTP.TrustedProxyHops = 1
		c.HTTP.AllowedOrigins = []string{"https://app.example.com"}
		c.Identity.RefuseBrowserOrigins = true
		c.Identity.AllowedNetworks = []string{"203.0.113.0/24"}
	})
	guardedToken := guarded.token(t, "agent")
	resp, m = post(t, guarded.url, guardedToken, callGet, "X-Forwarded-For", "203.0.113.7", "Origin", "https://app.example.com")
	record("browser_origin_refused", resp, m)
	resp, m = post(t, guarded.url, guardedToken, callGet, "X-Forwarded-For", "198.51.100.7")
	record("network_refused", resp, m)

	metadata, err := http.Get(f.url + front.MetadataPath(mcpPath))
	if err != nil {
		t.Fatal(err)
	}
	defer metadata.Body.Close()
	var doc map[string]any
	if err := jsonDecode(metadata, &doc); err != nil {
		t.Fatal(err)
	}
	for i, s := range doc["authorization_servers"].([]any) {
		if s == f.issuerAt {
			doc["authorization_servers"].([]any)[i] = "ISSUER"
		}
	}
	record("metadata", replyOf(metadata), doc)
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
