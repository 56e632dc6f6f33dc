package web

// Every call the desk makes of the engine's approval functions is in this
// file, so a change of their signatures is adapted here alone.

import (
	"context"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
)

// listLimit is how many pending approvals a page of the list shows.
const listLimit = 100

// pending lists a page of the pending approvals the person may decide,
// newest first, from cursor ("" for the newest): the engine's page for
// this caller, as the API serves it, with the cursor of the older ones
// ("" when there are none).
func (d *Desk) pending(ctx context.Context, person *engine.Caller, cursor string) (*engine.ApprovalPage, error) {
	return d.c.Engine.PageApprovals(ctx, person, engine.ApprovalQuery{Status: store.ApprovalPending, Cursor: cursor, Limit: listLimit})
}

// recent lists, at most limit, the tenant's approvals that are no longer
// pending, of the actions the person may decide, the most recently
// settled first.
func (d *Desk) recent(ctx context.Context, person *engine.Caller, limit int32) ([]*engine.ApprovalView, error) {
	return d.c.Engine.RecentlySettled(ctx, person, limit)
}

// show returns one approval with its target now and what it would write,
// when the person may decide it: the engine refuses another action's
// approver, as the API does.
func (d *Desk) show(ctx context.Context, person *engine.Caller, id string) (*engine.ApprovalView, error) {
	return d.c.Engine.ReviewApproval(ctx, person, id)
}

// decide records the person's decision.
func (d *Desk) decideApproval(ctx context.Context, person *engine.Caller, id string, approve bool, digest, note string) *engine.Outcome {
	return d.c.Engine.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: approve, Digest: digest, Note: note})
}

// mayReview reports whether the person may read the tenant's approvals
// and audit log at all (inputs can hold what only approvers and auditors
// should see): a person holding the auditor role or any action's approver
// role, as the engine decides for the API.
func (d *Desk) mayReview(person *engine.Caller) bool {
	return d.c.Engine.MayAudit(person)
}

// mayDecide reports whether the person may be shown decision buttons on
// v: a pending approval, one of its action's approver roles, and not its
// requester when four-eyes is on. The engine decides again on the POST;
// this only keeps a button off a page where it could not work.
func (d *Desk) mayDecide(person *engine.Caller, v *engine.ApprovalView) bool {
	if v.Status != store.ApprovalPending || !d.c.Engine.MayDecide(person, v.Action) {
		return false
	}
	return !d.c.Engine.FourEyesBars(person, v.RequestedBy, v.RequestedIssuer)
}
