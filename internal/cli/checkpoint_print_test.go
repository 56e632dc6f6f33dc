package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAuditCheckpointPrintsNoEscape: `audit checkpoint` prints the latest
// stored note, which is the database's text: the trigger that stores a
// checkpoint checks the note's body, not its signature lines. A note with a
// terminal escape after its body (stored around the trigger) must not
// reach the auditor's terminal raw — clearing the screen, or hiding what
// follows — but be refused, coded, as no signed note holds one.
func TestAuditCheckpointPrintsNoEscape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	runtime := testdb.RuntimePool(t, url)
	appendSealed(t, runtime, "acme", 3)
	keyFile := filepath.Join(t.TempDir(), "checkpoint.key")
	if code, _, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile); code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	if _, err := engine.SignCheckpoint(ctx, runtime, "acme", signerOf(t, keyFile), "orangerail.test/orders"); err != nil {
		t.Fatal(err)
	}
	code, note, stderr := cli(t, "audit", "checkpoint", "--database-url", url, "--tenant", "acme")
	if code != exitOK || !strings.HasPrefix(note, "orangerail.test/orders/acme\n3\n") {
		t.Fatalf("checkpoint: exit %d\n%s%s", code, note, stderr)
	}

	admin := testdb.Pool(t, url)
	appendSealed(t, runtime, "acme", 1)
	forged := strings.Replace(note, "3\n", "4\n", 1) + "\x1b[2J\x1b[H— orangerail.test looks fine\n"
	if _, err := admin.Exec(ctx, "ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER USER"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `INSERT INTO orangerail.audit_checkpoints (tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note)
		SELECT tenant_id, 4, root_hash, frontier, origin, key_name, key_hash, verifier_key, $1 FROM orangerail.audit_checkpoints
		WHERE tenant_id = 'acme' AND size = 3`, forged); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "audit", "checkpoint", "--database-url", url, "--tenant", "acme")
	if strings.Contains(out+stderr, "\x1b") || code != exitError {
		t.Fatalf("a stored note's escape reached the terminal: exit %d\n%q\n%q", code, out, stderr)
	}
	oneLine(t, stderr, "X_AUDIT_CHAIN_BROKEN")
}
