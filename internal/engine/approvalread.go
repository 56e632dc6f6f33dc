package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// AgentApproval is an approval as the agent that requested it may read
// it: what it asked, where it stands, and a rejecting person's note —
// never the input's digest, the decider or the target's state.
type AgentApproval struct {
	ID           uuid.UUID            `json:"approvalId"`
	Action       string               `json:"action"`
	Status       store.ApprovalStatus `json:"status"`
	CreatedAt    time.Time            `json:"createdAt"`
	ExpiresAt    time.Time            `json:"expiresAt"`
	DecidedAt    *time.Time           `json:"decidedAt,omitempty"`
	DecisionNote *string              `json:"decisionNote,omitempty"`
	ConsumedAt   *time.Time           `json:"consumedAt,omitempty"`
}

// Final reports whether the approval's status can no longer change.
func (a *AgentApproval) Final() bool {
	switch a.Status {
	case store.ApprovalRejected, store.ApprovalExpired, store.ApprovalConsumed:
		return true
	}
	return false
}

// ErrApprovalUnseen is ReadApproval's answer for an approval the caller
// may not read: none of the id, another tenant's, or another caller's —
// one answer for all three, as check_approval gives.
var ErrApprovalUnseen = errors.New("engine: no approval of that id is the caller's")

// ReadApproval returns one of the caller's approvals, by the rule
// check_approval follows: in the caller's tenant, and requested by the
// caller. It only reads — in a read-only transaction, it never executes,
// consumes or expires anything: an open approval (pending or approved)
// whose time is up reads as expired, as the next poll or sweep will record
// it.
func (e *Engine) ReadApproval(ctx context.Context, caller *Caller, approvalID string) (*AgentApproval, error) {
	id, err := uuid.Parse(approvalID)
	if err != nil || !caller.Authenticated() {
		return nil, ErrApprovalUnseen
	}
	a, err := store.New(database.RowReader(e.store, caller.Tenant)).ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: caller.Tenant})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrApprovalUnseen
	case err != nil:
		return nil, err
	case !caller.owns(a):
		return nil, ErrApprovalUnseen
	}
	if _, served := e.cfg.Actions[a.Action]; !served {
		// An action withdrawn here (environments), or no longer declared:
		// no resource mentions it, as describe does not; a poll says why
		// the approval does not execute.
		return nil, ErrApprovalUnseen
	}
	v := &AgentApproval{ID: a.ID, Action: a.Action, Status: a.Status, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		DecidedAt: a.DecidedAt, DecisionNote: a.DecisionNote, ConsumedAt: a.ConsumedAt}
	if e.lapsed(a) {
		v.Status = store.ApprovalExpired
	}
	return v, nil
}

// PendingApprovals is how many approvals of every tenant wait for a
// person now, and how long the oldest of them has waited (zero when none
// does). It reads two numbers, no tenant's rows, so a metrics scrape may
// call it.
func PendingApprovals(ctx context.Context, conn database.TxBeginner) (n int, oldest time.Duration, err error) {
	err = database.Tenantless(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		n, oldest, err = store.New(tx).ApprovalsWaiting(ctx)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("pending approvals: %w", err)
	}
	return n, oldest, nil
}
