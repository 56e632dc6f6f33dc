package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
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
// was sent) and the arguments without it, every other member as it was
// sent (a repeated one too, which checkInput refuses), or the issue that
// refuses it: a key on an action that is not idempotent, one sent twice,
// or one that is not a string of 1 to 255 characters without U+0000.
func takeIdempotencyKey(a *ontology.Action, args json.RawMessage) (string, json.RawMessage, *Issue) {
	at := "/" + ontology.IdempotencyKeyArg
	var (
		rest  = []byte{'{'}
		raw   json.RawMessage
		found bool
	)
	members := jsonmember.New(args)
	for members.Scan() {
		name, value := members.Name(), members.Value()
		if name == ontology.IdempotencyKeyArg {
			if found {
				return "", nil, &Issue{Path: at, Message: "duplicate member name \"" + ontology.IdempotencyKeyArg + "\""}
			}
			raw, found = value, true
			continue
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		quoted, _ := json.Marshal(name)
		rest = append(append(append(rest, quoted...), ':'), value...)
	}
	if !found || !members.Whole() {
		return "", args, nil // no key, or not one JSON object: checkInput says why
	}
	if !a.Idempotent {
		return "", nil, &Issue{Path: at, Message: "the action is not idempotent, so it takes no idempotencyKey: leave it out"}
	}
	var key string
	if json.Unmarshal(raw, &key) != nil || key == "" || utf8.RuneCountInString(key) > idempotencyKeyMax {
		return "", nil, &Issue{Path: at, Message: "the idempotencyKey must be a string of 1 to 255 characters"}
	}
	if strings.ContainsRune(key, 0) {
		return "", nil, &Issue{Path: at, Message: "must not contain the NUL character (U+0000)"}
	}
	return key, append(rest, '}'), nil
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
// failed before the effect) leaves the key free for a retry to run; so do
// a dry run and an action not implemented, which say what this engine
// would not do: a live engine beside a sandbox one, or this deployment
// once it goes live or implements the action, runs the call under the key.
//
// A call that found an identical call's approved approval answers as its
// poll does: consumed or executing say that approval ran, or runs, for the
// call, which a retry must not stage again.
func fileable(o *Outcome) bool {
	switch o.Status {
	case StatusOK, StatusApprovalPending, StatusNotFound,
		StatusPreconditionFailed, StatusFailed, StatusOutcomeUnknown:
		return true
	case StatusConsumed, StatusExecuting:
		return o.ApprovalID != nil
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

// keyReserve is what a call's run leaves of its transaction bound, after
// it, to record its end.
const keyReserve = time.Second

// keyLeaseBounds is how many transaction bounds a key's claim lasts: the
// call's run (cut short within one), the record of its end, and the
// filing of its outcome (each one transaction, whose COMMIT, should its
// answer be lost, is asked about within another). A claim whose time is
// over with no outcome filed is abandoned: the call did not end as a
// healthy one does.
const keyLeaseBounds = 3

// A retry that finds its key claimed by a call that runs looks again after
// keyPollFirst, then at twice the last pause, up to keyPollMax.
const (
	keyPollFirst = 10 * time.Millisecond
	keyPollMax   = 250 * time.Millisecond
)

// errKeyBusy answers a retry that waited as long as a lock wait may last
// for the call claiming its key to file a result.
var errKeyBusy = errors.New("the idempotency key is claimed by a call that still runs")

// errClaimAbandoned is the outcome filed in place of a claim whose time
// is over with no result: its call may have run.
var errClaimAbandoned = errors.New("the call under this idempotency key filed no outcome before its claim ran out: it may have run")

// errClaimGone is a filing that found its key no longer claimed by its
// call.
var errClaimGone = errors.New("the key is no longer claimed by this call")

// idempotent runs a call under an idempotency key: the first call claims
// the key, runs, and files its outcome under it; a retry with the same
// input gets that outcome back without running; a retry with another
// input is refused. The claim commits before the call runs, naming the
// call and how long it may take (keyLeaseBounds transaction bounds of
// lock_timeout + 2 × statement_timeout + 5s, by the database's clock), so
// that nothing but the call gives the key back before then: a replica
// that stops mid-call, a cut connection or a lost COMMIT leaves the claim
// in place, and a retry never runs a call whose effect may have run. A
// retry that finds the key claimed waits for the outcome as long as a
// lock wait may last (in line behind the call when both are in this
// process, then polling), and fails without running if none is filed by
// then; one that finds the claim's time over with no outcome files
// outcome_unknown in its place and answers that.
//
// The call runs under a context that ends one transaction bound, less
// keyReserve, after its claim: a call the database slows so much is cut
// short there, as a cancelled call is. What the cut leaves in doubt (a
// request already sent upstream) is answered as unknown and filed, as any
// unknown outcome; a failure the cut caused (cutShort), or an answer that
// says nothing ran, gives the key back, so that a retry runs the call.
func (e *Engine) idempotent(ctx context.Context, caller *Caller, c *call, key, correlation string, run func(context.Context) *Outcome) *Outcome {
	waitUntil := time.Now().Add(e.store.Limits.LockTimeout)
	// The key's statements do not end with the caller: once the call ran,
	// its outcome is filed even if the caller hung up (the usual reason to
	// retry). The pool's limits bound them; the call itself runs under
	// the caller's context.
	callerCtx, ctx := ctx, context.WithoutCancel(ctx)
	k, err := e.idempotencyKey(callerCtx, caller, c.name, key)
	if err != nil {
		return e.keyWaitFailure(ctx, c.name, correlation, err)
	}
	bound := e.store.Limits.Deadline()
	claim := uuid.New()
	var (
		unlock func()
		began  time.Time
		out    *Outcome
	)
	for {
		if unlock, err = e.keys.lock(callerCtx, k, waitUntil); err != nil {
			return e.keyWaitFailure(ctx, c.name, correlation, err)
		}
		if began, out = e.claimKey(ctx, callerCtx, caller, c, k, claim, keyLeaseBounds*bound, correlation, waitUntil); out != nil {
			unlock()
			return out
		}
		if canonical := ontology.IssuerKey(k.Issuer); k.Issuer != canonical {
			// A fresh claim under a spelling an earlier version filed means
			// that key expired after idempotencyKey found it: a retry that
			// looked since claims the canonical key, where this call must
			// meet it rather than run beside it (for a spelling issuer_key
			// keeps as it is, the two are keys apart).
			e.releaseKey(ctx, k, claim, correlation)
			unlock()
			k.Issuer = canonical
			continue
		}
		break
	}
	defer unlock()
	runCtx, cancel := context.WithDeadline(callerCtx, began.Add(bound-keyReserve))
	defer cancel()
	// A panic out of run never reached an effect: execute contains every
	// panic once its effect may start, answering it as an outcome. The
	// call is answered internal_error (settle), which says nothing ran, so
	// its key is given back as it unwinds, rather than left claimed as by
	// a replica that stopped.
	returned := false
	defer func() {
		if !returned {
			e.releaseKey(ctx, k, claim, correlation)
		}
	}()
	out = run(runCtx)
	returned = true
	if !fileable(out) || (out.Status == StatusFailed && cutShort(runCtx, out.Err)) {
		e.releaseKey(ctx, k, claim, correlation)
		return out
	}
	if out.CorrelationID == "" {
		// An answer that names no call of its own (a target not found)
		// is filed under this call's id: settle would give the caller a
		// fresh one, and each retry another.
		out.CorrelationID = correlation
	}
	e.fileKey(ctx, k, claim, out, correlation)
	return out
}

// idempotencyKey is the key under which a call of action sent with key is
// filed: its caller's issuer in the one form every spelling of it shares
// (ontology.IssuerKey), so that a retry after the operator re-spelled the
// issuer in the config (a trailing slash, the host's case) finds the first
// call's key, as four-eyes finds its requester (ontology.SameIssuer),
// rather than run the call again. The store reads and claims a key by
// its issuer's form in SQL (issuer_key, one key of each: migration
// 00069, which filed every stored key under it), so a key filed under
// another plain spelling — by an earlier version, or by a replica not yet
// upgraded — is this one. issuer_key keeps as it is an issuer that is no
// plain scheme://host[:port]/path (never looser than IssuerKey): a key an
// earlier version filed under such a spelling is found only under it,
// so while one under the caller's spelling is live, it is the call's key
// (a read, only for an issuer not spelled in IssuerKey's form).
func (e *Engine) idempotencyKey(ctx context.Context, caller *Caller, action, key string) (store.IdempotencyKey, error) {
	act := caller.actor()
	k := store.IdempotencyKey{Tenant: caller.Tenant, Action: action, Subject: act.Subject, Issuer: ontology.IssuerKey(act.Issuer), Key: key}
	if k.Issuer == act.Issuer {
		return k, nil
	}
	spelled := k
	spelled.Issuer = act.Issuer
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := store.New(tx).IdempotencyFind(ctx, spelled)
		return err
	})
	switch {
	case err == nil:
		return spelled, nil
	case errors.Is(err, store.ErrNotFound):
		return k, nil
	}
	return k, err
}

// cutShort reports whether err, a failed run's, is what ending runCtx
// made of it — the run's bound reached, or the caller gone: a statement
// cancelled, or a request never sent. Such a failure says nothing ran
// that a retry should not run. One the effect met of its own (the
// datasource refused it, the upstream answered it) is the call's answer
// even when its caller has gone meanwhile, and is filed as any other.
func cutShort(runCtx context.Context, err error) bool {
	if runCtx.Err() == nil {
		return false
	}
	err = store.InterpretError(err)
	return errors.Is(err, store.ErrTimeout) || errors.Is(err, store.ErrCanceled)
}

// keyWaitFailure answers a call that waited for its key in vain: until a
// lock wait's time was over (errKeyBusy: idempotency_key_busy, so that the
// caller retries under the same key rather than a new one, which would run
// the action again), or until its caller left.
func (e *Engine) keyWaitFailure(ctx context.Context, action, correlation string, err error) *Outcome {
	op := "idempotency key of " + action
	if errors.Is(err, errKeyBusy) {
		return e.failure(ctx, op, &Outcome{Status: StatusInternalError, CorrelationID: correlation, Diagnostic: DiagnosticIdempotencyKeyBusy, Err: err})
	}
	return e.storeFailure(ctx, op, correlation, err)
}

// claimKey claims k for the call named claim, committed, and returns when
// it began (before the claim's statement, whose clock starts its lease);
// or answers the call from what k holds: the outcome filed under it, a
// refusal when it was claimed for another input, outcome_unknown in place
// of a claim whose time is over with none, a timeout when the call that
// claimed it runs past waitUntil, or a failure of the store.
func (e *Engine) claimKey(ctx, callerCtx context.Context, caller *Caller, c *call, k store.IdempotencyKey, claim uuid.UUID, lease time.Duration,
	correlation string, waitUntil time.Time,
) (time.Time, *Outcome) {
	op := "idempotency key of " + c.name
	pause, waited := keyPollFirst, false
	for {
		var (
			claimed bool
			found   *store.IdempotencyResult
		)
		began := time.Now()
		err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			claimed, found = false, nil // an attempt run again starts afresh
			st := store.New(tx)
			if rand.IntN(idempotencyPruneOdds) == 0 { //nolint:gosec // G404: when to prune needs no secrecy
				if err := st.IdempotencyPrune(ctx, caller.Tenant); err != nil {
					return err
				}
			}
			var err error
			if waited {
				// A retry looking again reads first: a claim's statement
				// would lock the key's row, and the filing waits on it.
				found, err = st.IdempotencyFind(ctx, k)
				if err == nil || !errors.Is(err, store.ErrNotFound) {
					return err
				}
				found = nil
			}
			if claimed, err = st.IdempotencyClaim(ctx, k, c.digest, claim, correlation, lease); err != nil {
				return err
			}
			if claimed {
				// Should the COMMIT fail, Postgres is asked whether it
				// took effect: the key claimed by this call is its witness.
				return database.ConfirmCommit(ctx, tx, keyHolds(k, claim, nil))
			}
			found, err = st.IdempotencyFind(ctx, k)
			if errors.Is(err, store.ErrNotFound) {
				return nil // given back since the claim looked: claim again
			}
			return err
		})
		switch {
		case err != nil && !claimed && errors.Is(err, store.ErrConflict) && time.Now().Before(waitUntil):
			// Another replica's claim of the key, made at the same
			// instant, committed while this one's insertion waited for it
			// at the primary key: ON CONFLICT's arbiter is
			// idempotency_keys_canonical_idx (00069), and the primary
			// key, of the same row, is checked as any other unique index,
			// which fails rather than take the conflict path. Nothing was
			// claimed: look again, as a claim made a moment later would
			// have met the key.
			waited = true
			continue
		case err != nil:
			// Nothing ran. A claim whose COMMIT may have taken effect
			// unseen is given back, so that a retry need not wait it out.
			if claimed && !errors.Is(err, database.ErrNotCommitted) {
				e.releaseKey(ctx, k, claim, correlation)
			}
			return began, e.storeFailure(ctx, op, correlation, err)
		case claimed:
			return began, nil
		case found == nil:
			continue
		case !e.digestOfInput(found.InputDigest, caller.Tenant, c.name, c.canonical):
			// The key may have been claimed under a key of the ring since
			// rotated out of activity: same input, other digest.
			return began, e.refuseInput(ctx, caller, c.name, correlation, errcode.IdempotencyKeyReused, []Issue{{
				Path: "/" + ontology.IdempotencyKeyArg, Message: "the key was sent before with a different input: send a new key for a new call"}})
		case found.Outcome != nil:
			out, err := unfileOutcome(found.Outcome)
			if err != nil {
				return began, e.storeFailure(ctx, op, correlation, err)
			}
			if (out.Status == StatusApprovalPending || out.Status == StatusExecuting) && out.ApprovalID != nil {
				// The call was staged: a repeat of it polls its approval, as
				// a repeat without a key does (answerOpen), rather than say
				// it still waits once a person has decided it; or its
				// approval was running: a repeat says how it ended.
				if polled := e.check(callerCtx, caller, out.ApprovalID.String()); polled.Status != StatusPending {
					return began, polled
				}
			}
			return began, out
		case found.Abandoned:
			if out := e.abandonedKey(ctx, k, found, correlation); out != nil {
				return began, out
			}
			continue // an outcome was filed meanwhile: read it
		}
		// The call that claimed the key runs: wait for its outcome.
		if e.onKeyWait != nil {
			e.onKeyWait()
		}
		if !time.Now().Before(waitUntil) {
			return began, e.keyWaitFailure(ctx, c.name, correlation, errKeyBusy)
		}
		select {
		case <-callerCtx.Done():
			return began, e.keyWaitFailure(ctx, c.name, correlation, callerCtx.Err())
		case <-time.After(min(pause, time.Until(waitUntil))):
		}
		pause, waited = min(2*pause, keyPollMax), true
	}
}

