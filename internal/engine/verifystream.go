package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/database/pgcopy"
	"github.com/orangerail/orangerail/internal/store"
)

// The chain is verified as a pipeline. The goroutine that runs the COPY
// cuts the stream into batches of whole rows (chainStream.Write); workers,
// one per CPU, compute what each row needs alone — its entry's hash, its
// link to the row before it in the batch, its columns against its entry —
// and the checker walks the batches in seq order, linking each batch's
// first row to the last one before it, and keeps the first break and the
// open executions. A fixed number of batches is ever allocated and each
// returns to the reader once checked, so memory does not grow with the
// chain: when the workers fall behind, the reader waits, and Postgres
// waits on the socket.

// chainRow is one record as the stream holds it: each column a slice of
// its batch's buffer, nil for NULL, indexed by store.AuditChain*.
type chainRow [store.AuditChainWidth][]byte

// rowResult is what a worker computed of one row.
type rowResult struct {
	seq       int64
	entryHash [HashSize]byte
	// expected is link(the previous row's stored hash, seq, entryHash),
	// and hashOK whether the row's hash is that; for a batch's first row,
	// whose previous row is in another batch, the checker computes them.
	expected  [HashSize]byte
	hashOK    bool
	columnsOK bool
	// askServer marks columns that match as the entry reads here, of an
	// entry the server must confirm it reads (entryColumns.serverJudges).
	askServer bool
	// leaf is the row's checkpoint leaf (checkpoint.LeafHash of its
	// hash), when the stream computes leaves.
	leaf []byte
}

// batch is a run of consecutive rows and the buffer they point into.
type batch struct {
	buf  []byte
	rows []chainRow
	res  []rowResult
	err  error
	done chan struct{} // closed when a worker has filled res (or err)
}

func (b *batch) reset(maxBytes int) {
	if cap(b.buf) > 2*maxBytes {
		b.buf = make([]byte, 0, maxBytes) // one huge entry grew it: let it go
	}
	b.buf, b.rows, b.res, b.err = b.buf[:0], b.rows[:0], b.res[:0], nil
	b.done = make(chan struct{})
}

// errStreamStopped ends the copy when the checker has stopped reading.
var errStreamStopped = errors.New("the chain's check stopped")

// streamConfig sizes a chain stream.
type streamConfig struct {
	tenant string
	// rows and bytes bound a batch (a single row longer than bytes makes
	// a batch of its own).
	rows, bytes int
	workers     int
	// leaves asks the workers for each row's checkpoint leaf too.
	leaves bool
	// check runs on the checker's goroutine for every batch in seq order.
	check func(*batch)
}

// streamStats says how a stream went, for tests of its memory bound.
type streamStats struct {
	records int64
	// batches is how many batches were ever allocated.
	batches int
}

// chainStream is the io.Writer the COPY writes into: it cuts the stream
// into batches and hands them on.
type chainStream struct {
	cfg     streamConfig
	dec     *pgcopy.Decoder
	cur     *batch
	off     int // bytes of cur.buf consumed by whole rows
	fields  [][]byte
	free    chan *batch
	max     int
	stats   streamStats
	stop    <-chan struct{}
	work    chan *batch
	ordered chan *batch
}

// chainSink is what a chain's COPY writes into: one COPY, or several in
// turn, each ended by EndSegment before the next begins (each has its own
// header and trailer).
type chainSink interface {
	io.Writer
	EndSegment() error
}

