package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/orangerail/orangerail/internal/store"
)

// TestRoleGet reads a role's standing, and no role as ErrNotFound.
func TestRoleGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := store.New(b.admin)
	if r, err := s.RoleGet(ctx, "postgres"); err != nil || !r.Powerful {
		t.Fatalf("postgres: %+v %v, want powerful", r, err)
	}
	// The group role is no member of itself, and cannot log in.
	if r, err := s.RoleGet(ctx, "orangerail_auditor"); err != nil || r.Auditor || r.Login || r.Powerful || len(r.OtherRoles) != 0 {
		t.Fatalf("orangerail_auditor: %+v %v", r, err)
	}
	if _, err := s.RoleGet(ctx, "orangerail_no_such_role"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such role: %v, want ErrNotFound", err)
	}
}
