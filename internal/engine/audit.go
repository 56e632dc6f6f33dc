// Package engine is orangerail's transport-free core: the governed lifecycle
// and its hash-chained audit log. It never learns which transport called it.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

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

// entry is the wire form of a Record. Field names are the entry's member
// names; the canonical form sorts them.
type entry struct {
	V             int             `json:"v"`
	Tenant        string          `json:"tenant"`
	At            string          `json:"at"`
	CorrelationID string          `json:"correlation_id"`
	Phase         Phase           `json:"phase"`
	Action        string          `json:"action,omitempty"`
	Actor         Actor           `json:"actor"`
	DevMode       bool            `json:"dev_mode"`
	ApprovalID    *uuid.UUID      `json:"approval_id,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	InputDigest   string          `json:"input_digest,omitempty"`
	Prior         json.RawMessage `json:"prior,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
	Diagnostic    string          `json:"diagnostic,omitempty"`
	Attempt       *attemptEntry   `json:"attempt,omitempty"`
}

// attemptEntry is an EffectAttempt's wire form: never a header, a body or
// a URL, which can carry what the audit log must not.
type attemptEntry struct {
	Number     int            `json:"number"`
	Status     int            `json:"status,omitempty"`
	Failure    AttemptFailure `json:"failure,omitempty"`
	Sent       bool           `json:"sent"`
	DurationMS int64          `json:"duration_ms"`
}

func (a *EffectAttempt) entry() *attemptEntry {
	if a == nil {
		return nil
	}
	return &attemptEntry{Number: a.Number, Status: a.Status, Failure: a.Failure, Sent: a.Sent, DurationMS: a.Duration.Milliseconds()}
}

// Entry returns the record's canonical bytes (RFC 8785): the exact bytes the
// audit table stores and the chain hashes.
func (r *Record) Entry() ([]byte, error) {
	if r.At.IsZero() {
		return nil, errors.New("audit record has no time")
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
	return jcs.Marshal(&entry{
		V:             AuditVersion,
		Tenant:        r.Tenant,
		At:            r.At.UTC().Truncate(time.Microsecond).Format(atLayout),
		CorrelationID: r.CorrelationID,
		Phase:         r.Phase,
		Action:        r.Action,
		Actor:         r.Actor,
		DevMode:       r.DevMode,
		ApprovalID:    r.ApprovalID,
		Input:         r.Input,
		InputDigest:   r.InputDigest,
		Prior:         prior,
		Result:        result,
		Error:         storable(r.Error),
		Diagnostic:    r.Diagnostic,
		Attempt:       r.Attempt.entry(),
	})
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
	var buf [HashSize + 8 + HashSize]byte
	copy(buf[:HashSize], prev)
	// int8send(seq): the two's-complement bytes of seq, as Postgres sends
	// an int8 (seq > 0 by the table's CHECK).
	binary.BigEndian.PutUint64(buf[HashSize:HashSize+8], uint64(seq)) //nolint:gosec // the bit pattern is the point, not the value
	copy(buf[HashSize+8:], entryHash[:])
	sum := sha256.Sum256(buf[:])
	return sum[:]
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
