package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestPrintErrorGivesEachJoinedErrorItsFix: errors joined (a run over
// every tenant, of which two failed) are printed a line each, whole, with
// the fix of their own code — not one line whose fix is the first's.
func TestPrintErrorGivesEachJoinedErrorItsFix(t *testing.T) {
	tenant := fmt.Errorf(`verify tenant "bad tenant": %w`, errcode.New(errcode.TenantInvalid, "the tenant id is not of the accepted form", nil))
	unavailable := fmt.Errorf("verify tenant globex: %w", errcode.New(errcode.DatabaseUnreachable, "the database did not answer", nil))
	plain := errors.New("verify tenant initech: the connection closed")
	var out bytes.Buffer
	printError(&out, errors.Join(tenant, unavailable, plain))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"orangerail: " + tenant.Error() + ". Fix: " + errcode.New(errcode.TenantInvalid, "", nil).Fix(),
		"orangerail: " + unavailable.Error() + ". Fix: " + errcode.New(errcode.DatabaseUnreachable, "", nil).Fix(),
		"orangerail: " + plain.Error(),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}

	// An error that wraps two with words of its own is one error, printed
	// whole on one line.
	out.Reset()
	both := fmt.Errorf("seal and verify: %w; %w", tenant, plain)
	printError(&out, both)
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "seal and verify: ") {
		t.Fatalf("one error wrapping two printed as:\n%s", got)
	}
}

// TestACodedLineHoldsItsCodeUnquoted: a refusal whose message needs
// quoting (a config's problems, a line each) still begins
// "orangerail: X_CODE: ", where a script reads the code; the message alone
// is quoted, on the one line. It quoted the code with it.
func TestACodedLineHoldsItsCodeUnquoted(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "serve", "--stdio", "--config", empty)
	if code != exitError || !strings.HasPrefix(stderr, `orangerail: X_CONFIG_INVALID: "the config has 1 problem(s):\n`) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d: %q", code, stderr)
	}
	var out bytes.Buffer
	printError(&out, fmt.Errorf("tenant \"a\nb\": %w", errcode.New(errcode.TenantInvalid, "two\nlines", nil)))
	if want := `orangerail: "tenant \"a\nb\": "X_TENANT_INVALID: "two\nlines". Fix: `; !strings.HasPrefix(out.String(), want) {
		t.Errorf("a wrapped coded error: %q, want it to begin %q", out.String(), want)
	}
}

// TestOperatorMistakesAreCoded: a file the command line names that cannot
// be used, and a flag's value out of range, are one coded line each, not
// the system's or the database's bare words.
func TestOperatorMistakesAreCoded(t *testing.T) {
	t.Setenv("ORANGERAIL_CONFIG", "")
	dir := t.TempDir()
	key := filepath.Join(dir, "checkpoint.key")
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", key)
	if code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	vkey = strings.TrimSpace(vkey)
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"audit", "check-proof", "--keys-file", missing}, "X_FILE_UNUSABLE"},

		{[]string{"audit", "check-proof", "--key", vkey, "--checkpoint", missing, missing}, "X_FILE_UNUSABLE"},

		{[]string{"audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", key}, "X_FILE_UNUSABLE"},
		{[]string{"webhooks", "list", "--tenant", "acme", "--limit", "-5"}, "X_USAGE"},
		{[]string{"webhooks", "list", "--tenant", "acme", "--limit", "0"}, "X_USAGE"},
		{[]string{"approvals", "list", "--break-glass", "--reason", "r", "--tenant", "acme"}, "X_USAGE"},
	} {
		code, out, stderr := cli(t, c.args...)
		if code != exitError || out != "" || !strings.Contains(stderr, c.code+": ") {
			t.Errorf("%v: exit %d %q %q, want %s", c.args, code, out, stderr, c.code)
			continue
		}
		oneLine(t, stderr, c.code)
	}
	// A proof file that cannot be read is said on its line, as every
	// other's outcome, and the run exits 2: it could not check them all.
	code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, missing, dir)
	if code != exitError || !strings.Contains(out, missing+": FAILED: X_FILE_UNUSABLE: open ") ||
		!strings.Contains(out, dir+": FAILED: X_FILE_UNUSABLE: read ") || !strings.Contains(stderr, "X_FILE_UNUSABLE: 2 of 2 file(s) could not be read") {
		t.Fatalf("check-proof of files it cannot read: exit %d\n%s%s", code, out, stderr)
	}
}

// TestFlagHelpNamesItsValueInOneWord: pflag takes the first backquoted
// words of a flag's usage as the name of its value (--server `URL`), so a
// command quoted in backquotes there printed as --server orangerail login.
func TestFlagHelpNamesItsValueInOneWord(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { // its persistent flags too
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: its value is named %q in help", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestALoginWithoutAPrivilegeIsCoded: a command run as a login that lacks
// a privilege it needs — migrate by a login of no orangerail role — is
// one coded line, not the database's words under goose's.
func TestALoginWithoutAPrivilegeIsCoded(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	login := "cli_nobody_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+login+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE "+login) })
	for _, args := range [][]string{{"migrate", "status"}, {"migrate", "up"}} {
		code, _, stderr := cli(t, append(args, "--database-url", testdb.WithUser(t, url, login, ""))...)
		if code != exitError || strings.Contains(stderr, "SQLSTATE") || !strings.Contains(stderr, "lacks a privilege the command needs") {
			t.Fatalf("%v as a login of no role: exit %d %s", args, code, stderr)
		}
		oneLine(t, stderr, "X_DATABASE_ROLE_MISSING")
	}
}
