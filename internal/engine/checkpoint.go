package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/store"
)

// errHeadSeqMissing is a chain head whose seq was emptied (its owner
// dropped the constraint): it names no record, so nothing can be signed
// or shown as the chain's size; audit verify reports it (head_mismatch).
var errHeadSeqMissing = errors.New("the audit chain's head names no record (its seq is empty): run orangerail audit verify")

// Signed checkpoints: each tenant's sealed chain is also an RFC 6962
// Merkle tree (package checkpoint says what a leaf is), whose root a
// replica with a signing key signs every interval, and stores
// (orangerail.audit_checkpoints). Proofs are read from the stored chain
// and checkpoints; they are checked offline (checkpoint.Check).

// checkpointPage bounds the records one statement reads while signing or
// proving: memory stays bounded by it, not by the chain's length.
const checkpointPage = 4096

// checkpointStep bounds the records one checkpoint adds to the tree: the
// first checkpoint of a long chain is signed over several intervals, each
// transaction bounded (the signer hashes every record it adds, and the
// database checks them again: about 6 µs a record each on a 2-core box).
const checkpointStep = 1 << 20

// checkpointRecordCost is what the step allows a record within the
// transaction's statement_timeout: the database checks every record a
// checkpoint adds in the one statement that stores it (about 6.4 µs a
// record on a 2-core box), and this leaves it four times that, so that a
// deployment with a short statement_timeout signs smaller steps rather
// than have every attempt cancelled.
const checkpointRecordCost = 25 * time.Microsecond

// stepWithin is the most records one checkpoint adds under a statement
// timeout (0: none), at most step and at least one.
func stepWithin(step int64, timeout time.Duration) int64 {
	if timeout <= 0 {
		return step
	}
	return max(1, min(step, int64(timeout/checkpointRecordCost)))
}

// SignCheckpoint signs the tree of tenant's sealed records, when it has
// records no checkpoint covers yet, and stores the checkpoint. It reads
// only the records sealed since the latest checkpoint, checks their links
// (it never signs a broken chain: X_AUDIT_CHAIN_BROKEN), and extends the
// latest checkpoint's tree with them, by at most checkpointStep records.
// Replicas sign a tenant one at a time: one that finds another signing it
// waits for it (within the lock timeout), and then finds its checkpoint.
// It returns the checkpoint stored, or nil when there was nothing new or
// another replica stored one of that size first. origin is the
// deployment's origin (audit.checkpoint.origin); the checkpoint's is
// origin/tenant.
func SignCheckpoint(ctx context.Context, conn database.TxBeginner, tenant string, signer *checkpoint.Signer, origin string) (*store.Checkpoint, error) {
	// A checkpoint the database could not check within its
	// statement_timeout (a box slower than checkpointRecordCost allows
	// for) is tried again in this round with half its records, a few
	// times: the chain's records are only read.
	step := int64(checkpointStep)
	for attempt := 0; ; attempt++ {
		c, cancelled, err := signCheckpoint(ctx, conn, tenant, signer, origin, step)
		if cancelled <= 1 || attempt == checkpointRetries || ctx.Err() != nil {
			return c, err
		}
		step = cancelled / 2
	}
}

// checkpointRetries bounds the halvings of one round: sixteen times slower
// than checkpointRecordCost allows for, and the next round tries again.
const checkpointRetries = 4

