package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/metrics"
)

// registered lists the names of every metric m's registry describes.
func registered(t *testing.T, m *metrics.Metrics) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("a description without a name: %s", d)
		}
		names[match[1]] = true
	}
	return names
}

// subscribed is a Metrics subscribed to hooks, as a runtime has them.
func subscribed(t *testing.T) *metrics.Metrics {
	t.Helper()
	m := metrics.New(metrics.Options{Version: "v1"})
	hooks := engine.NewHooks()
	m.Subscribe(hooks)
	hooks.Close()
	return m
}

// TestRegistryHoldsEveryDefinition: the registry describes exactly the
// metrics Definitions lists, each once.
func TestRegistryHoldsEveryDefinition(t *testing.T) {
	t.Parallel()
	names := registered(t, subscribed(t))
	var defined []string
	for _, d := range metrics.Definitions() {
		if !names[d.Name] {
			t.Errorf("%s is defined, not registered", d.Name)
		}
		if slices.Contains(defined, d.Name) {
			t.Errorf("%s is defined twice", d.Name)
		}
		defined = append(defined, d.Name)
		if d.Help == "" || !strings.HasPrefix(d.Name, "orangerail_") {
			t.Errorf("%s: a metric needs the orangerail_ prefix and a meaning", d.Name)
		}
	}
	for name := range names {
		if !slices.Contains(defined, name) {
			t.Errorf("%s is registered, not defined", name)
		}
	}
}

