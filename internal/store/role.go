package store

import (
	"context"

	"github.com/orangerail/orangerail/internal/db"
)

// Role is a role's standing as an auditor login.
type Role struct {
	// Auditor: the role is a direct member of orangerail_auditor.
	Auditor bool
	// Login: the role may log in, and inherits its roles' grants.
	Login bool
	// Powerful: the role is a superuser, bypasses RLS, creates roles or
	// databases, or replicates — powers no auditor may hold.
	Powerful bool
	// OtherRoles are the roles it is a direct member of besides
	// orangerail_auditor.
	OtherRoles []string
	// NamedByObjects: some object of some database of the cluster names
	// the role (it owns one, is granted a privilege on one, or a policy
	// names it).
	NamedByObjects bool
}

// RoleGet returns a role's standing, or ErrNotFound when no role has the
// name.
func (s *Store) RoleGet(ctx context.Context, name string) (*Role, error) {
	row, err := s.q.RoleGet(ctx, s.x, name)
	return one(row, err, func(r *db.RoleGetRow) *Role {
		return &Role{Auditor: r.Auditor, Login: r.Login, Powerful: r.Powerful, OtherRoles: r.OtherRoles, NamedByObjects: r.NamedByObjects}
	})
}

// AuditorGrantParams name an auditor login and a tenant.
type AuditorGrantParams struct {
	RoleName string
	TenantID string
}

// AuditorGrantAdd lets an auditor login read a tenant's rows, and reports
// whether it is new: false, the login could already. The tenant must exist
// (TenantOpen). Granting twice is granting once.
func (s *Store) AuditorGrantAdd(ctx context.Context, p *AuditorGrantParams) (bool, error) {
	n, err := s.q.AuditorGrantAdd(ctx, s.x, &db.AuditorGrantAddParams{RoleName: p.RoleName, TenantID: p.TenantID})
	return n > 0, InterpretError(err)
}

// AuditorGrantRemove stops an auditor login reading a tenant's rows, and
// reports whether it could: false, the login had no such grant.
func (s *Store) AuditorGrantRemove(ctx context.Context, p *AuditorGrantParams) (bool, error) {
	n, err := s.q.AuditorGrantRemove(ctx, s.x, &db.AuditorGrantRemoveParams{RoleName: p.RoleName, TenantID: p.TenantID})
	return n > 0, InterpretError(err)
}

// AuditorGrantedTenants lists the tenants granted to the connection's
// login, in id order.
func (s *Store) AuditorGrantedTenants(ctx context.Context) ([]string, error) {
	ids, err := s.q.AuditorGrantedTenants(ctx, s.x)
	return ids, InterpretError(err)
}

// AuditorGrant is one auditor login's grant of one tenant.
type AuditorGrant struct {
	Login  string `json:"login"`
	Tenant string `json:"tenant"`
}

// AuditorGrantList lists the auditor logins' grants, by tenant then
// login: every one, or a tenant's (tenantID not empty), or a login's
// (roleName not empty). The schema's owner reads every grant.
func (s *Store) AuditorGrantList(ctx context.Context, tenantID, roleName string) ([]*AuditorGrant, error) {
	rows, err := s.q.AuditorGrantList(ctx, s.x, &db.AuditorGrantListParams{TenantID: tenantID, RoleName: roleName})
	return all(rows, err, func(r *db.AuditorGrantListRow) *AuditorGrant {
		return &AuditorGrant{Login: r.RoleName, Tenant: r.TenantID}
	})
}