// signCheckpoint is SignCheckpoint adding at most step records to the
// tree, and fewer under a statement_timeout (stepWithin): a chain that grew
// more since is signed up to that size, and the next call goes on from
// there. When the statement storing the checkpoint was cancelled by the
// statement timeout, it returns how many records that checkpoint added.
func signCheckpoint(ctx context.Context, conn database.TxBeginner, tenant string, signer *checkpoint.Signer, origin string, step int64) (*store.Checkpoint, int64, error) {
	var (
		stored    *store.Checkpoint
		cancelled int64
	)
	// READ COMMITTED: the sealed records up to the head read first never
	// change, and a checkpoint another replica stores meanwhile makes the
	// insert do nothing, where a snapshot's would fail to serialize.
	err := database.InTenant(ctx, conn, tenant, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		stored, cancelled = nil, 0 // an attempt run again starts afresh
		st := store.New(tx)
		// One replica signs a tenant at a time; the others wait, then find
		// its checkpoint and leave. A wait is bounded by the lock timeout:
		// a session that holds the lock and never lets go is an error
		// every round, never silence. (It is a row lock no auditor may
		// take, migration 00065, where any login could hold the advisory
		// lock it was.)
		if err := st.CheckpointSignLock(ctx, tenant); err != nil {
			return fmt.Errorf("wait for the tenant's signing lock (another replica signing, or a session holding it): %w", err)
		}
		head, err := st.AuditHead(ctx, tenant)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("read audit head: %w", err)
		case head.SeqMissing:
			return errHeadSeqMissing
		}
		frontier, err := checkpoint.NewFrontier(0, nil)
		if err != nil {
			return err
		}
		latest, err := st.CheckpointLatest(ctx, tenant)
		switch {
		case errors.Is(err, store.ErrNotFound):
			latest = nil
		case err != nil:
			return fmt.Errorf("read latest checkpoint: %w", err)
		case latest.Origin != checkpoint.Origin(origin, tenant):
			// The tree goes on from the latest checkpoint: under another
			// origin no consistency proof from a checkpoint kept before
			// would ever verify ("two logs").
			return errcode.New(errcode.ConfigInvalid, fmt.Sprintf("not signing a checkpoint: audit.checkpoint.origin makes the origin %q, and the tenant's log was signed as %q: "+
				"set audit.checkpoint.origin to %q (its default is orangerail/<service>)", checkpoint.Origin(origin, tenant), latest.Origin,
				strings.TrimSuffix(latest.Origin, "/"+tenant)), nil)
		case latest.Size >= head.Seq:
			return nil
		default:
			if frontier, err = frontierOf(latest); err != nil {
				return err
			}
			if root, err := frontier.Root(); err != nil || !bytes.Equal(root, latest.RootHash) {
				return errcode.New(errcode.AuditChainBroken, fmt.Sprintf("not signing a checkpoint: the stored frontier of the checkpoint of size %d does not make its root", latest.Size), err)
			}
		}
		if head.Seq == 0 {
			return nil
		}
		timeout, err := st.StatementTimeout(ctx)
		if err != nil {
			return fmt.Errorf("read statement_timeout: %w", err)
		}
		from := int64(frontier.Size()) //nolint:gosec // G115: a tree's size is a seq
		upto, last := head.Seq, head.Hash
		if used := stepWithin(step, timeout); upto-from > used {
			upto, last = from+used, nil
		}
		if err := extendFrontier(ctx, st, tenant, frontier, upto, last); err != nil {
			return err
		}
		root, err := frontier.Root()
		if err != nil {
			return err
		}
		cp := checkpoint.Checkpoint{Origin: checkpoint.Origin(origin, tenant), Size: frontier.Size(), Root: root}
		note, err := signer.Sign(cp)
		if err != nil {
			return err
		}
		row := &store.Checkpoint{TenantID: tenant, Size: upto, RootHash: root, Frontier: bytes.Join(frontier.Hashes(), nil),
			Origin: cp.Origin, KeyName: signer.Name(), KeyHash: signer.KeyHash(), VerifierKey: signer.VerifierKey(), Note: note}
		ok, err := st.CheckpointInsert(ctx, row)
		if errors.Is(err, store.ErrStatementTimeout) {
			cancelled = upto - from
		}
		if err != nil {
			return fmt.Errorf("store checkpoint: %w", err)
		}
		if ok {
			stored = row
		}
		return nil
	})
	if err != nil {
		return nil, cancelled, fmt.Errorf("checkpoint tenant %s: %w", tenant, err)
	}
	return stored, 0, nil
}