// TestObserveLabelsAreClosedSets: each event is counted under labels from
// closed sets — a call of a tool that does not exist under (unknown), not
// the name the caller sent; nothing from a subject, tenant, id or
// address.
func TestObserveLabelsAreClosedSets(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{Version: "v1"})
	m.Observe(engine.ToolCalled{Tool: "'; DROP TABLE x", Outcome: engine.StatusNotFound, Refusal: engine.RefusalUnknown, Actor: "eve", Tenant: "t1"})
	m.Observe(engine.ToolCalled{Tool: "cancel_order", Outcome: engine.StatusNotFound, Refusal: engine.RefusalHidden, Actor: "eve", Tenant: "t1"})
	m.Observe(engine.ToolCalled{Tool: "order_get", Outcome: engine.StatusOK, Actor: "ann", Tenant: "t2", CorrelationID: "c-1"})
	m.Observe(engine.Gate{Op: engine.OpGet, Status: engine.StatusOK, Subject: "order", Actor: "ann", Duration: 3 * time.Millisecond})
	m.Observe(engine.ApprovalChanged{Transition: engine.TransitionStaged, Action: "cancel_order", Tenant: "t1"})
	m.Observe(engine.ApprovalChanged{Transition: engine.TransitionRejected, Action: "cancel_order", Tenant: "t1", Age: 90 * time.Second})
	m.Observe(engine.ApprovalChanged{Transition: engine.TransitionExpired, Action: "cancel_order", Tenant: "t1"})
	m.Observe(engine.EffectAttempted{Action: "cancel_order", Outcome: engine.StatusFailed, Diagnostic: engine.DiagnosticDatasourceConstraint, Tenant: "t1"})
	m.Observe(engine.AuditAppended{Phase: engine.PhaseRejected, Tenant: "t1", Actor: "ann"})
	m.Observe(engine.RateRefused{Allowance: engine.AllowanceNoToken, Code: errcode.MCPAuthThrottled, Address: "203.0.113.9"})
	m.Observe(engine.RequestRefused{Path: "/random/path/1234", HTTPStatus: 429, Code: errcode.MCPAuthThrottled})

	want := `
# HELP orangerail_tool_calls_total Tool calls the MCP server answered, by tool and outcome (an engine status). A tool that does not exist is counted as (unknown).
# TYPE orangerail_tool_calls_total counter
orangerail_tool_calls_total{outcome="not_found",tool="(unknown)"} 1
orangerail_tool_calls_total{outcome="not_found",tool="cancel_order"} 1
orangerail_tool_calls_total{outcome="ok",tool="order_get"} 1
# HELP orangerail_gate_refusals_total Tool calls a gate refused, by gate: unknown, hidden, scope, policy, budget.
# TYPE orangerail_gate_refusals_total counter
orangerail_gate_refusals_total{refusal="hidden"} 1
orangerail_gate_refusals_total{refusal="unknown"} 1
# HELP orangerail_approval_transitions_total Approval status changes this replica committed: staged, approved, rejected, expired, consumed.
# TYPE orangerail_approval_transitions_total counter
orangerail_approval_transitions_total{transition="expired"} 1
orangerail_approval_transitions_total{transition="rejected"} 1
orangerail_approval_transitions_total{transition="staged"} 1
# HELP orangerail_effect_attempts_total Executions that reached their effect, by action, outcome (ok, failed, outcome_unknown) and diagnostic (empty when none).
# TYPE orangerail_effect_attempts_total counter
orangerail_effect_attempts_total{action="cancel_order",diagnostic="datasource_constraint_violation",outcome="failed"} 1
# HELP orangerail_audit_appends_total Audit records this replica appended (committed), by phase.
# TYPE orangerail_audit_appends_total counter
orangerail_audit_appends_total{phase="rejected"} 1
# HELP orangerail_rate_refusals_total Requests the HTTP front refused because an allowance was spent: reads, writes, no_token, bad_token.
# TYPE orangerail_rate_refusals_total counter
orangerail_rate_refusals_total{allowance="no_token"} 1
# HELP orangerail_http_refusals_total Requests the HTTP front refused, by error code and HTTP status.
# TYPE orangerail_http_refusals_total counter
orangerail_http_refusals_total{code="X_MCP_AUTH_THROTTLED",status="429"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.ToolCalls, metrics.GateRefusals, metrics.ApprovalTransitions,
		metrics.EffectAttempts, metrics.AuditAppends, metrics.RateRefusals, metrics.RequestRefusals); err != nil {
		t.Fatal(err)
	}
	// The rejection's age is observed once, in the 60s–300s bucket; a
	// staging or an expiry has no age.
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case metrics.ApprovalAge:
			if len(f.GetMetric()) != 1 {
				t.Fatalf("approval age series: %v", f.GetMetric())
			}
			h := f.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 90 {
				t.Fatalf("approval age: %v", h)
			}
		case metrics.EngineCallDuration:
			if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram().GetSampleSum() != 0.003 {
				t.Fatalf("engine call duration: %v", f.GetMetric())
			}
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				for _, leaked := range []string{"eve", "ann", "t1", "t2", "c-1", "203.0.113.9", "/random/path/1234", "DROP"} {
					if strings.Contains(l.GetValue(), leaked) {
						t.Errorf("%s carries %q in %s", f.GetName(), leaked, l.GetName())
					}
				}
			}
		}
	}
}

// TestDashboardReferencesRegisteredMetrics: every metric the Grafana
// dashboard's queries name is one the registry holds (a histogram by its
// _bucket, _sum and _count series) or one audit verify writes, and every
// metric is shown.
func TestDashboardReferencesRegisteredMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/grafana/orangerail.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard any
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dashboard)
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d queries", len(exprs))
	}
	// The runtime's registry, and the metrics audit verify writes.
	names := registered(t, subscribed(t))
	for _, d := range metrics.VerifyDefinitions() {
		names[d.Name] = true
	}
	kinds := map[string]metrics.Kind{}
	for _, d := range metrics.Definitions() {
		kinds[d.Name] = d.Kind
	}
	shown := map[string]bool{}
	metric := regexp.MustCompile(`\borangerail_[a-z0-9_]+`)
	for _, expr := range exprs {
		for _, name := range metric.FindAllString(expr, -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && kinds[b] == metrics.KindHistogram {
					base = b
				}
			}
			if !names[base] {
				t.Errorf("the dashboard queries %s, which the registry does not hold: %s", name, expr)
			}
			shown[base] = true
		}
	}
	for name := range names {
		if !shown[name] {
			t.Errorf("the dashboard shows no panel of %s", name)
		}
	}
}

// TestREADMEDocumentsEveryMetric: the README's metrics tables have a row
// per metric, the server's and audit verify's, with its type and labels.
func TestREADMEDocumentsEveryMetric(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n### Metrics\n")
	if !ok {
		t.Fatal("the README has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	rows := map[string]string{}
	for line := range strings.Lines(section) {
		if cells := strings.Split(line, "|"); len(cells) > 4 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`orangerail_") {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = line
		}
	}
	for _, d := range append(metrics.Definitions(), metrics.VerifyDefinitions()...) {
		row, ok := rows[d.Name]
		if !ok {
			t.Errorf("the README has no row for %s", d.Name)
			continue
		}
		cells := strings.Split(row, "|")
		if strings.TrimSpace(cells[2]) != string(d.Kind) {
			t.Errorf("%s: the README says %s, the metric is a %s", d.Name, strings.TrimSpace(cells[2]), d.Kind)
		}
		var labels []string
		for l := range strings.SplitSeq(strings.TrimSpace(cells[3]), ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		if !slices.Equal(labels, d.Labels) && !(len(labels) == 0 && len(d.Labels) == 0) {
			t.Errorf("%s: the README lists labels %q, the metric has %q", d.Name, labels, d.Labels)
		}
		delete(rows, d.Name)
	}
	for name := range rows {
		t.Errorf("the README documents %s, which is no metric", name)
	}
}

