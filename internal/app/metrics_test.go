package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/metrics"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// served is a serving runtime on real listeners: the HTTP front and the
// metrics listener, with an OIDC issuer minting its callers' tokens.
type served struct {
	rt         *Runtime
	base       string // the HTTP front's origin
	metricsURL string
	token      func(subject string, person bool, scope string, roles ...string) string
	// stopHTTP shuts the front down and waits for every handler to return.
	stopHTTP func()
}

func serve(t *testing.T, edit func(*ontology.Config), tune func(*Settings)) *served {
	t.Helper()
	ctx := context.Background()
	dbURL := testdb.New(t)
	if _, err := testdb.Pool(t, dbURL).Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: personClaim, Values: []string{"person"}}}
	cfg.HTTP.RateLimits.Store = ontology.RateLimitMemory
	cfg.Metrics.Listen = "127.0.0.1:0"
	if edit != nil {
		edit(cfg)
	}
	ln, err := Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.PublicURL = "http://" + ln.Addr().String()
	settings := Settings{Config: cfg, DatabaseURL: dbURL, Key: bytes.Repeat([]byte{7}, engine.KeySize), Version: "v9.8.7-test",
		Serve: true, SweepEvery: time.Hour}
	if tune != nil {
		tune(&settings)
	}
	rt, err := Open(ctx, settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopMetrics, err := rt.StartMetrics(ctx, metricsLn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopMetrics)
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.ServeHTTP(serveCtx, ln) }()
	stopped := false
	s := &served{rt: rt, base: cfg.HTTP.PublicURL, metricsURL: "http://" + metricsLn.Addr().String() + metrics.Path}
	s.stopHTTP = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(s.stopHTTP)
	s.token = func(subject string, person bool, scope string, roles ...string) string {
		extra := map[string]any{"org_id": "acme", "roles": roles, "scope": scope}
		if person {
			extra[personClaim] = "person"
		}
		tok, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: subject, Audience: "orangerail",
			Expiry: time.Now().Add(time.Hour), Extra: extra})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return s
}

// do sends one request to the front and returns its status and body.
func (s *served) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, got
}

// call calls a tool over MCP and returns the structured answer.
func (s *served) call(t *testing.T, token, tool string, arguments map[string]any) map[string]any {
	t.Helper()
	code, body := s.do(t, http.MethodPost, MCPPath, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": arguments}})
	var answer struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &answer) != nil {
		t.Fatalf("%s: %d %s", tool, code, body)
	}
	if answer.Error != nil {
		return map[string]any{"rpc_error": answer.Error.Code}
	}
	return answer.Result.StructuredContent
}

