package metrics_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/metrics"
)

// TestVerifyFindingsCountWhatIsNotListed: a report lists the first
// findings of a kind; the metric counts them all.
func TestVerifyFindingsCountWhatIsNotListed(t *testing.T) {
	r := &engine.Report{Tenant: "acme", Unsealed: make([]engine.UnsealedRecord, 3), UnsealedTotal: 5000,
		Unfinished: make([]engine.UnfinishedExecution, 1), UnfinishedTotal: 7,
		Unaudited: make([]engine.UnauditedApproval, 1), UnauditedTotal: 8,
		UnexplainedApprovals: make([]engine.UnexplainedApproval, 1), UnexplainedApprovalsTotal: 9,
		UnexplainedExecutions: make([]engine.UnexplainedExecution, 1), UnexplainedExecutionsTotal: 10}
	path := filepath.Join(t.TempDir(), "verify.prom")
	if err := metrics.WriteVerifyFile(path, []*engine.Report{r}, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{kind="unsealed"} 5000`, `{kind="unfinished_execution"} 7`, `{kind="unaudited_approval"} 8`,
		`{kind="unexplained_approval"} 9`, `{kind="unexplained_execution"} 10`, metrics.VerifyTenants + `{result="findings"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("missing %s in:\n%s", want, b)
		}
	}
}

// TestVerifyFindingsCountNothingVisible: a tenant nothing of was checked
// is a finding of its own kind, not a tenant that verified.
func TestVerifyFindingsCountNothingVisible(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verify.prom")
	reports := []*engine.Report{{Tenant: "acmee", NothingVisible: true}, {Tenant: "acme", Records: 3, HeadSeq: 3}}
	if err := metrics.WriteVerifyFile(path, reports, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{kind="nothing_visible"} 1`, metrics.VerifyTenants + `{result="findings"} 1`, metrics.VerifyTenants + `{result="ok"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("missing %s in:\n%s", want, b)
		}
	}
}
