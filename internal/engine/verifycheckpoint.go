package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/store"
)

// CheckpointProblem is what a tenant's signed checkpoints say of its
// chain, when they disagree.
type CheckpointProblem string

// The problems. A checkpoint may have two (its note, and then its root).
const (
	// CheckpointNoteInvalid: the checkpoint's stored note does not verify
	// under the auditor's keys
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
// chain: its note is invalid, the chain no longer makes its root, or no
// longer reaches its size; or no checkpoint where one was required.
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
	// NoteOtherLog: the note is signed, and its origin is not the row's,
	// or not one of the row's tenant (checkpoint.Origin: it ends in
	// "/<tenant>"): a checkpoint of another tenant's log, or another
	// deployment's, stored as this one's.
	NoteOtherLog NoteReason = "names_another_log"
)

// checkpointCheck holds a tenant's chain, as the verifier streams it in
// seq order, to every checkpoint stored for it: each note must verify
// (under the auditor's keys, VerifyOptions.CheckpointKeys, or with none
// given under the key stored with it) and name the tree its row does, and
// the chain's first Size records must make each one's root — every one,
// not only the latest: the database stores a checkpoint only as an
// extension of the one below it, but its owner can remove one later (one
// a login signed with a key of its own, say, once the real signer has
// signed on top of it), and then only the earlier roots show the records
// rewritten under it.
//
// Checkpoints are read a page at a time (read), between the COPYs that
// stream the chain up to each page's last size, so that what is held is
// the sizes and roots of the checkpoints of the rows in flight (a few
// pages at most), whatever their number: read adds a page's trees to the
// queue before the chain's rows reach them, and the checker's goroutine
// (add) takes them off as the rows pass their sizes.
type checkpointCheck struct {
	keys     note.Verifiers
	workers  int
	pageSize int32

	mu       sync.Mutex
	queue    []signedTree        // read, not yet reached by the chain, smallest first
	findings []CheckpointFinding // the first maxCheckpointFindings, by size
	total    int64               // findings in all
	count    int64               // checkpoints read
	latest   int64               // the largest size read

	frontier *checkpoint.Frontier // the chain's tree so far: add's alone
}

// signedTree is a stored checkpoint's size and root.
type signedTree struct {
	size int64
	root []byte
}

// maxCheckpointFindings bounds the checkpoint findings a report lists (it
// counts them all).
const maxCheckpointFindings = 10

// notePage is how many stored checkpoints are read at a time.
const notePage = 1024

func newCheckpointCheck(keys note.Verifiers, workers int, pageSize int32) *checkpointCheck {
	frontier, err := checkpoint.NewFrontier(0, nil)
	if err != nil {
		panic(err) // an empty range always opens
	}
	return &checkpointCheck{keys: keys, workers: max(1, workers), pageSize: pageSize, frontier: frontier}
}

// read reads the page of checkpoints above size after, checks their notes
// (in parallel: a signature costs tens of microseconds, and a tenant signed
// every minute has half a million a year) and queues their trees for the
// chain to reach. It returns the page's last size, and whether a page may
// follow.
func (k *checkpointCheck) read(ctx context.Context, st *store.Store, tenant string, after int64) (int64, bool, error) {
	page, err := st.CheckpointPage(ctx, tenant, after, k.pageSize)
	if err != nil {
		return 0, false, fmt.Errorf("read checkpoints: %w", err)
	}
	if len(page) == 0 {
		return after, false, nil
	}
	reasons := make([]NoteReason, len(page))
	var wg sync.WaitGroup
	for w := range min(k.workers, len(page)) {
		wg.Go(func() {
			for i := w; i < len(page); i += k.workers {
				reasons[i] = noteReason(page[i], k.keys)
			}
		})
	}
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, c := range page {
		if reasons[i] != "" {
			k.found(CheckpointFinding{Size: c.Size, Problem: CheckpointNoteInvalid, Expected: c.RootHash, Reason: reasons[i]})
		}
		k.queue = append(k.queue, signedTree{size: c.Size, root: c.RootHash})
	}
	k.count += int64(len(page))
	k.latest = page[len(page)-1].Size
	return k.latest, len(page) == int(k.pageSize), nil
}

// found records a finding, keeping the first maxCheckpointFindings by
// size. The caller holds k.mu.
func (k *checkpointCheck) found(f CheckpointFinding) {
	k.total++
	i, _ := slices.BinarySearchFunc(k.findings, f.Size, func(e CheckpointFinding, size int64) int { return cmp.Compare(e.Size, size+1) })
	if i < maxCheckpointFindings {
		k.findings = slices.Insert(k.findings, i, f)
		k.findings = k.findings[:min(len(k.findings), maxCheckpointFindings)]
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
	if body.Origin != c.Origin || !strings.HasSuffix(c.Origin, "/"+c.TenantID) {
		return NoteOtherLog
	}
	return ""
}

// add takes the sealed record of seq, whose checkpoint leaf is leaf
// (checkpoint.LeafHash of its chain hash, which the stream's workers
// compute), in seq order, and holds the tree it completes to the
// checkpoint of its size, if one was stored. Records after a gap are no
// part of any tree (the chain's break says so); the checkpoints past it
// are then records_missing.
func (k *checkpointCheck) add(seq int64, leaf []byte) {
	whole := int64(k.frontier.Size()) == seq-1 //nolint:gosec // G115: sizes are positive and small
	if whole {
		if err := k.frontier.AppendLeaf(leaf); err != nil {
			panic(err) // appending to a range in order always works
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.queue) > 0 && k.queue[0].size <= seq {
		t := k.queue[0]
		k.queue = k.queue[1:]
		if !whole {
			// Past a gap the chain no longer makes any tree: taken off
			// as the rows pass, so that the queue stays short.
			k.found(CheckpointFinding{Size: t.size, Problem: CheckpointRecordsMissing, Expected: t.root})
			continue
		}
		// t.size is seq: every size is queued before its row is read, and
		// taken off at it.
		if root, err := k.frontier.Root(); err != nil || !bytes.Equal(root, t.root) {
			k.found(CheckpointFinding{Size: t.size, Problem: CheckpointRootMismatch, Expected: t.root, Found: root})
		}
	}
}

// finish writes what the check found to report, once the whole chain
// passed add: the checkpoints whose size the chain's tree never reached
// are records_missing; with require set, a chain of records and no
// checkpoint is missing.
func (k *checkpointCheck) finish(report *Report, require bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range k.queue {
		k.found(CheckpointFinding{Size: t.size, Problem: CheckpointRecordsMissing, Expected: t.root})
	}
	k.queue = nil
	if require && k.count == 0 && report.Records > 0 {
		k.found(CheckpointFinding{Problem: CheckpointMissing})
	}
	report.Checkpoints, report.CheckpointSize = k.count, k.latest
	report.CheckpointFindings, report.CheckpointFindingsTotal = append([]CheckpointFinding{}, k.findings...), k.total
}