// scrape reads the metrics listener with the text exposition parser.
func (s *served) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(s.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", metrics.Path, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// series is every sample of a scrape, keyed name{label="value",…} with
// labels in the exposition's order; a histogram is keyed by its count
// (name_count{…}).
func series(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[key] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// TestMetricsAfterALifecycle serves the example on real listeners, runs a
// lifecycle over HTTP — an agent's call staged, a person's approval
// through the approvals API, the agent's poll executing it — and three
// refusals (a call without the tool's scope, a tool that does not exist,
// a forged token past its address's allowance), then scrapes the metrics
// listener and holds every series the events feed to its exact value.
func TestMetricsAfterALifecycle(t *testing.T) {
	t.Parallel()
	s := serve(t, func(cfg *ontology.Config) { cfg.HTTP.RateLimits.FailedAuthPerMinute = 1 }, nil)
	ctx := context.Background()
	agent := s.token("agent-7", false, "orders:read orders:write", "support")
	reader := s.token("agent-8", false, "orders:read", "support")
	approver := s.token("ada", true, "", "approver")

	staged := s.call(t, agent, "cancel_order", map[string]any{"order_id": "o-1001", "reason": "customer asked"})
	id, _ := staged["approvalId"].(string)
	if staged["status"] != string(engine.StatusApprovalPending) || id == "" {
		t.Fatalf("stage: %v", staged)
	}
	code, body := s.do(t, http.MethodGet, "/api/v1/approvals/"+id, approver, nil)
	var shown struct{ Digest string }
	if code != http.StatusOK || json.Unmarshal(body, &shown) != nil || shown.Digest == "" {
		t.Fatalf("review: %d %s", code, body)
	}
	if code, body := s.do(t, http.MethodPost, "/api/v1/approvals/"+id+"/decision", approver,
		map[string]string{"decision": "approve", "digest": shown.Digest}); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	if executed := s.call(t, agent, "check_approval", map[string]any{"approvalId": id}); executed["status"] != "executed" {
		t.Fatalf("execute: %v", executed)
	}
	if refused := s.call(t, reader, "cancel_order", map[string]any{"order_id": "o-1002", "reason": "x"}); refused["rpc_error"] == nil {
		t.Fatalf("a call without the tool's scope: %v", refused)
	}
	if unknown := s.call(t, agent, "drop_orders", map[string]any{}); unknown["rpc_error"] == nil && unknown["status"] == nil {
		t.Fatalf("an unknown tool: %v", unknown)
	}
	// A forged token is refused 401 until its address's allowance of one
	// a minute is spent, then 429 — once, as the sending stops there. (The
	// window is the clock's minute: one may begin between two requests,
	// and then a second 401 comes first.)
	forged := agent[:len(agent)-4] + "AAAA"
	for n := 1; ; n++ {
		code, body := s.do(t, http.MethodPost, MCPPath, forged, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
		if code == http.StatusTooManyRequests && n > 1 {
			break
		}
		if code != http.StatusUnauthorized || n == 3 {
			t.Fatalf("a forged token's request %d: %d %s", n, code, body)
		}
	}

	// Every handler has returned, so every event was emitted; closing the
	// hooks delivers what the metrics' subscription buffered. The audit
	// records (all the tenant's) are sealed, so no lag is left.
	s.stopHTTP()
	s.rt.Hooks.Close()
	// SealTenant waits for the runtime's own sealer if it holds the
	// tenant (Seal would pass over it).
	if _, err := engine.SealTenant(ctx, s.rt.Store, "acme"); err != nil {
		t.Fatal(err)
	}
	got := series(s.scrape(t))

	want := map[string]float64{
		`orangerail_tool_calls_total{outcome="approval_pending",tool="cancel_order"}`:                  1,
		`orangerail_tool_calls_total{outcome="ok",tool="check_approval"}`:                              1,
		`orangerail_tool_calls_total{outcome="denied",tool="cancel_order"}`:                            1,
		`orangerail_tool_calls_total{outcome="not_found",tool="(unknown)"}`:                            1,
		`orangerail_gate_refusals_total{refusal="scope"}`:                                              1,
		`orangerail_gate_refusals_total{refusal="unknown"}`:                                            1,
		`orangerail_approval_transitions_total{transition="staged"}`:                                   1,
		`orangerail_approval_transitions_total{transition="approved"}`:                                 1,
		`orangerail_approval_transitions_total{transition="consumed"}`:                                 1,
		`orangerail_approval_age_seconds_count{transition="approved"}`:                                 1,
		`orangerail_approval_age_seconds_count{transition="consumed"}`:                                 1,
		`orangerail_effect_attempts_total{action="cancel_order",diagnostic="",outcome="ok"}`:           1,
		`orangerail_audit_appends_total{phase="staged"}`:                                               1,
		`orangerail_audit_appends_total{phase="approved"}`:                                             1,
		`orangerail_audit_appends_total{phase="execution_started"}`:                                    1,
		`orangerail_audit_appends_total{phase="execution_succeeded"}`:                                  1,
		`orangerail_audit_appends_total{phase="refused"}`:                                              1, // the call without its scope
		`orangerail_engine_call_duration_seconds_count{op="call",status="approval_pending"}`:           1,
		`orangerail_engine_call_duration_seconds_count{op="decide",status="ok"}`:                       1,
		`orangerail_engine_call_duration_seconds_count{op="check",status="ok"}`:                        1,
		`orangerail_rate_refusals_total{allowance="bad_token"}`:                                        1,
		`orangerail_http_refusals_total{code="` + string(errcode.MCPAuthThrottled) + `",status="429"}`: 1,
		`orangerail_audit_seal_lag_seconds{}`:                                                          0,
		`orangerail_approvals_pending{}`:                                                               0, // the one staged was consumed
		`orangerail_approval_oldest_pending_seconds{}`:                                                 0,
		`orangerail_hook_events_dropped_total{}`:                                                       0,
	}
	for key, v := range want {
		if g, ok := got[key]; !ok || g != v {
			t.Errorf("%s = %v (present: %v), want %v", key, g, ok, v)
		}
	}
	// The families the lifecycle feeds hold no other series: no call,
	// transition, phase or refusal was counted that did not happen.
	for key := range got {
		for _, family := range []string{metrics.ToolCalls, metrics.GateRefusals, metrics.ApprovalTransitions, metrics.EffectAttempts,
			metrics.AuditAppends, metrics.RateRefusals, metrics.ApprovalAge + "_count", metrics.EngineCallDuration + "_count"} {
			if strings.HasPrefix(key, family+"{") {
				if _, ok := want[key]; !ok {
					t.Errorf("an unexpected series %s = %v", key, got[key])
				}
			}
		}
	}
	if got[`orangerail_build_info{go_version="`+runtime.Version()+`",version="v9.8.7-test"}`] != 1 {
		t.Errorf("build_info: %v", keysWith(got, metrics.BuildInfo))
	}
	if got[`orangerail_db_pool_max_connections{pool="store"}`] != float64(s.rt.Store.Stat().MaxConns()) ||
		got[`orangerail_db_pool_acquires_total{pool="store"}`] < 1 {
		t.Errorf("pool stats: %v", keysWith(got, "orangerail_db_pool_"))
	}
	if _, ok := got[`orangerail_db_pool_max_connections{pool="datasource"}`]; ok {
		t.Errorf("a datasource pool that does not exist has stats")
	}
}

func keysWith(got map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// TestMetricsOffWithoutListen: without metrics.listen nothing is collected
// and nothing listens.
func TestMetricsOffWithoutListen(t *testing.T) {
	t.Parallel()
	s := serve(t, func(cfg *ontology.Config) { cfg.Metrics.Listen = "" }, nil)
	if s.rt.Metrics != nil {
		t.Fatal("metrics collected without metrics.listen")
	}
	if resp, err := http.Get(s.metricsURL); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s without metrics.listen: %d", metrics.Path, resp.StatusCode)
	}
}
