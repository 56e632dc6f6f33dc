package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// idempotencyKeyMax bounds a key's length, in characters.
const idempotencyKeyMax = 255

// idempotencyPruneOdds is how often filing a key also forgets the tenant's
// expired ones: rarely enough to cost nothing, often enough that the table
// holds about one TTL of keys.
const idempotencyPruneOdds = 100

// takeIdempotencyKey takes the reserved idempotencyKey argument out of a
// call's arguments, so that what is validated, digested, staged and
// executed is the action's input alone. It returns the key ("" when none
// was sent) and the arguments without it, or the issue that refuses it: a
// key on an action that is not idempotent, or one that is not a string of
// 1 to 255 characters.
func takeIdempotencyKey(a *ontology.Action, args json.RawMessage) (string, json.RawMessage, *Issue) {
	var members map[string]json.RawMessage
	if json.Unmarshal(args, &members) != nil {
		return "", args, nil // not an object: checkInput says why
	}
	raw, ok := members[ontology.IdempotencyKeyArg]
	if !ok {
		return "", args, nil
	}
	at := "/" + ontology.IdempotencyKeyArg
	if !a.Idempotent {
		return "", nil, &Issue{Path: at, Message: "the action is not idempotent, so it takes no idempotencyKey: leave it out"}
	}
	var key string
	if json.Unmarshal(raw, &key) != nil || key == "" || utf8.RuneCountInString(key) > idempotencyKeyMax {
		return "", nil, &Issue{Path: at, Message: "the idempotencyKey must be a string of 1 to 255 characters"}
	}
	delete(members, ontology.IdempotencyKeyArg)
	rest, err := json.Marshal(members)
	if err != nil {
		return "", nil, &Issue{Path: "", Message: "the input is not valid JSON"}
	}
	return key, rest, nil
}

// filedOutcome is an outcome as a key keeps it.
type filedOutcome struct {
	Status        Status       `json:"status"`
	Data          []byte       `json:"data,omitempty"` // base64: the answer byte for byte, which a RawMessage would compact
	ApprovalID    *uuid.UUID   `json:"approvalId,omitempty"`
	ExpiresAt     *time.Time   `json:"expiresAt,omitempty"`
	CorrelationID string       `json:"correlationId,omitempty"`
	Issues        []Issue      `json:"issues,omitempty"`
	Diagnostic    Diagnostic   `json:"diagnostic,omitempty"`
	Note          string       `json:"note,omitempty"`
	Code          errcode.Code `json:"code,omitempty"`
	Err           string       `json:"error,omitempty"`
}

// fileable reports whether an outcome answers the call itself, and so is
// what a retry gets back: the call ran, or may have (outcome_unknown: its
// effect may have run, so a retry under the key must not run it again; it
// gets the same answer, and a new key is the caller's to send once the
// outcome is checked). One that says nothing ran (the store or the audit
// failed before the effect) leaves the key free for a retry to run.
func fileable(o *Outcome) bool {
	switch o.Status {
	case StatusOK, StatusApprovalPending, StatusDryRun, StatusNotImplemented, StatusNotFound,
		StatusPreconditionFailed, StatusFailed, StatusOutcomeUnknown:
		return true
	}
	return false
}

func fileOutcome(o *Outcome) ([]byte, error) {
	f := filedOutcome{Status: o.Status, Data: o.Data, ApprovalID: o.ApprovalID, ExpiresAt: o.ExpiresAt,
		CorrelationID: o.CorrelationID, Issues: o.Issues, Diagnostic: o.Diagnostic, Note: o.Note, Code: o.Code}
	if o.Err != nil {
		f.Err = o.Err.Error()
	}
	return json.Marshal(f)
}

func unfileOutcome(b []byte) (*Outcome, error) {
	var f filedOutcome
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	o := &Outcome{Status: f.Status, Data: json.RawMessage(f.Data), ApprovalID: f.ApprovalID, ExpiresAt: f.ExpiresAt,
		CorrelationID: f.CorrelationID, Issues: f.Issues, Diagnostic: f.Diagnostic, Note: f.Note, Code: f.Code, Replayed: true}
	if f.Err != "" {
		o.Err = errors.New(f.Err)
	}
	return o, nil
}

