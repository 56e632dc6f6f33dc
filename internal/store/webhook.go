package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// WebhookEvent is what happened to an approval, as a webhook announces it.
type WebhookEvent string

// The webhook events. The CHECK constraint on
// orangerail.webhook_outbox.event (migrations/00009) allows exactly these,
// and its trigger writes them; a test holds them equal.
const (
	WebhookApprovalPending  WebhookEvent = "approval.pending"
	WebhookApprovalApproved WebhookEvent = "approval.approved"
	WebhookApprovalRejected WebhookEvent = "approval.rejected"
	WebhookApprovalExpired  WebhookEvent = "approval.expired"
)

// WebhookEvents returns every webhook event.
func WebhookEvents() []WebhookEvent {
	return []WebhookEvent{WebhookApprovalPending, WebhookApprovalApproved, WebhookApprovalRejected, WebhookApprovalExpired}
}

// WebhookState is where an outbox row's delivery stands.
type WebhookState string

// The delivery states, held to the CHECK constraint on
// orangerail.webhook_outbox.state by a test.
const (
	// WebhookQueued waits for its next attempt.
	WebhookQueued WebhookState = "queued"
	// WebhookDelivered reached every endpoint subscribed to its event.
	WebhookDelivered WebhookState = "delivered"
	// WebhookFailed ran out of attempts.
	WebhookFailed WebhookState = "failed"
)

// WebhookStates returns every delivery state.
func WebhookStates() []WebhookState {
	return []WebhookState{WebhookQueued, WebhookDelivered, WebhookFailed}
}

