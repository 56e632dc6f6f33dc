package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServeDrainsAnUpstreamEffectInFlight: SIGTERM (the context ending)
// while an HTTP effect (create_return_label, made approval-free, its
// attempt timeout 20s, the deadline the default 30s) waits 12s on its
// upstream. serve's drain gave up after a fixed 10s, closed the runtime
// under the call and returned an uncoded error (exit 2); the process then
// exits (os.Exit in main) with execution_started committed and no end: the
// label bought, the audit saying outcome_unknown, the caller unanswered.
// The drain now lasts the execution bound: the call is answered, its end
// recorded, and serve exits 0.
func TestServeDrainsAnUpstreamEffectInFlight(t *testing.T) {
	ctx := context.Background()
	url, iss, issuerURL := serveFixture(t)
	httpPort := testdb.FreePort(t)
	effectHit := make(chan struct{}, 1)
	carrier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		effectHit <- struct{}{}
		time.Sleep(12 * time.Second)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"label_id":"L-1","tracking_number":"T-1","label_url":"https://x/l"}`)
	}))
	t.Cleanup(carrier.Close)
	config := serveConfig(t, issuerURL, httpPort, "", func(yaml string) string {
		yaml = strings.Replace(yaml, `demo: "http://127.0.0.1:8089"`, fmt.Sprintf("demo: %q", carrier.URL), 1)
		yaml = strings.Replace(yaml, "policy: {approval: required, roles: [support]}\n    destructive: false   # a label only adds",
			"policy: {approval: none, roles: [support]}\n    destructive: false   # a label only adds", 1)
		return strings.Replace(yaml, "success: [201]\n", "success: [201]\n        timeout: 20s\n", 1)
	})
	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stderr bytes.Buffer
	done := runServe(serveCtx, config, url, &stderr)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	for range 200 { // until serve listens and is ready
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tok, err := iss.Token(devissuer.Claims{Issuer: issuerURL, Subject: "agent-1", Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme", "roles": []string{"support"}, "scope": ""}})
	if err != nil {
		t.Fatal(err)
	}
	admin := testdb.Pool(t, url)
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "create_return_label", "arguments": map[string]any{"order_id": "o-1001", "reason": "drain me", "weight_grams": 500}}})
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{code: resp.StatusCode, body: string(b), err: err}
	}()
	select { // the effect reached the upstream
	case <-effectHit:
	case a := <-answered:
		t.Fatalf("the call never reached its effect: %d %v %s", a.code, a.err, a.body)
	}
	started := time.Now()
	cancel()       // SIGTERM
	code := <-done // main would os.Exit here, ending the handler still running
	t.Logf("serve exited %d after %s; stderr: %s", code, time.Since(started).Round(time.Second), stderr.String())
	var ends, starts int
	if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE phase = 'execution_started'),
		count(*) FILTER (WHERE phase IN ('execution_succeeded','execution_failed'))
		FROM orangerail.audit WHERE action = 'create_return_label'`).Scan(&starts, &ends); err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %d execution_started, %d ends", starts, ends)
	if code != exitOK {
		t.Errorf("serve exited %d after a graceful stop, want %d", code, exitOK)
	}
	select {
	case a := <-answered:
		t.Logf("call answered %d %v %s", a.code, a.err, a.body)
	default:
		t.Errorf("serve exited with the call in flight still unanswered")
	}
	if starts != ends {
		t.Errorf("audit: %d execution_started but %d ends: the process exits with the execution in flight unrecorded (outcome_unknown)", starts, ends)
	}
}