// errNotFiled rolls back a key's claim when its call's outcome is not
// filed.
var errNotFiled = errors.New("the outcome is not filed")

// keyReserve is what a key's claim keeps of its transaction's time, after
// the call it claimed for ran, to file the call's outcome and commit: a
// statement and a COMMIT, two short round trips.
const keyReserve = time.Second

// idempotent runs a call under an idempotency key: the first call claims
// the key, runs, and files its outcome in the claiming transaction; a
// retry with the same input gets that outcome back without running; a
// retry with another input is refused. A concurrent retry's claim waits in
// Postgres for the first call's transaction to end, so the call runs once
// across replicas; inside one process retries wait in line first, so that
// they do not hold connections the first call needs.
//
// The claiming transaction is bounded (database.Deadline): past its
// deadline the client gives up, Postgres rolls it back and a retry may
// claim the key. So the call runs under a context that ends keyReserve
// before that deadline: a call the database slows so much that it would
// outlast its claim is cut short there, as a cancelled call is, and what
// it had not begun (an effect above all) never runs beside a retry. What
// the cut leaves in doubt (a request already sent upstream) is answered
// as unknown and filed, as any unknown outcome, in the time the claim
// keeps for that; a failure the cut caused is not filed, so that a retry
// runs the call again.
func (e *Engine) idempotent(ctx context.Context, caller *Caller, c *call, key, correlation string, run func(context.Context) *Outcome) *Outcome {
	k := store.IdempotencyKey{Tenant: caller.Tenant, Action: c.name, Subject: caller.actor().Subject, Key: key}
	defer e.keys.lock(k)()
	var (
		out    *Outcome
		filed  []byte // the outcome as the claim files it
		reused bool
	)
	// The claim's statements and COMMIT do not end with the caller: once
	// the call ran, its outcome is filed even if the caller hung up (the
	// usual reason to retry), or the retry would run it again. The claim's
	// bounds (lock_timeout, its deadline) bound them; the call itself runs
	// under the caller's context.
	callerCtx, ctx := ctx, context.WithoutCancel(ctx)
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		filed = nil // an attempt run again starts afresh
		st := store.New(tx)
		if rand.IntN(idempotencyPruneOdds) == 0 { //nolint:gosec // G404: when to prune needs no secrecy
			if err := st.IdempotencyPrune(ctx, caller.Tenant); err != nil {
				return err
			}
		}
		claimed, err := st.IdempotencyClaim(ctx, k, c.digest, e.now().Add(e.cfg.Limits.IdempotencyKeyTTL()))
		if err != nil {
			return err
		}
		if !claimed {
			found, err := st.IdempotencyFind(ctx, k)
			if err != nil {
				return err
			}
			// The key may have been claimed under a key of the ring
			// since rotated out of activity: same input, other digest.
			if !e.digestOfInput(found.InputDigest, caller.Tenant, c.name, c.canonical) {
				reused = true
				return nil
			}
			out, err = unfileOutcome(found.Outcome)
			return err
		}
		// Should the claim's COMMIT fail, Postgres is asked whether it
		// took effect: the key filed with this outcome is its witness
		// (another call's outcome names another correlation id; one that
		// names none and reads the same is the same answer, filed).
		if err := database.ConfirmCommit(ctx, tx, func(ctx context.Context, tx pgx.Tx) (bool, error) {
			found, err := store.New(tx).IdempotencyFind(ctx, k)
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			return err == nil && filed != nil && bytes.Equal(found.Outcome, filed), err
		}); err != nil {
			return err
		}
		runCtx, cancel := callerCtx, context.CancelFunc(func() {})
		if until, ok := database.Deadline(tx); ok {
			runCtx, cancel = context.WithDeadline(callerCtx, until.Add(-keyReserve))
		}
		defer cancel()
		out = run(runCtx)
		// A failure the cut caused — the claim's deadline near, or the
		// caller gone — says nothing ran that a retry should not run.
		cut := runCtx.Err() != nil
		if !fileable(out) || (cut && out.Status == StatusFailed) {
			return errNotFiled
		}
		f, err := fileOutcome(out)
		if err != nil {
			return err
		}
		filed = f
		return st.IdempotencySave(ctx, k, filed)
	})
	switch {
	case reused:
		return e.refuseInput(ctx, caller, c.name, correlation, errcode.IdempotencyKeyReused, []Issue{{
			Path: "/" + ontology.IdempotencyKeyArg, Message: "the key was sent before with a different input: send a new key for a new call"}})
	case errors.Is(err, errNotFiled):
		return out
	case errors.Is(err, database.ErrNotCommitted) && filed != nil:
		// The call ran (or may have) and Postgres confirms its claim,
		// outcome and all, did not commit: the key is free, and a retry
		// would run the call again. File the outcome anew, unless a
		// retry claimed the key meanwhile.
		e.fileAgain(ctx, caller.Tenant, k, c.digest, filed, correlation)
		return out
	case err != nil && out != nil:
		// The call ran but its outcome could not be filed, or its claim's
		// COMMIT failed and Postgres could not say whether it took
		// effect: answer it; should the key be free, a retry runs again,
		// as it would have without a key. The operator is told. (An
		// outcome read back from the key is filed already.)
		if !out.Replayed {
			e.log.WarnContext(ctx, "idempotency outcome may not be filed: a retry under the key may run the call again",
				"action", c.name, "correlation_id", correlation, "error", err.Error())
		}
		return out
	case err != nil:
		return e.storeFailure(ctx, "idempotency key of "+c.name, correlation, err)
	}
	return out
}

