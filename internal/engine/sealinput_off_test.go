package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// TestInputSealedBeforeSealingWasTurnedOffStaysOutOfTheChain: an approval
// staged while inputs were sealed, executed by a server whose
// approvals.seal_inputs is now off, keeps its input out of the audit
// chain: the records of its execution carry its digest, as its staged
// record did. The chain is append-only, so an input written there in
// plaintext could never be shredded; the README promises the inputs
// sealed before are still shredded on time once sealing is off.
func TestInputSealedBeforeSealingWasTurnedOffStaysOutOfTheChain(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	const secret = "sealed-then-off-4417"
	staged := sealedEngine(t, b, nil).Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "`+secret+`"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	if n := rowsHolding(t, b, secret); n != 0 {
		t.Fatalf("%d rows hold the sealed input in plaintext after staging", n)
	}
	// Sealing is turned off: b.engine, the same key and config without seal_inputs.
	approve(t, b.engine, "acme", id)
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if n := rowsHolding(t, b, secret); n != 0 {
		t.Fatalf("%d rows hold the input sealed at staging in plaintext after it executed with sealing off", n)
	}
}
