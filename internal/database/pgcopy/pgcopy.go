// Package pgcopy reads and writes PostgreSQL's binary COPY format
// (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"):
// an 11-byte signature, a flags word and a header extension, then one
// tuple after another — a 16-bit field count and, per field, a 32-bit
// length (-1 for NULL) and that many bytes — and a trailer, the field
// count -1.
//
// The Decoder is incremental: it never copies, it returns fields as
// slices of the bytes it is given, and it tells its caller when the bytes
// end inside a tuple, so a stream can be read in whatever pieces the
// network delivers.
package pgcopy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Signature opens every binary COPY stream.
const Signature = "PGCOPY\n\xff\r\n\x00"

// headerSize is the signature, the flags word and the extension length.
const headerSize = len(Signature) + 4 + 4

// flagOIDs is the header flag of a stream whose tuples carry OIDs, which
// Postgres no longer writes; bits 0-15 are critical flags no reader may
// ignore.
const (
	flagOIDs     = 1 << 16
	flagCritical = 0xffff
)

// ErrFormat is wrapped by every error about a malformed stream.
var ErrFormat = errors.New("malformed binary COPY stream")

// Token is what Decoder.Next found at the start of its input.
type Token int

// The tokens.
const (
	// NeedMore: the input ends inside the header or a tuple; call again
	// with the same bytes and more after them.
	NeedMore Token = iota
	// Tuple: a whole tuple, whose fields Next returned.
	Tuple
	// End: the trailer; the stream is over.
	End
)

// Decoder reads one binary COPY stream. Its zero value is not ready: use
// NewDecoder. It is not safe for concurrent use.
type Decoder struct {
	fields int
	header bool // read
	ended  bool
}

// NewDecoder returns a Decoder for a stream whose every tuple has exactly
// fields fields; a tuple of another width is ErrFormat.
func NewDecoder(fields int) *Decoder {
	return &Decoder{fields: fields}
}

// Ended reports whether the trailer was read.
func (d *Decoder) Ended() bool { return d.ended }

// Next reads the header, if it has not been read yet, and then one tuple
// or the trailer from the start of b. It returns what it found and how
// many bytes of b it consumed; for a Tuple, the fields, appended to
// dst[:0], each a slice of b (nil for NULL, empty but not nil for an
// empty value). It consumes nothing when it returns NeedMore. Anything
// after the trailer is ErrFormat.
func (d *Decoder) Next(b []byte, dst [][]byte) (tok Token, n int, fields [][]byte, err error) {
	if d.ended {
		if len(b) > 0 {
			return End, 0, nil, fmt.Errorf("%w: %d bytes after the trailer", ErrFormat, len(b))
		}
		return End, 0, nil, nil
	}
	if !d.header {
		hn, err := header(b)
		if err != nil || hn == 0 {
			return NeedMore, 0, nil, err
		}
		tok, n, fields, err := d.tuple(b[hn:], dst)
		if err != nil || tok == NeedMore {
			// The header is consumed with the first tuple, so a caller
			// that keeps the unconsumed bytes keeps it too.
			return tok, 0, nil, err
		}
		d.header = true
		return tok, hn + n, fields, nil
	}
	return d.tuple(b, dst)
}

// header returns the header's length, or 0 when b does not hold it all yet.
func header(b []byte) (int, error) {
	if len(b) < len(Signature) {
		if string(b) != Signature[:len(b)] {
			return 0, fmt.Errorf("%w: no signature", ErrFormat)
		}
		return 0, nil
	}
	if string(b[:len(Signature)]) != Signature {
		return 0, fmt.Errorf("%w: no signature", ErrFormat)
	}
	if len(b) < headerSize {
		return 0, nil
	}
	flags := binary.BigEndian.Uint32(b[len(Signature):])
	if flags&(flagOIDs|flagCritical) != 0 {
		return 0, fmt.Errorf("%w: header flags %#x", ErrFormat, flags)
	}
	ext := binary.BigEndian.Uint32(b[len(Signature)+4:])
	if ext > 1<<30 {
		return 0, fmt.Errorf("%w: header extension of %d bytes", ErrFormat, ext)
	}
	if uint64(len(b)) < uint64(headerSize)+uint64(ext) {
		return 0, nil
	}
	return headerSize + int(ext), nil
}

func (d *Decoder) tuple(b []byte, dst [][]byte) (Token, int, [][]byte, error) {
	if len(b) < 2 {
		return NeedMore, 0, nil, nil
	}
	count := int16(binary.BigEndian.Uint16(b)) //nolint:gosec // the format sends the count as a signed 16-bit value (-1: the trailer)
	if count == -1 {
		d.ended = true
		if len(b) > 2 {
			return End, 0, nil, fmt.Errorf("%w: %d bytes after the trailer", ErrFormat, len(b)-2)
		}
		return End, 2, nil, nil
	}
	if int(count) != d.fields {
		return NeedMore, 0, nil, fmt.Errorf("%w: a tuple of %d fields, want %d", ErrFormat, count, d.fields)
	}
	fields := dst[:0]
	at := 2
	for range d.fields {
		if len(b)-at < 4 {
			return NeedMore, 0, nil, nil
		}
		size := int32(binary.BigEndian.Uint32(b[at:])) //nolint:gosec // the format sends the length as a signed 32-bit value (-1: NULL)
		at += 4
		switch {
		case size == -1:
			fields = append(fields, nil)
		case size < 0:
			return NeedMore, 0, nil, fmt.Errorf("%w: a field of length %d", ErrFormat, size)
		case len(b)-at < int(size):
			return NeedMore, 0, nil, nil
		default:
			fields = append(fields, b[at:at+int(size):at+int(size)])
			at += int(size)
		}
	}
	return Tuple, at, fields, nil
}

// AppendHeader appends a stream's header, with no flags and no extension.
func AppendHeader(b []byte) []byte {
	b = append(b, Signature...)
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0)
}

// AppendTuple appends one tuple of fields (nil for NULL).
func AppendTuple(b []byte, fields ...[]byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(fields))) //nolint:gosec // a tuple has at most 1664 columns
	for _, f := range fields {
		if f == nil {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(f))) //nolint:gosec // a field is at most 1 GB
		b = append(b, f...)
	}
	return b
}

// AppendTrailer appends the trailer that ends a stream.
func AppendTrailer(b []byte) []byte {
	return append(b, 0xff, 0xff)
}
