package store

import "context"

// TenantEnsure makes the tenant if it does not exist. A malformed id is
// ErrCheckViolation (tenants_id_format).
func (s *Store) TenantEnsure(ctx context.Context, id string) error {
	return InterpretError(s.q.TenantEnsure(ctx, s.x, id))
}

// TenantList lists the tenants the executor's role may see, in id order.
func (s *Store) TenantList(ctx context.Context) ([]string, error) {
	ids, err := s.q.TenantList(ctx, s.x)
	return ids, InterpretError(err)
}
