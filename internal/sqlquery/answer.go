package sqlquery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// kind is how a column's values travel from Postgres and become JSON. Every
// column is sent as text, so no value is decoded by type in Go; its kind
// decides whether that text is bounded by its type or cut to a share, and
// which JSON it becomes.
type kind uint8

const (
	// kindText: any type not below; a JSON string of its text, cut.
	kindText kind = iota
	// kindBool: true or false, as JSON.
	kindBool
	// kindInteger: int2, int4, int8, oid; its text is a JSON number.
	kindInteger
	// kindFloat: float4, float8; a JSON number, or its text as a string
	// where JSON has no number ("NaN", "Infinity", "-Infinity").
	kindFloat
	// kindNumeric: as kindFloat, but its text is unbounded, so cut.
	kindNumeric
	// kindJSON: json, jsonb: the JSON itself when whole; cut, its text as a
	// string.
	kindJSON
	// kindArray: an array of a type pgx knows, sent as to_jsonb's text and
	// then treated as kindJSON.
	kindArray
)

// cut says whether a kind's text is unbounded, and so cut to a share.
func (k kind) cut() bool {
	return k == kindText || k == kindNumeric || k == kindJSON || k == kindArray
}

// kindOf classifies a described column by its type.
func kindOf(oid uint32, types *pgtype.Map) kind {
	switch oid {
	case pgtype.BoolOID:
		return kindBool
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		return kindInteger
	case pgtype.Float4OID, pgtype.Float8OID:
		return kindFloat
	case pgtype.NumericOID:
		return kindNumeric
	case pgtype.JSONOID, pgtype.JSONBOID:
		return kindJSON
	}
	if t, ok := types.TypeForOID(oid); ok {
		if _, array := t.Codec.(*pgtype.ArrayCodec); array {
			return kindArray
		}
	}
	return kindText
}

// answer reads one statement's rows: the kind of each column, and the
// share of RowChars each cut column may hold.
type answer struct {
	kinds []kind
	share int // characters a cut column's value may hold
}

func newAnswer(fields []pgconn.FieldDescription, types *pgtype.Map) *answer {
	a := &answer{kinds: make([]kind, len(fields))}
	cut := 0
	for i, f := range fields {
		a.kinds[i] = kindOf(f.DataTypeOID, types)
		if a.kinds[i].cut() {
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
	values := make([]string, len(a.kinds))
	names := make([]string, len(a.kinds))
	for i, k := range a.kinds {
		names[i] = fmt.Sprintf("c%d", i+1)
		value := "orangerail_query." + names[i]
		switch k {
		case kindBool, kindInteger, kindFloat:
			values[i] = value + "::text" // bounded by its type
		case kindArray:
			values[i] = fmt.Sprintf("left(to_jsonb(%s)::text, %d)", value, a.share+1)
		default:
			values[i] = fmt.Sprintf("left(%s::text, %d)", value, a.share+1)
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
		k := a.kinds[i]
		if k.cut() && utf8.RuneCount(v) > a.share {
			v = firstRunes(v, a.share)
			cut = append(cut, i)
			out = appendString(out, v)
			continue
		}
		// Text is sent as is only where it is JSON of the column's kind (a
		// type changed between describe and run cannot break the answer).
		var raw bool
		switch k {
		case kindBool:
			raw = string(v) == "true" || string(v) == "false"
		case kindInteger, kindFloat, kindNumeric:
			raw = isJSONNumber(v) // not NaN, Infinity, -Infinity
		case kindJSON, kindArray:
			raw = json.Valid(v)
		}
		if raw {
			out = append(out, v...)
		} else {
			out = appendString(out, v)
		}
	}
	return append(out, ']'), cut
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
