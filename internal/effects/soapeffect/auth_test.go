package soapeffect_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestSOAPCredentials: a SOAP call presents its upstream's credentials as
// an http call does — each scheme placed where it is declared — and none
// reaches an audit record, a log line, a result or an error, though the
// upstream echoes them back in an answer and in a fault's string.
func TestSOAPCredentials(t *testing.T) {
	key, user, password := "hkey-SECRET-1", "user-2", "pass-SECRET-2"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	t.Setenv("CARRIER_HKEY_CREDENTIAL", key)
	t.Setenv("CARRIER_LOGIN_CREDENTIAL", user+":"+password)
	var mu sync.Mutex
	var got []string
	var up *upstream
	up = newUpstream(t, func(n int, w http.ResponseWriter) {
		r := up.requests()[n-1]
		mu.Lock()
		got = append(got, r.header.Get("X-Api-Key")+" "+r.header.Get("Authorization"))
		mu.Unlock()
		echo := fmt.Sprintf("%s %s %s", r.header.Get("X-Api-Key"), r.header.Get("Authorization"), password)
		if n == 1 {
			envelope(http.StatusOK, ns11, `<r:Echo xmlns:r="urn:x"><r:Seen>`+echo+`</r:Seen></r:Echo>`)(n, w)
			return
		}
		envelope(http.StatusInternalServerError, ns11, fault11("Client", echo))(n, w)
	})
	auth := `    auth:
      hkey: {type: api_key, in: header, name: X-Api-Key}
      login: {type: basic}`
	h := newHarness(t, up.URL, auth, soapExecute("1.1"), "{roles: [support]}")
	ctx := context.Background()
	var sinks []string
	for _, want := range []engine.Status{engine.StatusOK, engine.StatusFailed} {
		out := h.e.Call(ctx, agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
		if out.Status != want {
			t.Fatalf("status %s, want %s (%v)", out.Status, want, out.Err)
		}
		sinks = append(sinks, string(out.Data))
		if out.Err != nil {
			sinks = append(sinks, out.Err.Error())
		}
		_, _, entries := h.audit(t, "acme", out.CorrelationID)
		sinks = append(sinks, entries)
	}
	for _, g := range got {
		if g != key+" Basic "+basic {
			t.Fatalf("the upstream saw %q", g)
		}
	}
	sinks = append(sinks, h.logs.String())
	all := strings.Join(sinks, "\n")
	for _, s := range []string{key, password, basic} {
		if strings.Contains(all, s) {
			t.Errorf("the credential %q reached a sink", s)
		}
	}
	if strings.Count(all, "[redacted]") < 2 {
		t.Errorf("the echoed credentials were not redacted in the result and the fault: %s", all)
	}
}

// TestSOAPFaultScrubbedBeforeItIsCut: a fault's string is cut for
// operators, and scrubbed of credentials before the cut. An agent that
// pads its input so that the cut falls inside an echoed credential — one
// the fault spells in character references, which no scrub of the
// answer's bytes finds and the XML reader decodes — leaves none of it in
// the error, the audit record or the log.
func TestSOAPFaultScrubbedBeforeItIsCut(t *testing.T) {
	key := "hkey-SECRET-0123456789abcdefghijklmnopqrstuvwxyz"
	t.Setenv("CARRIER_HKEY_CREDENTIAL", key)
	var up *upstream
	up = newUpstream(t, func(n int, w http.ResponseWriter) {
		r := up.requests()[n-1]
		var spelled strings.Builder
		for _, c := range r.header.Get("X-Api-Key") {
			fmt.Fprintf(&spelled, "&#%d;", c)
		}
		envelope(http.StatusInternalServerError, ns11, fault11("Client", "order "+r.header.Get("X-Order")+" refused for key "+spelled.String()))(n, w)
	})
	h := newHarness(t, up.URL, "    auth:\n      hkey: {type: api_key, in: header, name: X-Api-Key}", soapExecute("1.1"), "{roles: [support]}")
	const faultBytes = 512
	for _, cut := range []int{1, len(key) - 1} { // bytes of the key the cut would keep (two calls: the budget of a write)
		pad := strings.Repeat("p", faultBytes-cut-len("order ")-len(" refused for key "))
		input, _ := json.Marshal(map[string]string{"order_id": pad})
		out := h.e.Call(context.Background(), agent("acme"), "create_label", input)
		if out.Status != engine.StatusFailed {
			t.Fatalf("status %s (%v)", out.Status, out.Err)
		}
		_, _, entries := h.audit(t, "acme", out.CorrelationID)
		kept := "for key " + key[:cut]
		for _, sink := range []string{entries, out.Err.Error(), h.logs.String()} {
			if strings.Contains(sink, kept) {
				t.Errorf("cut after %d bytes of the key: a sink holds %q:\n%s", cut, kept, sink)
			}
		}
		if !strings.Contains(out.Err.Error(), "for key [") {
			t.Errorf("cut after %d bytes of the key: the fault's string was not scrubbed: %v", cut, out.Err)
		}
	}
}

// TestSOAPNoScopeAsksNoScope: a soap call declaring scopes: [] requests
// its token with no scope parameter (the server's default scope, RFC 6749
// §3.3), not with its scheme's, and presents that token.
func TestSOAPNoScopeAsksNoScope(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	up := newUpstream(t, envelope(http.StatusOK, ns11, response))
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		forms = append(forms, r.PostForm)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token": "tok-default", "token_type": "bearer", "expires_in": 3600}`)
	}))
	t.Cleanup(tokenSrv.Close)
	t.Setenv("CARRIER_APP_CREDENTIAL", "client:secret")
	auth := fmt.Sprintf("    auth:\n      app: {type: oauth2_client_credentials, token_url: %q, scopes: [labels:read, labels:write]}", tokenSrv.URL+"/token")
	h := newHarness(t, up.URL, auth, soapExecute("1.1")+"scopes: []\n", "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
	if out.Status != engine.StatusOK {
		t.Fatalf("status %s %s (%v)", out.Status, out.Diagnostic, out.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(forms) != 1 {
		t.Fatalf("%d token requests, want 1", len(forms))
	}
	if scope, ok := forms[0]["scope"]; ok {
		t.Errorf("the token was requested with scope %q, want no scope parameter", scope)
	}
	if got := up.requests(); len(got) != 1 || got[0].header.Get("Authorization") != "Bearer tok-default" {
		t.Errorf("the upstream saw %+v, want one request presenting the token", got)
	}
}
