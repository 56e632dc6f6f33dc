// Package engine is orangerail's transport-free core: the governed lifecycle
// and its hash-chained audit log. It never learns which transport called it.
package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/store"
)

// AuditVersion is the version of the audit entry format, the "v" member of
// every entry.
const AuditVersion = 1

// atLayout is how an entry spells its time: UTC, always six fractional
// digits, so that the text and Postgres' microsecond timestamptz round-trip.
const atLayout = "2006-01-02T15:04:05.000000Z"

// HashSize is the size of a chain hash (SHA-256).
const HashSize = sha256.Size

// ActorKind says who caused an audit record.
type ActorKind string

// The kinds of actor. orangerail.audit_entry_columns accepts the same
// kinds (migrations/00010); a test holds them equal.
const (
	ActorAgent ActorKind = "agent"
	ActorHuman ActorKind = "human"
	// ActorOperator is a login that owns the database deciding around the
	// API (DecideBreakGlass); its subject is the database session_user.
	ActorOperator ActorKind = "operator"
	ActorSystem   ActorKind = "system"
)

// ActorKinds returns every kind of actor, sorted.
func ActorKinds() []ActorKind { return []ActorKind{ActorAgent, ActorHuman, ActorOperator, ActorSystem} }

// Actor is who caused an audit record.
type Actor struct {
	Subject string    `json:"subject"`
	Kind    ActorKind `json:"kind"`
	// Issuer is the issuer that verified the token, when one did; records
	// written before it was kept have none, and still verify.
	Issuer string `json:"issuer,omitempty"`
}

// Record is one audit record before it is written. Tenant, At,
// CorrelationID, Phase, Actor and DevMode are always present; the payload
// members are present when set.
type Record struct {
	Tenant        string
	At            time.Time
	CorrelationID string
	Phase         Phase
	Action        string
	Actor         Actor
	DevMode       bool
	ApprovalID    *uuid.UUID

	// Input is the call's input, Prior the target's state before an
	// execution, Result what an execution returned: JSON values, each made
	// canonical in the entry.
	Input  json.RawMessage
	Prior  json.RawMessage
	Result json.RawMessage
	// InputDigest, with approvals.seal_inputs, stands in for Input: the
	// input's digest (hex), which names the input without holding it, so
	// that a shredded input leaves nothing readable in the chain.
	InputDigest string
	// Error is the full underlying error text of a failed outcome: the audit
	// log is an operator artifact.
	Error string
	// Diagnostic classifies a failure from a closed set.
	Diagnostic string
	// Attempt is an effect_attempt record's attempt.
	Attempt *EffectAttempt
}

