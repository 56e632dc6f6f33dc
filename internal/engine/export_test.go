package engine

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// SetAfterConsume installs a hook that runs right after an approval is
// consumed, inside the consuming transaction: a test's stand-in for a
// process that dies there.
func SetAfterConsume(e *Engine, f func()) { e.afterConsume = f }

// SetBeforeFinish installs a hook that runs after an effect on a separate
// datasource committed and before its end is recorded.
func SetBeforeFinish(e *Engine, f func()) { e.beforeFinish = f }

// SetBeforeExecute installs a hook that runs as an execution begins, with
// its context: a stand-in for a slow step before it.
func SetBeforeExecute(e *Engine, f func(context.Context)) { e.beforeExecute = f }

// SetOnKeyWait installs a hook that runs each time a call finds its
// idempotency key claimed by a running call, before it waits.
func SetOnKeyWait(e *Engine, f func()) { e.onKeyWait = f }

// SetBeforeRead installs a hook that runs as each get reads.
func SetBeforeRead(e *Engine, f func()) { e.beforeRead = f }

// SetBeforeExpire installs a hook that runs as a poll that read its
// approval lapsed is about to expire it.
func SetBeforeExpire(e *Engine, f func()) { e.beforeExpire = f }

// SetBeforeDecide installs a hook that runs as a person's decision read
// its approval and is about to make it, with what it is about to send.
func SetBeforeDecide(e *Engine, f func(*store.ApprovalDecideParams)) { e.beforeDecide = f }

// InputDigest is the digest of an action's canonical input in a tenant,
// as the engine computes it, for tests that write approvals around it.
func InputDigest(e *Engine, tenant, action string, canonical []byte) []byte {
	digest, _ := e.inputDigest(tenant, action, canonical)
	return digest
}

// DefinitionHash is the hash an approval records of its action's
// declaration.
func DefinitionHash(a *ontology.Action) []byte { return definitionHash(a) }

// SetKeepLeases makes e leave every execution's budget slot held when it
// ends, as a replica that died mid-execution would.
func SetKeepLeases(e *Engine, keep bool) { e.keepLeases = keep }

// OweRelease makes e owe the release of lease, of an execution of action
// in tenant under correlation whose effect never ran, counted in the
// windows starting at minute and day: as unspend does when its
// transaction fails.
func OweRelease(e *Engine, tenant, action, correlation string, lease uuid.UUID, minute, day time.Time) {
	e.owed.add(owedRelease{tenant: tenant, correlation: correlation, lapses: time.Now().Add(time.Hour),
		spent: spent{key: store.BudgetKey{Tenant: tenant, Action: action}, lease: lease, minute: minute, day: day}})
}

// SignCheckpointStep is SignCheckpoint adding at most step records to the
// tree (fewer under a short statement_timeout), in one attempt.
func SignCheckpointStep(ctx context.Context, conn database.TxBeginner, tenant string, signer *checkpoint.Signer, origin string, step int64) (*store.Checkpoint, error) {
	c, _, err := signCheckpoint(ctx, conn, tenant, signer, origin, step)
	return c, err
}

// StepWithin is the most records one checkpoint adds under a
// statement_timeout.
func StepWithin(timeout time.Duration) int64 { return stepWithin(checkpointStep, timeout) }

// WithCheckpointPage is o reading checkpoints pageSize at a time (and so
// streaming the chain in as many segments).
func WithCheckpointPage(o VerifyOptions, pageSize int32) VerifyOptions {
	o.checkpointPage = pageSize
	return o
}

// WithListMax is o listing at most n findings of a kind.
func WithListMax(o VerifyOptions, n int32) VerifyOptions {
	o.listMax = n
	return o
}

// ShredBatch is shredBatch, for a test that piles up more.
const ShredBatch = shredBatch
