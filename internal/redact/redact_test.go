package redact

import (
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestSentencesFollowTheEngine holds redact to the engine's closed sets: it
// explains only statuses the engine has, each a failure, and has a sentence
// for every diagnostic the engine can give.
func TestSentencesFollowTheEngine(t *testing.T) {
	t.Parallel()
	for status := range failures {
		if !slices.Contains(engine.Statuses(), status) {
			t.Errorf("redact explains %q, which is not an engine status", status)
		}
		if (&engine.Outcome{Status: status}).OK() {
			t.Errorf("redact withholds the error of %q, which is a success", status)
		}
		if !Withholds(string(status)) {
			t.Errorf("Withholds(%q) = false", status)
		}
	}
	for _, d := range engine.Diagnostics() {
		if Diagnostic(string(d)) != string(d) {
			t.Errorf("no sentence for the engine's diagnostic %q", d)
		}
		msg := Message("t", string(engine.StatusFailed), "c-1", string(d), false)
		if !strings.Contains(msg, diagnostics[d]) {
			t.Errorf("%s: message %q does not use its sentence", d, msg)
		}
	}
	for d := range diagnostics {
		if !slices.Contains(engine.Diagnostics(), d) {
			t.Errorf("redact has a sentence for %q, which is not an engine diagnostic", d)
		}
	}
	if Diagnostic("made_up") != "" || Withholds(string(engine.StatusOK)) {
		t.Error("redact accepts what the engine does not give")
	}
}

// TestAnUpstreamFailureWithholdsNoDatasourceError: a failure an upstream
// API answered says the upstream's answer is withheld — there is no
// datasource to name — and a datasource's still says its error is.
func TestAnUpstreamFailureWithholdsNoDatasourceError(t *testing.T) {
	t.Parallel()
	for d := range withheldBy {
		if msg := Message("t", string(engine.StatusFailed), "c-1", string(d), false); strings.Contains(msg, "datasource") {
			t.Errorf("%s: %q", d, msg)
		}
	}
	if msg := Message("t", string(engine.StatusFailed), "c-1", string(engine.DiagnosticUpstreamRejected), false); !strings.Contains(msg, "The upstream's answer is withheld") {
		t.Errorf("upstream_rejected: %q", msg)
	}
	if msg := Message("t", string(engine.StatusFailed), "c-1", string(engine.DiagnosticDatasourceConstraint), false); !strings.Contains(msg, "The datasource error is withheld") {
		t.Errorf("datasource_constraint_violation: %q", msg)
	}
}
