package sqlquery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orangerail/orangerail/internal/jcs"
)

// kind is how a column's values travel from Postgres and become JSON,
// chosen by the column's type as the statement's description gives it
// (its OID), never by a decoded Go value. Every value is sent as text: its
// kind decides the expression that makes that text (and whether it is
// bounded by its type or cut to a share), and which JSON it becomes.
type kind uint8

const (
	// kindText: any type not below (text, enum labels, ranges, geometry,
	// composites, …); a JSON string of Postgres's text output, cut.
	kindText kind = iota
	// kindBool: true or false, as JSON.
	kindBool
	// kindInteger: int2, int4, oid; its text is a JSON number.
	kindInteger
	// kindBigint: int8; a JSON number where a double holds it exactly,
	// else a JSON string of its digits, as the audit log keeps a number no
	// double holds (jcs.CanonicalizeLossless): a client that reads JSON
	// numbers as doubles never gets another number.
	kindBigint
	// kindFloat: float4, float8; a JSON number, or its text as a string
	// where JSON has no number ("NaN", "Infinity", "-Infinity").
	kindFloat
	// kindNumeric: numeric; a JSON string of its exact text ("12.340",
	// "NaN", "Infinity"), never a number a client would read as a double;
	// unbounded, so cut.
	kindNumeric
	// kindJSON: json, jsonb: the JSON itself when whole; cut, its text as a
	// string.
	kindJSON
	// kindArray: an array; sent as to_jsonb's text of it, its elements
	// encoded by their own kind, and then treated as kindJSON.
	kindArray
	// kindBytea: bytea; lowercase hex without a prefix, as the CLI prints
	// a hash or a digest; unbounded, so cut (after at most share/2+1 bytes
	// are taken in the database).
	kindBytea
	// kindTimestamp: timestamp, timestamptz; to_jsonb's string of it:
	// RFC 3339 (2024-05-01T10:00:00.5+00:00, the session in UTC), a
	// timestamp without its offset.
	kindTimestamp
	// kindBounded: uuid, date, time, timetz, interval, inet, cidr, macaddr,
	// macaddr8; a JSON string of Postgres's text output under the session's
	// pinned styles (see Querier.setup), never cut: its type bounds it.
	kindBounded

	kinds // the number of kinds
)

// cut says whether a kind's text is unbounded, and so cut to a share.
func (k kind) cut() bool {
	return k == kindText || k == kindNumeric || k == kindJSON || k == kindArray || k == kindBytea
}

// kindOf classifies a type by its OID: a built-in by its own OID, an array
// by the array flag its catalog row gives (see typeInfo).
func kindOf(oid uint32, array bool) kind {
	switch oid {
	case pgtype.BoolOID:
		return kindBool
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.OIDOID:
		return kindInteger
	case pgtype.Int8OID:
		return kindBigint
	case pgtype.Float4OID, pgtype.Float8OID:
		return kindFloat
	case pgtype.NumericOID:
		return kindNumeric
	case pgtype.JSONOID, pgtype.JSONBOID:
		return kindJSON
	case pgtype.ByteaOID:
		return kindBytea
	case pgtype.TimestampOID, pgtype.TimestamptzOID:
		return kindTimestamp
	case pgtype.UUIDOID, pgtype.DateOID, pgtype.TimeOID, pgtype.TimetzOID, pgtype.IntervalOID,
		pgtype.InetOID, pgtype.CIDROID, pgtype.MacaddrOID, pgtype.Macaddr8OID:
		return kindBounded
	}
	if array {
		return kindArray
	}
	return kindText
}

// column is how one described column is read.
type column struct {
	kind kind
	// elem is an array's elements' kind.
	elem kind
}

// answer reads one statement's rows: how each column is read, and the
// share of RowChars each cut column may hold.
type answer struct {
	columns []column
	share   int // characters a cut column's value may hold
}

func newAnswer(fields []pgconn.FieldDescription, types map[uint32]typeInfo) *answer {
	a := &answer{columns: make([]column, len(fields))}
	cut := 0
	for i, f := range fields {
		t := types[f.DataTypeOID]
		c := column{kind: kindOf(f.DataTypeOID, t.elem != 0)}
		if c.kind == kindArray {
			c.elem = kindOf(t.elemBase, false)
		}
		a.columns[i] = c
		if c.kind.cut() {
			cut++
		}
	}
	a.share = RowChars / max(cut, 1)
	return a
}

// statement wraps the checked statement in the projection that has
// Postgres send every value as text, each long one cut to share+1
// characters (one more than the share, so a cut is seen), and the row
// ceiling. The statement's columns are renamed by position (c1, c2, …), so
// its own names — duplicated, quoted, anything — never appear in SQL built
// here.
func (a *answer) statement(statement string, limit int) string {
	values := make([]string, len(a.columns))
	names := make([]string, len(a.columns))
	for i, c := range a.columns {
		names[i] = fmt.Sprintf("c%d", i+1)
		value := "orangerail_query." + names[i]
		switch c.kind {
		case kindBool, kindInteger, kindBigint, kindFloat, kindBounded:
			values[i] = value + "::text" // bounded by its type
		case kindTimestamp:
			values[i] = fmt.Sprintf("pg_catalog.to_jsonb(%s)::text", value) // bounded by its type
		case kindBytea:
			// The bytes a share of hex needs, and one more, so a cut is
			// seen: the rest of a long value is never read.
			values[i] = fmt.Sprintf("pg_catalog.encode(pg_catalog.substring(%s, 1, %d), 'hex')", value, a.share/2+1)
		case kindArray:
			if c.elem == kindText {
				// Elements of a type JSON has no form for come as their text.
				value += "::text[]"
			}
			values[i] = fmt.Sprintf("pg_catalog.left(pg_catalog.to_jsonb(%s)::text, %d)", value, a.share+1)
		default:
			values[i] = fmt.Sprintf("pg_catalog.left(%s::text, %d)", value, a.share+1)
		}
	}
	alias := "orangerail_query"
	if len(names) > 0 {
		alias += "(" + strings.Join(names, ", ") + ")"
	}
	return fmt.Sprintf("SELECT %s FROM (\n%s\n) AS %s LIMIT %d", strings.Join(values, ", "), statement, alias, limit)
}

