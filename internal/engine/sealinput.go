package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/inputseal"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/store"
)

// Sealed inputs (approvals.seal_inputs). A staged input is stored
// encrypted under a data key of its own, wrapped under the ring key that
// also made its digest (the approval's input_key_id): it is opened for the
// approver's view and for execution, and nowhere else. Once an approval
// has ended (consumed, rejected, expired) and approvals.retention has
// passed, the sweeper deletes its data key: the input is then unreadable
// by anyone (crypto-shredded), while the chain, which only ever held the
// input's digest, still verifies.

// InputState says whether an approval's input could be read.
type InputState string

// The input states.
const (
	// InputOpen: the input is at hand, stored in plaintext or opened.
	InputOpen InputState = "open"
	// InputShredded: the sealed input's data key was deleted after
	// approvals.retention; nobody can read it again.
	InputShredded InputState = "shredded"
	// InputUnreadable: the sealed input does not open: the ring no longer
	// holds the key that wrapped its data key, or the row was altered.
	InputUnreadable InputState = "unreadable"
)

// shredBatch bounds the sealed inputs one transaction of a tenant's sweep
// shreds; a full batch has the sweep run another (Sweep).
const shredBatch = 1000

// sealInput seals an approval's canonical input under the ring key kid
// names (the key that made its digest).
func (e *Engine) sealInput(tenant string, id uuid.UUID, kid keyring.KID, canonical []byte) (sealed, wrapped []byte, err error) {
	secret, ok := e.ring.Lookup(kid)
	if !ok {
		return nil, nil, fmt.Errorf("seal input: no key %q in the ring", kid)
	}
	return inputseal.Seal(secret, inputseal.Binding(tenant, id), canonical)
}

// openInput returns an approval's input and whether it could be read.
func (e *Engine) openInput(a *store.Approval) ([]byte, InputState) {
	switch {
	case a.InputSealed == nil:
		return a.Input, InputOpen
	case a.InputDataKey == nil:
		return nil, InputShredded
	}
	secret, ok := e.ring.Lookup(keyring.KID(a.InputKeyID))
	if !ok {
		return nil, InputUnreadable
	}
	input, err := inputseal.Open(secret, inputseal.Binding(a.TenantID, a.ID), a.InputSealed, a.InputDataKey)
	if err != nil {
		return nil, InputUnreadable
	}
	return input, InputOpen
}

// shredInputs shreds, in the sweeping transaction, the tenant's sealed
// inputs whose approvals ended approvals.retention ago or earlier, by the
// engine's clock. Without a retention it shreds nothing; a retention of
// zero shreds every input whose approval has ended.
func (e *Engine) shredInputs(ctx context.Context, tx pgx.Tx) (int64, error) {
	retention := e.cfg.Approvals.Retention
	if retention == nil {
		return 0, nil
	}
	n, err := store.New(tx).ApprovalShredInputs(ctx, e.now().Add(-time.Duration(*retention)), shredBatch)
	if err != nil {
		return 0, fmt.Errorf("shred sealed inputs: %w", err)
	}
	return n, nil
}
