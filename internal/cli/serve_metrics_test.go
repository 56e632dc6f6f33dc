package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServeMetricsListener: `serve` with metrics.listen serves the metrics
// on that address, apart from the HTTP front (which has no /metrics), with
// the build's version, and stops with the server.
func TestServeMetricsListener(t *testing.T) {
	ctx := context.Background()
	url, _, issuerURL := serveFixture(t)
	httpPort, metricsPort := testdb.FreePort(t), testdb.FreePort(t)
	config := serveConfig(t, issuerURL, httpPort, fmt.Sprintf("metrics: {listen: \"127.0.0.1:%d\"}\n", metricsPort))
	serveCtx, cancel := context.WithCancel(ctx)
	done := runServe(serveCtx, config, url, io.Discard)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("serve exited %d", code)
			}
		}
	}
	t.Cleanup(stop)
	get := func(url string) (int, string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	var (
		code int
		body string
		err  error
	)
	for range 100 { // until serve listens
		if code, body, err = get(metricsURL); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || code != http.StatusOK || !strings.Contains(body, `orangerail_build_info{go_version="`) ||
		!strings.Contains(body, fmt.Sprintf("version=%q} 1", readBuildFacts().Version)) {
		t.Fatalf("GET %s: %d %v\n%s", metricsURL, code, err, body)
	}
	if code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)); err != nil || code != http.StatusNotFound {
		t.Fatalf("the HTTP front's /metrics: %d %v, want 404", code, err)
	}
	stop()
	if _, _, err := get(metricsURL); err == nil {
		t.Fatal("the metrics listener still answers after serve stopped")
	}
}
