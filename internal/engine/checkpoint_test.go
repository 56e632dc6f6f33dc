package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/roles"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

const testDeployment = "orangerail.test/acme-orders"

// appendBulk appends n records to tenant's chain in one transaction and
// one round trip (audit_append, as AppendAudit calls it), numbering their
// correlation ids from first, and seals them.
func appendBulk(t *testing.T, pool *pgxpool.Pool, tenant string, first, n int) {
	t.Helper()
	ctx := context.Background()
	err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var batch pgx.Batch
		for i := first; i < first+n; i++ {
			entry, err := record(tenant, engine.PhaseStaged, fmt.Sprintf("c-%d", i)).Entry()
			if err != nil {
				return err
			}
			batch.Queue("SELECT orangerail.audit_append($1)", entry)
		}
		return tx.SendBatch(ctx, &batch).Close()
	})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if sealed, err := engine.SealTenant(ctx, pool, tenant); err != nil || sealed != n {
		t.Fatalf("sealed %d of %d records: %v", sealed, n, err)
	}
}

func signingKey(t *testing.T, name string) (*checkpoint.Signer, string) {
	t.Helper()
	skey, vkey, err := checkpoint.GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s, vkey
}

// signNow signs tenant's checkpoint and requires one of size want.
func signNow(t *testing.T, pool *pgxpool.Pool, tenant string, s *checkpoint.Signer, want int64) {
	t.Helper()
	c, err := engine.SignCheckpoint(context.Background(), pool, tenant, s, testDeployment)
	if err != nil || c == nil || c.Size != want {
		t.Fatalf("sign checkpoint of size %d: %+v, %v", want, c, err)
	}
}

// offline checks a proof as `audit check-proof` does: through its JSON,
// with nothing but the public keys.
func offline(t *testing.T, p *checkpoint.Proof, vkeys ...string) (*checkpoint.Result, error) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	known, err := checkpoint.Verifiers(vkeys)
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.Check(bytes.NewReader(b), known, checkpoint.CheckOptions{})
}

func TestChainHashIsTheCheckpointLeafs(t *testing.T) {
	t.Parallel()
	prev := engine.Genesis()
	for seq, entry := range []string{"", "{}", `{"v":1}`} {
		if got, want := checkpoint.ChainHash(prev, int64(seq+1), []byte(entry)), engine.ChainHash(prev, int64(seq+1), []byte(entry)); !bytes.Equal(got, want) {
			t.Fatalf("seq %d: checkpoint %x, engine %x", seq+1, got, want)
		}
		prev = engine.ChainHash(prev, int64(seq+1), []byte(entry))
	}
}

// TestCheckpointProofsOfATenThousandRecordLog signs a checkpoint after
// each of 20 batches of a 10,000-record log, then proves every record in
// the last and 50 random pairs consistent, each checked offline.
func TestCheckpointProofsOfATenThousandRecordLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, vkey := signingKey(t, "orangerail.test")
	const batches, batch = 20, 500
	var sizes []int64
	for i := range batches {
		appendBulk(t, b.runtime, "acme", i*batch, batch)
		signNow(t, b.runtime, "acme", signer, int64((i+1)*batch))
		sizes = append(sizes, int64((i+1)*batch))
		// Nothing new: no second checkpoint of the size.
		if c, err := engine.SignCheckpoint(ctx, b.runtime, "acme", signer, testDeployment); c != nil || err != nil {
			t.Fatalf("signed again at the same size: %+v, %v", c, err)
		}
	}
	prover, err := engine.OpenProver(ctx, b.runtime, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := prover.Checkpoint().Size; got != batches*batch {
		t.Fatalf("latest checkpoint of size %d", got)
	}
	for seq := int64(1); seq <= batches*batch; seq++ {
		p, err := prover.Inclusion(ctx, seq)
		if err != nil {
			t.Fatalf("prove seq %d: %v", seq, err)
		}
		res, err := offline(t, p, vkey)
		if err != nil || res.Seq != seq || res.Origin != testDeployment+"/acme" {
			t.Fatalf("seq %d: %+v, %v", seq, res, err)
		}
	}
	rng := rand.New(rand.NewPCG(17, 2))
	for range 50 {
		x, y := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
		from, to := min(x, y), max(x, y)
		p, err := engine.ProveConsistency(ctx, b.runtime, "acme", from, to)
		if err != nil {
			t.Fatalf("prove %d to %d: %v", from, to, err)
		}
		res, err := offline(t, p, vkey)
		if err != nil || res.OldSize != uint64(from) || res.Size != uint64(to) {
			t.Fatalf("%d to %d: %+v, %v", from, to, res, err)
		}
	}
}

// rechain is the tamperer who rewrites a record and recomputes every link
// after it and the head, so that the chain alone verifies.
func rechain(tenant string, seq int64) []string {
	return []string{
		fmt.Sprintf(`UPDATE orangerail.audit a SET entry = convert_to(replace(convert_from(a.entry, 'UTF8'), '"correlation_id":"c-%d"', '"correlation_id":"c-X"'), 'UTF8'),
		        correlation_id = 'c-X' WHERE tenant_id = '%s' AND seq = %d`, seq-1, tenant, seq),
		relink(tenant, seq),
	}
}

// relink recomputes every link from seq on, and the head, over the
// entries as they are now.
func relink(tenant string, seq int64) string {
	return fmt.Sprintf(`DO $$
DECLARE
    r record;
    prev bytea := (SELECT hash FROM orangerail.audit WHERE tenant_id = '%[1]s' AND seq = %[2]d - 1);
BEGIN
    FOR r IN SELECT seq, entry FROM orangerail.audit WHERE tenant_id = '%[1]s' AND seq >= %[2]d ORDER BY seq LOOP
        UPDATE orangerail.audit SET prev_hash = prev, hash = sha256(prev || int8send(r.seq) || sha256(r.entry))
            WHERE tenant_id = '%[1]s' AND seq = r.seq RETURNING hash INTO prev;
    END LOOP;
    UPDATE orangerail.audit_heads SET hash = prev WHERE tenant_id = '%[1]s';
END
$$`, tenant, seq)
}

