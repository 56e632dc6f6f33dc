package store

import (
	"context"
	"errors"
	"time"

	"github.com/orangerail/orangerail/internal/db"
)

// IdempotencyKey names one key: the tenant, the action, the caller's
// subject and the key the caller sent.
type IdempotencyKey struct {
	Tenant, Action, Subject, Key string
}

// IdempotencyResult is the result filed under a live key, and the digest of
// the input it answered.
type IdempotencyResult struct {
	InputDigest []byte
	Outcome     []byte
}

// IdempotencyClaim claims k for a first call until expiresAt, replacing an
// expired key. It reports false when a live result is filed under k: a
// concurrent claim of k waits here for the claiming transaction to end.
func (s *Store) IdempotencyClaim(ctx context.Context, k IdempotencyKey, inputDigest []byte, expiresAt time.Time) (bool, error) {
	_, err := s.q.IdempotencyClaim(ctx, s.x, &db.IdempotencyClaimParams{
		TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Key: k.Key, InputDigest: inputDigest, ExpiresAt: expiresAt,
	})
	err = InterpretError(err)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// IdempotencyFind returns the live result filed under k, or ErrNotFound.
func (s *Store) IdempotencyFind(ctx context.Context, k IdempotencyKey) (*IdempotencyResult, error) {
	row, err := s.q.IdempotencyFind(ctx, s.x, &db.IdempotencyFindParams{TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Key: k.Key})
	if err != nil {
		return nil, InterpretError(err)
	}
	return &IdempotencyResult{InputDigest: row.InputDigest, Outcome: row.Outcome}, nil
}

// IdempotencySave files the result of the first call under the key it
// claimed.
func (s *Store) IdempotencySave(ctx context.Context, k IdempotencyKey, outcome []byte) error {
	return InterpretError(s.q.IdempotencySave(ctx, s.x, &db.IdempotencySaveParams{
		Outcome: outcome, TenantID: k.Tenant, Action: k.Action, Subject: k.Subject, Key: k.Key,
	}))
}

// IdempotencyPrune forgets the tenant's expired keys.
func (s *Store) IdempotencyPrune(ctx context.Context, tenant string) error {
	return InterpretError(s.q.IdempotencyPrune(ctx, s.x, tenant))
}
