package store

import (
	"context"
	"time"

	"github.com/orangerail/orangerail/internal/db"
)

// SessionAssumeRuntime makes the connection act as orangerail_runtime for
// the rest of its life: the first thing every pooled connection of the
// server does. A missing role is ErrSchemaMismatch; a login that may not
// assume it, ErrPermission.
func (s *Store) SessionAssumeRuntime(ctx context.Context) error {
	return InterpretError(s.q.SessionAssumeRuntime(ctx, s.x))
}

// QuerySessionBindParams name a backend of the query login and the tenant
// its agent SQL reads.
type QuerySessionBindParams struct {
	PID      int32
	TenantID string
}

// QuerySessionBind binds a backend of orangerail_query to a tenant before
// its agent SQL runs, and returns the backend's start time, which names
// the binding.
func (s *Store) QuerySessionBind(ctx context.Context, p *QuerySessionBindParams) (time.Time, error) {
	started, err := s.q.QuerySessionBind(ctx, s.x, &db.QuerySessionBindParams{Pid: p.PID, TenantID: p.TenantID})
	return started, InterpretError(err)
}

// QuerySessionUnbindParams name a binding.
type QuerySessionUnbindParams struct {
	PID          int32
	BackendStart time.Time
}

// QuerySessionUnbind ends a binding.
func (s *Store) QuerySessionUnbind(ctx context.Context, p *QuerySessionUnbindParams) error {
	return InterpretError(s.q.QuerySessionUnbind(ctx, s.x, &db.QuerySessionUnbindParams{Pid: p.PID, BackendStart: p.BackendStart}))
}

// SessionOperator is who a connection logged in as, for a break-glass
// decision.
type SessionOperator struct {
	// Login is the session_user: the login that connected, which no SQL
	// the connection runs can change.
	Login string
	// OwnRights: the connection acts as its login (current_user is
	// session_user), not as a role it SET ROLE to.
	OwnRights bool
	// Owner: the login owns the orangerail schema or is a superuser.
	Owner bool
}

// SessionOperatorGet reads who the connection logged in as.
func (s *Store) SessionOperatorGet(ctx context.Context) (*SessionOperator, error) {
	row, err := s.q.SessionOperator(ctx, s.x)
	if err != nil {
		return nil, InterpretError(err)
	}
	return &SessionOperator{Login: row.Login, OwnRights: row.OwnRights, Owner: row.Owner}, nil
}

// SessionActAsLoginBypassingRLS makes the rest of the transaction act with
// the login's own rights, not the role the session set, when the login
// may bypass Row Level Security (a superuser, or BYPASSRLS), and reports
// whether it did. Acting as the login is a connection's own right (RESET
// ROLE); what it gains is every tenant's rows, so it is for reads that
// must see past every tenant's scope, in a read-only transaction.
func (s *Store) SessionActAsLoginBypassingRLS(ctx context.Context) (bool, error) {
	bypasses, err := s.q.SessionLoginBypassesRLS(ctx, s.x)
	if err != nil || !bypasses {
		return false, InterpretError(err)
	}
	return true, InterpretError(s.q.SessionActAsLogin(ctx, s.x))
}

// SessionActsAsAuditor reports whether the connection acts as an auditor
// login (database.OpenAuditor's pools): a member of orangerail_auditor
// that does not act as orangerail_runtime.
func (s *Store) SessionActsAsAuditor(ctx context.Context) (bool, error) {
	auditor, err := s.q.SessionActsAsAuditor(ctx, s.x)
	return auditor, InterpretError(err)
}