// streamChain runs copyTo, which must write a binary COPY of the
// store.AuditChain* columns in seq order to the sink it is given (or
// several, one after another, each ended by the sink's EndSegment), and
// checks every row with cfg. It returns when every row is checked, or on
// the first error (a stream that is malformed or ends early, a column
// that cannot be read, or copyTo's).
func streamChain(ctx context.Context, cfg streamConfig, copyTo func(chainSink) error) (streamStats, error) {
	cfg.workers = max(1, cfg.workers)
	cfg.rows = max(1, cfg.rows)
	maxBatches := 2*cfg.workers + 2
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	s := &chainStream{
		cfg: cfg, dec: pgcopy.NewDecoder(store.AuditChainWidth), fields: make([][]byte, 0, store.AuditChainWidth),
		free: make(chan *batch, maxBatches), max: maxBatches, stop: stopCtx.Done(),
		// Never full: at most maxBatches batches exist.
		work: make(chan *batch, maxBatches), ordered: make(chan *batch, maxBatches),
	}

	var workers sync.WaitGroup
	for range cfg.workers {
		workers.Go(func() {
			for b := range s.work {
				cfg.computeBatch(b)
				close(b.done)
			}
		})
	}
	checkErr := make(chan error, 1)
	go func() {
		var err error
		for b := range s.ordered {
			<-b.done
			if err == nil && b.err != nil {
				err = b.err
				stop() // the reader waiting for a free batch gives up
			}
			if err == nil {
				cfg.check(b)
				s.stats.records += int64(len(b.rows))
			}
			b.reset(cfg.bytes)
			s.free <- b
		}
		checkErr <- err
	}()

	err := copyTo(s)
	if err == nil && !s.dec.Ended() {
		err = errors.New("read audit chain: the stream ended early")
	}
	if err == nil && s.cur != nil && len(s.cur.rows) > 0 {
		s.send()
	}
	close(s.work)
	close(s.ordered)
	workers.Wait()
	if cerr := <-checkErr; cerr != nil {
		err = cerr // the cause; the copy's error is then errStreamStopped
	}
	return s.stats, err
}

