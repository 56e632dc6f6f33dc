package httpeffect

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestTokenSecretsStayBounded: an oauth2_client_credentials scheme's
// tokens are scrubbed from answers, the current one and the one before it
// (which a call begun before the renewal may still carry), and no older:
// every token ever fetched was kept, eleven forms each, so a server
// renewing its token every few minutes scanned a 1 MiB answer some 20,000
// times after a week.
func TestTokenSecretsStayBounded(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// A token x/oauth2 holds expired at once (under its 10s margin).
		_, _ = fmt.Fprintf(w, `{"access_token": "tok-%04d-abcdefghijklmnop", "token_type": "bearer", "expires_in": 1}`, n.Add(1))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("LEDGER_APP_CREDENTIAL", "client:secret")
	u := &ontology.Upstream{Auth: map[string]*ontology.UpstreamAuth{
		"app": {Type: ontology.AuthOAuth2ClientCredentials, TokenURL: srv.URL + "/token"},
	}}
	c, err := NewCaller("ledger", u, []string{"app"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
		if err := c.authorize(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 300 {
		t.Fatalf("%d tokens fetched", n.Load())
	}
	c.creds.mu.Lock()
	secrets := slices.Clone(c.creds.secrets)
	c.creds.mu.Unlock()
	if len(secrets) > 100 {
		t.Fatalf("after 300 tokens the scrub list holds %d forms: it grows with every token ever fetched", len(secrets))
	}
	// The last two tokens are scrubbed, the one before them no longer.
	for i, want := range map[int32]bool{300: true, 299: true, 298: false} {
		tok := fmt.Sprintf("tok-%04d-abcdefghijklmnop", i)
		if got := slices.ContainsFunc(secrets, func(b []byte) bool { return string(b) == tok }); got != want {
			t.Errorf("token %d scrubbed: %v, want %v", i, got, want)
		}
	}
	if !slices.ContainsFunc(secrets, func(b []byte) bool { return string(b) == "secret" }) {
		t.Error("the client's secret is no longer scrubbed")
	}
}