// frontierOf rebuilds a stored checkpoint's frontier.
func frontierOf(c *store.Checkpoint) (*checkpoint.Frontier, error) {
	var hashes [][]byte
	for b := c.Frontier; len(b) >= checkpoint.HashSize; b = b[checkpoint.HashSize:] {
		hashes = append(hashes, b[:checkpoint.HashSize])
	}
	return checkpoint.NewFrontier(uint64(c.Size), hashes) //nolint:gosec // G115: sizes are positive
}

// extendFrontier appends the records after the frontier up to seq upto,
// checking each link: seq in order, prev_hash the previous record's hash,
// hash the record's ChainHash, and the last's hash last (the head's; nil
// when upto is short of the head, which a later step checks). The record the
// frontier ends with is checked against its own hash too; the records
// before it were checked when their checkpoints were signed, and a
// rewrite of one since breaks the proofs against those checkpoints.
func extendFrontier(ctx context.Context, st *store.Store, tenant string, f *checkpoint.Frontier, upto int64, last []byte) error {
	after := int64(f.Size()) //nolint:gosec // G115: a tree's size is a seq
	// The record the frontier ends with gives the first new one's
	// prev_hash; genesis before the first.
	prev := []byte(Genesis())
	if after > 0 {
		rows, err := st.AuditLinks(ctx, tenant, after-1, after, true)
		if err != nil {
			return fmt.Errorf("read audit links: %w", err)
		}
		if len(rows) != 1 {
			return broken(after, "the record the last checkpoint ends with is missing")
		}
		if !bytes.Equal(rows[0].Hash, ChainHash(rows[0].PrevHash, rows[0].Seq, rows[0].Entry)) {
			return broken(after, "the record's bytes do not match its hash")
		}
		if err := inFrontier(ctx, st, tenant, f); err != nil {
			return err
		}
		prev = rows[0].Hash
	}
	for after < upto {
		rows, err := st.AuditLinks(ctx, tenant, after, min(after+checkpointPage, upto), true)
		if err != nil {
			return fmt.Errorf("read audit links: %w", err)
		}
		if len(rows) == 0 {
			return broken(after+1, "a record before the head is missing")
		}
		for _, r := range rows {
			switch {
			case r.Seq != after+1:
				return broken(after+1, "a record is missing")
			case !bytes.Equal(r.PrevHash, prev):
				return broken(r.Seq, "the record does not link to the one before it")
			case !bytes.Equal(r.Hash, ChainHash(prev, r.Seq, r.Entry)):
				return broken(r.Seq, "the record's bytes do not match its hash")
			}
			if err := f.Append(r.Hash); err != nil {
				return err
			}
			prev, after = r.Hash, r.Seq
		}
	}
	if last != nil && !bytes.Equal(prev, last) {
		return broken(upto, "the chain head does not name the last record")
	}
	return nil
}

// inFrontier checks that the records of the frontier's last perfect
// subtree still make its root: the record the frontier ends with, and the
// ones it pairs with, are those the checkpoint signed. Without it a record
// rewritten under the last checkpoint, its hash and every later link
// recomputed, would pass its own check above, and the new records would
// be signed into a tree that is no longer that of the stored records. The
// subtree holds as many records as the lowest set bit of the frontier's
// size says: one for an odd size, and at most the whole tree for a power
// of two — a read of hashes alone, a page at a time.
func inFrontier(ctx context.Context, st *store.Store, tenant string, f *checkpoint.Frontier) error {
	size := f.Size()
	hashes := f.Hashes()
	last := int64(size & -size) //nolint:gosec // G115: a tree's size is a seq
	sub, err := checkpoint.NewFrontier(0, nil)
	if err != nil {
		return err
	}
	end := int64(size) //nolint:gosec // G115: a tree's size is a seq
	for after := end - last; after < end; {
		rows, err := st.AuditLinks(ctx, tenant, after, min(after+checkpointPage, end), false)
		if err != nil {
			return fmt.Errorf("read audit links: %w", err)
		}
		if len(rows) == 0 {
			return broken(after+1, "a record the last checkpoint covers is missing")
		}
		for _, r := range rows {
			if r.Seq != after+1 {
				return broken(after+1, "a record the last checkpoint covers is missing")
			}
			if err := sub.Append(r.Hash); err != nil {
				return err
			}
			after = r.Seq
		}
	}
	root, err := sub.Root()
	if err != nil {
		return err
	}
	if !bytes.Equal(root, hashes[len(hashes)-1]) {
		return broken(end, "the records the last checkpoint covers no longer make its tree (one was rewritten since it was signed)")
	}
	return nil
}

