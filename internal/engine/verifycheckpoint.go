package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/store"
)

// CheckpointProblem is what a tenant's signed checkpoints say of its
// chain, when they disagree.
type CheckpointProblem string

// The problems, in the order they are checked.
const (
	// CheckpointNoteInvalid: a stored note — of any checkpoint, the
	// smallest such — does not verify under the auditor's keys
	// (VerifyOptions.CheckpointKeys), or without them under the key stored
	// with it, or its body names another tree than its row.
	CheckpointNoteInvalid CheckpointProblem = "note_invalid"
	// CheckpointRecordsMissing: the chain holds fewer sealed records than
	// the checkpoint covers: records were removed since it was signed.
	CheckpointRecordsMissing CheckpointProblem = "records_missing"
	// CheckpointRootMismatch: the chain's first Size records no longer
	// make the root the checkpoint signed: a record at or before seq Size
	// was rewritten since, even if every later link was recomputed so that
	// the chain itself verifies.
	CheckpointRootMismatch CheckpointProblem = "root_mismatch"
	// CheckpointMissing: the tenant's chain holds sealed records and no
	// checkpoint, where one was required (VerifyOptions.RequireCheckpoint):
	// none was signed, or all were removed.
	CheckpointMissing CheckpointProblem = "missing"
)

// CheckpointFinding is a tenant's signed checkpoint disagreeing with its
// chain: one whose note is invalid, or the latest, whose root the chain
// must still make.
type CheckpointFinding struct {
	Size    int64             `json:"size"`
	Problem CheckpointProblem `json:"problem"`
	// Expected is the root the checkpoint signed (absent when there is no
	// checkpoint: missing); Found the one the chain makes now (absent when
	// it cannot make one).
	Expected Hash `json:"expected_root,omitempty"`
	Found    Hash `json:"found_root,omitempty"`
	// Reason says, for note_invalid, which check the note failed.
	Reason NoteReason `json:"reason,omitempty"`
}

// NoteReason is why a checkpoint's note is invalid.
type NoteReason string

// The reasons, in the order they are checked.
const (
	// NoteKeyInvalid: the public key stored with the note is not one.
	NoteKeyInvalid NoteReason = "stored_key_invalid"
	// NoteNotSigned: no key it is checked under (the auditor's, else the
	// one stored with it) signed the note, or it is not a signed note.
	NoteNotSigned NoteReason = "not_signed_by_the_keys"
	// NoteOtherTree: the note is signed, and names another size or root
	// than its row.
	NoteOtherTree NoteReason = "names_another_tree"
)

// checkpointCheck holds the chain, as the verifier streams it in seq
// order, to a tenant's latest stored checkpoint: its first Size records'
// hashes must still make the signed root. It keeps a compact range (a
// hash a level), not the hashes. Earlier checkpoints need no root of
// their own checked: the latest's tree was grown from theirs (the signer
// extends the stored frontier, and the database stores no checkpoint that
// does not extend the one below it), so the chain makes the latest's root
// only where it also makes theirs. Their notes are checked (checkNotes).
type checkpointCheck struct {
	size     int64
	root     []byte
	frontier *checkpoint.Frontier
	finding  *CheckpointFinding
}

// newCheckpointCheck starts the check of the latest checkpoint c, or holds
// finding, a note checkNotes found invalid, as the result.
func newCheckpointCheck(c *store.Checkpoint, finding *CheckpointFinding) *checkpointCheck {
	frontier, err := checkpoint.NewFrontier(0, nil)
	if err != nil {
		panic(err) // an empty range always opens
	}
	return &checkpointCheck{size: c.Size, root: c.RootHash, frontier: frontier, finding: finding}
}

// notePage is how many stored checkpoints checkNotes reads at a time: its
// memory, whatever the number a tenant has.
const notePage = 1024

// checkNotes checks the note of every checkpoint of the tenant, smallest
// first: each must verify under one of keys (the auditor's,
// VerifyOptions.CheckpointKeys), or with none given under the key stored
// with it, and name the tree its row does. Every one, not only the latest:
// a checkpoint signed with another key than the auditor's (a login that
// can insert them, signing with a key of its own) stays a finding once
// later ones are signed on top of it. It returns the latest checkpoint
// (nil when there is none), how many there are, and the first invalid
// note, where reading stops. The notes of a page are checked in parallel:
// a signature costs tens of microseconds, and a tenant signed every minute
// has half a million a year.
func checkNotes(ctx context.Context, st *store.Store, tenant string, keys note.Verifiers, pageSize int32, workers int) (*store.Checkpoint, int64, *CheckpointFinding, error) {
	var latest *store.Checkpoint
	var n int64
	for after := int64(0); ; {
		page, err := st.CheckpointPage(ctx, tenant, after, pageSize)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("read checkpoints: %w", err)
		}
		if len(page) == 0 {
			return latest, n, nil, nil
		}
		reasons := make([]NoteReason, len(page))
		var wg sync.WaitGroup
		for w := range min(workers, len(page)) {
			wg.Go(func() {
				for i := w; i < len(page); i += workers {
					reasons[i] = noteReason(page[i], keys)
				}
			})
		}
		wg.Wait()
		for i, c := range page {
			n++
			if reasons[i] != "" {
				return c, n, &CheckpointFinding{Size: c.Size, Problem: CheckpointNoteInvalid, Expected: c.RootHash, Reason: reasons[i]}, nil
			}
		}
		latest = page[len(page)-1]
		after = latest.Size
	}
}

// noteReason is why c's note is invalid under keys (with none, under the
// key stored with it), or "". The stored key tells a note changed since it
// was signed, not a checkpoint signed by someone else.
func noteReason(c *store.Checkpoint, keys note.Verifiers) NoteReason {
	known := keys
	if known == nil {
		var err error
		if known, err = checkpoint.Verifiers([]string{c.VerifierKey}); err != nil {
			return NoteKeyInvalid
		}
	}
	body, _, err := checkpoint.OpenNote(c.Note, known)
	if err != nil {
		return NoteNotSigned
	}
	if int64(body.Size) != c.Size || !bytes.Equal(body.Root, c.RootHash) { //nolint:gosec // G115: a size is far below 2^63
		return NoteOtherTree
	}
	return ""
}

// add takes the sealed record of seq, whose checkpoint leaf is leaf
// (checkpoint.LeafHash of its chain hash, which the stream's workers
// compute), in seq order; records past the checkpoint's size, and any
// after a gap, are not part of its tree.
func (k *checkpointCheck) add(seq int64, leaf []byte) {
	if k == nil || k.finding != nil || seq > k.size || int64(k.frontier.Size()) != seq-1 { //nolint:gosec // G115: sizes are positive and small
		return
	}
	if err := k.frontier.AppendLeaf(leaf); err != nil {
		panic(err) // appending to a range in order always works
	}
}

// result is the finding, or nil when the chain still makes the signed
// root.
func (k *checkpointCheck) result() *CheckpointFinding {
	switch {
	case k == nil:
		return nil
	case k.finding != nil:
		return k.finding
	case int64(k.frontier.Size()) < k.size: //nolint:gosec // G115: sizes are positive and small
		return &CheckpointFinding{Size: k.size, Problem: CheckpointRecordsMissing, Expected: k.root}
	}
	root, err := k.frontier.Root()
	if err != nil || !bytes.Equal(root, k.root) {
		return &CheckpointFinding{Size: k.size, Problem: CheckpointRootMismatch, Expected: k.root, Found: root}
	}
	return nil
}
