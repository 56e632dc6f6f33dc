package engine

import "github.com/orangerail/orangerail/internal/store"

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
	// PhaseExecutionSettled finishes an execution left unfinished
	// (outcome_unknown): an operator's record of how it ended, as they
	// found out, and why (SettleExecution).
	PhaseExecutionSettled Phase = "execution_settled"
	// PhaseEffectAttempt is one attempt of an effect that is not
	// transactional (an upstream call), between execution_started and its
	// end: its number, status or failure class, and duration.
	PhaseEffectAttempt Phase = "effect_attempt"
	// The refusals an execution can end in after its approval is consumed.
	PhasePreconditionFailed Phase = "precondition_failed"
	PhaseSignatureMismatch  Phase = "signature_mismatch"
	PhaseInvalidInput       Phase = "invalid_input"
	PhaseResolveError       Phase = "resolve_error"
	// PhaseRefused is a tool call a gate refused before anything ran: a
	// scope the caller's token lacks, or a caller no longer allowed the
	// action its approved approval would execute. Its error names the
	// code and why.
	PhaseRefused Phase = "refused"
	// PhaseRateLimited is an execution a call budget refused before
	// anything ran, its approval (if any) left approved: its error starts
	// with X_RATE_LIMITED and names the limit (budget.go).
	PhaseRateLimited Phase = "rate_limited"
	// PhaseAuditorGranted and PhaseAuditorRevoked are an operator's
	// records of an auditor login given, or losing, read access to the
	// tenant's audit log and approvals (RecordAuditorAccess): who could
	// read the tenant, and since when, is the chain's to tell.
	PhaseAuditorGranted Phase = "auditor_granted"
	PhaseAuditorRevoked Phase = "auditor_revoked"
	// PhaseAuditorPasswordSet is the owner's record of an auditor
	// login's password set (RecordAuditorPasswordSet), in each tenant the
	// login reads: whoever holds the new password reads as it since.
	PhaseAuditorPasswordSet Phase = "auditor_password_set"
)

// OfAuditor reports whether p is the owner's record of an auditor login
// (its result names the login, AuditorMember), not of an approval.
func (p Phase) OfAuditor() bool {
	return p == PhaseAuditorGranted || p == PhaseAuditorRevoked || p == PhaseAuditorPasswordSet
}

// Phases returns every phase, in lifecycle order.
func Phases() []Phase {
	return []Phase{PhaseStaged, PhaseApproved, PhaseRejected, PhaseExpired, PhaseDryRun, PhaseNotImplemented,
		PhaseExecutionStarted, PhaseEffectAttempt, PhaseExecutionSucceeded, PhaseExecutionFailed, PhaseExecutionSettled,
		PhasePreconditionFailed, PhaseSignatureMismatch, PhaseInvalidInput, PhaseResolveError, PhaseRefused, PhaseRateLimited,
		PhaseAuditorGranted, PhaseAuditorRevoked, PhaseAuditorPasswordSet}
}

// FollowsConsume reports whether a record of phase p can follow the consume
// of an approval, and so shows the consumed approval was acted on.
// orangerail.approvals_unaudited uses the same set.
func FollowsConsume(p Phase) bool {
	switch p {
	case PhaseExecutionStarted, PhaseExecutionSucceeded, PhaseExecutionFailed,
		PhasePreconditionFailed, PhaseSignatureMismatch, PhaseInvalidInput, PhaseResolveError:
		return true
	}
	return false
}

// Finishes reports whether p closes an execution that
// PhaseExecutionStarted opened. orangerail.audit_unfinished uses the same
// set.
func (p Phase) Finishes() bool {
	return p == PhaseExecutionSucceeded || p == PhaseExecutionFailed || p == PhaseExecutionSettled
}

// unfinished reports whether phases, one correlation id's records in
// chain order, leave an execution started and not finished: what
// orangerail.audit_unfinished and the Go verifier find.
func unfinished(phases []string) bool {
	open := false
	for _, p := range phases {
		switch p := Phase(p); {
		case p == PhaseExecutionStarted:
			open = true
		case p.Finishes():
			open = false
		}
	}
	return open
}

// RequiredPhases are the records an approval of the given status needs in
// its tenant's chain: the approval functions append them with each change,
// so an approval without them was written around orangerail.
// orangerail.approval_required_phases holds the same table; a test holds
// them equal.
func RequiredPhases(status store.ApprovalStatus) []Phase {
	switch status {
	case store.ApprovalPending:
		return []Phase{PhaseStaged}
	case store.ApprovalApproved, store.ApprovalConsumed:
		return []Phase{PhaseStaged, PhaseApproved}
	case store.ApprovalRejected:
		return []Phase{PhaseStaged, PhaseRejected}
	case store.ApprovalExpired:
		return []Phase{PhaseStaged, PhaseExpired}
	}
	return nil
}
