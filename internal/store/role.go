package store

import (
	"context"

	"github.com/orangerail/orangerail/internal/db"
)

// Role is a role's standing as an auditor login.
type Role struct {
	// Auditor: the role is a member of orangerail_auditor.
	Auditor bool
	// Powerful: the role is a superuser, bypasses RLS or creates roles —
	// powers no auditor may hold.
	Powerful bool
}

// RoleGet returns a role's standing, or ErrNotFound when no role has the
// name.
func (s *Store) RoleGet(ctx context.Context, name string) (*Role, error) {
	row, err := s.q.RoleGet(ctx, s.x, name)
	return one(row, err, func(r *db.RoleGetRow) *Role { return &Role{Auditor: r.Auditor, Powerful: r.Powerful} })
}

// AuditorGrantParams name an auditor login and a tenant.
type AuditorGrantParams struct {
	RoleName string
	TenantID string
}

// AuditorGrantAdd lets an auditor login read a tenant's rows. The tenant
// must exist (TenantOpen). Granting twice is granting once.
func (s *Store) AuditorGrantAdd(ctx context.Context, p *AuditorGrantParams) error {
	return InterpretError(s.q.AuditorGrantAdd(ctx, s.x, &db.AuditorGrantAddParams{RoleName: p.RoleName, TenantID: p.TenantID}))
}

// AuditorGrantRemove stops an auditor login reading a tenant's rows.
// Removing a grant that does not exist does nothing.
func (s *Store) AuditorGrantRemove(ctx context.Context, p *AuditorGrantParams) error {
	return InterpretError(s.q.AuditorGrantRemove(ctx, s.x, &db.AuditorGrantRemoveParams{RoleName: p.RoleName, TenantID: p.TenantID}))
}

// AuditorGrantedTenants lists the tenants granted to the connection's
// login, in id order.
func (s *Store) AuditorGrantedTenants(ctx context.Context) ([]string, error) {
	ids, err := s.q.AuditorGrantedTenants(ctx, s.x)
	return ids, InterpretError(err)
}
