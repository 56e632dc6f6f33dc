package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAKeyGivenTwiceIsNoFinding: after a rotation the auditor keeps every
// public key in a --keys-file and also names the current one with --key.
// The same key given twice must not turn an untouched log's checkpoints
// into note_invalid findings (a false alarm of tampering, exit 1), nor
// make check-proof fail a proof that holds.
func TestAKeyGivenTwiceIsNoFinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	pool := testdb.RuntimePool(t, url)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "checkpoint.key")
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile)
	if code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	vkey = strings.TrimSpace(vkey)
	keysFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keysFile, []byte("# every key this deployment used\n"+vkey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appendSealed(t, pool, "acme", 3)
	if _, err := engine.SignCheckpoint(ctx, pool, "acme", signerOf(t, keyFile), "orangerail.test/orders"); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--key", vkey, "--keys-file", keysFile); code != exitOK || !strings.Contains(out, "tenant acme: OK") {
		t.Fatalf("verify with the key given twice: exit %d\n%s%s", code, out, stderr)
	}
	proof := filepath.Join(dir, "seq2.json")
	if code, _, stderr := cli(t, "audit", "prove", "--database-url", url, "--tenant", "acme", "--seq", "2", "--out", proof); code != exitOK {
		t.Fatalf("prove: exit %d %s", code, stderr)
	}
	if code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, "--keys-file", keysFile, proof); code != exitOK {
		t.Fatalf("check-proof with the key given twice: exit %d\n%s%s", code, out, stderr)
	}
}
