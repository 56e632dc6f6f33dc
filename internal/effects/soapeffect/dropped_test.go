package soapeffect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
)

// rawUpstream is a TCP listener that hands each connection to drop; it
// returns its URL and a count of connections.
func rawUpstream(t *testing.T, drop func(c *net.TCPConn, r *bufio.Reader)) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var count atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			count.Add(1)
			go drop(c.(*net.TCPConn), bufio.NewReader(c))
		}
	}()
	return "http://" + l.Addr().String(), &count
}

// reset closes c with a TCP RST.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// afterWritten reads the whole request, then resets the connection.
func afterWritten(c *net.TCPConn, r *bufio.Reader) {
	length := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			reset(c)
			return
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &length)
		}
	}
	_, _ = io.CopyN(io.Discard, r, int64(length))
	reset(c)
}

// TestSOAPDroppedConnections: a SOAP request written and then cut off is
// repeated only for a safe (read-only) operation; on a write it ends the
// call in doubt at once — no key makes a repeat harmless.
func TestSOAPDroppedConnections(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		extra    string
		status   engine.Status
		diag     engine.Diagnostic
		failures []string
	}{
		{"a write: one attempt, in doubt", "", engine.StatusOutcomeUnknown, "", []string{"connection_dropped"}},
		{"a safe operation: attempted again, a failure", "safe: true\n", engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []string{"connection_dropped", "connection_dropped", "connection_dropped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, count := rawUpstream(t, afterWritten)
			h := newHarness(t, base, "", soapExecute("1.1")+tt.extra, "{roles: [support]}")
			out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
			if out.Status != tt.status || out.Diagnostic != tt.diag {
				t.Fatalf("status %s diagnostic %q, want %s %q (%v)", out.Status, out.Diagnostic, tt.status, tt.diag, out.Err)
			}
			_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
			var failures []string
			for _, a := range attempts {
				if !a.Sent {
					t.Fatalf("attempt %+v not recorded as sent", a)
				}
				failures = append(failures, a.Failure)
			}
			if !slices.Equal(failures, tt.failures) || int(count.Load()) != len(tt.failures) {
				t.Fatalf("recorded %v over %d connections, want %v", failures, count.Load(), tt.failures)
			}
			unfinished := ""
			if tt.status == engine.StatusOutcomeUnknown {
				unfinished = out.CorrelationID
			}
			h.verify(t, "acme", unfinished)
		})
	}
}

// TestSOAPWriteNeverSentIsAttemptedAgain: an attempt of a SOAP write that
// timed out before its request was written — here, waiting for its OAuth
// token — sent nothing the service could act on, and is attempted again,
// as a request never written in full is. It ended the call
// upstream_timeout after one attempt: a timeout was taken as a request
// sent and unanswered, which only a safe operation repeats.
func TestSOAPWriteNeverSentIsAttemptedAgain(t *testing.T) {
	var tokens atomic.Int32
	up := newUpstream(t, envelope(http.StatusOK, ns11, response))
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokens.Add(1) == 1 {
			select { // the first token request is not answered in time
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}`)
	}))
	t.Cleanup(tokenSrv.Close)
	t.Setenv("CARRIER_APP_CREDENTIAL", "client:secret")
	auth := fmt.Sprintf("    auth:\n      app: {type: oauth2_client_credentials, token_url: %q}", tokenSrv.URL+"/token")
	execute := strings.Replace(soapExecute("1.1"), "deadline: 8s\ntimeout: 1s\n", "deadline: 8s\ntimeout: 300ms\n", 1)
	h := newHarness(t, up.URL, auth, execute, "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
	_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
	if out.Status != engine.StatusOK || len(up.requests()) != 1 {
		t.Fatalf("status %s %s (%v), %d requests, attempts %+v: want the unsent attempt made again", out.Status, out.Diagnostic, out.Err, len(up.requests()), attempts)
	}
	if len(attempts) != 2 || attempts[0].Failure != "timeout" || attempts[0].Sent || attempts[1].Status != 200 {
		t.Fatalf("attempts %+v", attempts)
	}
	h.verify(t, "acme", "")
}
