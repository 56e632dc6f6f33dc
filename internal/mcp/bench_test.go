package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
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
// verified, the caller's allowance counted by the BatchLimiter the app
// runs), and, as the baseline, a bare go-sdk server whose one tool, of
// the same name and input schema, runs the same SELECT through pgx. All serve in-process on loopback, in 12
// short rounds that alternate the three; each reports calls/s, p50 and
// p99 over every round, and governed and door the median, min and max of
// their per-round p50 ratios to the baseline. Run it once per measurement
// (-benchtime 1x): `make bench` does, and prints the figures as JSON lines.
// Each server's work carries the profiler label variant=<name>: with
// -cpuprofile, `go tool pprof -tagfocus variant=governed` shows one
// variant's, beside the baseline's, from the same run.
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
	limiter := front.NewBatchLimiter(bundle.runtime, front.BatchOptions{Share: cfg.HTTP.RateLimits.Share,
		FlushInterval: time.Duration(cfg.HTTP.RateLimits.FlushInterval), Logger: quiet})
	b.Cleanup(func() { _ = limiter.Close(context.Background()) })
	governedSrv := httptest.NewServer(labelled("governed", mcp.NewAuthenticator(fixed{caller}).Require(governed.HTTPHandler())))
	b.Cleanup(governedSrv.Close)
	doorFront := front.New(front.Config{Ontology: cfg, Authenticator: mcp.NewAuthenticator(resolver), Limiter: limiter, Logger: quiet})
	doorFront.Mount("/mcp", governed.HTTPHandler(), front.Policy{Auth: front.AuthBearer, Resource: "/mcp", CheckOrigin: true,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, OneMessage: true, Rate: front.ToolCalls(func(string, map[string]any) front.Class { return front.ClassRead })})
	doorSrv := httptest.NewServer(labelled("door", doorFront))
	b.Cleanup(doorSrv.Close)

	// The bare tool declares the input schema the governed one does, as
	// the bytes the governed server sends: the SDK reads a tool's input
	// schema on every call (for x-mcp-header annotations), at a cost that
	// grows with the schema, and that cost is the tool's, not governing's.
	bare := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&sdk.Tool{Name: "order_get", InputSchema: servedInputSchema(b, governedSrv.URL, token, "order_get")}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
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
	bareSrv := httptest.NewServer(labelled("baseline", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return bare },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	b.Cleanup(bareSrv.Close)

	type variant struct {
		name string
		cs   *sdk.ClientSession
		p50s []time.Duration // one per round
		all  []time.Duration
	}
	connect := func(name, url string) *variant {
		client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return &variant{name: name, cs: cs}
	}
	variants := []*variant{connect("governed", governedSrv.URL), connect("door", doorSrv.URL+"/mcp"), connect("baseline", bareSrv.URL)}
	params := &sdk.CallToolParams{Name: "order_get", Arguments: map[string]any{"id": "o-1001"}}
	call := func(v *variant) time.Duration {
		t0 := time.Now()
		res, err := v.cs.CallTool(context.Background(), params)
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("%s: call: %v %v", v.name, err, res)
		}
		return d
	}
	for _, v := range variants {
		for range 50 { // warm-up: connections, caches, the plan
			call(v)
		}
	}
	// Short alternating rounds, each variant's block in a rotating order,
	// so that what the box does meanwhile falls on every variant alike; the
	// ratios are per round, then their median and spread.
	const rounds, perRound = 12, 150
	for b.Loop() {
		for r := range rounds {
			for i := range variants {
				v := variants[(r+i)%len(variants)]
				lat := make([]time.Duration, perRound)
				for j := range lat {
					lat[j] = call(v)
				}
				v.all = append(v.all, lat...)
				slices.Sort(lat)
				v.p50s = append(v.p50s, lat[len(lat)/2])
			}
		}
	}
	base := variants[2]
	for _, v := range variants {
		slices.Sort(v.all)
		var total time.Duration
		for _, d := range v.all {
			total += d
		}
		b.ReportMetric(float64(len(v.all))/total.Seconds(), v.name+"-calls/s")
		b.ReportMetric(float64(v.all[len(v.all)/2].Microseconds()), v.name+"-p50-µs")
		b.ReportMetric(float64(v.all[len(v.all)*99/100].Microseconds()), v.name+"-p99-µs")
		if v == base {
			continue
		}
		ratios := make([]float64, len(v.p50s))
		for r := range v.p50s {
			ratios[r] = float64(v.p50s[r]) / float64(base.p50s[r])
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], v.name+"-ratio-median")
		b.ReportMetric(ratios[0], v.name+"-ratio-min")
		b.ReportMetric(ratios[len(ratios)-1], v.name+"-ratio-max")
	}
	b.ReportMetric(float64(len(base.p50s)), "rounds")
}

// servedInputSchema is the input schema the MCP server at url, asked with
// token, declares for tool, encoded as JSON.
func servedInputSchema(b *testing.B, url, token, tool string) json.RawMessage {
	b.Helper()
	client := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	for t, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			b.Fatal(err)
		}
		if t.Name == tool {
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				b.Fatal(err)
			}
			return schema
		}
	}
	b.Fatalf("the server declares no tool %s", tool)
	return nil
}

// labelled serves h with its goroutine labelled variant=name, so that a
// CPU profile of the benchmark (-cpuprofile, then pprof's -tagfocus)
// splits the servers' work by variant.
func labelled(name string, h http.Handler) http.Handler {
	labels := pprof.Labels("variant", name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(context.Context) { h.ServeHTTP(w, r) })
	})
}

// fixed resolves every token to one caller.
type fixed struct{ caller *engine.Caller }

func (f fixed) Resolve(context.Context, string) (*identity.Caller, error) {
	return &identity.Caller{Caller: *f.caller}, nil
}