// TestRewrittenRecordBreaksTheProofs: a record rewritten with every later
// link recomputed passes `audit verify`, but not a checkpoint signed
// before: the server refuses to prove against it, and a proof made from
// the rewritten log anyway fails offline.
func TestRewrittenRecordBreaksTheProofs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, vkey := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 20)
	signNow(t, b.runtime, "acme", signer, 20)
	appendBulk(t, b.runtime, "acme", 20, 20)
	signNow(t, b.runtime, "acme", signer, 40)
	kept, err := engine.ProveInclusion(ctx, b.runtime, "acme", 7, 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := offline(t, kept, vkey); err != nil {
		t.Fatalf("before the rewrite: %v", err)
	}

	latest, err := engine.LatestCheckpoint(ctx, b.runtime, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || !report.OK() || report.CheckpointSize != 40 {
		t.Fatalf("before the rewrite: %+v, %v", report, err)
	}
	tamper(t, b, rechain("acme", 7)...)
	report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || report.Break != nil {
		t.Fatalf("the rewrite was meant to keep the chain whole: %+v, %v", report.Break, err)
	}
	// The chain verifies, but audit verify holds it to its signed
	// checkpoints, both of which cover the record and neither of which it
	// still makes.
	if f := report.CheckpointFindings; report.OK() || report.CheckpointFindingsTotal != 2 || len(f) != 2 ||
		f[0].Problem != engine.CheckpointRootMismatch || f[0].Size != 20 ||
		f[1].Problem != engine.CheckpointRootMismatch || f[1].Size != 40 ||
		!bytes.Equal(f[1].Expected, latest.RootHash) || len(f[1].Found) != 32 || bytes.Equal(f[1].Found, latest.RootHash) {
		t.Fatalf("the rewritten chain against its checkpoints: %+v", report.CheckpointFindings)
	}

	for name, prove := range map[string]func() error{
		"inclusion against the old checkpoint": func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 7, 20); return err },
		"inclusion against the latest":         func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 30, 0); return err },
		"consistency from the old checkpoint":  func() error { _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 20, 40); return err },
	} {
		if err := prove(); errcode.Of(err) != errcode.AuditChainBroken {
			t.Errorf("%s: %v, want %s", name, err, errcode.AuditChainBroken)
		}
	}

	// A server that proves from the rewritten log anyway is caught
	// offline, by the checkpoint the auditor kept.
	var hashes [][]byte
	var entry, prev []byte
	rows, err := b.admin.Query(ctx, `SELECT seq, prev_hash, hash, entry FROM orangerail.audit WHERE tenant_id = 'acme' AND seq IS NOT NULL ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq int64
		var p, h, e []byte
		if err := rows.Scan(&seq, &p, &h, &e); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
		if seq == 7 {
			prev, entry = p, e
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	tree := checkpoint.NewTree(hashes)
	path, err := tree.Inclusion(6, 20)
	if err != nil {
		t.Fatal(err)
	}
	lie := *kept
	lie.Record = &checkpoint.Record{Seq: 7, Entry: entry, PrevHash: prev, Hash: hashes[6]}
	lie.Hashes = nil
	for _, h := range path {
		lie.Hashes = append(lie.Hashes, h)
	}
	if bytes.Equal(entry, kept.Record.Entry) {
		t.Fatal("the record was not rewritten")
	}
	if _, err := offline(t, &lie, vkey); errcode.Of(err) != errcode.AuditProofInvalid {
		t.Fatalf("a proof of the rewritten record against the old checkpoint: %v", err)
	}
	// The new tree is no extension of the old one.
	root40, err := tree.Root(40)
	if err != nil {
		t.Fatal(err)
	}
	newNote, err := signer.Sign(checkpoint.Checkpoint{Origin: testDeployment + "/acme", Size: 40, Root: root40})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := tree.Consistency(20, 40)
	if err != nil {
		t.Fatal(err)
	}
	split := &checkpoint.Proof{Format: checkpoint.Format, Kind: checkpoint.KindConsistency, Tenant: "acme", Checkpoint: newNote, OldCheckpoint: kept.Checkpoint}
	for _, h := range cons {
		split.Hashes = append(split.Hashes, h)
	}
	if _, err := offline(t, split, vkey); errcode.Of(err) != errcode.AuditProofInvalid {
		t.Fatalf("a consistency proof from the old checkpoint to the rewritten log: %v", err)
	}
	// And the signer refuses to sign a chain whose new records, or the
	// record its last checkpoint ends with, it finds changed.
	changeEntry := func(seq int) string {
		return fmt.Sprintf("UPDATE orangerail.audit SET entry = overlay(entry placing '\\x5a'::bytea from octet_length(entry) - 20 for 1) WHERE tenant_id = 'acme' AND seq = %d", seq)
	}
	appendBulk(t, b.runtime, "acme", 40, 2)
	tamper(t, b, changeEntry(41))
	if _, err := engine.SignCheckpoint(ctx, b.runtime, "acme", signer, testDeployment); errcode.Of(err) != errcode.AuditChainBroken {
		t.Fatalf("signing over a changed new record: %v", err)
	}
	other := setup(t)
	appendBulk(t, other.runtime, "acme", 0, 5)
	signNow(t, other.runtime, "acme", signer, 5)
	appendBulk(t, other.runtime, "acme", 5, 1)
	tamper(t, other, changeEntry(5))
	if _, err := engine.SignCheckpoint(ctx, other.runtime, "acme", signer, testDeployment); errcode.Of(err) != errcode.AuditChainBroken {
		t.Fatalf("signing after the last checkpoint's record changed: %v", err)
	}
	// Nor over a record the last checkpoint covers rewritten with every
	// link after it recomputed, so that each record matches its hash: the
	// records no longer make the checkpoint's tree. Its size odd (the
	// last subtree one record), or a power of two (the whole tree).
	for _, size := range []int64{5, 8} {
		rewritten := setup(t)
		appendBulk(t, rewritten.runtime, "acme", 0, int(size))
		signNow(t, rewritten.runtime, "acme", signer, size)
		appendBulk(t, rewritten.runtime, "acme", int(size), 2)
		tamper(t, rewritten, rechain("acme", 3)...)
		if _, err := engine.SignCheckpoint(ctx, rewritten.runtime, "acme", signer, testDeployment); errcode.Of(err) != errcode.AuditChainBroken {
			t.Fatalf("signing over a record the checkpoint of size %d covers, rewritten and relinked: %v", size, err)
		}
	}
}

// TestVerifyHoldsTheChainToItsCheckpoint: audit verify reports a
// checkpoint whose stored note was changed, and a chain that holds fewer
// records than its checkpoint covers, its head moved back so that the
// chain itself verifies; a tenant without a checkpoint has nothing to be
// held to.
func TestVerifyHoldsTheChainToItsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	setCheckpoint := func(assignment string) []string {
		return []string{"ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER audit_checkpoints_refuse_update_delete",
			"UPDATE orangerail.audit_checkpoints SET " + assignment + " WHERE tenant_id = 'acme'",
			"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_update_delete"}
	}
	otherTree, err := signer.Sign(checkpoint.Checkpoint{Origin: testDeployment + "/acme", Size: 4, Root: make([]byte, checkpoint.HashSize)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change []string
		want   engine.CheckpointProblem
		reason engine.NoteReason
	}{
		{"a note changed", setCheckpoint(`note = replace(note, E'\n5\n', E'\n4\n')`), engine.CheckpointNoteInvalid, engine.NoteNotSigned},
		{"a note of another tree, signed", setCheckpoint("note = $note$" + otherTree + "$note$"), engine.CheckpointNoteInvalid, engine.NoteOtherTree},
		{"a stored key that is none", setCheckpoint("verifier_key = 'not a key'"), engine.CheckpointNoteInvalid, engine.NoteKeyInvalid},
		{"a record removed from the end", []string{"DELETE FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 5",
			"UPDATE orangerail.audit_heads h SET seq = a.seq, hash = a.hash FROM orangerail.audit a WHERE h.tenant_id = 'acme' AND a.tenant_id = 'acme' AND a.seq = 4"},
			engine.CheckpointRecordsMissing, ""},
	} {
		b := setup(t)
		appendBulk(t, b.runtime, "acme", 0, 5)
		if r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || !r.OK() || r.CheckpointSize != 0 || len(r.CheckpointFindings) != 0 {
			t.Fatalf("%s: a tenant without a checkpoint: %+v, %v", tc.name, r, err)
		}
		signNow(t, b.runtime, "acme", signer, 5)
		tamper(t, b, tc.change...)
		r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
		if err != nil || r.Break != nil {
			t.Fatalf("%s: the change was meant to keep the chain whole: %+v, %v", tc.name, r, err)
		}
		if f := r.CheckpointFindings; r.OK() || r.CheckpointFindingsTotal != 1 || len(f) != 1 || f[0].Problem != tc.want || f[0].Reason != tc.reason ||
			f[0].Size != 5 || r.CheckpointSize != 5 {
			t.Fatalf("%s: %+v, want %s", tc.name, r.CheckpointFindings, tc.want)
		}
	}

	// A note of the very tree acme's row names, signed by the same key,
	// of another log: bravo's, or another deployment's acme. Its size and
	// root are the row's, and the chain makes that root: only its origin
	// tells.
	for _, origin := range []string{testDeployment + "/bravo", "another.deployment/acme"} {
		b := setup(t)
		appendBulk(t, b.runtime, "acme", 0, 5)
		signNow(t, b.runtime, "acme", signer, 5)
		var root []byte
		if err := b.admin.QueryRow(ctx, "SELECT root_hash FROM orangerail.audit_checkpoints WHERE tenant_id = 'acme' AND size = 5").Scan(&root); err != nil {
			t.Fatal(err)
		}
		foreign, err := signer.Sign(checkpoint.Checkpoint{Origin: origin, Size: 5, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		tamper(t, b, setCheckpoint("note = $note$"+foreign+"$note$")...)
		r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
		if err != nil || r.Break != nil {
			t.Fatalf("%s: %+v, %v", origin, r, err)
		}
		if f := r.CheckpointFindings; r.OK() || len(f) != 1 || f[0].Problem != engine.CheckpointNoteInvalid || f[0].Reason != engine.NoteOtherLog {
			t.Fatalf("a note of %s stored as acme's: %+v", origin, f)
		}
	}
}

// TestVerifyChecksEveryCheckpointsNote: a checkpoint signed with a key
// the auditor does not hold — a login that can insert checkpoints, signing
// one with a key of its own between two of the real signer's — is a
// finding however many are signed on top of it, wherever it falls in the
// pages the checkpoints are read in (and the chain streamed between), and
// the chain is still held to every root; holding both keys, or none (each
// note under the key stored with it), the audit verifies.
func TestVerifyChecksEveryCheckpointsNote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours, ourPub := signingKey(t, "orangerail.test")
	theirs, theirPub := signingKey(t, "orangerail.test")
	onlyOurs, err := checkpoint.Verifiers([]string{ourPub})
	if err != nil {
		t.Fatal(err)
	}
	both, err := checkpoint.Verifiers([]string{ourPub, theirPub})
	if err != nil {
		t.Fatal(err)
	}
	const signed = 7
	for _, foreign := range []int64{1, 4, signed} {
		b := setup(t)
		for size := int64(1); size <= signed; size++ {
			appendBulk(t, b.runtime, "acme", int(size-1), 1)
			s := ours
			if size == foreign {
				s = theirs
			}
			signNow(t, b.runtime, "acme", s, size)
		}
		appendBulk(t, b.runtime, "acme", signed, 3) // records no checkpoint covers yet
		for _, page := range []int32{1, 2, 3, signed, 1024} {
			for _, keys := range []note.Verifiers{nil, both} {
				r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.WithCheckpointPage(engine.VerifyOptions{CheckpointKeys: keys}, page))
				if err != nil || !r.OK() || r.Records != signed+3 || r.Checkpoints != signed || r.CheckpointSize != signed {
					t.Fatalf("foreign at %d, pages of %d, keys %v: %+v, %v", foreign, page, keys, r, err)
				}
			}
			r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.WithCheckpointPage(engine.VerifyOptions{CheckpointKeys: onlyOurs}, page))
			if f := r.CheckpointFindings; err != nil || r.OK() || r.CheckpointFindingsTotal != 1 || len(f) != 1 || f[0].Problem != engine.CheckpointNoteInvalid ||
				f[0].Reason != engine.NoteNotSigned || f[0].Size != foreign || r.Checkpoints != signed || r.Records != signed+3 {
				t.Fatalf("foreign at %d, pages of %d, our key only: %+v (%+v), %v", foreign, page, r, r.CheckpointFindings, err)
			}
		}
	}
}

// TestVerifyHoldsTheChainToEveryRoot: a record rewritten under many
// checkpoints (every later link recomputed) and a checkpoint of the
// rewritten tree signed on top with the real key (as the signer signs
// when it extends a checkpoint the database's owner stored and then
// removed): the latest checkpoint is the chain's tree and every note is
// the real key's, and only the earlier roots show the rewrite. Whatever
// the pages the checkpoints are read in, each root below is reported, in
// size order, the list bounded and the count whole.
func TestVerifyHoldsTheChainToEveryRoot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, pub := signingKey(t, "orangerail.test")
	keys, err := checkpoint.Verifiers([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	const early = 14 // checkpoints 1 to 14, then one of 15 over the rewrite
	for size := int64(1); size <= early; size++ {
		appendBulk(t, b.runtime, "acme", int(size-1), 1)
		signNow(t, b.runtime, "acme", signer, size)
	}
	appendBulk(t, b.runtime, "acme", early, 1)
	tamper(t, b, rechain("acme", 3)...)

	frontier, root := chainTree(t, sealedHashes(t, b, early+1)) // the rewritten chain's tree
	origin := checkpoint.Origin(testDeployment, "acme")
	signed, err := signer.Sign(checkpoint.Checkpoint{Origin: origin, Size: early + 1, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, b, "ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER USER",
		fmt.Sprintf(`INSERT INTO orangerail.audit_checkpoints (tenant_id, size, root_hash, frontier, origin, key_name, key_hash, verifier_key, note)
			VALUES ('acme', %d, '\x%x', '\x%x', '%s', '%s', %d, '%s', $note$%s$note$)`,
			early+1, root, frontier, origin, signer.Name(), signer.KeyHash(), pub, signed),
		"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_update_delete",
		"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_truncate",
		"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_match_chain")

	for _, page := range []int32{1, 2, 5, 1024} {
		r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.WithCheckpointPage(engine.VerifyOptions{CheckpointKeys: keys}, page))
		if err != nil || r.Break != nil || r.Checkpoints != early+1 || r.CheckpointSize != early+1 {
			t.Fatalf("pages of %d: the rewrite was meant to keep the chain whole and every note the key's: %+v, %v", page, r, err)
		}
		// Checkpoints 3 to 14 covered the rewritten record: twelve
		// findings, the first ten listed.
		f := r.CheckpointFindings
		if r.OK() || r.CheckpointFindingsTotal != early-2 || len(f) != 10 {
			t.Fatalf("pages of %d: %d findings, %d listed: %+v", page, r.CheckpointFindingsTotal, len(f), f)
		}
		for i, finding := range f {
			if finding.Problem != engine.CheckpointRootMismatch || finding.Size != int64(i)+3 || len(finding.Found) != 32 || bytes.Equal(finding.Found, finding.Expected) {
				t.Fatalf("pages of %d: finding %d: %+v", page, i, finding)
			}
		}
	}
}

// TestCheckpointKeyRotation: checkpoints keep the key that signed them;
// after a rotation, the old ones verify with the old public key in the
// set, and a consistency proof spans the rotation.
func TestCheckpointKeyRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	oldKey, oldPub := signingKey(t, "orangerail.test")
	newKey, newPub := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 10)
	signNow(t, b.runtime, "acme", oldKey, 10)
	appendBulk(t, b.runtime, "acme", 10, 10)
	signNow(t, b.runtime, "acme", newKey, 20)

	latest, err := engine.LatestCheckpoint(ctx, b.runtime, "acme")
	if err != nil || latest.KeyHash != newKey.KeyHash() || latest.VerifierKey != newPub {
		t.Fatalf("latest checkpoint's key: %+v, %v", latest, err)
	}
	old, err := engine.ProveInclusion(ctx, b.runtime, "acme", 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := offline(t, old, oldPub, newPub); err != nil || res.Keys[0] != oldKey.KeyID() {
		t.Fatalf("old checkpoint with both keys: %+v, %v", res, err)
	}
	if _, err := offline(t, old, newPub); errcode.Of(err) != errcode.AuditProofInvalid {
		t.Fatalf("old checkpoint with the new key only: %v", err)
	}
	across, err := engine.ProveConsistency(ctx, b.runtime, "acme", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := offline(t, across, oldPub, newPub); err != nil || len(res.Keys) != 2 {
		t.Fatalf("across the rotation: %+v, %v", res, err)
	}
}

func TestCheckpointBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	if _, err := engine.LatestCheckpoint(ctx, b.runtime, "acme"); errcode.Of(err) != errcode.AuditCheckpointMissing {
		t.Fatalf("no checkpoint yet: %v", err)
	}
	if _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 1, 0); errcode.Of(err) != errcode.AuditCheckpointMissing {
		t.Fatalf("a proof with no checkpoint: %v", err)
	}
	appendBulk(t, b.runtime, "acme", 0, 5)
	signNow(t, b.runtime, "acme", signer, 5)
	appendBulk(t, b.runtime, "acme", 5, 5)
	signNow(t, b.runtime, "acme", signer, 10)
	for name, prove := range map[string]func() error{
		"seq 0":                    func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 0, 0); return err },
		"seq beyond the tree":      func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 11, 0); return err },
		"seq beyond its size":      func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 6, 5); return err },
		"a size never signed":      func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 1, 7); return err },
		"a negative size":          func() error { _, err := engine.ProveInclusion(ctx, b.runtime, "acme", 1, -1); return err },
		"from > to":                func() error { _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 10, 5); return err },
		"from 0":                   func() error { _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 0, 10); return err },
		"from a size never signed": func() error { _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 3, 10); return err },
	} {
		if err := prove(); errcode.Of(err) != errcode.AuditProofRange {
			t.Errorf("%s: %v, want %s", name, err, errcode.AuditProofRange)
		}
	}
	if _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 5, 5); err != nil {
		t.Errorf("from = to: %v", err)
	}
	// A size past the log's latest checkpoint is one an auditor may hold
	// of a log since cut short: the refusal says so.
	if _, err := engine.ProveConsistency(ctx, b.runtime, "acme", 13, 0); errcode.Of(err) != errcode.AuditProofRange || !strings.Contains(err.Error(), "this log was cut short after it was signed") {
		t.Errorf("from past the latest: %v", err)
	}
}

// TestCheckpointsMustDescribeTheChain: the database stores a checkpoint
// only when its tree is the tree of the tenant's sealed records: not a
// size the records have not reached, not a frontier and root of someone's
// making (which every later checkpoint would extend), not a root its
// frontier does not make. A checkpoint of the records' own tree is stored
// at any size, and the signer goes on from it.
func TestCheckpointsMustDescribeTheChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 10)
	signNow(t, b.runtime, "acme", signer, 10)
	appendBulk(t, b.runtime, "acme", 10, 5)

	hashes := sealedHashes(t, b, 15)
	tree := func(leaves [][]byte) ([]byte, []byte) { return chainTree(t, leaves) }
	// insertNotedAs stores a checkpoint of size, frontier and root under the
	// row's origin, its note signing notedSize and notedRoot under
	// notedOrigin.
	insertNotedAs := func(size int64, frontier, root []byte, notedSize int64, notedRoot []byte, notedOrigin, origin string) error {
		return database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			note, err := signer.Sign(checkpoint.Checkpoint{Origin: notedOrigin, Size: uint64(notedSize), Root: notedRoot}) //nolint:gosec // G115: a test's small size
			if err != nil {
				return err
			}
			_, err = store.New(tx).CheckpointInsert(ctx, &store.Checkpoint{TenantID: "acme", Size: size, RootHash: root, Frontier: frontier,
				Origin: origin, KeyName: signer.Name(), KeyHash: signer.KeyHash(), VerifierKey: signer.VerifierKey(), Note: note})
			return err
		})
	}
	insertNoted := func(size int64, frontier, root []byte, notedSize int64, notedRoot []byte, origin string) error {
		return insertNotedAs(size, frontier, root, notedSize, notedRoot, origin, origin)
	}
	insert := func(size int64, frontier, root []byte) error {
		return insertNoted(size, frontier, root, size, root, testDeployment+"/acme")
	}
	forged := make([][]byte, 15)
	for i := range forged {
		forged[i] = bytes.Repeat([]byte{byte(i + 1)}, 32)
	}
	frontier15, root15 := tree(hashes)
	forgedFrontier, forgedRoot := tree(forged)
	frontier16, root16 := tree(append(append([][]byte(nil), hashes...), forged[0]))
	_, otherRoot := tree(hashes[:14])
	for name, c := range map[string]struct {
		size           int64
		frontier, root []byte
	}{
		"a size the records have not reached":  {16, frontier16, root16},
		"a forged tree, whole in itself":       {15, forgedFrontier, forgedRoot},
		"the records' frontier, another root":  {15, frontier15, otherRoot},
		"another tree's frontier, their root":  {15, forgedFrontier, root15},
		"the tree of other records at a size":  {12, forgedFrontier[:len(forgedFrontier)-32], forgedRoot},
		"a frontier one subtree short":         {15, frontier15[32:], root15},
		"the records' tree, a size too small":  {14, frontier15, root15},
		"a frontier of no whole subtree roots": {15, append(append([]byte(nil), frontier15...), 0), root15},
	} {
		if err := insert(c.size, c.frontier, c.root); !errors.Is(err, store.ErrCheckpointMismatch) {
			t.Errorf("%s: %v, want %v", name, err, store.ErrCheckpointMismatch)
		}
	}
	// The note must sign the row's tree, of the row's tenant.
	for name, err := range map[string]error{
		"a note of another size":     insertNoted(15, frontier15, root15, 14, root15, testDeployment+"/acme"),
		"a note of another root":     insertNoted(15, frontier15, root15, 15, otherRoot, testDeployment+"/acme"),
		"a note of another tenant":   insertNoted(15, frontier15, root15, 15, root15, testDeployment+"/globex"),
		"a note of no tenant at all": insertNoted(15, frontier15, root15, 15, root15, "acme"),
		"a note of another origin":   insertNotedAs(15, frontier15, root15, 15, root15, "elsewhere.example/acme", testDeployment+"/acme"),
	} {
		if !errors.Is(err, store.ErrCheckpointMismatch) {
			t.Errorf("%s: %v, want %v", name, err, store.ErrCheckpointMismatch)
		}
	}
	// The records' own tree is stored, below the head too; the signer
	// then extends the latest.
	frontier12, root12 := tree(hashes[:12])
	if err := insert(12, frontier12, root12); err != nil {
		t.Fatalf("the tree of the first 12 records: %v", err)
	}
	signNow(t, b.runtime, "acme", signer, 15)
	if report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || !report.OK() || report.CheckpointSize != 15 {
		t.Fatalf("verify: %+v, %v", report, err)
	}

	// A checkpoint stored without the check (before migration 00031) that
	// is not whole itself is extended by none: its frontier one subtree
	// short (which once made a NULL of every comparison), or not folding
	// to its root. Neither the records' own tree nor one made from the bad
	// frontier is stored above it.
	appendBulk(t, b.runtime, "acme", 15, 2)
	frontier17, root17 := tree(append(append([][]byte(nil), hashes...), sealedHash(t, b, 16), sealedHash(t, b, 17)))
	notHers := bytes.Repeat([]byte{0xab}, 32)
	fromBad, err := checkpoint.NewFrontier(16, [][]byte{notHers})
	if err != nil {
		t.Fatal(err)
	}
	if err := fromBad.Append(sealedHash(t, b, 17)); err != nil {
		t.Fatal(err)
	}
	badRoot17, err := fromBad.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, frontier string
		// the tree an inserter extending the bad row would store
		frontier17, root17 []byte
	}{
		{"a frontier one subtree short", "substring(frontier FROM 33)", forgedFrontier[:64], forgedRoot},
		{"a frontier that does not fold to its root", "'\\x" + strings.Repeat("ab", 32) + "'::bytea", bytes.Join(fromBad.Hashes(), nil), badRoot17},
	} {
		t.Run(c.name, func(t *testing.T) {
			tamper(t, b, "ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER audit_checkpoints_match_chain",
				"INSERT INTO orangerail.audit_checkpoints SELECT tenant_id, 16, root_hash, "+c.frontier+", origin, key_name, key_hash, verifier_key, note, signed_at "+
					"FROM orangerail.audit_checkpoints WHERE tenant_id = 'acme' AND size = 15",
				"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_match_chain")
			for name, tr := range map[string][2][]byte{"the records' tree": {frontier17, root17}, "the bad row's extension": {c.frontier17, c.root17}} {
				if err := insert(17, tr[0], tr[1]); !errors.Is(err, store.ErrCheckpointMismatch) {
					t.Errorf("%s above it: %v, want %v", name, err, store.ErrCheckpointMismatch)
				}
			}
			tamper(t, b, "ALTER TABLE orangerail.audit_checkpoints DISABLE TRIGGER audit_checkpoints_refuse_update_delete",
				"DELETE FROM orangerail.audit_checkpoints WHERE tenant_id = 'acme' AND size = 16",
				"ALTER TABLE orangerail.audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_refuse_update_delete")
		})
	}
	if err := insert(17, frontier17, root17); err != nil {
		t.Fatalf("the records' tree of 17, above the whole one of 15: %v", err)
	}
}

// sealedHashes returns the chain hashes of tenant acme's records of seq 1
// to n.
func sealedHashes(t *testing.T, b *testBundle, n int) [][]byte {
	t.Helper()
	hashes := make([][]byte, n)
	for i := range hashes {
		hashes[i] = sealedHash(t, b, int64(i+1))
	}
	return hashes
}

// chainTree returns the frontier (its subtree roots concatenated) and the
// root of the tree whose leaves are chainHashes.
func chainTree(t *testing.T, chainHashes [][]byte) (frontier, root []byte) {
	t.Helper()
	f, err := checkpoint.NewFrontier(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range chainHashes {
		if err := f.Append(h); err != nil {
			t.Fatal(err)
		}
	}
	if root, err = f.Root(); err != nil {
		t.Fatal(err)
	}
	return bytes.Join(f.Hashes(), nil), root
}

// sealedHash returns the chain hash of tenant acme's record of seq.
func sealedHash(t *testing.T, b *testBundle, seq int64) []byte {
	t.Helper()
	var h []byte
	if err := b.admin.QueryRow(context.Background(), "SELECT hash FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = $1", seq).Scan(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestCheckpointsGrowInSteps: a chain that grew by more than a step since
// its latest checkpoint is signed a step at a time, each checkpoint the
// tree of the records up to its size, until the head.
func TestCheckpointsGrowInSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 12)
	// While another replica signs the tenant (holds its signing lock), a
	// signer waits for it, then signs.
	other, err := b.runtime.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.New(other).CheckpointSignLock(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan *store.Checkpoint, 1)
	go func() {
		c, err := engine.SignCheckpointStep(ctx, b.runtime, "acme", signer, testDeployment, 5)
		if err != nil {
			t.Errorf("after the other signer: %v", err)
		}
		waited <- c
	}()
	select {
	case c := <-waited:
		t.Fatalf("signed beside the other signer: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if c := <-waited; c == nil || c.Size != 5 {
		t.Fatalf("after the other signer: %+v", c)
	}
	for _, want := range []int64{10, 12} {
		c, err := engine.SignCheckpointStep(ctx, b.runtime, "acme", signer, testDeployment, 5)
		if err != nil || c == nil || c.Size != want {
			t.Fatalf("a step: %+v, %v; want size %d", c, err, want)
		}
	}
	if c, err := engine.SignCheckpointStep(ctx, b.runtime, "acme", signer, testDeployment, 5); err != nil || c != nil {
		t.Fatalf("nothing new: %+v, %v", c, err)
	}
	if report, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || !report.OK() || report.CheckpointSize != 12 {
		t.Fatalf("verify: %+v, %v", report, err)
	}
	for _, size := range []int64{5, 10} {
		if _, err := engine.ProveConsistency(ctx, b.runtime, "acme", size, 12); err != nil {
			t.Errorf("consistency from %d: %v", size, err)
		}
	}
}

// TestCheckpointStepsFitTheStatementTimeout: under a short
// statement_timeout a checkpoint adds only what the database can check
// within it (StepWithin), and a step the database could not check in time
// is halved and tried again in the same call, rather than every attempt
// cancelled.
func TestCheckpointStepsFitTheStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	for timeout, want := range map[time.Duration]int64{0: 1 << 20, 30 * time.Second: 1 << 20, time.Second: 40_000, 20 * time.Millisecond: 800, time.Microsecond: 1} {
		if got := engine.StepWithin(timeout); got != want {
			t.Errorf("StepWithin(%s) = %d, want %d", timeout, got, want)
		}
	}

	b := setup(t)
	const (
		records = 9000
		timeout = 100 * time.Millisecond // a step of 4000 records: the database checks them in ~26ms
	)
	appendBulk(t, b.runtime, "acme", 0, records)
	bounded := database.Bound(b.runtime, database.Limits{LockTimeout: time.Second, StatementTimeout: timeout})
	var sizes []int64
	for size := int64(0); size < records; {
		c, err := engine.SignCheckpoint(ctx, bounded, "acme", signer, testDeployment)
		if err != nil || c == nil || c.Size <= size || c.Size-size > engine.StepWithin(timeout) {
			t.Fatalf("after size %d: %+v, %v", size, c, err)
		}
		size = c.Size
		sizes = append(sizes, size)
	}
	if len(sizes) < 3 {
		t.Fatalf("sizes %v: one checkpoint took more than the statement timeout allows", sizes)
	}

	// The database made slow to check a checkpoint (a millisecond a record
	// it adds): 1000 records, then 500, are cancelled at 400ms, and 250
	// are signed: three attempts (a sequence counts them, as a rollback
	// does not undo it).
	slow := setup(t)
	appendBulk(t, slow.runtime, "acme", 0, 1000)
	if _, err := slow.admin.Exec(ctx, `CREATE SEQUENCE slow_attempts;
		GRANT USAGE ON SEQUENCE slow_attempts TO orangerail_runtime;
		CREATE FUNCTION slow_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM nextval('public.slow_attempts');
			PERFORM pg_sleep(0.001 * (NEW.size - coalesce((SELECT max(c.size) FROM orangerail.audit_checkpoints c WHERE c.tenant_id = NEW.tenant_id), 0)));
			RETURN NEW;
		END $$;
		CREATE TRIGGER slow_checkpoint BEFORE INSERT ON orangerail.audit_checkpoints FOR EACH ROW EXECUTE FUNCTION slow_checkpoint()`); err != nil {
		t.Fatal(err)
	}
	bounded = database.Bound(slow.runtime, database.Limits{LockTimeout: time.Second, StatementTimeout: 400 * time.Millisecond})
	if c, err := engine.SignCheckpoint(ctx, bounded, "acme", signer, testDeployment); err != nil || c == nil || c.Size != 250 {
		t.Fatalf("a slow database: %+v, %v", c, err)
	}
	var attempts int64
	if err := slow.admin.QueryRow(ctx, "SELECT last_value FROM slow_attempts").Scan(&attempts); err != nil || attempts != 3 {
		t.Fatalf("%d attempts (%v), want 3: 1000, 500, 250 records", attempts, err)
	}
	if report, err := engine.VerifyTenant(ctx, slow.runtime, "acme", engine.VerifyOptions{}); err != nil || !report.OK() || report.CheckpointSize != 250 {
		t.Fatalf("verify: %+v, %v", report, err)
	}
}

// TestCheckpointersSignEachSizeOnce: replicas sign at once; each size is
// stored once, and the periodic checkpointer signs what is sealed.
func TestCheckpointersSignEachSizeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendBulk(t, b.runtime, "acme", 0, 50)
	appendBulk(t, b.runtime, "globex", 0, 3)
	var wg sync.WaitGroup
	stored := make(chan int, 8)
	for range 8 {
		signer, _ := signingKey(t, "orangerail.test")
		wg.Go(func() {
			n, err := engine.SignCheckpoints(ctx, b.runtime, signer, testDeployment)
			if err != nil {
				t.Errorf("sign: %v", err)
			}
			stored <- n
		})
	}
	wg.Wait()
	close(stored)
	total := 0
	for n := range stored {
		total += n
	}
	if total != 2 {
		t.Fatalf("8 replicas stored %d checkpoints of 2 tenants' logs", total)
	}
	var rows int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_checkpoints").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d checkpoints stored: %v", rows, err)
	}

	signer, vkey := signingKey(t, "orangerail.test")
	c := engine.StartCheckpointer(b.runtime, signer, testDeployment, periodic.Config{Interval: time.Millisecond, OnError: func(err error) { t.Errorf("checkpointer: %v", err) }})
	defer c.Stop()
	appendBulk(t, b.runtime, "acme", 50, 5)
	for {
		latest, err := engine.LatestCheckpoint(ctx, b.runtime, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if latest.Size == 55 {
			known, err := checkpoint.Verifiers([]string{vkey})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := note.Open([]byte(latest.Note), known); err != nil {
				t.Fatalf("the periodic checkpoint: %v", err)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.Stop()
}

// TestCheckpointsAreAppendOnlyAndTenantScoped: nobody changes a stored
// checkpoint, and the runtime sees only its transaction's tenant's.
func TestCheckpointsAreAppendOnlyAndTenantScoped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, _ := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 3)
	appendBulk(t, b.runtime, "globex", 0, 4)
	if _, err := engine.SignCheckpoints(ctx, b.runtime, signer, testDeployment); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"UPDATE orangerail.audit_checkpoints SET size = size + 1", "DELETE FROM orangerail.audit_checkpoints", "TRUNCATE orangerail.audit_checkpoints"} {
		if _, err := b.admin.Exec(ctx, stmt); sqlState(err) != "ORA01" {
			t.Errorf("%s as the owner: %v", stmt, err)
		}
	}
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_checkpoints").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("acme sees %d checkpoints: %w", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orangerail.audit_checkpoints SET note = ''")
		return err
	})
	if sqlState(err) != "42501" {
		t.Fatalf("the runtime updated a checkpoint: %v", err)
	}
}

// TestAuditorsReadTheirTenantsCheckpoints: an auditor login reads the
// checkpoints of the tenants granted to it, as it reads their chains,
// and no other's, whatever it sets.
func TestAuditorsReadTheirTenantsCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	signer, vkey := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 3)
	appendBulk(t, b.runtime, "globex", 0, 4)
	if n, err := engine.SignCheckpoints(ctx, b.runtime, signer, testDeployment); err != nil || n != 2 {
		t.Fatalf("signed %d: %v", n, err)
	}
	name := fmt.Sprintf("auditor_cp_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		_, _ = b.admin.Exec(context.Background(), "DELETE FROM orangerail.auditor_grants WHERE role_name = $1", name)
		_, _ = b.admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
	})
	if err := roles.GrantAuditor(ctx, testdb.Direct(b.url), &roles.GrantAuditorParams{Name: name, Tenant: "acme", Password: "correct horse battery staple"}); err != nil {
		t.Fatal(err)
	}
	auditor, err := pgx.Connect(ctx, testdb.WithUser(t, b.url, name, "correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	defer auditor.Close(ctx)
	rows, err := auditor.Query(ctx, "SELECT tenant_id, note FROM orangerail.audit_checkpoints WHERE set_config('orangerail.tenant_id', 'globex', false) IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for rows.Next() {
		var tenant, text string
		if err := rows.Scan(&tenant, &text); err != nil {
			t.Fatal(err)
		}
		known, err := checkpoint.Verifiers([]string{vkey})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := note.Open([]byte(text), known); err != nil {
			t.Fatalf("the auditor's copy of %s's checkpoint: %v", tenant, err)
		}
		seen = append(seen, tenant)
	}
	if rows.Err() != nil || len(seen) != 1 || seen[0] != "acme" {
		t.Fatalf("the auditor sees the checkpoints of %v (%v)", seen, rows.Err())
	}
	// Refused by privilege, not by the copy's key: a copy of a checkpoint
	// is a duplicate that no one may write, so any error at all held
	// nothing of the auditor's rights.
	if _, err := auditor.Exec(ctx, "INSERT INTO orangerail.audit_checkpoints SELECT * FROM orangerail.audit_checkpoints"); sqlState(err) != "42501" {
		t.Fatalf("an auditor's write of a checkpoint: %v, want permission denied (42501)", err)
	}
}

// TestAuditorTakesNoLocks: an auditor login, granted only globex, can
// take none of the locks the server keys on a tenant's id alone, nor
// notify or move a sequence: acme's checkpoint is signed and its sweep
// runs whatever the auditor tries. Its reads (set_config among them) it
// keeps.
func TestAuditorTakesNoLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	appendBulk(t, b.runtime, "acme", 0, 3)
	appendBulk(t, b.runtime, "globex", 0, 1)
	auditor := auditorLogin(t, b, "globex")
	for _, stmt := range []string{
		"SELECT pg_advisory_lock(hashtextextended('orangerail checkpoint sign ' || 'acme', 0))",
		"SELECT pg_try_advisory_lock(hashtextextended('orangerail approval sweep ' || 'acme', 0))",
		"SELECT pg_advisory_lock_shared(1)",
		"SELECT pg_advisory_lock(1, 2)",
		"SELECT pg_notify('orangerail', 'x')",
	} {
		if _, err := auditor.Exec(ctx, stmt); sqlState(err) != "42501" {
			t.Errorf("an auditor ran %s: %v, want permission denied (42501)", stmt, err)
		}
	}
	if _, err := auditor.Exec(ctx, "SELECT set_config('orangerail.tenant_id', 'globex', false)"); err != nil {
		t.Fatalf("an auditor may no longer name its tenant: %v", err)
	}
	// Bounded: were the auditor holding acme's signing lock, signing
	// would wait for it as long as the auditor's session lasts.
	signer, _ := signingKey(t, "orangerail.test")
	signCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c, err := engine.SignCheckpoint(signCtx, b.runtime, "acme", signer, testDeployment); err != nil || c == nil || c.Size != 3 {
		t.Fatalf("acme's checkpoint beside the auditor: %+v, %v", c, err)
	}
	var swept bool
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		swept, err = store.New(tx).ApprovalSweepLock(ctx, "acme")
		return err
	}); err != nil || !swept {
		t.Fatalf("acme's sweep may not run: %v, %v", swept, err)
	}
}
