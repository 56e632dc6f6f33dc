package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// IdempotencyKey names one key: the tenant, the action, the caller — its
// subject and the issuer that vouched for it ("" for none) — and the key
// the caller sent.
type IdempotencyKey struct {
	Tenant, Action, Subject, Issuer, Key string
}

// IdempotencyResult is what a live key holds: the digest of its call's
// input, and the call's filed result, or (Outcome nil) the claim of the
// call running under it, whether that claim's time is over, and the
// call's correlation id.
type IdempotencyResult struct {
	InputDigest   []byte
	Outcome       []byte
	Claim         uuid.UUID
	CorrelationID string
	Abandoned     bool
}

// IdempotencyClaim claims k for the call named claim and correlation,
// which may take lease by the database's clock; an expired key whose
// outcome is filed is replaced. It reports false when k is live (filed,
// unexpired) or claimed by a call: a claim never expires.
func (s *Store) IdempotencyClaim(ctx context.Context, k IdempotencyKey, inputDigest []byte, claim uuid.UUID, correlation string, lease time.Duration) (bool, error) {
	_, err := s.q.IdempotencyClaim(ctx, s.x, &db.IdempotencyClaimParams{
		TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Issuer: k.Issuer, Key: k.Key, InputDigest: inputDigest,
		LeaseSeconds: lease.Seconds(), Claim: &claim, CorrelationID: &correlation,
	})
	err = InterpretError(err)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// IdempotencyFind returns what the live key k holds, or ErrNotFound.
func (s *Store) IdempotencyFind(ctx context.Context, k IdempotencyKey) (*IdempotencyResult, error) {
	row, err := s.q.IdempotencyFind(ctx, s.x, &db.IdempotencyFindParams{TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Issuer: k.Issuer, Key: k.Key})
	if err != nil {
		return nil, InterpretError(err)
	}
	r := &IdempotencyResult{InputDigest: row.InputDigest, Outcome: row.Outcome, Abandoned: row.Abandoned}
	if row.Claim != nil {
		r.Claim = *row.Claim
	}
	if row.CorrelationID != nil {
		r.CorrelationID = *row.CorrelationID
	}
	return r, nil
}

// IdempotencySave files a call's result under k, which its claim holds,
// kept for ttl; false when the claim does not hold k (it was given up, or
// a result is filed).
func (s *Store) IdempotencySave(ctx context.Context, k IdempotencyKey, claim uuid.UUID, outcome []byte, ttl time.Duration) (bool, error) {
	n, err := s.q.IdempotencySave(ctx, s.x, &db.IdempotencySaveParams{
		Outcome: outcome, TtlSeconds: ttl.Seconds(), TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Issuer: k.Issuer, Key: k.Key, Claim: &claim,
	})
	return n == 1, InterpretError(err)
}

// IdempotencyAbandoned files outcome, kept for ttl, in place of claim,
// whose time is over with no result filed; false when that is no longer
// what k holds.
func (s *Store) IdempotencyAbandoned(ctx context.Context, k IdempotencyKey, claim uuid.UUID, outcome []byte, ttl time.Duration) (bool, error) {
	n, err := s.q.IdempotencyAbandoned(ctx, s.x, &db.IdempotencyAbandonedParams{
		Outcome: outcome, TtlSeconds: ttl.Seconds(), TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Issuer: k.Issuer, Key: k.Key, Claim: &claim,
	})
	return n == 1, InterpretError(err)
}

// IdempotencyRelease gives k back, when claim holds it with no result:
// its call ran nothing a retry should not run.
func (s *Store) IdempotencyRelease(ctx context.Context, k IdempotencyKey, claim uuid.UUID) error {
	_, err := s.q.IdempotencyRelease(ctx, s.x, &db.IdempotencyReleaseParams{
		TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Issuer: k.Issuer, Key: k.Key, Claim: &claim,
	})
	return InterpretError(err)
}

// IdempotencyPrune forgets the tenant's expired keys.
func (s *Store) IdempotencyPrune(ctx context.Context, tenant string) error {
	return InterpretError(s.q.IdempotencyPrune(ctx, s.x, tenant))
}