// Entry returns the record's canonical bytes (RFC 8785): the exact bytes the
// audit table stores and the chain hashes. The members are written in one
// pass, in their canonical order (every name is ASCII, so RFC 8785's
// order is the bytes'), each value canonical as it is written: the
// entry jcs.Marshal would make of the record's wire form — encoding/json's
// reading of each Go value, omitempty members left out — without that
// form's three passes (TestEntryIsTheMarshalledForm holds them equal).
func (r *Record) Entry() ([]byte, error) {
	if r.At.IsZero() {
		return nil, errors.New("audit record has no time")
	}
	var input json.RawMessage
	if len(r.Input) > 0 {
		var err error
		if input, err = jcs.Canonicalize(r.Input); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	// A row or a result may hold numbers no double holds (a bigint, a
	// numeric): they are kept exactly, as strings.
	prior, err := lossless(r.Prior)
	if err != nil {
		return nil, fmt.Errorf("prior state: %w", err)
	}
	result, err := lossless(r.Result)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	o := jsonObject{b: make([]byte, 0, 320+len(input)+len(prior)+len(result)+len(r.Error))}
	o.open()
	o.optionalString("action", r.Action)
	o.member("actor")
	o.open()
	o.optionalString("issuer", r.Actor.Issuer)
	o.string("kind", string(r.Actor.Kind))
	o.string("subject", r.Actor.Subject)
	o.close()
	if r.ApprovalID != nil {
		o.string("approval_id", r.ApprovalID.String())
	}
	o.string("at", r.At.UTC().Truncate(time.Microsecond).Format(atLayout))
	if a := r.Attempt; a != nil {
		// What the attempt was, never a header, a body or a URL, which
		// can carry what the audit log must not; the idempotency key is
		// the one header value recorded, a random one the effect made.
		o.member("attempt")
		o.open()
		o.integer("duration_ms", a.Duration.Milliseconds())
		o.optionalString("failure", string(a.Failure))
		o.optionalString("idempotency_key", a.IdempotencyKey)
		o.integer("number", int64(a.Number))
		o.boolean("sent", a.Sent)
		if a.Status != 0 {
			o.integer("status", int64(a.Status))
		}
		o.close()
	}
	o.string("correlation_id", r.CorrelationID)
	o.boolean("dev_mode", r.DevMode)
	o.optionalString("diagnostic", r.Diagnostic)
	o.optionalString("error", storable(r.Error))
	o.optionalRaw("input", input)
	o.optionalString("input_digest", r.InputDigest)
	o.string("phase", string(r.Phase))
	o.optionalRaw("prior", prior)
	o.optionalRaw("result", result)
	o.string("tenant", r.Tenant)
	o.integer("v", AuditVersion)
	o.close()
	if o.err != nil {
		return nil, o.err
	}
	return o.b, nil
}

// jsonObject writes a JSON object's members, and objects within it, in the
// order it is given them; a number no double holds is its error.
type jsonObject struct {
	b     []byte
	first bool // the next member is its object's first
	err   error
}

func (o *jsonObject) open() { o.b, o.first = append(o.b, '{'), true }

func (o *jsonObject) close() { o.b, o.first = append(o.b, '}'), false }

func (o *jsonObject) member(name string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, '"', ':')
}

func (o *jsonObject) string(name, v string) {
	o.member(name)
	o.b = jcs.AppendGoString(o.b, v)
}

// optionalString is string, left out when v is empty (omitempty).
func (o *jsonObject) optionalString(name, v string) {
	if v != "" {
		o.string(name, v)
	}
}

// optionalRaw writes v, canonical already, left out when it is empty.
func (o *jsonObject) optionalRaw(name string, v []byte) {
	if len(v) > 0 {
		o.member(name)
		o.b = append(o.b, v...)
	}
}

func (o *jsonObject) boolean(name string, v bool) {
	o.member(name)
	o.b = strconv.AppendBool(o.b, v)
}

func (o *jsonObject) integer(name string, v int64) {
	o.member(name)
	b, err := jcs.AppendInt(o.b, v)
	if err != nil {
		o.err = cmp.Or(o.err, fmt.Errorf("%s: %w", name, err))
		return
	}
	o.b = b
}

// storable spells each U+0000 of free text as the six characters \u0000:
// Postgres' jsonb, which the audit table parses every entry with, cannot
// hold the character, and an operator's text that carries one must not
// block the record it explains.
func storable(s string) string { return strings.ReplaceAll(s, "\x00", `\u0000`) }

// Hash is a chain hash. It prints, and encodes to JSON, as hex.
type Hash []byte

func (h Hash) String() string { return hex.EncodeToString(h) }

// MarshalText encodes h as hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

func lossless(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	return jcs.CanonicalizeLossless(raw)
}

// Link is a position in a tenant's chain.
type Link struct {
	Seq  int64
	Hash Hash
}

// Genesis returns the prev_hash of a chain's first record: 32 zero bytes,
// a new slice each call.
func Genesis() Hash { return make(Hash, HashSize) }

// ChainHash returns the hash of the record at seq with the given canonical
// entry, following the previous link's hash:
//
//	sha256(prev || int8send(seq) || sha256(entry))
//
// orangerail.audit_seal computes the same in SQL.
func ChainHash(prev []byte, seq int64, entry []byte) Hash {
	return link(prev, seq, sha256.Sum256(entry))
}