// TestSealLagReadAtScrape: the sealing lag is read at each scrape; one
// that cannot be read leaves its series out of that scrape, which still
// answers, and the host log says why.
func TestSealLagReadAtScrape(t *testing.T) {
	t.Parallel()
	var lag time.Duration
	var readErr error
	var logged strings.Builder
	m := metrics.New(metrics.Options{Version: "v1", Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		SealLag: func(context.Context) (time.Duration, error) { return lag, readErr }})
	scrape := func() (int, string) {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.Path, nil))
		return rec.Code, rec.Body.String()
	}
	lag = 1500 * time.Millisecond
	if code, body := scrape(); code != http.StatusOK || !strings.Contains(body, "\n"+metrics.AuditSealLag+" 1.5\n") {
		t.Fatalf("lag 1.5s: %d\n%s", code, body)
	}
	readErr = errors.New("connection refused")
	if code, body := scrape(); code != http.StatusOK || strings.Contains(body, "\n"+metrics.AuditSealLag+" ") ||
		!strings.Contains(body, metrics.BuildInfo) {
		t.Fatalf("lag unreadable: %d\n%s", code, body)
	}
	if !strings.Contains(logged.String(), "the sealing lag could not be read") {
		t.Fatalf("host log: %s", logged.String())
	}
}

// TestPendingReadAtScrape: the approvals waiting and the oldest one's wait
// are read at each scrape; a read that fails leaves both out of that
// scrape, which still answers, and the host log says why.
func TestPendingReadAtScrape(t *testing.T) {
	t.Parallel()
	var n int
	var oldest time.Duration
	var readErr error
	var logged strings.Builder
	m := metrics.New(metrics.Options{Version: "v1", Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		Pending: func(context.Context) (int, time.Duration, error) { return n, oldest, readErr }})
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, metrics.Path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("scrape: %d", rec.Code)
		}
		return rec.Body.String()
	}
	n, oldest = 7, 90*time.Minute
	if body := scrape(); !strings.Contains(body, "\n"+metrics.ApprovalsPending+" 7\n") || !strings.Contains(body, "\n"+metrics.ApprovalOldestWait+" 5400\n") {
		t.Fatalf("7 waiting, the oldest 90m:\n%s", body)
	}
	readErr = errors.New("connection refused")
	if body := scrape(); strings.Contains(body, "\n"+metrics.ApprovalsPending+" ") || strings.Contains(body, "\n"+metrics.ApprovalOldestWait+" ") ||
		!strings.Contains(body, metrics.BuildInfo) {
		t.Fatalf("unreadable:\n%s", body)
	}
	if !strings.Contains(logged.String(), "the approvals waiting could not be read") {
		t.Fatalf("host log: %s", logged.String())
	}
}
