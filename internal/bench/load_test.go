package main

import (
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestMCPHTTPLoad runs mcp_http_load briefly, ten sessions for two
// seconds against the real server, issuer and Postgres: every kind of
// call answers as the workload expects (no error), and each kind ran.
// It checks correctness; the timing is the benchmark's.
func TestMCPHTTPLoad(t *testing.T) {
	t.Parallel()
	r, err := runLoad(t.Context(), testdb.New(t), loadOptions{sessions: 10, duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.errors != 0 {
		t.Fatalf("%d calls failed; the first: %q", r.errors, r.samples)
	}
	for _, k := range callKinds() {
		if r.kinds[k] == 0 {
			t.Errorf("no %s call ran: %v", k, r.kinds)
		}
	}
	if len(r.measured) == 0 || r.peakKB <= 0 || r.idleKB <= 0 || r.peakKB < r.idleKB || r.serverCPU <= 0 || r.clientCPU <= 0 {
		t.Errorf("measured %d calls, server VmHWM %d kB idle and %d kB after, CPU %s server and %s client",
			len(r.measured), r.idleKB, r.peakKB, r.serverCPU, r.clientCPU)
	}
}
