package pgcopy_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/orangerail/orangerail/internal/database/pgcopy"
	"github.com/orangerail/orangerail/internal/testdb"
)

// decodeAll reads a whole stream, handed to the decoder in pieces of at
// most step bytes, the way a caller that keeps unconsumed bytes would.
func decodeAll(stream []byte, width, step int) ([][][]byte, bool, error) {
	d := pgcopy.NewDecoder(width)
	var tuples [][][]byte
	var pending []byte
	for fed := 0; ; {
		for {
			tok, n, fields, err := d.Next(pending, nil)
			if err != nil {
				return tuples, false, err
			}
			pending = pending[n:]
			if tok == pgcopy.Tuple {
				tuples = append(tuples, slices.Clone(fields))
				continue
			}
			break
		}
		if fed == len(stream) {
			if len(pending) > 0 && d.Ended() {
				return tuples, true, errors.New("bytes after the end")
			}
			return tuples, d.Ended(), nil
		}
		next := min(fed+step, len(stream))
		pending = append(slices.Clip(pending), stream[fed:next]...)
		fed = next
	}
}

func TestDecoderReadsPiecesAsAWhole(t *testing.T) {
	t.Parallel()
	stream := pgcopy.AppendHeader(nil)
	stream = pgcopy.AppendTuple(stream, []byte("a"), nil, []byte{})
	stream = pgcopy.AppendTuple(stream, bytes.Repeat([]byte("x"), 300), []byte{0, 1, 2}, nil)
	stream = pgcopy.AppendTrailer(stream)
	for step := 1; step <= len(stream); step++ {
		tuples, ended, err := decodeAll(stream, 3, step)
		if err != nil || !ended || len(tuples) != 2 {
			t.Fatalf("step %d: %d tuples, ended %v, %v", step, len(tuples), ended, err)
		}
		if string(tuples[0][0]) != "a" || tuples[0][1] != nil || tuples[0][2] == nil || len(tuples[0][2]) != 0 {
			t.Fatalf("step %d: first tuple %q (NULL must be nil, empty must not)", step, tuples[0])
		}
		if len(tuples[1][0]) != 300 || !bytes.Equal(tuples[1][1], []byte{0, 1, 2}) || tuples[1][2] != nil {
			t.Fatalf("step %d: second tuple %q", step, tuples[1])
		}
	}
}

func TestDecoderRefusesMalformedStreams(t *testing.T) {
	t.Parallel()
	good := pgcopy.AppendTuple(pgcopy.AppendHeader(nil), []byte("a"))
	tests := []struct {
		name   string
		stream []byte
	}{
		{"no signature", append([]byte("PGCOPY\n\xff\r\n\x01"), good[11:]...)},
		{"not copy at all", []byte("hello")},
		{"OIDs flag", append(append([]byte(pgcopy.Signature), 0, 1, 0, 0, 0, 0, 0, 0), good[19:]...)},
		{"critical flag", append(append([]byte(pgcopy.Signature), 0, 0, 0, 1, 0, 0, 0, 0), good[19:]...)},
		{"wrong width", pgcopy.AppendTuple(pgcopy.AppendHeader(nil), []byte("a"), []byte("b"))},
		{"negative length", append(pgcopy.AppendHeader(nil), 0, 1, 0xff, 0xff, 0xff, 0xfe)},
		{"bytes after the trailer", append(pgcopy.AppendTrailer(good), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, step := range []int{1, 7, len(tt.stream)} {
				if _, _, err := decodeAll(tt.stream, 1, step); err == nil {
					t.Fatalf("step %d: no error", step)
				}
			}
		})
	}
	// A header extension is skipped.
	ext := append([]byte(pgcopy.Signature), 0, 0, 0, 0, 0, 0, 0, 3, 'e', 'x', 't')
	ext = pgcopy.AppendTrailer(pgcopy.AppendTuple(ext, []byte("a")))
	if tuples, ended, err := decodeAll(ext, 1, 1); err != nil || !ended || len(tuples) != 1 || string(tuples[0][0]) != "a" {
		t.Fatalf("stream with a header extension: %q %v %v", tuples, ended, err)
	}
	// A stream cut short is not ended.
	if _, ended, err := decodeAll(good, 1, 4); err != nil || ended {
		t.Fatalf("stream without its trailer: ended %v, %v", ended, err)
	}
}

