package cli

import (
	"bytes"
	"fmt"
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
		{Seq: 2, ApprovalID: &id, Phase: engine.PhaseApproved, Operator: "postgres", At: time.Now(), Reason: "desk down\x1b[2J"}},
		BreakGlassTotal: 1}
	var out bytes.Buffer
	printReports(&out, []*engine.Report{r})
	got := out.String()
	for _, want := range []string{"tenant acme: OK", "1 operator record(s)", "break-glass decisions", id.String(), `operator "postgres"`, `reason "desk down\x1b[2J"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("an operator's reason reached the terminal raw:\n%q", got)
	}
}

// TestPrintReportsCountsWhatItDoesNotList: a kind with more findings than
// the report lists is counted whole, its first ten printed, and the rest
// said to be more than --json lists.
func TestPrintReportsCountsWhatItDoesNotList(t *testing.T) {
	r := &engine.Report{Tenant: "acme", UnsealedTotal: 250_000}
	for i := range 12 {
		r.Unsealed = append(r.Unsealed, engine.UnsealedRecord{CorrelationID: fmt.Sprintf("c-%02d", i), Phase: engine.PhaseStaged, UnsealedFor: time.Hour})
	}
	var out bytes.Buffer
	printReports(&out, []*engine.Report{r})
	got := out.String()
	for _, want := range []string{"tenant acme: FAILED", "  250000 record(s) unsealed past the bound", `correlation "c-09"`, "… and 249990 more (--json lists the first 12)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "c-10") {
		t.Errorf("more than ten listed:\n%s", got)
	}
}

// TestPrintReportsSaysNothingWasChecked: a tenant with no head and no
// sealed record (a mistyped id, a chain deleted whole) is not printed OK.
func TestPrintReportsSaysNothingWasChecked(t *testing.T) {
	var out bytes.Buffer
	printReports(&out, []*engine.Report{{Tenant: "acmee", NothingVisible: true}})
	got := out.String()
	for _, want := range []string{"tenant acmee: FAILED — 0 records", "nothing to verify", "[nothing_visible]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestPrintReportsEscapesCorrelations: a correlation id is the caller's
// text, quoted like an action: one holding a terminal escape prints it
// escaped; an operator's record of no approval says none.
func TestPrintReportsEscapesCorrelations(t *testing.T) {
	r := &engine.Report{Tenant: "acme", Records: 2, HeadSeq: 2,
		Unfinished:      []engine.UnfinishedExecution{{Seq: 1, CorrelationID: "forged-\x1b[2Jx", Action: "touch", At: time.Now()}},
		UnfinishedTotal: 1,
		BreakGlass:      []engine.BreakGlassDecision{{Seq: 2, Phase: engine.PhaseExecutionSettled, Operator: "postgres", At: time.Now(), Reason: "checked"}},
		BreakGlassTotal: 1}
	var out bytes.Buffer
	printReports(&out, []*engine.Report{r})
	got := out.String()
	if strings.Contains(got, "\x1b") || !strings.Contains(got, `correlation "forged-\x1b[2Jx"`) || !strings.Contains(got, "approval none") {
		t.Fatalf("%q", got)
	}
}
