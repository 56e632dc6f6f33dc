package store

import (
	"context"
	"time"

	"github.com/orangerail/orangerail/internal/db"
)

// DeskSession is a signed-in person's session at the approvers' desk.
type DeskSession struct {
	// IDHash is the SHA-256 of the session id the cookie carries; the id
	// itself is never stored.
	IDHash   []byte
	TenantID string
	Subject  string
	Issuer   string
	// Caller is the person as the verified token's claims made them,
	// JSON-encoded by the desk.
	Caller    []byte
	FormToken string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// DeskSessionCreate starts a session.
func (s *Store) DeskSessionCreate(ctx context.Context, d *DeskSession) error {
	return InterpretError(s.q.DeskSessionCreate(ctx, s.x, &db.DeskSessionCreateParams{IDHash: d.IDHash, TenantID: d.TenantID,
		Subject: d.Subject, Issuer: d.Issuer, Caller: d.Caller, FormToken: d.FormToken, ExpiresAt: d.ExpiresAt}))
}

// DeskSessionGet returns a live session (neither expired nor revoked) by
// its id's hash, or ErrNotFound.
func (s *Store) DeskSessionGet(ctx context.Context, idHash []byte) (*DeskSession, error) {
	row, err := s.q.DeskSessionGet(ctx, s.x, idHash)
	return one(row, err, func(r *db.OrangerailDeskSession) *DeskSession {
		return &DeskSession{IDHash: r.IDHash, TenantID: r.TenantID, Subject: r.Subject, Issuer: r.Issuer, Caller: r.Caller,
			FormToken: r.FormToken, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
	})
}

// DeskSessionRevoke ends one session.
func (s *Store) DeskSessionRevoke(ctx context.Context, idHash []byte) error {
	return InterpretError(s.q.DeskSessionRevoke(ctx, s.x, idHash))
}

// DeskSessionRevokeSubject ends every live session of one person and
// returns how many it ended.
func (s *Store) DeskSessionRevokeSubject(ctx context.Context, issuer, subject string) (int64, error) {
	n, err := s.q.DeskSessionRevokeSubject(ctx, s.x, &db.DeskSessionRevokeSubjectParams{Issuer: issuer, Subject: subject})
	return n, InterpretError(err)
}

// DeskSessionPrune forgets sessions that ended more than a day ago.
func (s *Store) DeskSessionPrune(ctx context.Context) error {
	return InterpretError(s.q.DeskSessionPrune(ctx, s.x))
}
