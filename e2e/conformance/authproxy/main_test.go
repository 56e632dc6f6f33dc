package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestProxyAddsTokenKeepsHostAndOrigin holds the proxy to what the
// conformance run relies on: the token is added only where the client
// sent none, and the server sees the client's own Host, Origin, path and
// body.
func TestProxyAddsTokenKeepsHostAndOrigin(t *testing.T) {
	t.Parallel()
	type seen struct{ host, origin, auth, path, body string }
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Host, r.Header.Get("Origin"), r.Header.Get("Authorization"), r.URL.Path, string(b)}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer upstream.Close()
	target, err := url.Parse(upstream.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(newProxy(target, "dev-token"))
	defer proxy.Close()

	for _, tc := range []struct {
		name, host, auth, wantAuth string
	}{
		{"adds the token", "", "", "Bearer dev-token"},
		{"keeps the client's own", "", "Bearer other", "Bearer other"},
		{"passes a foreign Host through", "evil.example.com", "", "Bearer dev-token"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, proxy.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0"}`))
		if err != nil {
			t.Fatal(err)
		}
		wantHost := strings.TrimPrefix(proxy.URL, "http://")
		if tc.host != "" {
			req.Host, wantHost = tc.host, tc.host
		}
		req.Header.Set("Origin", "http://"+wantHost)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := <-got
		want := seen{wantHost, "http://" + wantHost, tc.wantAuth, "/mcp", `{"jsonrpc":"2.0"}`}
		if resp.StatusCode != http.StatusTeapot || s != want {
			t.Errorf("%s: status %d, upstream saw %+v; want %+v", tc.name, resp.StatusCode, s, want)
		}
	}
}
