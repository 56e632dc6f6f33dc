package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/database/pgcopy"
)

// syntheticChain writes a valid chain of n records of tenant as the COPY
// of store.AuditChainCopy would, in writes of at most chunk bytes.
func syntheticChain(w io.Writer, tenant string, n, chunk int) error {
	return syntheticSegments(w, tenant, n, chunk)
}

// syntheticSegments is syntheticChain written as several COPYs, the
// first of the records up to cuts[0], the next up to cuts[1], and so on,
// and the last of the rest; w ends each but the last (EndSegment).
func syntheticSegments(w io.Writer, tenant string, n, chunk int, cuts ...int) error {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	prev := Genesis()
	buf := pgcopy.AppendHeader(nil)
	flush := func(final bool) error {
		for len(buf) >= chunk || final && len(buf) > 0 {
			k := min(chunk, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
			buf = append(buf[:0], buf[k:]...)
		}
		return nil
	}
	for seq := int64(1); seq <= int64(n); seq++ {
		rec := &Record{Tenant: tenant, At: at.Add(time.Duration(seq) * time.Microsecond), CorrelationID: fmt.Sprintf("c-%d", seq),
			Phase: PhaseStaged, Action: "cancel_order", Actor: Actor{Subject: "agent-7", Kind: ActorAgent}}
		entry, err := rec.Entry()
		if err != nil {
			return err
		}
		hash := ChainHash(prev, seq, entry)
		us := rec.At.UnixMicro() - postgresEpoch*1_000_000
		buf = pgcopy.AppendTuple(buf, binary.BigEndian.AppendUint64(nil, uint64(seq)), entry, binary.BigEndian.AppendUint64(nil, uint64(us)),
			[]byte(rec.CorrelationID), []byte(rec.Phase), []byte(rec.Action), []byte(rec.Actor.Subject), []byte(rec.Actor.Kind),
			[]byte{0}, nil, prev, hash)
		prev = hash
		if err := flush(false); err != nil {
			return err
		}
		for len(cuts) > 0 && int64(cuts[0]) == seq {
			cuts = cuts[1:]
			if err := flush(true); err != nil {
				return err
			}
			if _, err := w.Write(pgcopy.AppendTrailer(nil)); err != nil {
				return err
			}
			if err := w.(chainSink).EndSegment(); err != nil {
				return err
			}
			buf = pgcopy.AppendHeader(buf)
		}
	}
	buf = pgcopy.AppendTrailer(buf)
	return flush(true)
}

// TestStreamInSegments: a chain written as several COPYs, one of them
// empty, each ended before the next, is read whole; a segment ended
// before its trailer is an error.
func TestStreamInSegments(t *testing.T) {
	t.Parallel()
	for _, cuts := range [][]int{nil, {10}, {10, 10, 25}, {1, 39}, {40}} {
		_, report, err := verifySynthetic(t, 40, 4, func(w chainSink) error { return syntheticSegments(w, "acme", 40, 100, cuts...) })
		if err != nil || report.Break != nil || report.Records != 40 {
			t.Fatalf("cut at %v: %+v, break %+v, %v", cuts, report, report.Break, err)
		}
	}
	var whole bytes.Buffer
	if err := syntheticChain(&whole, "acme", 10, 1<<20); err != nil {
		t.Fatal(err)
	}
	_, _, err := verifySynthetic(t, 10, 4, func(w chainSink) error {
		if _, err := w.Write(whole.Bytes()[:whole.Len()-2]); err != nil {
			return err
		}
		return w.EndSegment()
	})
	if err == nil || !strings.Contains(err.Error(), "ended early") {
		t.Fatalf("a segment without its trailer: %v", err)
	}
}

// TestCheckpointFindingsInSizeOrder: findings met out of size order (a
// later page's notes before an earlier page's roots) are listed by size,
// the first maxCheckpointFindings of them, and counted all.
func TestCheckpointFindingsInSizeOrder(t *testing.T) {
	t.Parallel()
	k := newCheckpointCheck(nil, 1, 4)
	sizes := []int64{30, 5, 17, 2, 9, 40, 1, 12, 25, 7, 3, 33, 5}
	for _, size := range sizes {
		k.found(CheckpointFinding{Size: size, Problem: CheckpointRootMismatch})
	}
	var report Report
	k.finish(&report, false)
	want := slices.Sorted(slices.Values(sizes))[:maxCheckpointFindings]
	var got []int64
	for _, f := range report.CheckpointFindings {
		got = append(got, f.Size)
	}
	if !slices.Equal(got, want) || report.CheckpointFindingsTotal != int64(len(sizes)) {
		t.Fatalf("listed %v of %d, want %v of %d", got, report.CheckpointFindingsTotal, want, len(sizes))
	}
}

// verifySynthetic checks a synthetic chain of n records through the
// stream and returns its stats and what the checker found.
func verifySynthetic(t *testing.T, n, rows int, copyTo func(chainSink) error) (streamStats, *Report, error) {
	t.Helper()
	chain := newChainChecker("acme", ReportListMax)
	report := &Report{Tenant: "acme"}
	cfg := streamConfig{tenant: "acme", rows: rows, bytes: 64 << 10, workers: 2, check: func(b *batch) {
		chain.checkBatch(b)
		report.Records += int64(len(b.rows))
	}}
	stats, err := streamChain(context.Background(), cfg, copyTo)
	report.HeadSeq = int64(n)
	report.HeadHash = chain.prevHash
	chain.finish(report, false)
	return stats, report, err
}

// TestStreamMemoryIsBounded: however long the chain, the stream allocates
// the same few batches, each bounded, and reuses them.
func TestStreamMemoryIsBounded(t *testing.T) {
	t.Parallel()
	var allocated []int
	for _, n := range []int{500, 50_000} {
		stats, report, err := verifySynthetic(t, n, 64, func(w chainSink) error { return syntheticChain(w, "acme", n, 4096) })
		if err != nil || report.Break != nil || stats.records != int64(n) || report.Records != int64(n) {
			t.Fatalf("%d records: stats %+v, break %+v, %v", n, stats, report.Break, err)
		}
		allocated = append(allocated, stats.batches)
	}
	// 2 workers: at most 2*2+2 batches, whatever the length (the long
	// chain passes through 50,000/64 of them).
	if allocated[0] > 6 || allocated[1] > 6 {
		t.Fatalf("batches allocated for 500 and 50,000 records: %v, want at most 6", allocated)
	}
}

// TestStreamReadsAnyCut: the stream reads the same chain whatever pieces
// the COPY delivers it in, one byte at a time included.
func TestStreamReadsAnyCut(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{1, 3, 100, 1 << 20} {
		for _, rows := range []int{1, 5, 1000} {
			_, report, err := verifySynthetic(t, 40, rows, func(w chainSink) error { return syntheticChain(w, "acme", 40, chunk) })
			if err != nil || report.Break != nil || report.Records != 40 {
				t.Fatalf("chunks of %d, batches of %d: %d records, break %+v, %v", chunk, rows, report.Records, report.Break, err)
			}
		}
	}
}

// TestStreamRefusesWhatItCannotRead: a stream that stops early, is
// malformed, or holds a NULL where a record cannot have one is an error,
// not a verdict.
func TestStreamRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	var whole bytes.Buffer
	if err := syntheticChain(&whole, "acme", 30, 1<<20); err != nil {
		t.Fatal(err)
	}
	nullSeq := pgcopy.AppendTuple(pgcopy.AppendHeader(nil), nil, []byte("{}"), make([]byte, 8), []byte("c"), []byte("staged"), nil,
		[]byte("a"), []byte("agent"), []byte{0}, nil, Genesis(), Genesis())
	failing := errors.New("the connection broke")
	tests := []struct {
		name   string
		stream []byte
		err    error
	}{
		{"cut short", whole.Bytes()[:whole.Len()/2], nil},
		{"without its trailer", whole.Bytes()[:whole.Len()-2], nil},
		{"not a COPY", []byte("hello, world"), pgcopy.ErrFormat},
		{"a NULL seq", pgcopy.AppendTrailer(nullSeq), nil},
		{"a failing copy", whole.Bytes()[:100], failing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := verifySynthetic(t, 30, 4, func(w chainSink) error {
				if _, err := w.Write(tt.stream); err != nil {
					return err
				}
				if errors.Is(tt.err, failing) {
					return failing
				}
				return nil
			})
			if err == nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want one (%v)", err, tt.err)
			}
		})
	}
}
