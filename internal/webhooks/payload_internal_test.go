package webhooks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/store"
)

// TestPayloadLinksToADeskOnlyWhereOneIsServed: a payload's url names the
// approval's page on the desk; with no desk served it is left out, not a
// link to a page that does not exist.
func TestPayloadLinksToADeskOnlyWhereOneIsServed(t *testing.T) {
	m := &store.WebhookMessage{Event: store.WebhookApprovalPending, ApprovalID: uuid.New(), TenantID: "acme", OccurredAt: time.Now(), ExpiresAt: time.Now()}
	withDesk, _ := json.Marshal(payloadOf(m, "https://orangerail.example.com/", nil))
	if !strings.Contains(string(withDesk), `"url":"https://orangerail.example.com/approvals/`+m.ApprovalID.String()+`"`) {
		t.Fatalf("with a desk: %s", withDesk)
	}
	if without, _ := json.Marshal(payloadOf(m, "", nil)); strings.Contains(string(without), `"url"`) {
		t.Fatalf("without a desk: %s", without)
	}
}
