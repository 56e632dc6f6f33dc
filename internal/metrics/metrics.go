// Package metrics owns orangerail's Prometheus metrics: the series a
// runtime's hook events feed, what is read at each scrape (the database
// pools, the audit chain's sealing lag), and the handler that serves
// them on the metrics listener (metrics.listen), apart from the HTTP
// front.
//
// Every label takes its values from a closed set — an engine status, a
// refusal, a phase, an error code, a diagnostic — or from the config (a
// tool's or an action's name), so a series count is bounded by the
// deployment's declaration and never by its traffic. No label carries a
// subject, a tenant, an approval or correlation id, an address or a path.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orangerail/orangerail/internal/engine"
)

// Path is where the metrics listener serves the metrics.
const Path = "/metrics"

// UnknownTool is the tool label of a call of a tool that does not exist:
// the name a caller sent is not a closed set, and a tool name cannot hold
// parentheses.
const UnknownTool = "(unknown)"

// Kind is a metric's Prometheus type.
type Kind string

// The kinds.
const (
	KindCounter   Kind = "counter"
	KindGauge     Kind = "gauge"
	KindHistogram Kind = "histogram"
)

// Definition is one metric: its name, type, labels and meaning, as the
// README's table lists it.
type Definition struct {
	Name   string
	Kind   Kind
	Labels []string
	Help   string
}

// The metric names.
const (
	ToolCalls           = "orangerail_tool_calls_total"
	GateRefusals        = "orangerail_gate_refusals_total"
	EngineCallDuration  = "orangerail_engine_call_duration_seconds"
	ApprovalTransitions = "orangerail_approval_transitions_total"
	ApprovalAge         = "orangerail_approval_age_seconds"
	EffectAttempts      = "orangerail_effect_attempts_total"
	AuditAppends        = "orangerail_audit_appends_total"
	AuditSealLag        = "orangerail_audit_seal_lag_seconds"
	ApprovalsPending    = "orangerail_approvals_pending"
	ApprovalOldestWait  = "orangerail_approval_oldest_pending_seconds"
	RateRefusals        = "orangerail_rate_refusals_total"
	RequestRefusals     = "orangerail_http_refusals_total"
	HookEventsDropped   = "orangerail_hook_events_dropped_total"
	PoolConns           = "orangerail_db_pool_connections"
	PoolMaxConns        = "orangerail_db_pool_max_connections"
	PoolAcquires        = "orangerail_db_pool_acquires_total"
	PoolEmptyAcquires   = "orangerail_db_pool_empty_acquires_total"
	PoolCanceledAcquire = "orangerail_db_pool_canceled_acquires_total"
	PoolAcquireWait     = "orangerail_db_pool_acquire_wait_seconds_total"
	PoolNewConns        = "orangerail_db_pool_new_connections_total"
	BuildInfo           = "orangerail_build_info"
)

// Definitions returns every metric a Metrics registers, in the README's
// order. The slice is the caller's.
func Definitions() []Definition {
	return []Definition{
		{ToolCalls, KindCounter, []string{"tool", "outcome"}, "Tool calls the MCP server answered, by tool and outcome (an engine status). A tool that does not exist is counted as (unknown)."},
		{GateRefusals, KindCounter, []string{"refusal"}, "Tool calls a gate refused, by gate: unknown, hidden, scope, policy, budget."},
		{EngineCallDuration, KindHistogram, []string{"op", "status"}, "How long the engine took to decide and answer a call (get, list, call, check, decide), whichever transport made it, by outcome."},
		{ApprovalTransitions, KindCounter, []string{"transition"}, "Approval status changes this replica committed: staged, approved, rejected, expired, consumed."},
		{ApprovalAge, KindHistogram, []string{"transition"}, "How long an approval had been open when it was approved, rejected or consumed."},
		{EffectAttempts, KindCounter, []string{"action", "outcome", "diagnostic"}, "Executions that reached their effect, by action, outcome (ok, failed, outcome_unknown) and diagnostic (empty when none)."},
		{AuditAppends, KindCounter, []string{"phase"}, "Audit records this replica appended (committed), by phase."},
		{AuditSealLag, KindGauge, nil, "How long the oldest committed audit record of any tenant has waited for its seal, read at each scrape; 0 when all are sealed."},
		{ApprovalsPending, KindGauge, nil, "Approvals of every tenant waiting for a person now (pending, not lapsed), read at each scrape."},
		{ApprovalOldestWait, KindGauge, nil, "How long the oldest approval still waiting for a person has waited, read at each scrape; 0 when none waits."},
		{RateRefusals, KindCounter, []string{"allowance"}, "Requests the HTTP front refused because an allowance was spent: reads, writes, no_token, bad_token."},
		{RequestRefusals, KindCounter, []string{"code", "status"}, "Requests the HTTP front refused, by error code and HTTP status."},
		{HookEventsDropped, KindCounter, nil, "Events the metrics subscriber missed because its buffer was full: the counters above undercount by this much."},
		{PoolConns, KindGauge, []string{"pool", "state"}, "Connections of a database pool (store, datasource) by state: acquired, idle, constructing."},
		{PoolMaxConns, KindGauge, []string{"pool"}, "A database pool's maximum size."},
		{PoolAcquires, KindCounter, []string{"pool"}, "Connections acquired from a pool."},
		{PoolEmptyAcquires, KindCounter, []string{"pool"}, "Acquires that waited because the pool had no idle connection."},
		{PoolCanceledAcquire, KindCounter, []string{"pool"}, "Acquires whose context ended while waiting."},
		{PoolAcquireWait, KindCounter, []string{"pool"}, "Total time acquires spent waiting for a connection."},
		{PoolNewConns, KindCounter, []string{"pool"}, "Connections a pool opened."},
		{BuildInfo, KindGauge, []string{"version", "go_version"}, "Always 1: the build's version (orangerail version) and Go toolchain."},
	}
}

