package store

import "context"

// TenantOpen makes the transaction's tenant, and the head of its empty
// chain, unless they exist (orangerail.tenant_open). It runs in a
// transaction scoped to the tenant (database.InTenant).
//
// The engine opens a tenant in a short transaction of its own before the
// tenant's first call, so that the call's writes find both committed: a
// tenant's first writes made them in their own transactions, and a second
// writer of a new tenant waited on the first's insert for as long as that
// transaction ran. Granting an auditor opens the tenant too, so that one
// granted before its first record is, to both verifiers, a whole chain of
// no records, not a tenant nothing of is visible (which they report: a
// mistyped id, or a chain deleted whole). A malformed id is
// ErrCheckViolation (tenants_id_format).
func (s *Store) TenantOpen(ctx context.Context) error {
	return InterpretError(s.q.TenantOpen(ctx, s.x))
}

// TenantList lists the tenants the executor's role may see, in id order.
func (s *Store) TenantList(ctx context.Context) ([]string, error) {
	ids, err := s.q.TenantList(ctx, s.x)
	return ids, InterpretError(err)
}
