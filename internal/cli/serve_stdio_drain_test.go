package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServeStdioDrainsAnEffectInFlight: SIGTERM (the context ending)
// while a call served over stdio (create_return_label, made
// approval-free, under the development identity) waits 6s on its
// upstream. serve over HTTP drains such a call and answers it; over stdio
// it closed the session at once, and go-sdk's Close, while it waits for
// the handlers, fails every write after it: the label was bought and its
// end recorded, but the client was never told (an agent that retries buys
// a second one). Now the stdio session stops reading and answers the
// calls it read first, as at the end of its input, before serve exits 0.
func TestServeStdioDrainsAnEffectInFlight(t *testing.T) {
	ctx := context.Background()
	url, _, issuerURL := serveFixture(t)
	effectHit := make(chan struct{}, 1)
	carrier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		effectHit <- struct{}{}
		select {
		case <-time.After(6 * time.Second):
		case <-r.Context().Done(): // the call was cut
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"label_id":"L-1","tracking_number":"T-1","label_url":"https://x/l"}`)
	}))
	t.Cleanup(carrier.Close)
	config := serveConfig(t, issuerURL, testdb.FreePort(t), "", func(yaml string) string {
		yaml = strings.Replace(yaml, `demo: "http://127.0.0.1:8089"`, fmt.Sprintf("demo: %q", carrier.URL), 1)
		yaml = strings.Replace(yaml, "policy: {approval: required, roles: [support]}\n    destructive: false   # a label only adds",
			"policy: {approval: none, roles: [support]}\n    destructive: false   # a label only adds", 1)
		return strings.Replace(yaml, "success: [201]\n", "success: [201]\n        timeout: 20s\n", 1)
	})
	// serve --stdio speaks on this process's stdin and stdout.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, stdout := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = inR, outW
	restored := false
	restore := func() {
		if !restored {
			os.Stdin, os.Stdout, restored = stdin, stdout, true
		}
	}
	t.Cleanup(func() { restore(); inW.Close(); outR.Close() })
	lines := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(serveCtx, []string{"serve", "--stdio", "--config", config, "--database-url", url,
			"--key-file", filepath.Join(t.TempDir(), "k"), "--dev-tenant", "acme", "--dev-roles", "support"}, io.Discard, &stderr)
	}()
	send := func(msg map[string]any) {
		b, _ := json.Marshal(msg)
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Error(err)
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-06-18",
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	select {
	case m := <-lines:
		if m["result"] == nil {
			restore()
			t.Fatalf("initialize: %v", m)
		}
	case code := <-done:
		restore()
		t.Fatalf("serve exited %d before initialize: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		restore()
		t.Fatalf("no answer to initialize: %s", stderr.String())
	}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "create_return_label",
		"arguments": map[string]any{"order_id": "o-1001", "reason": "drain me", "weight_grams": 500}}})
	select { // the effect reached the upstream
	case <-effectHit:
	case m := <-lines:
		restore()
		t.Fatalf("the call never reached its effect: %v", m)
	case <-time.After(30 * time.Second):
		restore()
		t.Fatalf("the call never reached its effect: %s", stderr.String())
	}
	cancel() // SIGTERM
	code := <-done
	var answer map[string]any
	select {
	case answer = <-lines:
	case <-time.After(time.Second):
	}
	restore()
	t.Logf("serve exited %d; answer %v; stderr: %s", code, answer, stderr.String())
	var ends, starts int
	if err := testdb.Pool(t, url).QueryRow(ctx, `SELECT count(*) FILTER (WHERE phase = 'execution_started'),
		count(*) FILTER (WHERE phase IN ('execution_succeeded','execution_failed'))
		FROM orangerail.audit WHERE action = 'create_return_label' AND dev_mode`).Scan(&starts, &ends); err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %d execution_started, %d ends", starts, ends)
	if code != exitOK {
		t.Errorf("serve exited %d after a graceful stop, want %d", code, exitOK)
	}
	if answer == nil || answer["id"] != float64(2) || answer["result"] == nil {
		t.Errorf("serve exited with the call in flight unanswered: %v", answer)
	}
	if starts != 1 || starts != ends {
		t.Errorf("audit: %d execution_started but %d ends: the execution in flight was cut, left outcome_unknown", starts, ends)
	}
}
