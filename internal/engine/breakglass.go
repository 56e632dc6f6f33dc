package engine

import (
	"context"
	"strings"
	"time"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// BreakGlassReasonMember is the member of a break-glass decision's record
// result that holds the operator's reason; orangerail.audit_break_glass
// reads the same member.
const BreakGlassReasonMember = "break_glass_reason"

// DecideBreakGlass is DecideBreakGlassApproval for a caller that needs only
// the outcome.
func (e *Engine) DecideBreakGlass(ctx context.Context, owner database.TxBeginner, tenant, reason string, d Decision) *Outcome {
	out, _ := e.DecideBreakGlassApproval(ctx, owner, tenant, reason, d)
	return out
}

// DecideBreakGlassApproval decides an approval around the API, for when
// the desk and its API are down: `approvals approve|reject --break-glass`.
//
// owner must be a connection (a pool, a connection or a transaction)
// logged in as the owner of the orangerail schema, or a superuser, and
// acting as that login: not the engine's store, whose connections SET ROLE
// orangerail_runtime, and not a runtime login. Anything else is refused
// with X_BREAK_GLASS_REFUSED, as is an empty reason. The database holds
// the same line: it refuses an operator's record appended by any other
// login (ORA06), so a runtime login cannot forge one around the engine.
//
// The decision is recorded through the same audited approval_decide as
// DecideApproval, with the actor {"kind": "operator", "subject":
// session_user} and the reason in the record's result (beside the note),
// and the same rules otherwise: the approval is decided once, a lapsed one
// is never decided, and approving needs the digest of its input. Four-eyes
// does not apply: an operator is a database login, not a verified person
// whose subject could be compared with the requester's. Approver roles do
// not apply either: the owner of the database can change it at will, so
// the guard is that the decision is recorded and every verifier lists it
// (Report.BreakGlass, orangerail.audit_break_glass).
func (e *Engine) DecideBreakGlassApproval(ctx context.Context, owner database.TxBeginner, tenant, reason string, d Decision) (result *Outcome, decided *Decided) {
	ctx = e.observe(ctx)
	operator := &Caller{Kind: ActorOperator, Tenant: tenant}
	ctx = e.begin(ctx, OpDecide, d.ApprovalID)
	defer e.settle(ctx, OpDecide, d.ApprovalID, operator, time.Now(), &result)
	if strings.TrimSpace(reason) == "" {
		return refuse(StatusDenied, errcode.BreakGlassRefused), nil
	}
	if p := ReasonProblem(reason); p != "" {
		// Held as a note is: bytes that are not UTF-8 would be recorded
		// as other text than the operator gave.
		return &Outcome{Status: StatusInvalidInput, Code: errcode.RequestInvalid, Issues: []Issue{{Path: "/reason", Message: p}}}, nil
	}
	if out := noteRefused(d); out != nil {
		return out, nil
	}
	return e.decide(ctx, owner, tenant, d, decisionRules{
		who: func(ctx context.Context, st *store.Store) (*Caller, *Outcome, error) {
			login, err := st.SessionOperatorGet(ctx)
			if err != nil {
				return nil, nil, err
			}
			if !login.OwnRights || !login.Owner {
				return nil, refuse(StatusDenied, errcode.BreakGlassRefused), nil
			}
			operator.Subject = login.Login
			return operator, nil, nil
		},
		may:      func(*store.Approval) bool { return true },
		fourEyes: func(*store.Approval) bool { return false },
		extra:    map[string]string{BreakGlassReasonMember: reason},
	})
}
