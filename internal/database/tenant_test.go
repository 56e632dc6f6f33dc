package database_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestTenantPatternMatchesConstraint holds ValidateTenantID and the
// tenants_id_format check constraint to one rule.
func TestTenantPatternMatchesConstraint(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.New(t))
	samples := []string{
		"acme", "a", "A9", "org_123", "t.e-s:t@x", "0", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"", "-acme", "_a", "acme corp", "acme/1", "ümlaut", "a\x00b", "a\nb", "a'b", `a"b`, "a;DROP",
	}
	for _, s := range samples {
		goOK := database.ValidateTenantID(s) == nil
		_, err := pool.Exec(context.Background(), "INSERT INTO orangerail.tenants (id) VALUES ($1)", s)
		if dbOK := err == nil; goOK != dbOK {
			t.Errorf("tenant %q: Go accepts=%v, database accepts=%v (%v)", s, goOK, dbOK, err)
		}
	}
}
