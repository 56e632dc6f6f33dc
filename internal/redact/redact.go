// Package redact owns what an agent is told when a call fails: one sentence
// per outcome, naming the cause, the kind of error withheld and the channel
// where an operator finds it, and never any text from the failing layer.
package redact

import (
	"fmt"

	"github.com/orangerail/orangerail/internal/engine"
)

// failure is how one failing status is explained.
type failure struct {
	cause     string // what happened, at the domain level
	withheld  string // the kind of error withheld
	where     string // where an operator reads it
	whereRead string // for read tools, which are not audited
}

// failures holds the sentence parts of every failing status; a status not
// here has no withheld error.
var failures = map[engine.Status]failure{
	engine.StatusFailed:        {"the datasource rejected the action", "datasource error", "the audit log or host log", "the host log"},
	engine.StatusResolveError:  {"the target could not be read from the datasource", "datasource error", "the audit log or host log", "the host log"},
	engine.StatusAuditBlocked:  {"the audit record could not be written, so nothing ran", "store error", "the host log", "the host log"},
	engine.StatusInternalError: {"an unexpected internal error", "underlying error", "the host log", "the host log"},
	engine.StatusOutcomeUnknown: {"the action may have run, but its outcome could not be confirmed or recorded; do not call it again until an operator has checked",
		"underlying error", "the host log and the audit log (an unfinished execution)", "the host log"},
}

// diagnostics are the sentences for classified failures. A code is the
// only thing that crosses from the failing layer; the words are ours.
var diagnostics = map[engine.Diagnostic]string{
	engine.DiagnosticDatasourceNotConfigured: "the datasource is not configured, so the server could not connect. Its connection URL is missing or unusable, or its login was refused; the operator sets it for the process running orangerail, then retries.",
	engine.DiagnosticDatasourceUnavailable:   "the datasource could not be reached. It may be down or restarting; retry later.",
	engine.DiagnosticDatasourceSchema:        "the datasource does not have the tables or columns the ontology declares. The operator runs `orangerail config check` against it.",
	engine.DiagnosticDatasourcePermission:    "the datasource refused orangerail's role the privilege this action needs. The operator grants it.",
	engine.DiagnosticDatasourceConstraint:    "the datasource refused the change because it breaks one of its constraints. Check the input against the current state of the data.",
	engine.DiagnosticDatasourceTimeout:       "the datasource took too long and the statement was cancelled. Retry later.",
	engine.DiagnosticStoreTimeout:            "orangerail's own database was busy: a wait ran past its time limit, so the call stopped before anything ran. Retry later.",
	engine.DiagnosticStoreUnavailable:        "the connection to orangerail's own database was lost during the call, so it stopped and what it had not committed was undone. Retry; the server reconnects by itself.",
	engine.DiagnosticIdempotencyKeyBusy:      "a call under the same idempotencyKey is still running, so this one ran nothing. Retry later with the same key to get that call's outcome; a new key would run the action again.",
	engine.DiagnosticUpstreamRejected:        "the upstream API refused the request: it answered with a status that is not success. Check the input against what the API accepts; the status is in the audit log.",
	engine.DiagnosticUpstreamUnavailable:     "the upstream API could not be reached, or stayed busy through every attempt. Retry later.",
	engine.DiagnosticUpstreamError:           "the upstream API answered with a server error, and nothing it did is in doubt. Retry later; if it persists, the operator finds the status in the audit log.",
	engine.DiagnosticUpstreamTimeout:         "the upstream API did not answer in time; nothing changed (the request was not sent in full, or only read). Retry later.",
	engine.DiagnosticUpstreamTooLarge:        "the upstream API answered with a body larger than the action's max_bytes, so the answer was not read. The operator raises max_bytes or narrows the call.",
	engine.DiagnosticUpstreamUnplaceable:     "the input holds a value the action's request cannot carry where it is bound (an object or a list in a path, a query or a header; an XML list's item that is empty or holds whitespace), so nothing was sent. Send a plain value there; the operator narrows the action's input schema to match.",
}

// upstreamWithheld is what a failure an upstream API answered withholds:
// there is no datasource error to speak of (the status and an excerpt of
// the answer are in the audit log).
const upstreamWithheld = "upstream's answer"

// withheldBy names what a classified failure withholds, where it is not
// its status's kind: an upstream call's, not a datasource's.
var withheldBy = map[engine.Diagnostic]string{
	engine.DiagnosticUpstreamRejected:    upstreamWithheld,
	engine.DiagnosticUpstreamUnavailable: upstreamWithheld,
	engine.DiagnosticUpstreamError:       upstreamWithheld,
	engine.DiagnosticUpstreamTimeout:     upstreamWithheld,
	engine.DiagnosticUpstreamTooLarge:    upstreamWithheld,
	engine.DiagnosticUpstreamUnplaceable: "request it would have made",
}

// Withholds reports whether a status withholds an underlying error.
func Withholds(status string) bool {
	_, ok := failures[engine.Status(status)]
	return ok
}

// Message explains a failing call to the agent. read is true for read
// tools, whose failures are not audited, so the host log is the only
// channel named.
func Message(tool, status, correlationID, diagnostic string, read bool) string {
	f, ok := failures[engine.Status(status)]
	if !ok {
		return fmt.Sprintf("Tool %q did not complete: %s.", tool, status)
	}
	where := f.where
	if read {
		where = f.whereRead
	}
	cause := f.cause
	if sentence, ok := diagnostics[engine.Diagnostic(diagnostic)]; ok {
		cause = sentence
	} else {
		cause += "."
	}
	withheld := f.withheld
	if w, ok := withheldBy[engine.Diagnostic(diagnostic)]; ok {
		withheld = w
	}
	return fmt.Sprintf("Tool %q failed: %s The %s is withheld; an operator can read it in %s under correlationId %q.",
		tool, cause, withheld, where, correlationID)
}

// Diagnostic returns a diagnostic code if it is one of ours, else "".
func Diagnostic(code string) string {
	if _, ok := diagnostics[engine.Diagnostic(code)]; ok {
		return code
	}
	return ""
}