func broken(seq int64, why string) error {
	return errcode.New(errcode.AuditChainBroken, fmt.Sprintf("not signing a checkpoint: at seq %d %s (run `orangerail audit verify`)", seq, why), nil)
}

// SignCheckpoints signs a checkpoint of every tenant whose sealed log grew
// since its latest, and returns how many it stored. One tenant's failure
// leaves the others to be signed; the errors are joined.
func SignCheckpoints(ctx context.Context, conn database.TxBeginner, signer *checkpoint.Signer, origin string) (int, error) {
	tenants, err := Tenants(ctx, conn)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: list tenants: %w", err)
	}
	n := 0
	var errs []error
	for _, t := range tenants {
		c, err := SignCheckpoint(ctx, conn, t, signer, origin)
		if err != nil {
			errs = append(errs, err)
		} else if c != nil {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Checkpointer signs checkpoints every interval until stopped.
type Checkpointer struct{ loop *periodic.Loop }

// StartCheckpointer signs every tenant's new checkpoints (SignCheckpoints)
// on conn as c says: every c.Interval, its failures told to c.Log as
// "signing audit checkpoints" unless c.What names them, and to c.OnError.
// Every replica with a key may run one: a size is stored once.
func StartCheckpointer(conn database.TxBeginner, signer *checkpoint.Signer, origin string, c periodic.Config) *Checkpointer {
	c.What = cmp.Or(c.What, "signing audit checkpoints")
	return &Checkpointer{loop: periodic.Start(c, func(ctx context.Context) error {
		_, err := SignCheckpoints(ctx, conn, signer, origin)
		return err
	})}
}

// Stop stops the checkpointer and waits for its round to end. It may be
// called more than once.
func (c *Checkpointer) Stop() { c.loop.Stop() }

// LatestCheckpoint returns tenant's latest signed checkpoint, or
// X_AUDIT_CHECKPOINT_MISSING when none was signed yet.
func LatestCheckpoint(ctx context.Context, conn database.TxBeginner, tenant string) (*store.Checkpoint, error) {
	return checkpointOf(ctx, conn, tenant, 0)
}

// checkpointOf reads tenant's checkpoint of size, the latest for 0.
func checkpointOf(ctx context.Context, conn database.TxBeginner, tenant string, size int64) (*store.Checkpoint, error) {
	var c *store.Checkpoint
	err := database.InTenant(ctx, conn, tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		if size == 0 {
			c, err = store.New(tx).CheckpointLatest(ctx, tenant)
		} else {
			c, err = store.New(tx).CheckpointAt(ctx, tenant, size)
		}
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && size == 0:
		return nil, errcode.New(errcode.AuditCheckpointMissing, fmt.Sprintf("tenant %s has no signed checkpoint yet", tenant), nil)
	case errors.Is(err, store.ErrNotFound):
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("tenant %s has no checkpoint of size %d", tenant, size), nil)
	case err != nil:
		return nil, err
	}
	return c, nil
}

// Prover makes proofs against one of a tenant's checkpoints, from the
// tree of its sealed records up to that checkpoint's size, read once (64
// bytes a record). It is safe for concurrent use.
type Prover struct {
	conn       database.TxBeginner
	tenant     string
	checkpoint *store.Checkpoint
	tree       *checkpoint.Tree
}

// OpenProver reads tenant's checkpoint of size (0: the latest) and the
// chain hashes it covers. When they no longer make the checkpoint's root,
// the log was rewritten since it was signed: X_AUDIT_CHAIN_BROKEN.
func OpenProver(ctx context.Context, conn database.TxBeginner, tenant string, size int64) (*Prover, error) {
	if size < 0 {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("a tree size is positive, not %d", size), nil)
	}
	c, err := checkpointOf(ctx, conn, tenant, size)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, 0, c.Size)
	err = database.InTenant(ctx, conn, tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		database.Repeatable(tx)
		hashes = hashes[:0] // of a first run whose connection died
		st := store.New(tx)
		for after := int64(0); after < c.Size; {
			rows, err := st.AuditLinks(ctx, tenant, after, min(after+checkpointPage*4, c.Size), false)
			if err != nil {
				return fmt.Errorf("read audit links: %w", err)
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				hashes = append(hashes, r.Hash)
			}
			after = rows[len(rows)-1].Seq
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tree := checkpoint.NewTree(hashes)
	if tree.Size() != uint64(c.Size) { //nolint:gosec // G115: sizes are positive
		return nil, errcode.New(errcode.AuditChainBroken, fmt.Sprintf("tenant %s's log holds %d sealed records of the %d its checkpoint of size %d covers: records were removed since it was signed",
			tenant, tree.Size(), c.Size, c.Size), nil)
	}
	root, err := tree.Root(uint64(c.Size)) //nolint:gosec // G115: sizes are positive
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(root, c.RootHash) {
		return nil, errcode.New(errcode.AuditChainBroken, fmt.Sprintf("tenant %s's log no longer makes the root its checkpoint of size %d signed: a record at or before seq %d was rewritten since",
			tenant, c.Size, c.Size), nil)
	}
	return &Prover{conn: conn, tenant: tenant, checkpoint: c, tree: tree}, nil
}

// Checkpoint is the checkpoint the prover proves against.
func (p *Prover) Checkpoint() *store.Checkpoint { return p.checkpoint }

// Inclusion proves that the record of seq is in the prover's checkpoint.
func (p *Prover) Inclusion(ctx context.Context, seq int64) (*checkpoint.Proof, error) {
	if seq < 1 || seq > p.checkpoint.Size {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("seq %d is not in the tree of the checkpoint of size %d (seqs 1 to %d)", seq, p.checkpoint.Size, p.checkpoint.Size), nil)
	}
	var rows []*store.AuditSealedLink
	err := database.InTenant(ctx, p.conn, p.tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		rows, err = store.New(tx).AuditLinks(ctx, p.tenant, seq-1, seq, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, errcode.New(errcode.AuditChainBroken, fmt.Sprintf("the record of seq %d is missing", seq), nil)
	}
	path, err := p.tree.Inclusion(uint64(seq-1), uint64(p.checkpoint.Size)) //nolint:gosec // G115: checked positive above
	if err != nil {
		return nil, err
	}
	r := rows[0]
	return &checkpoint.Proof{Format: checkpoint.Format, Kind: checkpoint.KindInclusion, Tenant: p.tenant, Checkpoint: p.checkpoint.Note,
		Record: &checkpoint.Record{Seq: r.Seq, Entry: r.Entry, PrevHash: r.PrevHash, Hash: r.Hash}, Hashes: hexes(path)}, nil
}

// Consistency proves that tenant's checkpoint of size from names a prefix
// of the prover's checkpoint's tree.
func (p *Prover) Consistency(ctx context.Context, from int64) (*checkpoint.Proof, error) {
	if from > p.checkpoint.Size {
		// Said so, for whoever holds a checkpoint of that size signed by
		// this log's key: the log no longer reaches it.
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("--from %d is larger than the newer checkpoint's %d: if you hold a checkpoint of size %d signed by this log's key, "+
			"this log was cut short after it was signed (an incident: run audit verify), else name a size you hold", from, p.checkpoint.Size, from), nil)
	}
	if from < 1 {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("--from %d is not a size from 1 to the newer checkpoint's %d", from, p.checkpoint.Size), nil)
	}
	old, err := checkpointOf(ctx, p.conn, p.tenant, from)
	if err != nil {
		return nil, err
	}
	root, err := p.tree.Root(uint64(from)) //nolint:gosec // G115: checked positive above
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(root, old.RootHash) {
		return nil, errcode.New(errcode.AuditChainBroken, fmt.Sprintf("tenant %s's log no longer makes the root its checkpoint of size %d signed: a record at or before seq %d was rewritten since",
			p.tenant, from, from), nil)
	}
	path, err := p.tree.Consistency(uint64(from), uint64(p.checkpoint.Size)) //nolint:gosec // G115: checked positive above
	if err != nil {
		return nil, err
	}
	return &checkpoint.Proof{Format: checkpoint.Format, Kind: checkpoint.KindConsistency, Tenant: p.tenant, Checkpoint: p.checkpoint.Note,
		OldCheckpoint: old.Note, Hashes: hexes(path)}, nil
}

