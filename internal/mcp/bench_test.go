package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
)

// BenchmarkReadCall measures order_get over Streamable HTTP three ways:
// governed (the MCP server for a fixed caller: tenant scope, read access,
// the engine's checks), door (the same behind the HTTP front: an OIDC token
// verified, the address and the caller's allowance counted in Postgres),
// and, as the baseline, a bare go-sdk server whose one tool runs the same
// SELECT through pgx. All serve in-process on loopback; each reports
// calls/s, p50 and p99. `make bench` runs it and prints the figures as
// JSON lines.
func BenchmarkReadCall(b *testing.B) {
	bundle := setup(b)
	governed, _ := bundle.server(b)
	iss, err := devissuer.New()
	if err != nil {
		b.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	b.Cleanup(issuerSrv.Close)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id"}
	cfg.HTTP.RateLimits.ReadsPerMinute = 1 << 30 // measure the counting, never the refusing
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		b.Fatal(err)
	}
	token, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: "agent-7", Audience: "orangerail",
		Expiry: time.Now().Add(time.Hour), Extra: map[string]any{"org_id": "acme", "roles": []string{"support"}}})
	if err != nil {
		b.Fatal(err)
	}
	caller := agent("support")
	governedSrv := httptest.NewServer(mcp.NewAuthenticator(fixed{caller}).Require(governed.HTTPHandler()))
	b.Cleanup(governedSrv.Close)
	doorFront := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(resolver), Limiter: front.NewPostgresLimiter(bundle.runtime), Logger: quiet})
	doorFront.Mount("/mcp", governed.HTTPHandler(), front.Policy{Auth: front.AuthBearer, Resource: "/mcp", CheckOrigin: true,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, OneMessage: true, Rate: front.ToolCalls(func(string, map[string]any) front.Class { return front.ClassRead })})
	doorSrv := httptest.NewServer(doorFront)
	b.Cleanup(doorSrv.Close)

	bare := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&sdk.Tool{Name: "order_get", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		var row string
		err := bundle.admin.QueryRow(ctx, `SELECT row_to_json(r)::text FROM (SELECT "id", "status", "total_cents", "customer_id", "shipping_address", "created_at"
			FROM "orders" WHERE "org_id" = $1 AND "id" = $2 LIMIT 2) r`, "acme", in.ID).Scan(&row)
		if err != nil {
			return nil, err
		}
		var item map[string]any
		_ = json.Unmarshal([]byte(row), &item)
		data := map[string]any{"item": item}
		text, _ := json.Marshal(data)
		return &sdk.CallToolResult{StructuredContent: data, Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}, nil
	})
	bareSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return bare },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	b.Cleanup(bareSrv.Close)

	for _, tc := range []struct {
		name string
		url  string
	}{{"governed", governedSrv.URL}, {"door", doorSrv.URL + "/mcp"}, {"baseline", bareSrv.URL}} {
		b.Run(tc.name, func(b *testing.B) {
			client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
				Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: tc.url, HTTPClient: client, MaxRetries: -1}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}
			if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
				b.Fatalf("warm-up call: %v %v", err, res)
			}
			latencies := make([]time.Duration, 0, b.N)
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				res, err := cs.CallTool(context.Background(), params)
				latencies = append(latencies, time.Since(t0))
				if err != nil || res.IsError {
					b.Fatalf("call: %v %v", err, res)
				}
			}
			elapsed := time.Since(start)
			slices.Sort(latencies)
			b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// fixed resolves every token to one caller.
type fixed struct{ caller *engine.Caller }

func (f fixed) Resolve(context.Context, string) (*identity.Caller, error) {
	return &identity.Caller{Caller: *f.caller}, nil
}