// link is ChainHash given the entry's own hash.
func link(prev []byte, seq int64, entryHash [HashSize]byte) Hash {
	sum := linkSum(prev, seq, entryHash)
	return sum[:]
}

// linkSum is link as an array, which the verifier computes for every
// record without allocating.
func linkSum(prev []byte, seq int64, entryHash [HashSize]byte) [HashSize]byte {
	var buf [HashSize + 8 + HashSize]byte
	copy(buf[:HashSize], prev)
	// int8send(seq): the two's-complement bytes of seq, as Postgres sends
	// an int8 (seq > 0 by the table's CHECK).
	binary.BigEndian.PutUint64(buf[HashSize:HashSize+8], uint64(seq)) //nolint:gosec // the bit pattern is the point, not the value
	copy(buf[HashSize+8:], entryHash[:])
	return sha256.Sum256(buf[:])
}

// AppendAudit appends rec, unsealed, to its tenant's chain. It must run in
// a transaction scoped to rec.Tenant (database.InTenant); the record
// commits or rolls back with that transaction, and once committed a sealer
// gives it its seq and link (Seal). If it fails, the caller must not run
// the effect the record announces.
func AppendAudit(ctx context.Context, tx store.DBTX, rec *Record) error {
	entry, err := encodeEntry(rec)
	if err != nil {
		return err
	}
	if err := store.New(tx).AuditAppend(ctx, entry); err != nil {
		return classifyAuditError(err)
	}
	return nil
}

// appendConfirmed queues rec's append on q, which is sent on stx, and asks
// InTenant to confirm stx's COMMIT should it fail (database.ConfirmCommit)
// with the record as its witness: a committed record is never removed from
// the chain, and no other transaction appends its bytes (its correlation
// id, phase and time to the microsecond).
func appendConfirmed(ctx context.Context, q *database.Queue, stx pgx.Tx, rec *Record) error {
	entry, err := encodeEntry(rec)
	if err != nil {
		return err
	}
	_ = store.New(q).AuditAppend(ctx, entry) // queued: its error is q.Send's
	q.ConfirmCommit(stx, func(ctx context.Context, tx pgx.Tx) (bool, error) {
		return store.New(tx).AuditEntryExists(ctx, rec.CorrelationID, entry)
	})
	return nil
}

// encodeEntry returns rec's entry, or a coded error when it cannot be
// encoded.
func encodeEntry(rec *Record) ([]byte, error) {
	entry, err := rec.Entry()
	if err != nil {
		return nil, errcode.New(errcode.AuditEntryInvalid, "the audit record could not be encoded", err)
	}
	return entry, nil
}

// classifyAuditError maps the store's refusals of an audit record to codes.
func classifyAuditError(err error) error {
	if coded, ok := auditErrorCode(err); ok {
		return coded
	}
	return fmt.Errorf("append audit record: %w", err)
}

// auditErrorCode returns err as a coded error, and true, when it is a
// refusal an audit append (or an audited approval change) raises.
func auditErrorCode(err error) (error, bool) {
	switch {
	case errors.Is(err, store.ErrAppendOnly):
		return errcode.New(errcode.AuditAppendOnly, "audit history cannot change", err), true
	case errors.Is(err, store.ErrAuditEntryInvalid),
		// Bytes Postgres cannot read as the entry: not UTF-8, not JSON, a
		// date that does not exist, a \u0000 jsonb cannot hold.
		errors.Is(err, store.ErrMalformedValue):
		return errcode.New(errcode.AuditEntryInvalid, "the database refused the audit record", err), true
	case errors.Is(err, store.ErrTenantMismatch):
		return errcode.New(errcode.TenantInvalid, "the audit record's tenant is not the transaction's", err), true
	case errors.Is(err, store.ErrCheckViolation): // tenants_id_format
		return errcode.New(errcode.TenantInvalid, "the tenant id is not of the accepted form", err), true
	}
	return nil, false
}
