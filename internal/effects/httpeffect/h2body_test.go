package httpeffect_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestBodylessReadsOverHTTP2SendNoBody: to an https upstream that offers
// HTTP/2, as most do, a GET, HEAD, OPTIONS or DELETE still goes out
// without a body, never as HTTP/2 headers a body of unknown length
// follows (the upstream sees length -1; a proxy writing HTTP/1.1 sends it
// chunked): net/http's HTTP/2 transport does not probe the empty body
// that keeps a read from being repeated, as its HTTP/1.1 one does.
func TestBodylessReadsOverHTTP2SendNoBody(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "HEAD", "OPTIONS", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("length %d %v", r.ContentLength, r.TransferEncoding))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok": true}`)
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			caFile := filepath.Join(t.TempDir(), "ca.pem")
			if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			effect := touchOrder(t, fmt.Sprintf("{base_url: %q, ca_file: %q}", srv.URL, caFile), method)
			if _, err := effect.Run(context.Background(), &engine.EffectCall{Input: []byte(`{"order_id":"o-1"}`),
				RecordAttempt: func(context.Context, engine.EffectAttempt) error { return nil }}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0] != "length 0 []" {
				t.Errorf("the upstream saw %v, want one request of length 0", seen)
			}
		})
	}
}
