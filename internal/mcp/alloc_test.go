package mcp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/mcp"
)

// TestReadCallAllocations bounds what a governed read over Streamable
// HTTP (the server of BenchmarkReadCall's governed variant) allocates
// beyond what the SDK allocates to serve the same request with a bare
// tool that answers at once: the gates, the engine's checks, the
// tenant-scoped read and the answer. The request is the one a go-sdk
// client sends, replayed in process. The bound holds with -race (whose
// sync.Pool keeps less: some 195 more) and without (some 185); the read
// went over it before the envelope was scanned (rpcerror.Inspect) and the
// catalog's server remembered by caller (some 220 with -race, 210
// without), and as it was before its statements were halved — BEGIN READ
// ONLY, a scope built per call, the query, COMMIT — (268). Not parallel:
// AllocsPerRun counts the whole process's allocations.
func TestReadCallAllocations(t *testing.T) {
	bundle := setup(t)
	governed, _ := bundle.server(t)
	gh := mcp.NewAuthenticator(fixed{agent("support")}).Require(governed.HTTPHandler())
	bare := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&sdk.Tool{Name: "order_get", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "{}"}}}, nil
	})
	bh := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return bare }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})

	// The client's tools/call, as it reaches a server.
	var header http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			header, body = r.Header.Clone(), b
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		bh.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}); err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	header.Set("Authorization", "Bearer token")
	serve := func(h http.Handler, want string) func() {
		return func() {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header = header.Clone()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(want)) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	}
	governedCall, bareCall := serve(gh, `"id":"o-1001"`), serve(bh, `{}`)
	governedCall() // prepares the read's statements
	bareCall()
	g, b := testing.AllocsPerRun(200, governedCall), testing.AllocsPerRun(200, bareCall)
	t.Logf("governed %v, bare %v", g, b)
	const bound = 210
	if g-b > bound {
		t.Fatalf("a governed read allocates %v times, the SDK's bare tool %v: %v more, want at most %d", g, b, g-b, bound)
	}
}