// Write takes the next bytes of the stream. The rows it completes are
// sliced out of the current batch's buffer, which is never reallocated
// while it holds rows: a write that does not fit sends the batch on first.
func (s *chainStream) Write(p []byte) (int, error) {
	if s.cur == nil {
		b, err := s.take()
		if err != nil {
			return 0, err
		}
		s.cur = b
	}
	if len(s.cur.rows) > 0 && len(s.cur.buf)+len(p) > cap(s.cur.buf) {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	s.cur.buf = append(s.cur.buf, p...)
	for {
		tok, n, fields, err := s.dec.Next(s.cur.buf[s.off:], s.fields)
		if err != nil {
			return 0, fmt.Errorf("read audit chain: %w", err)
		}
		s.off += n
		if tok != pgcopy.Tuple {
			return len(p), nil
		}
		s.cur.rows = append(s.cur.rows, chainRow(fields))
		if len(s.cur.rows) >= s.cfg.rows {
			if err := s.next(); err != nil {
				return 0, err
			}
		}
	}
}

// EndSegment ends one COPY whose trailer was read: the next bytes are
// another COPY's, from its header.
func (s *chainStream) EndSegment() error {
	if !s.dec.Ended() {
		return errors.New("read audit chain: a segment of the stream ended early")
	}
	s.dec = pgcopy.NewDecoder(store.AuditChainWidth)
	return nil
}

// next sends the current batch on and starts another with the bytes of
// the row it ends inside.
func (s *chainStream) next() error {
	b, err := s.take()
	if err != nil {
		return err
	}
	b.buf = append(b.buf, s.cur.buf[s.off:]...)
	s.send()
	s.cur, s.off = b, 0
	return nil
}

func (s *chainStream) send() {
	s.ordered <- s.cur
	s.work <- s.cur
}

// take returns a free batch, allocating one while fewer than max exist,
// else waiting for the checker to free one.
func (s *chainStream) take() (*batch, error) {
	select {
	case b := <-s.free:
		return b, nil
	default:
	}
	if s.stats.batches < s.max {
		s.stats.batches++
		return &batch{buf: make([]byte, 0, s.cfg.bytes), done: make(chan struct{})}, nil
	}
	select {
	case b := <-s.free:
		return b, nil
	case <-s.stop:
		return nil, errStreamStopped
	}
}

// computeBatch does each row's own work.
func (cfg *streamConfig) computeBatch(b *batch) {
	b.res = append(b.res[:0], make([]rowResult, len(b.rows))...)
	for i := range b.rows {
		row, res := &b.rows[i], &b.res[i]
		// Only a sealed record is read, so its seq is there. Any other
		// column may be NULL where its constraint was dropped: that is a
		// finding (a NULL entry or hash a hash_mismatch, a NULL prev_hash a
		// prev_hash_mismatch, a NULL column a column_mismatch, as SQL's
		// audit_verify reports them), not a chain that cannot be read.
		if len(row[store.AuditChainSeq]) != 8 || !lenOrNull(row[store.AuditChainAt], 8) || !lenOrNull(row[store.AuditChainDevMode], 1) ||
			!lenOrNull(row[store.AuditChainApprovalID], 16) {
			b.err = errors.New("read audit chain: a row's columns are not of their types")
			return
		}
		res.seq = int64(binary.BigEndian.Uint64(row[store.AuditChainSeq])) //nolint:gosec // int8 is sent as its bit pattern
		res.entryHash = sha256.Sum256(row[store.AuditChainEntry])
		if i > 0 {
			res.expected = linkSum(b.rows[i-1][store.AuditChainHash], res.seq, res.entryHash)
			res.hashOK = bytes.Equal(row[store.AuditChainHash], res.expected[:])
		}
		res.columnsOK, res.askServer = columnsMatch(cfg.tenant, row)
		if cfg.leaves {
			res.leaf = checkpoint.LeafHash(row[store.AuditChainHash])
		}
	}
}

// lenOrNull reports whether a column is NULL or n bytes long.
func lenOrNull(col []byte, n int) bool { return col == nil || len(col) == n }

// postgresEpoch is where Postgres counts a timestamptz's microseconds
// from, in seconds since the Unix epoch.
const postgresEpoch = 946_684_800

// timestamptz decodes a timestamptz as Postgres sends it; ok is false for
// ±infinity, which no entry's time equals.
func timestamptz(b []byte) (t time.Time, ok bool) {
	if len(b) != 8 {
		return time.Time{}, false // NULL: a column emptied where its constraint was dropped
	}
	us := int64(binary.BigEndian.Uint64(b)) //nolint:gosec // int8 is sent as its bit pattern
	if us == 1<<63-1 || us == -1<<63 {
		return time.Time{}, false
	}
	sec, rem := us/1_000_000, us%1_000_000
	if rem < 0 {
		sec, rem = sec-1, rem+1_000_000
	}
	return time.Unix(postgresEpoch+sec, rem*1000), true
}

// columnsMatch reports whether a row's queryable columns are exactly those
// its entry holds, under the rules of orangerail.audit_entry_columns, and
// whether the server must confirm that it reads the entry so
// (entryColumns.serverJudges).
func columnsMatch(tenant string, row *chainRow) (match, askServer bool) {
	c, err := scanEntry(row[store.AuditChainEntry])
	if err != nil {
		return false, false
	}
	rowApproval := row[store.AuditChainApprovalID]
	approvalOK := c.approvalID == nil && rowApproval == nil
	if c.approvalID != nil && rowApproval != nil {
		id, err := uuid.ParseBytes(c.approvalID)
		approvalOK = err == nil && bytes.Equal(id[:], rowApproval)
	}
	rowAction := row[store.AuditChainAction]
	actionOK := c.action == nil && rowAction == nil || c.action != nil && rowAction != nil && bytes.Equal(c.action, rowAction)
	rowAt, rowDevMode := row[store.AuditChainAt], row[store.AuditChainDevMode]
	if rowAt == nil || rowDevMode == nil {
		return false, false
	}
	at, atOK := timestamptz(rowAt)
	match = approvalOK && actionOK && string(c.tenant) == tenant && atOK && c.atTime.Equal(at) &&
		bytes.Equal(c.correlationID, row[store.AuditChainCorrelationID]) && bytes.Equal(c.phase, row[store.AuditChainPhase]) &&
		bytes.Equal(c.subject, row[store.AuditChainActor]) && bytes.Equal(c.kind, row[store.AuditChainActorKind]) &&
		c.devMode == (rowDevMode[0] != 0)
	return match, match && c.serverJudges
}

// defaultWorkers is how many workers hash a chain: one per CPU.
func defaultWorkers() int { return runtime.GOMAXPROCS(0) }