// Options say what a Metrics reads besides the events.
type Options struct {
	// Version is the build's version, the build_info label.
	Version string
	// Pools are the database pools whose stats are read at each scrape,
	// by name (store, datasource). A nil pool is left out.
	Pools map[string]*pgxpool.Pool
	// SealLag, when set, is read at each scrape (engine.SealLag).
	SealLag func(context.Context) (time.Duration, error)
	// Pending, when set, is read at each scrape (engine.PendingApprovals):
	// how many approvals wait, and how long the oldest has.
	Pending func(context.Context) (int, time.Duration, error)
	// Logger hears of a scrape's failures. Nil: discarded.
	Logger *slog.Logger
}

// Metrics is one runtime's metrics on a registry of their own (never the
// process-global one). It is safe for concurrent use.
type Metrics struct {
	reg                 *prometheus.Registry
	log                 *slog.Logger
	toolCalls           *prometheus.CounterVec
	gateRefusals        *prometheus.CounterVec
	engineCalls         *prometheus.HistogramVec
	approvalTransitions *prometheus.CounterVec
	approvalAge         *prometheus.HistogramVec
	effectAttempts      *prometheus.CounterVec
	auditAppends        *prometheus.CounterVec
	rateRefusals        *prometheus.CounterVec
	requestRefusals     *prometheus.CounterVec
}

// approvalAgeBuckets span a second to a week: approvals wait for people.
func approvalAgeBuckets() []float64 {
	return []float64{1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600}
}

// New builds the metrics, registered on a private registry.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), log: o.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	defs := map[string]Definition{}
	for _, d := range Definitions() {
		defs[d.Name] = d
	}
	counter := func(name string) *prometheus.CounterVec {
		d := defs[name]
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	}
	histogram := func(name string, buckets []float64) *prometheus.HistogramVec {
		d := defs[name]
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: buckets}, d.Labels)
	}
	m.toolCalls = counter(ToolCalls)
	m.gateRefusals = counter(GateRefusals)
	m.engineCalls = histogram(EngineCallDuration, prometheus.DefBuckets)
	m.approvalTransitions = counter(ApprovalTransitions)
	m.approvalAge = histogram(ApprovalAge, approvalAgeBuckets())
	m.effectAttempts = counter(EffectAttempts)
	m.auditAppends = counter(AuditAppends)
	m.rateRefusals = counter(RateRefusals)
	m.requestRefusals = counter(RequestRefusals)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BuildInfo, Help: defs[BuildInfo].Help}, defs[BuildInfo].Labels)
	build.WithLabelValues(o.Version, runtime.Version()).Set(1)
	m.reg.MustRegister(m.toolCalls, m.gateRefusals, m.engineCalls, m.approvalTransitions, m.approvalAge, m.effectAttempts,
		m.auditAppends, m.rateRefusals, m.requestRefusals, build,
		&scraped{defs: defs, pools: o.Pools, sealLag: o.SealLag, pending: o.Pending, log: m.log})
	return m
}

// Registry is the metrics' own registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the exposition format a scraper asks for.
// A value that cannot be read (the database is down) leaves its series
// out and the rest are served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slogAdapter{m.log}, Timeout: 10 * time.Second, MaxRequestsInFlight: 4})
}

// Subscribe feeds the metrics from h's events until h closes, and counts
// the events the subscription drops. Call it once: a Metrics counts one
// runtime's hooks.
func (m *Metrics) Subscribe(h *engine.Hooks) {
	sub := h.Subscribe(0, m.Observe)
	d := Definitions()
	for _, def := range d {
		if def.Name == HookEventsDropped {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: def.Name, Help: def.Help},
				func() float64 { return float64(sub.Dropped()) }))
		}
	}
}

// Observe counts one event. It is the hooks' subscriber; a test may call
// it directly.
func (m *Metrics) Observe(ev engine.Event) {
	switch ev := ev.(type) {
	case engine.ToolCalled:
		tool := ev.Tool
		if ev.Refusal == engine.RefusalUnknown {
			tool = UnknownTool
		}
		m.toolCalls.WithLabelValues(tool, string(ev.Outcome)).Inc()
		if ev.Refusal != "" {
			m.gateRefusals.WithLabelValues(string(ev.Refusal)).Inc()
		}
	case engine.Gate:
		m.engineCalls.WithLabelValues(string(ev.Op), string(ev.Status)).Observe(ev.Duration.Seconds())
	case engine.ApprovalChanged:
		m.approvalTransitions.WithLabelValues(string(ev.Transition)).Inc()
		switch ev.Transition {
		case engine.TransitionApproved, engine.TransitionRejected, engine.TransitionConsumed:
			m.approvalAge.WithLabelValues(string(ev.Transition)).Observe(max(ev.Age, 0).Seconds())
		}
	case engine.EffectAttempted:
		m.effectAttempts.WithLabelValues(ev.Action, string(ev.Outcome), string(ev.Diagnostic)).Inc()
	case engine.AuditAppended:
		m.auditAppends.WithLabelValues(string(ev.Phase)).Inc()
	case engine.RateRefused:
		m.rateRefusals.WithLabelValues(string(ev.Allowance)).Inc()
	case engine.RequestRefused:
		m.requestRefusals.WithLabelValues(string(ev.Code), strconv.Itoa(ev.HTTPStatus)).Inc()
	}
}

// slogAdapter logs the handler's errors to the host log.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Println(v ...any) {
	a.log.Warn("metrics scrape", "error", slog.AnyValue(v).String())
}
