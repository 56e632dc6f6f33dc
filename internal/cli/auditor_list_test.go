package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAuditorListIsTheOwnersWhole: `auditor list` says which logins may
// read which tenants. Run by an auditor login, Row Level Security shows it
// only its own grants: it must not print them as the whole list, exit 0
// ("only I read acme" when another login does too), but be refused as
// grant and revoke are.
func TestAuditorListIsTheOwnersWhole(t *testing.T) {
	url := testdb.New(t)
	appendSealed(t, testdb.RuntimePool(t, url), "acme", 1)
	admin := testdb.Pool(t, url)
	alice := fmt.Sprintf("auditor_%d_alice", time.Now().UnixNano()%1e9)
	bob := alice[:len(alice)-len("alice")] + "bob"
	t.Cleanup(func() {
		for _, name := range []string{alice, bob} {
			_, _ = admin.Exec(context.Background(), "DELETE FROM orangerail.auditor_grants WHERE role_name = $1", name)
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
		}
	})
	t.Setenv("AUDITOR_PASSWORD", "correct horse battery staple")
	for _, name := range []string{alice, bob} {
		if code, _, stderr := cli(t, "auditor", "grant", name, "--tenant", "acme", "--password-env", "AUDITOR_PASSWORD", "--database-url", url); code != exitOK {
			t.Fatalf("grant %s: exit %d %s", name, code, stderr)
		}
	}
	if code, out, stderr := cli(t, "auditor", "list", "--tenant", "acme", "--database-url", url); code != exitOK || !strings.Contains(out, alice) || !strings.Contains(out, bob) {
		t.Fatalf("the owner's list: exit %d\n%s%s", code, out, stderr)
	}
	// A tenant the database does not know is refused, as grant and
	// revoke refuse it: an empty list read as "nobody may read it".
	code, out, stderr := cli(t, "auditor", "list", "--tenant", "acne", "--database-url", url)
	if code != exitError || out != "" {
		t.Fatalf("the list of an unknown tenant: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")
	aliceURL := testdb.WithUser(t, url, alice, "correct horse battery staple")
	for _, args := range [][]string{{"--tenant", "acme"}, {}, {"--json"}} {
		code, out, stderr := cli(t, append([]string{"auditor", "list", "--database-url", aliceURL}, args...)...)
		if code != exitError || out != "" {
			t.Fatalf("an auditor's list %v: exit %d, printed as whole\n%s%s", args, code, out, stderr)
		}
		oneLine(t, stderr, "X_BREAK_GLASS_REFUSED")
	}
}