// encode returns one row, its values in text, as a JSON array, and the
// columns whose values were cut.
func (a *answer) encode(values [][]byte) (json.RawMessage, []int) {
	var cut []int
	out := make([]byte, 0, 2+rowTextLen(values))
	out = append(out, '[')
	for i, v := range values {
		if i > 0 {
			out = append(out, ',')
		}
		if v == nil {
			out = append(out, "null"...)
			continue
		}
		c := a.columns[i]
		if c.kind.cut() && utf8.RuneCount(v) > a.share {
			v = firstRunes(v, a.share)
			cut = append(cut, i)
			out = appendString(out, v)
			continue
		}
		out = appendValue(out, c, v)
	}
	return append(out, ']'), cut
}

// appendValue appends one whole value's text as the JSON its column's kind
// makes of it. Text is sent as is only where it is JSON of the column's
// kind, so a type changed between describe and run cannot break the
// answer: anything else becomes a JSON string of the text.
func appendValue(out []byte, c column, v []byte) []byte {
	switch c.kind {
	case kindBool:
		if string(v) == "true" || string(v) == "false" {
			return append(out, v...)
		}
	case kindInteger, kindFloat:
		if isJSONNumber(v) { // not NaN, Infinity, -Infinity
			return append(out, v...)
		}
	case kindBigint:
		if isJSONNumber(v) {
			return append(out, exact(v)...)
		}
	case kindJSON:
		if json.Valid(v) {
			return append(out, v...)
		}
	case kindTimestamp:
		if len(v) > 0 && v[0] == '"' && json.Valid(v) {
			return append(out, v...)
		}
	case kindArray:
		if json.Valid(v) {
			return append(out, elements(v, c.elem)...)
		}
	}
	return appendString(out, v)
}

// exact returns a whole number's text as JSON that loses nothing: the
// number where a double holds it exactly, else a string of it.
func exact(v []byte) []byte {
	canonical, err := jcs.CanonicalizeLossless(v)
	if err != nil {
		quoted, _ := json.Marshal(string(v)) // a string always encodes
		return quoted
	}
	return canonical
}

// elements returns an array's JSON (to_jsonb's, valid) with each element
// as its kind makes it: to_jsonb already writes most kinds as this package
// does (dates, timestamps, intervals in the session's styles, numbers,
// booleans, JSON itself); an int8, numeric or bytea element is rewritten.
func elements(v []byte, elem kind) []byte {
	var leaf func(any) any
	switch elem {
	case kindBigint:
		leaf = func(x any) any {
			if n, ok := x.(json.Number); ok {
				return json.RawMessage(exact([]byte(n)))
			}
			return x
		}
	case kindNumeric:
		leaf = func(x any) any {
			if n, ok := x.(json.Number); ok {
				return string(n) // NaN and the infinities are strings already
			}
			return x
		}
	case kindBytea:
		leaf = func(x any) any {
			if s, ok := x.(string); ok {
				return strings.TrimPrefix(s, `\x`) // bytea_output is hex
			}
			return x
		}
	default:
		return v
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		return v
	}
	out, err := json.Marshal(mapLeaves(tree, leaf))
	if err != nil {
		return v
	}
	return out
}

// mapLeaves replaces each element of nested arrays that is not an array.
func mapLeaves(v any, leaf func(any) any) any {
	list, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil
		}
		return leaf(v)
	}
	for i, x := range list {
		list[i] = mapLeaves(x, leaf)
	}
	return list
}

// cutValueBytes is what one CutValues entry adds to the answer's JSON.
func cutValueBytes(row, column int) int {
	return len(`{"row":,"column":},`) + len(strconv.Itoa(row)) + len(strconv.Itoa(column))
}

func rowTextLen(values [][]byte) int {
	n := 0
	for _, v := range values {
		n += len(v) + 3
	}
	return n
}

// firstRunes returns the first n characters of valid UTF-8 text.
func firstRunes(v []byte, n int) []byte {
	i := 0
	for ; n > 0 && i < len(v); n-- {
		_, size := utf8.DecodeRune(v[i:])
		i += size
	}
	return v[:i]
}

// appendString appends text as a JSON string.
func appendString(out, text []byte) []byte {
	quoted, _ := json.Marshal(string(text)) // a string always encodes
	return append(out, quoted...)
}

// isJSONNumber says whether Postgres's text of a number is also a JSON
// number: not NaN or an infinity, and no form JSON lacks.
func isJSONNumber(v []byte) bool {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	return json.Valid(v)
}
