package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

// TestPrintErrorGivesEachJoinedErrorItsFix: errors joined (a run over
// every tenant, of which two failed) are printed a line each, whole, with
// the fix of their own code — not one line whose fix is the first's.
func TestPrintErrorGivesEachJoinedErrorItsFix(t *testing.T) {
	tenant := fmt.Errorf(`verify tenant "bad tenant": %w`, errcode.New(errcode.TenantInvalid, "the tenant id is not of the accepted form", nil))
	unavailable := fmt.Errorf("verify tenant globex: %w", errcode.New(errcode.DatabaseUnreachable, "the database did not answer", nil))
	plain := errors.New("verify tenant initech: the connection closed")
	var out bytes.Buffer
	printError(&out, errors.Join(tenant, unavailable, plain))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"orangerail: " + tenant.Error() + ". Fix: " + errcode.New(errcode.TenantInvalid, "", nil).Fix(),
		"orangerail: " + unavailable.Error() + ". Fix: " + errcode.New(errcode.DatabaseUnreachable, "", nil).Fix(),
		"orangerail: " + plain.Error(),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}

	// An error that wraps two with words of its own is one error, printed
	// whole on one line.
	out.Reset()
	both := fmt.Errorf("seal and verify: %w; %w", tenant, plain)
	printError(&out, both)
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "seal and verify: ") {
		t.Fatalf("one error wrapping two printed as:\n%s", got)
	}
}
