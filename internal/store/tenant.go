package store

import "context"

// TenantEnsure makes the tenant, and the head of its empty chain, if they
// do not exist: a tenant made before its first record (its auditor
// granted first) is, to both verifiers, a whole chain of no records, not
// a tenant nothing of is visible (which they report: a mistyped id, or a
// chain deleted whole). It runs in a transaction scoped to the tenant
// (database.InTenant), which the heads' policy asks for. A malformed id
// is ErrCheckViolation (tenants_id_format).
func (s *Store) TenantEnsure(ctx context.Context, id string) error {
	if err := s.q.TenantEnsure(ctx, s.x, id); err != nil {
		return InterpretError(err)
	}
	return InterpretError(s.q.AuditHeadEnsure(ctx, s.x, id))
}

// TenantList lists the tenants the executor's role may see, in id order.
func (s *Store) TenantList(ctx context.Context) ([]string, error) {
	ids, err := s.q.TenantList(ctx, s.x)
	return ids, InterpretError(err)
}
