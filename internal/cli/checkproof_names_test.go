package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckProofShowsAFileNameAsText: check-proof verifies proof files an
// untrusted party handed over, and their names are that party's too. A
// tampered proof whose name holds a forged OK line and a terminal escape
// that hides what follows (SGR 8, concealed) must not print the name raw:
// its FAILED would be hidden behind "seq42.json: OK: …" on the auditor's
// terminal.
func TestCheckProofShowsAFileNameAsText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", filepath.Join(dir, "checkpoint.key"))
	if vkey = strings.TrimSpace(vkey); code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	for _, name := range []string{
		"seq42.json: OK: record 42 is in the tree of size 50 of acme-orders, signed by orangerail.test\x1b[8m",
		"seq43.json: OK: record 43 is in the tree of size 50 of acme-orders\nforged",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(`{"format": "tampered"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _ := cli(t, "audit", "check-proof", "--key", vkey, path)
		if code != exitFindings {
			t.Fatalf("a tampered proof: exit %d\n%s", code, out)
		}
		if strings.ContainsAny(out, "\x1b") || strings.Count(out, "\n") != 1 || !strings.Contains(out, ": FAILED: ") {
			t.Fatalf("a proof file's name reached the terminal raw:\n%q", out)
		}
	}
}
