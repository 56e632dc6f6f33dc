package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/metrics"
	"github.com/orangerail/orangerail/internal/testdb"
)

// readProm reads a metrics file as the textfile collector would, each
// series keyed by its name and its one label's value.
func readProm(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, fam := range families {
		if fam.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %s, want a gauge", name, fam.GetType())
		}
		for _, m := range fam.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestAuditVerifyMetricsFile: --metrics-file holds a run's results for the
// node exporter — tenants by result, findings by kind, records verified,
// that it ran to the end and when — with findings and without, and says a
// run that could not run to the end did not.
func TestAuditVerifyMetricsFile(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	pool := testdb.RuntimePool(t, url)
	for _, tenant := range []string{"acme", "globex"} {
		for i := range 3 {
			if err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
				return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: tenant, At: time.Now(), CorrelationID: "c" + string(rune('0'+i)),
					Phase: engine.PhaseStaged, Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := engine.Seal(ctx, pool); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "orangerail_verify.prom")
	before := time.Now().Unix()

	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--metrics-file", path); code != exitOK {
		t.Fatalf("clean: exit %d\n%s%s", code, out, stderr)
	}
	got := readProm(t, path)
	want := map[string]float64{
		metrics.VerifySuccess: 1, metrics.VerifyRecords: 6,
		metrics.VerifyTenants + "{ok}": 2, metrics.VerifyTenants + "{findings}": 0,
		metrics.VerifyFindings + "{chain_break}": 0, metrics.VerifyFindings + "{nothing_visible}": 0, metrics.VerifyFindings + "{checkpoint_mismatch}": 0, metrics.VerifyFindings + "{checkpoint_missing}": 0, metrics.VerifyFindings + "{unsealed}": 0,
		metrics.VerifyFindings + "{unfinished_execution}": 0, metrics.VerifyFindings + "{unaudited_approval}": 0,
		metrics.VerifyFindings + "{unexplained_approval}": 0, metrics.VerifyFindings + "{unexplained_execution}": 0,
	}
	check := func(what string) {
		t.Helper()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", what, k, got[k], v)
			}
		}
		if ts := got[metrics.VerifyLastRun]; ts < float64(before) {
			t.Errorf("%s: last run at %v, before the run began (%d)", what, ts, before)
		}
		if len(got) != len(want)+1 {
			t.Errorf("%s: %d series, want %d: %v", what, len(got), len(want)+1, got)
		}
	}
	check("clean")

	// No checkpoint where one is required is its own kind, not a
	// checkpoint that disagrees.
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--metrics-file", path, "--require-checkpoint"); code != exitFindings {
		t.Fatalf("no checkpoint: exit %d\n%s%s", code, out, stderr)
	}
	got = readProm(t, path)
	want[metrics.VerifyTenants+"{ok}"], want[metrics.VerifyTenants+"{findings}"], want[metrics.VerifyFindings+"{checkpoint_missing}"] = 0, 2, 2
	check("no checkpoint")
	want[metrics.VerifyTenants+"{ok}"], want[metrics.VerifyTenants+"{findings}"], want[metrics.VerifyFindings+"{checkpoint_missing}"] = 2, 0, 0

	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, `ALTER TABLE orangerail.audit DISABLE TRIGGER USER;
		UPDATE orangerail.audit SET entry = entry || '\x20'::bytea WHERE tenant_id = 'acme' AND seq = 2;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate`); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--metrics-file", path); code != exitFindings {
		t.Fatalf("tampered: exit %d\n%s%s", code, out, stderr)
	}
	got = readProm(t, path)
	want[metrics.VerifyTenants+"{ok}"], want[metrics.VerifyTenants+"{findings}"], want[metrics.VerifyFindings+"{chain_break}"] = 1, 1, 1
	check("tampered")

	if code, _, stderr := cli(t, "audit", "verify", "--database-url", url, "--tenant", "nobody", "--metrics-file", path); code != exitError {
		t.Fatalf("unknown tenant: exit %d\n%s", code, stderr)
	}
	got = readProm(t, path)
	if got[metrics.VerifySuccess] != 0 || got[metrics.VerifyTenants+"{ok}"] != 0 || got[metrics.VerifyTenants+"{findings}"] != 0 {
		t.Fatalf("a run that could not run: %v", got)
	}
}
