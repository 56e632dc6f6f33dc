package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/testdb"
)

// appendSealed appends n records to tenant's chain and seals them.
func appendSealed(t *testing.T, pool *pgxpool.Pool, tenant string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: tenant, At: time.Now(), CorrelationID: "c" + string(rune('a'+i)),
				Phase: engine.PhaseStaged, Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := engine.SealTenant(ctx, pool, tenant); err != nil {
		t.Fatal(err)
	}
}

// runWithStdin runs the command line with stdin.
func runWithStdin(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(bytes.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err != nil {
		if errors.Is(err, errFindings) {
			return exitFindings, out.String(), errOut.String()
		}
		return exitError, out.String(), err.Error()
	}
	return exitOK, out.String(), errOut.String()
}

// signerOf is the signer of the private key in keyFile.
func signerOf(t *testing.T, keyFile string) *checkpoint.Signer {
	t.Helper()
	skey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoint.NewSigner(string(skey))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func TestAuditCheckpointsAndProofs(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	pool := testdb.RuntimePool(t, url)
	dir := t.TempDir()

	// A key: the private half to a new file only the owner reads, the
	// public half printed.
	keyFile := filepath.Join(dir, "checkpoint.key")
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile)
	vkey = strings.TrimSpace(vkey)
	if code != exitOK || strings.Contains(vkey, "PRIVATE") || !strings.HasPrefix(vkey, "orangerail.test+") {
		t.Fatalf("generate: exit %d %q %s", code, vkey, stderr)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if code, _, _ := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile); code != exitError {
		t.Fatalf("generate over an existing key: exit %d", code)
	}
	code, _, stderr = cli(t, "audit", "checkpoint-key", "generate", "--name", "a+b", "--out", filepath.Join(dir, "other.key"))
	if code != exitError {
		t.Fatalf("a bad key name: exit %d", code)
	}
	oneLine(t, stderr, "X_CHECKPOINT_KEY_INVALID")
	skey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer := signerOf(t, keyFile)

	appendSealed(t, pool, "acme", 3)
	appendSealed(t, pool, "globex", 2)
	if _, err := engine.SignCheckpoint(ctx, pool, "acme", signer, "orangerail.test/orders"); err != nil {
		t.Fatal(err)
	}
	// The auditor keeps the checkpoint of size 3.
	code, kept, stderr := cli(t, "audit", "checkpoint", "--database-url", url, "--tenant", "acme")
	if code != exitOK {
		t.Fatalf("checkpoint: exit %d %s", code, stderr)
	}
	keptFile := filepath.Join(dir, "kept.note")
	if err := os.WriteFile(keptFile, []byte(kept), 0o600); err != nil {
		t.Fatal(err)
	}
	appendSealed(t, pool, "acme", 2)
	if _, err := engine.SignCheckpoint(ctx, pool, "acme", signer, "orangerail.test/orders"); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := cli(t, "audit", "checkpoint", "--database-url", url, "--tenant", "acme")
	if code != exitOK {
		t.Fatalf("checkpoint: exit %d %s", code, stderr)
	}
	known, err := checkpoint.Verifiers([]string{vkey})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := checkpoint.OpenNote(out, known); err != nil || c.Size != 5 || c.Origin != "orangerail.test/orders/acme" {
		t.Fatalf("the printed checkpoint: %+v %v\n%s", c, err, out)
	}
	code, out, _ = cli(t, "audit", "checkpoint", "--database-url", url, "--tenant", "acme", "--json")
	var view CheckpointView
	if err := json.Unmarshal([]byte(out), &view); code != exitOK || err != nil || view.Size != 5 || view.VerifierKey != vkey || view.KeyID != signer.KeyID() {
		t.Fatalf("checkpoint --json: exit %d %v\n%s", code, err, out)
	}

	inclusion, consistency := filepath.Join(dir, "seq2.json"), filepath.Join(dir, "3to5.json")
	for _, args := range [][]string{{"--seq", "2", "--out", inclusion}, {"--from", "3", "--out", consistency}} {
		if code, out, stderr := cli(t, append([]string{"audit", "prove", "--database-url", url, "--tenant", "acme"}, args...)...); code != exitOK ||
			out != "Wrote the proof to "+args[3]+".\n" {
			t.Fatalf("prove %v: exit %d %q %s", args, code, out, stderr)
		}
	}
	// A proof is never written over a file: the one there is kept.
	before, err := os.ReadFile(inclusion)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, "audit", "prove", "--database-url", url, "--tenant", "acme", "--seq", "1", "--out", inclusion); code != exitError ||
		!strings.Contains(stderr, "X_FILE_UNUSABLE: ") || !strings.Contains(stderr, "file exists") {
		t.Fatalf("prove over an existing file: exit %d %q", code, stderr)
	}
	if after, err := os.ReadFile(inclusion); err != nil || string(after) != string(before) {
		t.Fatalf("prove over an existing file changed it: %v", err)
	}
	code, out, stderr = cli(t, "audit", "check-proof", "--key", vkey, inclusion, consistency)
	if code != exitOK || !strings.Contains(out, "seq2.json: OK: record 2 is in the tree of size 5 of orangerail.test/orders/acme") ||
		!strings.Contains(out, "3to5.json: OK: the tree of size 3 is a prefix of the tree of size 5") {
		t.Fatalf("check-proof: exit %d\n%s%s", code, out, stderr)
	}
	// The consistency proof agrees with the checkpoint the auditor kept,
	// and not with another of that size, though signed by the same key (a
	// split view).
	if code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", keptFile, consistency); code != exitOK {
		t.Fatalf("check-proof --checkpoint: exit %d\n%s%s", code, out, stderr)
	}
	// As `psql -At` saves a note: one more newline at its end.
	savedFile := filepath.Join(dir, "saved.note")
	if err := os.WriteFile(savedFile, []byte(kept+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", savedFile, consistency); code != exitOK {
		t.Fatalf("check-proof --checkpoint of a note saved by psql: exit %d\n%s%s", code, out, stderr)
	}
	forged, err := signer.Sign(checkpoint.Checkpoint{Origin: "orangerail.test/orders/acme", Size: 3, Root: make([]byte, checkpoint.HashSize)})
	if err != nil {
		t.Fatal(err)
	}
	forgedFile := filepath.Join(dir, "forged.note")
	if err := os.WriteFile(forgedFile, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", forgedFile, consistency); code != exitFindings ||
		!strings.Contains(out, "FAILED: X_AUDIT_PROOF_INVALID") || !strings.Contains(out, "split view") {
		t.Fatalf("check-proof against another kept checkpoint: exit %d\n%s", code, out)
	}
	// With a checkpoint kept, every proof must be tied to it: the record's
	// inclusion in a later tree proves something about the log the
	// auditor saw only beside a consistency proof from the kept tree.
	if code, out, _ := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", keptFile, inclusion); code != exitFindings ||
		!strings.Contains(out, "seq2.json: FAILED: X_AUDIT_PROOF_INVALID") || !strings.Contains(out, "tied to no checkpoint you kept") {
		t.Fatalf("an inclusion proof tied to nothing kept: exit %d\n%s", code, out)
	}
	if code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", keptFile, inclusion, consistency); code != exitOK ||
		!strings.Contains(out, "seq2.json: OK") || !strings.Contains(out, "3to5.json: OK") {
		t.Fatalf("an inclusion proof tied through a consistency proof: exit %d\n%s%s", code, out, stderr)
	}
	// Stopped at a file that never comes, the files checked before it are
	// still said; one whose tie to the kept checkpoint could be in a file
	// not read is not judged either way.
	if code, out, stderr := checkProofStopped(t, "--key", vkey, inclusion, consistency); code != exitError ||
		!strings.Contains(out, "seq2.json: OK") || !strings.Contains(out, "3to5.json: OK") || !strings.Contains(stderr, "X_INTERRUPTED") {
		t.Fatalf("check-proof stopped at its last file: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := checkProofStopped(t, "--key", vkey, "--checkpoint", keptFile, inclusion); code != exitError ||
		!strings.Contains(out, "seq2.json: NOT JUDGED: X_INTERRUPTED") || strings.Contains(out, "FAILED") || !strings.Contains(stderr, "X_INTERRUPTED") {
		t.Fatalf("check-proof stopped before a proof's tie was read: exit %d\n%s%s", code, out, stderr)
	}
	// A kept checkpoint of another size that the log no longer grows
	// from (the key's holder rewrote the log after it was kept, and signs
	// anew): a proof between two of the rewritten log's checkpoints
	// verifies, but is tied to nothing the auditor kept.
	rewrittenKept, err := signer.Sign(checkpoint.Checkpoint{Origin: "orangerail.test/orders/acme", Size: 4, Root: make([]byte, checkpoint.HashSize)})
	if err != nil {
		t.Fatal(err)
	}
	rewrittenFile := filepath.Join(dir, "kept4.note")
	if err := os.WriteFile(rewrittenFile, []byte(rewrittenKept), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", rewrittenFile, consistency); code != exitFindings ||
		!strings.Contains(out, "3to5.json: FAILED: X_AUDIT_PROOF_INVALID") || !strings.Contains(out, "tied to no checkpoint you kept") {
		t.Fatalf("a proof that passes by the kept checkpoint of size 4: exit %d\n%s", code, out)
	}
	proofBytes, err := os.ReadFile(inclusion)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runWithStdin(t, proofBytes, "audit", "check-proof", "--key", vkey); code != exitOK || !strings.Contains(out, "-: OK") {
		t.Fatalf("check-proof from stdin: exit %d\n%s%s", code, out, stderr)
	}
	// A kept checkpoint of the same size with another root: the proof
	// disagrees with what the auditor holds.
	_, otherKey := func() (string, string) {
		s, v, err := checkpoint.GenerateKey("orangerail.test")
		if err != nil {
			t.Fatal(err)
		}
		return s, v
	}()
	changed := bytes.Replace(proofBytes, []byte(`"seq": 2`), []byte(`"seq": 3`), 1)
	changedFile := filepath.Join(dir, "changed.json")
	malformedFile := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(changedFile, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(malformedFile, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a changed proof", []string{"--key", vkey, changedFile}, "X_AUDIT_PROOF_INVALID"},
		{"another key", []string{"--key", otherKey, inclusion}, "X_AUDIT_PROOF_INVALID"},
		{"a malformed file", []string{"--key", vkey, malformedFile}, "X_AUDIT_PROOF_MALFORMED"},
		{"another origin", []string{"--key", vkey, "--origin", "orangerail.test/orders/globex", inclusion}, "X_AUDIT_PROOF_INVALID"},
	} {
		code, out, _ := cli(t, append([]string{"audit", "check-proof"}, tt.args...)...)
		if code != exitFindings || !strings.Contains(out, "FAILED: "+tt.want) {
			t.Errorf("%s: exit %d\n%s", tt.name, code, out)
		}
	}
	code, out, _ = cli(t, "audit", "check-proof", "--json", "--key", vkey, inclusion, malformedFile)
	var outcomes []struct {
		OK   bool   `json:"ok"`
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(out), &outcomes); code != exitFindings || err != nil || len(outcomes) != 2 || !outcomes[0].OK || outcomes[1].Code != "X_AUDIT_PROOF_MALFORMED" {
		t.Fatalf("check-proof --json: exit %d %v\n%s", code, err, out)
	}

	// Refusals, each one line with its code.
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a bad public key", []string{"audit", "check-proof", "--key", "not-a-key", inclusion}, "X_CHECKPOINT_KEY_INVALID"},
		{"a private key for a public one", []string{"audit", "check-proof", "--key", strings.TrimSpace(string(skey)), inclusion}, "X_CHECKPOINT_KEY_INVALID"},
		{"no key", []string{"audit", "check-proof", inclusion}, "X_CHECKPOINT_KEY_INVALID"},
		{"an unknown tenant", []string{"audit", "prove", "--database-url", url, "--tenant", "nobody", "--seq", "1"}, "X_TENANT_UNKNOWN"},
		{"a malformed tenant", []string{"audit", "prove", "--database-url", url, "--tenant", "bad tenant", "--seq", "1"}, "X_TENANT_INVALID"},
		{"no tenant for prove", []string{"audit", "prove", "--database-url", url, "--seq", "1"}, "X_USAGE"},
		{"no tenant of two", []string{"audit", "checkpoint", "--database-url", url}, "X_USAGE"},
		{"a tenant without checkpoints", []string{"audit", "checkpoint", "--database-url", url, "--tenant", "globex"}, "X_AUDIT_CHECKPOINT_MISSING"},
		{"a seq beyond the tree", []string{"audit", "prove", "--database-url", url, "--tenant", "acme", "--seq", "6"}, "X_AUDIT_PROOF_RANGE"},
		{"a size never signed", []string{"audit", "prove", "--database-url", url, "--tenant", "acme", "--seq", "1", "--size", "4"}, "X_AUDIT_PROOF_RANGE"},
		{"from > to", []string{"audit", "prove", "--database-url", url, "--tenant", "acme", "--from", "5", "--to", "3"}, "X_AUDIT_PROOF_RANGE"},
	} {
		code, out, stderr := cli(t, tt.args...)
		if code != exitError || out != "" {
			t.Errorf("%s: exit %d\n%s", tt.name, code, out)
			continue
		}
		oneLine(t, stderr, tt.want)
		if strings.Contains(stderr, "PRIVATE") {
			t.Errorf("%s: the error repeats a private key", tt.name)
		}
	}
	if code, _, _ := cli(t, "audit", "prove", "--database-url", url, "--tenant", "acme", "--seq", "1", "--from", "3"); code != exitError {
		t.Errorf("--seq with --from: exit %d", code)
	}

	// audit verify holds the chain to its latest checkpoint: one whose
	// stored note was changed is a finding, said in words and by kind.
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme"); code != exitOK ||
		!strings.Contains(out, "tenant acme: OK — 5 records, head at seq 5, 2 signed checkpoint(s) checked (the latest of size 5)\n") {
		t.Fatalf("verify before the change: exit %d\n%s%s", code, out, stderr)
	}
	// With keys the auditor holds, every checkpoint must be signed by one
	// of them: one signed with a key of someone else's (the database's
	// owner's, say) is a finding, though it verifies under the key stored
	// with it; the first, by size, is the one reported.
	keysFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keysFile, []byte("# the deployment's checkpoint key\n"+vkey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--key", vkey}, {"--keys-file", keysFile}, {"--key", otherKey, "--keys-file", keysFile}} {
		if code, out, stderr := cli(t, append([]string{"audit", "verify", "--database-url", url, "--tenant", "acme"}, args...)...); code != exitOK {
			t.Fatalf("verify %v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--key", otherKey); code != exitFindings ||
		!strings.Contains(out, "the signed checkpoint of size 3 disagrees") || !strings.Contains(out, "[note_invalid]") ||
		!strings.Contains(out, "none of the keys it was checked under signed it") {
		t.Fatalf("verify under another key: exit %d\n%s", code, out)
	}
	// A chain required to have a checkpoint: acme has one, globex none.
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--key", vkey, "--require-checkpoint"); code != exitOK {
		t.Fatalf("verify acme --require-checkpoint: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", url, "--tenant", "globex", "--require-checkpoint"); code != exitFindings ||
		!strings.Contains(out, "no signed checkpoint") || !strings.Contains(out, "[missing]") {
		t.Fatalf("verify globex --require-checkpoint: exit %d\n%s", code, out)
	}
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", url, "--tenant", "globex"); code != exitOK {
		t.Fatalf("verify globex: exit %d\n%s%s", code, out, stderr)
	}
	emptyKeys := filepath.Join(dir, "no-keys")
	if err := os.WriteFile(emptyKeys, []byte("# none yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--keys-file", emptyKeys)
	if code != exitError {
		t.Fatalf("verify with a keys file of no key: exit %d", code)
	}
	oneLine(t, stderr, "X_CHECKPOINT_KEY_INVALID")
	code, _, stderr = cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme", "--key", string(skey))
	if code != exitError || strings.Contains(stderr, strings.TrimSpace(string(skey))) {
		t.Fatalf("verify with a private key as --key: exit %d %q", code, stderr)
	}
	oneLine(t, stderr, "X_CHECKPOINT_KEY_INVALID")
	if _, err := testdb.Pool(t, url).Exec(ctx, `ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER audit_checkpoints_refuse_update_delete;
		UPDATE orangerail.audit_checkpoints SET note = note || ' ' WHERE tenant_id = 'acme';
		ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_update_delete`); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", url, "--tenant", "acme"); code != exitFindings ||
		!strings.Contains(out, "the signed checkpoint of size 3 disagrees") || !strings.Contains(out, "[note_invalid]") {
		t.Fatalf("verify after the note changed: exit %d\n%s", code, out)
	}
}

// TestDemoSignsCheckpoints: `make run` signs audit checkpoints with the
// development key it keeps, and prints the public key they verify with,
// in a prove and a check-proof that run as printed.
func TestDemoSignsCheckpoints(t *testing.T) {
	facts, out := runDemo(t)
	m := regexp.MustCompile(`audit prove --tenant acme --seq 1 --out proof\.json --database-url \S+\n\s+\S+ audit check-proof --key (\S+) proof\.json\n`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the demo printed no checkpoint key:\n%s", out.String())
	}
	if fi, err := os.Stat(filepath.Join(demoStateDir, "checkpoint.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the development key: %v %v", fi, err)
	}
	appendSealed(t, testdb.RuntimePool(t, facts.DatabaseURL), "acme", 1)
	known, err := checkpoint.Verifiers([]string{m[1]})
	if err != nil {
		t.Fatal(err)
	}
	// The demo's checkpointer signs within its interval.
	for deadline := time.Now().Add(time.Minute); ; {
		code, note, _ := cli(t, "audit", "checkpoint", "--database-url", facts.DatabaseURL, "--tenant", "acme")
		if code == exitOK {
			if c, _, err := checkpoint.OpenNote(note, known); err != nil || c.Origin != "orangerail.demo/acme-orders/acme" {
				t.Fatalf("the demo's checkpoint: %+v, %v\n%s", c, err, note)
			}
			// The two commands it printed, as printed but for the file's
			// directory.
			proof := filepath.Join(t.TempDir(), "proof.json")
			if code, _, stderr := cli(t, "audit", "prove", "--tenant", "acme", "--seq", "1", "--out", proof, "--database-url", facts.DatabaseURL); code != exitOK {
				t.Fatalf("the printed prove: exit %d %s", code, stderr)
			}
			if code, out, stderr := cli(t, "audit", "check-proof", "--key", m[1], proof); code != exitOK || !strings.Contains(out, "OK: record 1 is in the tree") {
				t.Fatalf("the printed check-proof: exit %d\n%s%s", code, out, stderr)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo signed no checkpoint")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAuditVerifyGoesOnPastAnUnreadableTenant: one tenant the verifier
// cannot verify (an id no transaction can name, written by a superuser
// who dropped the table's check) does not hide the other tenants'
// reports: they are printed, the tenant that could not be verified is
// named, and the run exits 2 (it could not verify everything).
func TestAuditVerifyGoesOnPastAnUnreadableTenant(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	pool := testdb.RuntimePool(t, url)
	appendSealed(t, pool, "acme", 2)
	appendSealed(t, pool, "globex", 2)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, `ALTER TABLE orangerail.tenants DROP CONSTRAINT tenants_id_format;
		INSERT INTO orangerail.tenants (id) VALUES ('bad tenant')`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "audit", "verify", "--database-url", url)
	if code != exitError || !strings.Contains(out, "tenant acme: OK — 2 records") || !strings.Contains(out, "tenant globex: OK — 2 records") ||
		strings.Contains(out, "bad tenant") || !strings.Contains(stderr, `verify tenant "bad tenant"`) {
		t.Fatalf("verify with one unreadable tenant: exit %d\n%s%s", code, out, stderr)
	}
}

// TestCheckProofRefusesARewriteBehindAKeptCheckpoint: a proof from a
// prefix of the kept checkpoint ties that prefix to it, but not the trees
// grown from the prefix otherwise. A log rewritten after its third record,
// signed by the same key, proves its own records from that prefix; with
// the honest log's checkpoint of size 5 kept, they are tied to nothing.
func TestCheckProofRefusesARewriteBehindAKeptCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "checkpoint.key")
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile)
	if vkey = strings.TrimSpace(vkey); code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	signer := signerOf(t, keyFile)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	// grow appends a record for each name to the chain, seals them and signs a
	// checkpoint: the same records give the same tree in both databases.
	grow := func(pool *pgxpool.Pool, names ...string) {
		for _, name := range names {
			err := database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: "acme", At: at, CorrelationID: name,
					Phase: engine.PhaseStaged, Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := engine.SealTenant(ctx, pool, "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.SignCheckpoint(ctx, pool, "acme", signer, "orangerail.test/orders"); err != nil {
			t.Fatal(err)
		}
	}
	honest, rewritten := testdb.New(t), testdb.New(t)
	honestPool, rewrittenPool := testdb.RuntimePool(t, honest), testdb.RuntimePool(t, rewritten)
	grow(honestPool, "c1", "c2", "c3")
	grow(rewrittenPool, "c1", "c2", "c3")
	grow(honestPool, "c4", "c5")
	grow(rewrittenPool, "x4", "x5", "x6", "x7")

	code, kept, stderr := cli(t, "audit", "checkpoint", "--database-url", honest, "--tenant", "acme")
	if code != exitOK {
		t.Fatalf("checkpoint: exit %d %s", code, stderr)
	}
	keptFile := filepath.Join(dir, "kept5.note")
	if err := os.WriteFile(keptFile, []byte(kept), 0o600); err != nil {
		t.Fatal(err)
	}
	prove := func(url, name string, args ...string) string {
		file := filepath.Join(dir, name)
		if code, _, stderr := cli(t, append([]string{"audit", "prove", "--database-url", url, "--tenant", "acme", "--out", file}, args...)...); code != exitOK {
			t.Fatalf("prove %v: exit %d %s", args, code, stderr)
		}
		return file
	}
	prefix := prove(honest, "3to5.json", "--from", "3")
	grown := prove(rewritten, "3to7.json", "--from", "3")
	record := prove(rewritten, "seq6.json", "--seq", "6")

	// Each verifies by the key alone: the key's holder signed both logs.
	if code, out, stderr := cli(t, "audit", "check-proof", "--key", vkey, prefix, grown, record); code != exitOK {
		t.Fatalf("check-proof by the key alone: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ := cli(t, "audit", "check-proof", "--key", vkey, "--checkpoint", keptFile, prefix, grown, record)
	if code != exitFindings || !strings.Contains(out, "3to5.json: OK") ||
		!strings.Contains(out, "3to7.json: FAILED: X_AUDIT_PROOF_INVALID") || !strings.Contains(out, "seq6.json: FAILED: X_AUDIT_PROOF_INVALID") {
		t.Fatalf("proofs of a log rewritten behind the kept checkpoint: exit %d\n%s", code, out)
	}
}

// checkProofStopped runs `audit check-proof` with args and then a FIFO no
// one writes to, and signals it once it has opened the FIFO: every file
// before it has been checked by then.
func checkProofStopped(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "never.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	type ran struct {
		code        int
		out, errOut string
	}
	done := make(chan ran, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := Run(ctx, append(append([]string{"audit", "check-proof"}, args...), fifo), &out, &errOut)
		done <- ran{code, out.String(), errOut.String()}
	}()
	// Opening the FIFO to write without blocking succeeds once a reader
	// has it open: the command is at its last file.
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			defer w.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check-proof never opened its last file: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	signal()
	select {
	case r := <-done:
		return r.code, r.out, r.errOut
	case <-time.After(30 * time.Second):
		t.Fatal("check-proof still waits on its last file after the signal")
		return 0, "", ""
	}
}