// ProveInclusion proves that tenant's record of seq is in its checkpoint
// of size (0: the latest).
func ProveInclusion(ctx context.Context, conn database.TxBeginner, tenant string, seq, size int64) (*checkpoint.Proof, error) {
	if seq < 1 {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("seq %d is not a record's: seqs begin at 1", seq), nil)
	}
	p, err := OpenProver(ctx, conn, tenant, size)
	if err != nil {
		return nil, err
	}
	return p.Inclusion(ctx, seq)
}

// ProveConsistency proves that tenant's checkpoint of size from names a
// prefix of the tree of its checkpoint of size to (0: the latest).
func ProveConsistency(ctx context.Context, conn database.TxBeginner, tenant string, from, to int64) (*checkpoint.Proof, error) {
	if to != 0 && from > to {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("--from %d is larger than --to %d: a consistency proof goes from the older tree to the newer", from, to), nil)
	}
	if from < 1 {
		return nil, errcode.New(errcode.AuditProofRange, fmt.Sprintf("--from %d is not a checkpoint's size: sizes begin at 1", from), nil)
	}
	p, err := OpenProver(ctx, conn, tenant, to)
	if err != nil {
		return nil, err
	}
	return p.Consistency(ctx, from)
}

func hexes(hs [][]byte) []checkpoint.Hex {
	out := make([]checkpoint.Hex, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

// CheckpointOf returns the caller's tenant's latest checkpoint. The caller
// must be a person who may read the audit log.
func (e *Engine) CheckpointOf(ctx context.Context, caller *Caller) (*store.Checkpoint, error) {
	if err := e.mayAudit(caller); err != nil {
		return nil, err
	}
	return LatestCheckpoint(ctx, e.store, caller.Tenant)
}

// ProveInclusionOf is ProveInclusion for the caller's tenant. The proof
// carries the record's entry, so the caller must be a person who may read
// entries (MayReadEntries).
func (e *Engine) ProveInclusionOf(ctx context.Context, caller *Caller, seq, size int64) (*checkpoint.Proof, error) {
	if err := e.mayAudit(caller); err != nil {
		return nil, err
	}
	if !e.MayReadEntries(caller) {
		return nil, errcode.New(errcode.Forbidden, "an inclusion proof carries the record's entry, which only the role "+
			e.cfg.Approvals.AuditorRole+" reads", nil)
	}
	return ProveInclusion(ctx, e.store, caller.Tenant, seq, size)
}

// ProveConsistencyOf is ProveConsistency for the caller's tenant, which
// the caller must be a person who may read the audit log of.
func (e *Engine) ProveConsistencyOf(ctx context.Context, caller *Caller, from, to int64) (*checkpoint.Proof, error) {
	if err := e.mayAudit(caller); err != nil {
		return nil, err
	}
	return ProveConsistency(ctx, e.store, caller.Tenant, from, to)
}
