package engine

// Phase names the step of the governed lifecycle an audit record marks.
type Phase string

// The phases. Their spelling is part of the audit format: auditors query it.
const (
	PhaseStaged             Phase = "staged"
	PhaseApproved           Phase = "approved"
	PhaseRejected           Phase = "rejected"
	PhaseExpired            Phase = "expired"
	PhaseDryRun             Phase = "dry_run"
	PhaseNotImplemented     Phase = "not_implemented"
	PhaseExecutionStarted   Phase = "execution_started"
	PhaseExecutionSucceeded Phase = "execution_succeeded"
	PhaseExecutionFailed    Phase = "execution_failed"
)

// Finishes reports whether p closes an execution that
// PhaseExecutionStarted opened. orangerail.audit_unfinished uses the same
// set.
func (p Phase) Finishes() bool {
	return p == PhaseExecutionSucceeded || p == PhaseExecutionFailed
}
