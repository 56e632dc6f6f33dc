package httpeffect_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

const scopesConfig = `service: shop
upstreams:
  ledger:
    base_url: %[1]q
    auth:
      app: {type: oauth2_client_credentials, token_url: "%[1]s/token", scopes: [write, read, refund]}
actions:
  balance:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 10}
    execute: {http: {upstream: ledger, method: GET, path: "/balance/{order_id}", scopes: [read]}}
  pay:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 10}
    execute: {http: {upstream: ledger, method: POST, path: "/pay/{order_id}", scopes: [write, read, write]}}
  settle:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 10}
    execute: {http: {upstream: ledger, method: POST, path: "/settle/{order_id}"}}
  peek:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 10}
    execute: {http: {upstream: ledger, method: GET, path: "/peek/{order_id}", scopes: []}}
`

// TestCallScopesAreRequested: each action's token is requested at the
// token endpoint with the action's own scopes — sorted, each once, space-
// delimited (RFC 6749 §3.3) — or, declaring none, with its scheme's, or,
// declaring [], with no scope parameter at all (the server's default); and
// each action's requests carry the token issued for its scopes, never
// another action's: a read's token does not carry a write's scopes. A
// token is fetched once per action while it is valid.
func TestCallScopesAreRequested(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}      // scope parameter -> token requests
	carried := map[string]string{} // upstream path -> the scope its token was issued for
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/token" {
			if err := r.ParseForm(); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			scope := r.PostForm.Get("scope")
			if _, ok := r.PostForm["scope"]; !ok {
				scope = "-" // no scope parameter, not an empty one
			}
			asked[scope]++
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token": "tok-SECRET-%s", "token_type": "bearer", "expires_in": 3600}`, strings.ReplaceAll(scope, " ", "+"))
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer tok-SECRET-")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		carried[strings.SplitN(r.URL.Path, "/", 3)[1]] = strings.ReplaceAll(token, "+", " ")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("LEDGER_APP_CREDENTIAL", "client-5:secret-SECRET-5")
	cfg, err := ontology.Parse(fmt.Appendf(nil, scopesConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := credentialEngine(t, cfg)
	ctx := context.Background()
	for round := range 2 {
		for _, action := range []string{"balance", "pay", "settle", "peek"} {
			if out := e.Call(ctx, agent("acme"), action, fmt.Appendf(nil, `{"order_id": "o-%d"}`, round)); out.Status != engine.StatusOK {
				t.Fatalf("%s, round %d: %s %s (%v)", action, round, out.Status, out.Diagnostic, out.Err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	wantAsked := map[string]int{"read": 1, "read write": 1, "read refund write": 1, "-": 1}
	if !maps.Equal(asked, wantAsked) {
		t.Errorf("token requests by scope %v, want %v (one per action, each with its own scopes)", asked, wantAsked)
	}
	wantCarried := map[string]string{"balance": "read", "pay": "read write", "settle": "read refund write", "peek": "-"}
	if !maps.Equal(carried, wantCarried) {
		t.Errorf("each call carried the token of scopes %v, want %v", carried, wantCarried)
	}
}