// TestDecoderReadsPostgres holds the decoder to what Postgres writes.
func TestDecoderReadsPostgres(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.NewEmpty(t))
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var out bytes.Buffer
	_, err = conn.Conn().PgConn().CopyTo(context.Background(), &out, `COPY (
		SELECT * FROM (VALUES (1::int8, 'é'::text, NULL::bytea, ''::text), (2, repeat('y', 70000), '\x00ff'::bytea, NULL)) v
		ORDER BY 1) TO STDOUT (FORMAT binary)`)
	if err != nil {
		t.Fatal(err)
	}
	tuples, ended, err := decodeAll(out.Bytes(), 4, 4096)
	if err != nil || !ended || len(tuples) != 2 {
		t.Fatalf("%d tuples, ended %v, %v", len(tuples), ended, err)
	}
	want := [][][]byte{
		{{0, 0, 0, 0, 0, 0, 0, 1}, []byte("é"), nil, {}},
		{{0, 0, 0, 0, 0, 0, 0, 2}, bytes.Repeat([]byte("y"), 70000), {0, 0xff}, nil},
	}
	for i := range want {
		for j := range want[i] {
			if !bytes.Equal(tuples[i][j], want[i][j]) || (tuples[i][j] == nil) != (want[i][j] == nil) {
				t.Fatalf("tuple %d field %d = %q, want %q", i, j, tuples[i][j], want[i][j])
			}
		}
	}
}

// FuzzDecoder: any input either fails or decodes to the same tuples
// however it is cut, never panics, and a stream written by the Append
// functions reads back as written.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("a"), []byte(""), true, 3, 2)
	f.Add([]byte{}, []byte("bb"), false, 1, 1)
	f.Add(pgcopy.AppendTrailer(pgcopy.AppendTuple(pgcopy.AppendHeader(nil), []byte("z"), nil)), []byte{}, false, 5, 2)
	f.Fuzz(func(t *testing.T, a, b []byte, bNull bool, step, width int) {
		step = max(1, step%64)
		width = max(0, width%4)
		// Arbitrary bytes: cut any way, they decode the same.
		whole, wholeEnded, wholeErr := decodeAll(a, width, len(a)+1)
		cut, cutEnded, cutErr := decodeAll(a, width, step)
		if (wholeErr == nil) != (cutErr == nil) || wholeEnded != cutEnded || len(whole) != len(cut) {
			t.Fatalf("whole %d %v %v, in pieces of %d: %d %v %v", len(whole), wholeEnded, wholeErr, step, len(cut), cutEnded, cutErr)
		}
		// A written stream reads back.
		second := b
		if bNull {
			second = nil
		}
		stream := pgcopy.AppendHeader(nil)
		stream = pgcopy.AppendTuple(stream, a, second)
		stream = pgcopy.AppendTuple(stream, second, a)
		stream = pgcopy.AppendTrailer(stream)
		tuples, ended, err := decodeAll(stream, 2, step)
		if err != nil || !ended || len(tuples) != 2 {
			t.Fatalf("round trip: %d tuples, ended %v, %v", len(tuples), ended, err)
		}
		for i, want := range [][][]byte{{a, second}, {second, a}} {
			for j := range want {
				if !bytes.Equal(tuples[i][j], want[j]) || (tuples[i][j] == nil) != (want[j] == nil) {
					t.Fatalf("tuple %d field %d = %q, want %q", i, j, tuples[i][j], want[j])
				}
			}
		}
	})
}
