package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestPrintReportsListsBreakGlass: a clean chain with a break-glass
// decision prints OK and names the decision, its operator and reason.
func TestPrintReportsListsBreakGlass(t *testing.T) {
	id := uuid.New()
	r := &engine.Report{Tenant: "acme", Records: 3, HeadSeq: 3, BreakGlass: []engine.BreakGlassDecision{
		{Seq: 2, ApprovalID: &id, Phase: engine.PhaseApproved, Operator: "postgres", At: time.Now(), Reason: "desk down\x1b[2J"}}}
	var out bytes.Buffer
	printReports(&out, []*engine.Report{r})
	got := out.String()
	for _, want := range []string{"tenant acme: OK", "1 break-glass decision(s)", id.String(), `operator "postgres"`, `reason "desk down\x1b[2J"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("an operator's reason reached the terminal raw:\n%q", got)
	}
}
