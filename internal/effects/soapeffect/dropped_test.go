package soapeffect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

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
