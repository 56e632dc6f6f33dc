package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orangerail/orangerail/internal/engine"
)

// The metrics of one `orangerail audit verify` run, written for the node
// exporter's textfile collector (--metrics-file): the server never
// verifies, a scheduled job does.
const (
	VerifyLastRun  = "orangerail_audit_verify_last_run_timestamp_seconds"
	VerifySuccess  = "orangerail_audit_verify_success"
	VerifyTenants  = "orangerail_audit_verify_tenants"
	VerifyFindings = "orangerail_audit_verify_findings"
	VerifyRecords  = "orangerail_audit_verify_records"
)

// The kinds of finding VerifyFindings counts, as a Report holds them.
const (
	FindingChainBreak                    = "chain_break"
	FindingNothingVisible                = "nothing_visible"
	FindingCheckpointMismatch            = "checkpoint_mismatch"
	FindingCheckpointMissing             = "checkpoint_missing"
	FindingUnsealed                      = "unsealed"
	FindingUnfinished                    = "unfinished_execution"
	FindingUnaudited                     = "unaudited_approval"
	FindingUnexplainedApproval           = "unexplained_approval"
	FindingUnexplainedExecution          = "unexplained_execution"
	verifyResultOK, verifyResultFindings = "ok", "findings"
)

// VerifyDefinitions returns the metrics WriteVerifyFile writes, in the
// README's order.
func VerifyDefinitions() []Definition {
	return []Definition{
		{VerifyLastRun, KindGauge, nil, "When the last audit verify run ended (Unix seconds): alert when it is older than the schedule."},
		{VerifySuccess, KindGauge, nil, "1 when the last run verified every tenant it was asked to, found or not; 0 when it could not run to the end."},
		{VerifyTenants, KindGauge, []string{"result"}, "Tenants the last run verified, by result: ok, findings."},
		{VerifyFindings, KindGauge, []string{"kind"}, "Findings of the last run, summed over tenants, by kind: chain_break, nothing_visible, checkpoint_mismatch, checkpoint_missing (--require-checkpoint), unsealed, unfinished_execution, unaudited_approval, unexplained_approval, unexplained_execution."},
		{VerifyRecords, KindGauge, nil, "Sealed records the last run verified."},
	}
}

// WriteVerifyFile writes the metrics of a verify run that ended at end
// with reports (what it verified before runErr, when it failed) to path,
// atomically (a file beside it renamed over it), in the text format the
// node exporter's textfile collector reads (name it *.prom).
func WriteVerifyFile(path string, reports []*engine.Report, runErr error, end time.Time) error {
	defs := map[string]Definition{}
	for _, d := range VerifyDefinitions() {
		defs[d.Name] = d
	}
	reg := prometheus.NewRegistry()
	gauge := func(name string) *prometheus.GaugeVec {
		d := defs[name]
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
		reg.MustRegister(g)
		return g
	}
	gauge(VerifyLastRun).WithLabelValues().Set(float64(end.Unix()))
	success := 1.0
	if runErr != nil {
		success = 0
	}
	gauge(VerifySuccess).WithLabelValues().Set(success)
	tenants, findings, records := gauge(VerifyTenants), gauge(VerifyFindings), gauge(VerifyRecords)
	for _, result := range []string{verifyResultOK, verifyResultFindings} {
		tenants.WithLabelValues(result)
	}
	for _, kind := range []string{FindingChainBreak, FindingNothingVisible, FindingCheckpointMismatch, FindingCheckpointMissing, FindingUnsealed, FindingUnfinished, FindingUnaudited, FindingUnexplainedApproval, FindingUnexplainedExecution} {
		findings.WithLabelValues(kind)
	}
	total := 0.0
	for _, r := range reports {
		result := verifyResultOK
		if !r.OK() {
			result = verifyResultFindings
		}
		tenants.WithLabelValues(result).Inc()
		if r.Break != nil {
			findings.WithLabelValues(FindingChainBreak).Inc()
		}
		if r.NothingVisible {
			findings.WithLabelValues(FindingNothingVisible).Inc()
		}
		switch f := r.CheckpointFindings; {
		case r.CheckpointFindingsTotal == 0:
		case len(f) > 0 && f[0].Problem == engine.CheckpointMissing:
			// None signed is not one that disagrees: an alert on a
			// rewritten log should not fire for a tenant too new to have
			// its first checkpoint.
			findings.WithLabelValues(FindingCheckpointMissing).Inc()
		default:
			// Each checkpoint that disagrees, listed or not.
			findings.WithLabelValues(FindingCheckpointMismatch).Add(float64(r.CheckpointFindingsTotal))
		}
		// Every finding, listed in the report or not.
		findings.WithLabelValues(FindingUnsealed).Add(float64(r.UnsealedTotal))
		findings.WithLabelValues(FindingUnfinished).Add(float64(r.UnfinishedTotal))
		findings.WithLabelValues(FindingUnaudited).Add(float64(r.UnauditedTotal))
		findings.WithLabelValues(FindingUnexplainedApproval).Add(float64(r.UnexplainedApprovalsTotal))
		findings.WithLabelValues(FindingUnexplainedExecution).Add(float64(r.UnexplainedExecutionsTotal))
		total += float64(r.Records)
	}
	records.WithLabelValues().Set(total)
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("write the metrics file: %w", err)
	}
	return nil
}
