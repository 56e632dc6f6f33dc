package store

import (
	"context"
	"time"

	"github.com/orangerail/orangerail/internal/db"
)

// Checkpoint is a stored signed checkpoint of a tenant's audit log
// (migrations/00016).
type Checkpoint struct {
	TenantID string
	Size     int64
	RootHash []byte
	// Frontier is the roots of the tree's perfect subtrees, left to right,
	// concatenated (32 bytes each).
	Frontier    []byte
	Origin      string
	KeyName     string
	KeyHash     uint32
	VerifierKey string
	// Note is the signed note, as verifiers check it.
	Note     string
	SignedAt time.Time
}

func checkpointOf(r *db.OrangerailAuditCheckpoint) *Checkpoint {
	return &Checkpoint{TenantID: r.TenantID, Size: r.Size, RootHash: r.RootHash, Frontier: r.Frontier, Origin: r.Origin,
		KeyName: r.KeyName, KeyHash: uint32(r.KeyHash), VerifierKey: r.VerifierKey, Note: r.Note, SignedAt: r.SignedAt} //nolint:gosec // G115: the column is checked to 0..2^32-1
}

// CheckpointInsert stores a signed checkpoint of the transaction's tenant
// and reports whether it did: false when one of its size exists already.
func (s *Store) CheckpointInsert(ctx context.Context, c *Checkpoint) (bool, error) {
	n, err := s.q.CheckpointInsert(ctx, s.x, &db.CheckpointInsertParams{TenantID: c.TenantID, Size: c.Size, RootHash: c.RootHash,
		Frontier: c.Frontier, Origin: c.Origin, KeyName: c.KeyName, KeyHash: int64(c.KeyHash), VerifierKey: c.VerifierKey, Note: c.Note})
	return n == 1, InterpretError(err)
}

// CheckpointSignLock takes the tenant's checkpoint-signing lock for the
// transaction, waiting for another replica that holds it (within the lock
// timeout: ErrLockNotAvailable past it).
func (s *Store) CheckpointSignLock(ctx context.Context, tenantID string) error {
	return InterpretError(s.q.CheckpointSignLock(ctx, s.x, tenantID))
}

// StatementTimeout is the transaction's statement_timeout (0: none).
func (s *Store) StatementTimeout(ctx context.Context) (time.Duration, error) {
	ms, err := s.q.StatementTimeoutMillis(ctx, s.x)
	return time.Duration(ms) * time.Millisecond, InterpretError(err)
}

// CheckpointLatest returns a tenant's checkpoint of the largest size, or
// ErrNotFound when it has none.
func (s *Store) CheckpointLatest(ctx context.Context, tenantID string) (*Checkpoint, error) {
	row, err := s.q.CheckpointLatest(ctx, s.x, tenantID)
	return one(row, err, checkpointOf)
}

// CheckpointAt returns a tenant's checkpoint of the given size, or
// ErrNotFound when none was signed at that size.
func (s *Store) CheckpointAt(ctx context.Context, tenantID string, size int64) (*Checkpoint, error) {
	row, err := s.q.CheckpointAt(ctx, s.x, &db.CheckpointAtParams{TenantID: tenantID, Size: size})
	return one(row, err, checkpointOf)
}

// CheckpointPage lists a tenant's checkpoints of size above afterSize,
// smallest first, at most limit: their size, root, stored key and note
// only (no frontier).
func (s *Store) CheckpointPage(ctx context.Context, tenantID string, afterSize int64, limit int32) ([]*Checkpoint, error) {
	rows, err := s.q.CheckpointPage(ctx, s.x, &db.CheckpointPageParams{TenantID: tenantID, AfterSize: afterSize, PageSize: limit})
	return all(rows, err, func(r *db.CheckpointPageRow) *Checkpoint {
		return &Checkpoint{TenantID: tenantID, Size: r.Size, RootHash: r.RootHash, Origin: r.Origin, VerifierKey: r.VerifierKey, Note: r.Note}
	})
}

// AuditSealedLink is a sealed record's seq and links, and, when asked
// for, its entry.
type AuditSealedLink struct {
	Seq      int64
	PrevHash []byte
	Hash     []byte
	Entry    []byte
}

// AuditLinks lists a tenant's sealed records of seq afterSeq+1 to uptoSeq
// in seq order, their entries only withEntry.
func (s *Store) AuditLinks(ctx context.Context, tenantID string, afterSeq, uptoSeq int64, withEntry bool) ([]*AuditSealedLink, error) {
	rows, err := s.q.AuditLinks(ctx, s.x, &db.AuditLinksParams{TenantID: tenantID, AfterSeq: afterSeq, UptoSeq: uptoSeq, WithEntry: withEntry})
	return all(rows, err, func(r *db.AuditLinksRow) *AuditSealedLink {
		return &AuditSealedLink{Seq: r.Seq, PrevHash: r.PrevHash, Hash: r.Hash, Entry: r.Entry}
	})
}
