package login

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// recorder is the person's network, as a test sees it: it notes every
// request and reaches only the issuer's own test server.
type recorder struct {
	mu   sync.Mutex
	urls []string
	next http.RoundTripper
	host string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	if req.URL.Host != r.host {
		return nil, errors.New("off the test's network")
	}
	return r.next.RoundTrip(req)
}

// TestDeviceRefusesPlainHTTPEndpointsOffLoopback: `login`
// refuses an issuer of plain http off loopback "as the server does", but
// an https issuer's discovery document may name device and token endpoints
// of plain http on another host, and Device sends the device code there and
// takes the access token from there in the clear. The server holds the
// issuer's jwks_uri and every redirect to the issuer's rule
// (ontology.CheckIssuerURL); the sign-in holds nothing past the issuer URL.
func TestDeviceRefusesPlainHTTPEndpointsOffLoopback(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "jwks_uri": srv.URL + "/jwks",
			"token_endpoint":                "http://idp.example.com/token",
			"device_authorization_endpoint": "http://idp.example.com/device",
		})
	}))
	defer srv.Close()
	rec := &recorder{next: srv.Client().Transport, host: srv.Listener.Addr().String()}
	_, err := Device(context.Background(), Options{Issuer: srv.URL, HTTPClient: &http.Client{Transport: rec},
		Prompt: func(string, string, string) {}})
	if err == nil {
		t.Fatal("signed in")
	}
	for _, u := range rec.urls {
		if u[:5] == "http:" {
			t.Fatalf("the sign-in was sent over plain http off loopback to %s (every request: %v)", u, rec.urls)
		}
	}
}
