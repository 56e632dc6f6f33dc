package cli

import (
	"strings"
	"testing"
)

// TestHelpNeverPrintsTheDatabaseURLsPassword: --database-url defaults to
// $DATABASE_URL, and a command's help (--help, or a group named alone)
// says where the default comes from, never the URL itself: the password it
// carries would go to the terminal, a CI log or a support ticket's paste.
func TestHelpNeverPrintsTheDatabaseURLsPassword(t *testing.T) {
	const secret = "hunter2-Sekr1t"
	t.Setenv("DATABASE_URL", "postgres://orangerail:"+secret+"@db.example.com:5432/orangerail")
	t.Setenv(ServerEnv, "https://mcp.example.com")
	for _, args := range [][]string{
		{"serve", "--help"},
		{"migrate", "--help"},
		{"migrate", "up", "--help"},
		{"migrate"},
		{"audit", "verify", "--help"},
		{"init", "--help"},
		{"approvals", "list", "--help"},
	} {
		_, out, errOut := cli(t, args...)
		if !strings.Contains(out+errOut, "database-url") {
			t.Errorf("%v: help does not name --database-url:\n%s", args, out)
		}
		if strings.Contains(out+errOut, secret) {
			t.Errorf("%v: help prints the password of $DATABASE_URL:\n%s", args, out+errOut)
		}
	}
}