// keyHolds is the witness of a COMMIT that claimed k for the call named
// claim (outcome nil: none filed yet) or filed its outcome: k holds that
// claim and that outcome.
func keyHolds(k store.IdempotencyKey, claim uuid.UUID, outcome []byte) database.Witness {
	return func(ctx context.Context, tx pgx.Tx) (bool, error) {
		found, err := store.New(tx).IdempotencyFind(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil && found.Claim == claim && bytes.Equal(found.Outcome, outcome), err
	}
}

// fileKey files a call's outcome under the key its claim holds. Should the
// COMMIT fail, Postgres is asked whether it took effect (the key holding
// this outcome is its witness), and an outcome confirmed not filed is
// filed again. An outcome that may not be filed is said in the host log:
// a retry then waits for it, and answers outcome_unknown once the claim's
// time has passed, never running the call again.
func (e *Engine) fileKey(ctx context.Context, k store.IdempotencyKey, claim uuid.UUID, out *Outcome, correlation string) {
	filed, err := fileOutcome(out)
	if err == nil {
		again := true
		for attempt := 0; again && attempt < 2; attempt++ {
			again, err = e.fileOnce(ctx, k, claim, filed)
		}
	}
	if err != nil && !out.Replayed {
		e.log.WarnContext(ctx, "idempotency outcome may not be filed: a retry under the key answers outcome_unknown once its claim's time has passed",
			"action", k.Action, "correlation_id", correlation, "error", err.Error())
	}
}

// fileOnce is one attempt of fileKey. again reports a failure that took
// nothing into effect — a statement failed, so the transaction rolled
// back, or Postgres confirms its COMMIT did not commit — after which the
// outcome may be filed again.
func (e *Engine) fileOnce(ctx context.Context, k store.IdempotencyKey, claim uuid.UUID, filed []byte) (again bool, err error) {
	var saved, committing bool
	err = database.InTenant(ctx, e.store, k.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		saved, committing = false, false
		// Should the COMMIT fail, Postgres is asked whether it took
		// effect: the key holding this outcome under this claim is its
		// witness.
		err := database.ConfirmCommit(ctx, tx, keyHolds(k, claim, filed))
		if err == nil {
			saved, err = store.New(tx).IdempotencySave(ctx, k, claim, filed, e.cfg.Limits.IdempotencyKeyTTL())
		}
		committing = err == nil
		return err
	})
	switch {
	case err == nil && !saved:
		return false, errClaimGone
	case err == nil:
		return false, nil
	}
	return !committing || errors.Is(err, database.ErrNotCommitted), err
}