// WebhookMessage is one outbox row: an approval event, what the approval
// was when it happened, and where its delivery stands.
type WebhookMessage struct {
	ID uuid.UUID `json:"id"`
	// Seq orders messages as their events happened.
	Seq         int64        `json:"seq"`
	TenantID    string       `json:"tenant_id"`
	ApprovalID  uuid.UUID    `json:"approval_id"`
	Event       WebhookEvent `json:"event"`
	Action      string       `json:"action"`
	RequestedBy string       `json:"requested_by"`
	DecidedBy   *string      `json:"decided_by"`
	DecidedAt   *time.Time   `json:"decided_at"`
	ExpiresAt   time.Time    `json:"expires_at"`
	OccurredAt  time.Time    `json:"occurred_at"`
	State       WebhookState `json:"state"`
	// Attempts counts the claims: an attempt that died mid-way counts.
	Attempts      int        `json:"attempts"`
	NextAttemptAt time.Time  `json:"next_attempt_at"`
	LockedUntil   *time.Time `json:"locked_until"`
	// OwedTo are the keys (ontology.WebhookKey) of the endpoints the
	// message is owed to: those configured, subscribed to its event, when
	// it happened. Nil: every endpoint subscribed where it is delivered.
	OwedTo []string `json:"owed_to"`
	// DeliveredTo are the endpoint URLs that answered 2xx.
	DeliveredTo []string   `json:"delivered_to"`
	LastError   *string    `json:"last_error"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

func webhookMessageOf(r *db.OrangerailWebhookOutbox) *WebhookMessage {
	return &WebhookMessage{
		ID: r.ID, Seq: r.Seq, TenantID: r.TenantID, ApprovalID: r.ApprovalID, Event: WebhookEvent(r.Event), Action: r.Action,
		RequestedBy: r.RequestedBy, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, ExpiresAt: r.ExpiresAt,
		OccurredAt: r.OccurredAt, State: WebhookState(r.State), Attempts: int(r.Attempts), NextAttemptAt: r.NextAttemptAt,
		LockedUntil: r.LockedUntil, OwedTo: r.OwedTo, DeliveredTo: r.DeliveredTo, LastError: r.LastError, DeliveredAt: r.DeliveredAt,
	}
}

// WebhookDueTenants names up to limit tenants with a message due at now,
// across tenants (a SECURITY DEFINER function returning ids only).
func (s *Store) WebhookDueTenants(ctx context.Context, now time.Time, limit int32) ([]string, error) {
	ids, err := s.q.WebhookDueTenants(ctx, s.x, &db.WebhookDueTenantsParams{Now: now, RowLimit: limit})
	if err != nil {
		return nil, InterpretError(err)
	}
	return ids, nil
}

// WebhookPrune deletes up to limit finished messages (delivered, or
// failed) whose last attempt was before before, the oldest first, across
// tenants (a SECURITY DEFINER function that deletes nothing else), and
// returns how many.
func (s *Store) WebhookPrune(ctx context.Context, before time.Time, limit int32) (int, error) {
	n, err := s.q.WebhookPrune(ctx, s.x, &db.WebhookPruneParams{Before: before, RowLimit: limit})
	if err != nil {
		return 0, InterpretError(err)
	}
	return int(n), nil
}

// WebhookClaimParams claim due messages.
type WebhookClaimParams struct {
	TenantID string
	Now      time.Time
	// Until is when the lease ends: another worker may claim the message
	// then, if this one has not marked it.
	Until time.Time
	Limit int32
}

// WebhookClaim leases up to Limit of the tenant's due messages to the
// caller and counts the attempt. Messages another transaction is claiming
// are skipped, never waited for.
func (s *Store) WebhookClaim(ctx context.Context, p *WebhookClaimParams) ([]*WebhookMessage, error) {
	rows, err := s.q.WebhookClaim(ctx, s.x, &db.WebhookClaimParams{LockedUntil: p.Until, TenantID: p.TenantID, Now: p.Now, RowLimit: p.Limit})
	return all(rows, err, webhookMessageOf)
}

// WebhookMarkParams record how an attempt went. A mark changes the message
// only while Lease (its LockedUntil as claimed) still holds it.
type WebhookMarkParams struct {
	ID       uuid.UUID
	TenantID string
	Lease    time.Time
	// DeliveredTo are the endpoints that have answered 2xx so far.
	DeliveredTo []string
	// At is when the message was delivered, or when to try again.
	At        time.Time
	LastError string
}

// WebhookMarkDelivered marks a message delivered at p.At.
func (s *Store) WebhookMarkDelivered(ctx context.Context, p *WebhookMarkParams) error {
	return marked(s.q.WebhookDelivered(ctx, s.x, &db.WebhookDeliveredParams{Now: p.At, DeliveredTo: nonNil(p.DeliveredTo), ID: p.ID, TenantID: p.TenantID, Lease: p.Lease}))
}

// marked is a mark's outcome: ErrNotFound when it changed no row, the
// message no longer held under p.Lease (it ended, and another worker may
// have claimed the message since).
func marked(rows int64, err error) error {
	if err != nil {
		return InterpretError(err)
	}
	if rows == 0 {
		return ErrNotFound
	}
	return nil
}

// WebhookMarkRetry releases a message to be tried again at p.At.
func (s *Store) WebhookMarkRetry(ctx context.Context, p *WebhookMarkParams) error {
	return marked(s.q.WebhookRetry(ctx, s.x, &db.WebhookRetryParams{NextAttemptAt: p.At, DeliveredTo: nonNil(p.DeliveredTo),
		LastError: p.LastError, ID: p.ID, TenantID: p.TenantID, Lease: p.Lease}))
}

// WebhookMarkFailed gives a message up: its attempts ran out.
func (s *Store) WebhookMarkFailed(ctx context.Context, p *WebhookMarkParams) error {
	return marked(s.q.WebhookFail(ctx, s.x, &db.WebhookFailParams{Now: p.At, DeliveredTo: nonNil(p.DeliveredTo), LastError: p.LastError, ID: p.ID, TenantID: p.TenantID, Lease: p.Lease}))
}

// WebhookRedeliver queues a message of the tenant again, due at now, for
// every endpoint subscribed to its event. ErrNotFound: the tenant has no
// such message, or a worker holds it leased at now (WebhookLeased tells
// which).
func (s *Store) WebhookRedeliver(ctx context.Context, tenantID string, id uuid.UUID, now time.Time) (*WebhookMessage, error) {
	row, err := s.q.WebhookRedeliver(ctx, s.x, &db.WebhookRedeliverParams{Now: now, ID: id, TenantID: tenantID})
	return one(row, err, webhookMessageOf)
}

// WebhookLeased reports whether a worker holds the tenant's message leased
// at now: it is being sent.
func (s *Store) WebhookLeased(ctx context.Context, tenantID string, id uuid.UUID, now time.Time) (bool, error) {
	leased, err := s.q.WebhookLeased(ctx, s.x, &db.WebhookLeasedParams{ID: id, TenantID: tenantID, Now: now})
	return leased, InterpretError(err)
}

// WebhookListParams list a tenant's messages.
type WebhookListParams struct {
	TenantID string
	// State lists only messages in it; "" lists every state.
	State WebhookState
	Limit int32
}

// WebhookList lists a tenant's messages, newest first.
func (s *Store) WebhookList(ctx context.Context, p *WebhookListParams) ([]*WebhookMessage, error) {
	rows, err := s.q.WebhookList(ctx, s.x, &db.WebhookListParams{TenantID: p.TenantID, State: string(p.State), RowLimit: p.Limit})
	return all(rows, err, webhookMessageOf)
}

// nonNil makes a nil list the empty array: the column is NOT NULL.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
