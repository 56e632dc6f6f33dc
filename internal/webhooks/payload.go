package webhooks

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/store"
)

// Payload is the JSON body of every webhook POST. README ("Notifications")
// documents it; a test holds the two to the same fields.
type Payload struct {
	// Type is the event: approval.pending, approval.approved,
	// approval.rejected or approval.expired.
	Type store.WebhookEvent `json:"type"`
	// Timestamp is when the event happened (RFC 3339, UTC).
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is the approval as it stood when the event happened.
type Data struct {
	ID     uuid.UUID `json:"id"`
	Tenant string    `json:"tenant"`
	Action string    `json:"action"`
	// Status is the approval's status after the event.
	Status      store.ApprovalStatus `json:"status"`
	RequestedBy string               `json:"requested_by"`
	DecidedBy   *string              `json:"decided_by"`
	DecidedAt   *time.Time           `json:"decided_at"`
	ExpiresAt   time.Time            `json:"expires_at"`
	// URL is the approval on the desk: http.public_url + /approvals/{id};
	// absent when no desk is served, where it would name no page.
	URL string `json:"url,omitempty"`
	// Input is the approval's verbatim input, present only for an endpoint
	// configured with include_input: true.
	Input json.RawMessage `json:"input,omitempty"`
}

// statusAfter is the approval status each event leaves.
var statusAfter = map[store.WebhookEvent]store.ApprovalStatus{
	store.WebhookApprovalPending:  store.ApprovalPending,
	store.WebhookApprovalApproved: store.ApprovalApproved,
	store.WebhookApprovalRejected: store.ApprovalRejected,
	store.WebhookApprovalExpired:  store.ApprovalExpired,
}

// payloadOf is m's payload, linking to the desk under publicURL (none when
// it is empty: no desk is served), with input when it is not nil.
func payloadOf(m *store.WebhookMessage, publicURL string, input []byte) Payload {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	var page string
	if publicURL != "" {
		page = strings.TrimSuffix(publicURL, "/") + "/approvals/" + m.ApprovalID.String()
	}
	return Payload{
		Type:      m.Event,
		Timestamp: m.OccurredAt.UTC(),
		Data: Data{
			ID: m.ApprovalID, Tenant: m.TenantID, Action: m.Action, Status: statusAfter[m.Event],
			RequestedBy: m.RequestedBy, DecidedBy: m.DecidedBy, DecidedAt: utc(m.DecidedAt), ExpiresAt: m.ExpiresAt.UTC(),
			URL:   page,
			Input: input,
		},
	}
}