// releaseKey gives back a key whose call ran nothing a retry should not
// run. A key it could not give back stays claimed: a retry then waits, and
// answers outcome_unknown once the claim's time has passed.
func (e *Engine) releaseKey(ctx context.Context, k store.IdempotencyKey, claim uuid.UUID, correlation string) {
	err := database.InTenant(ctx, e.store, k.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return store.New(tx).IdempotencyRelease(ctx, k, claim)
	})
	if err != nil {
		e.log.WarnContext(ctx, "idempotency key not given back: a retry under it answers outcome_unknown once its claim's time has passed",
			"action", k.Action, "correlation_id", correlation, "error", err.Error())
	}
}

// abandonedKey files outcome_unknown in place of found, a claim of k
// whose time is over with no outcome filed, and returns it, under the
// correlation id of the call that claimed k: that call may have run (its
// replica stopped mid-call, or its outcome could not be filed), so no
// retry under the key runs it again. It returns nil when k no longer
// holds that claim: the call filed its outcome after all.
func (e *Engine) abandonedKey(ctx context.Context, k store.IdempotencyKey, found *store.IdempotencyResult, correlation string) *Outcome {
	op := "idempotency key of " + k.Action
	out := &Outcome{Status: StatusOutcomeUnknown, CorrelationID: found.CorrelationID, Err: errClaimAbandoned}
	if out.CorrelationID == "" {
		out.CorrelationID = correlation
	}
	filed, err := fileOutcome(out)
	var took bool
	if err == nil {
		err = database.InTenant(ctx, e.store, k.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			var err error
			took, err = store.New(tx).IdempotencyAbandoned(ctx, k, found.Claim, filed, e.cfg.Limits.IdempotencyKeyTTL())
			return err
		})
	}
	switch {
	case err != nil:
		return e.storeFailure(ctx, op, correlation, err)
	case !took:
		return nil
	}
	// Filed under the key in the claim's place: an answer of the key, as
	// every later retry gets it.
	out.Replayed = true
	return e.failure(ctx, op, out)
}

// keyLocks holds the keys calls in this process are running under, each
// with the calls waiting for it.
type keyLocks struct {
	mu   sync.Mutex
	held map[store.IdempotencyKey]*keyLock
}

type keyLock struct {
	token   chan struct{} // holds one token while a call runs under the key
	waiters int
}

// lock waits until no other call of this process runs under k, and returns
// the unlock; or errKeyBusy once until has passed, or ctx's error.
func (l *keyLocks) lock(ctx context.Context, k store.IdempotencyKey, until time.Time) (func(), error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[store.IdempotencyKey]*keyLock{}
	}
	kl := l.held[k]
	if kl == nil {
		kl = &keyLock{token: make(chan struct{}, 1)}
		l.held[k] = kl
	}
	kl.waiters++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if kl.waiters--; kl.waiters == 0 {
			delete(l.held, k)
		}
		l.mu.Unlock()
	}
	unlock := func() { <-kl.token; leave() }
	// A free key is taken even when the time to wait for it is over.
	select {
	case kl.token <- struct{}{}:
		return unlock, nil
	default:
	}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case kl.token <- struct{}{}:
		return unlock, nil
	case <-timer.C:
		leave()
		return nil, errKeyBusy
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