// fileAgain files a call's outcome under its key in a transaction of its
// own, after the claim that ran the call was confirmed not to have
// committed: a claim of the key and its outcome at once. A key some retry
// claimed meanwhile is left to it (that retry ran the call again: there is
// nothing left to prevent). Either failure is said in the host log.
func (e *Engine) fileAgain(ctx context.Context, tenant string, k store.IdempotencyKey, digest, filed []byte, correlation string) {
	// The caller may have gone: the call ran, and its key is what keeps a
	// retry from running it again (the pool's limits bound the wait).
	ctx = context.WithoutCancel(ctx)
	err := database.InTenant(ctx, e.store, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		st := store.New(tx)
		claimed, err := st.IdempotencyClaim(ctx, k, digest, e.now().Add(e.cfg.Limits.IdempotencyKeyTTL()))
		if err == nil && !claimed {
			err = errKeyTaken
		}
		if err != nil {
			return err
		}
		return st.IdempotencySave(ctx, k, filed)
	})
	if err != nil {
		e.log.WarnContext(ctx, "idempotency outcome not filed: a retry under the key may run, or have run, the call again",
			"action", k.Action, "correlation_id", correlation, "error", err.Error())
	}
}

// errKeyTaken is fileAgain's failure when a retry claimed the key first.
var errKeyTaken = errors.New("a retry claimed the key first")

// keyLocks holds the keys calls in this process are running under, each
// with the calls waiting for it.
type keyLocks struct {
	mu   sync.Mutex
	held map[store.IdempotencyKey]*keyLock
}

type keyLock struct {
	mu      sync.Mutex
	waiters int
}

// lock waits until no other call of this process runs under k, and returns
// the unlock.
func (l *keyLocks) lock(k store.IdempotencyKey) func() {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[store.IdempotencyKey]*keyLock{}
	}
	kl := l.held[k]
	if kl == nil {
		kl = &keyLock{}
		l.held[k] = kl
	}
	kl.waiters++
	l.mu.Unlock()
	kl.mu.Lock()
	return func() {
		kl.mu.Unlock()
		l.mu.Lock()
		if kl.waiters--; kl.waiters == 0 {
			delete(l.held, k)
		}
		l.mu.Unlock()
	}
}
