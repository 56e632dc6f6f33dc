package engine

import (
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/jcs"
)

// validJSONB reports whether Postgres reads b, already known to be UTF-8,
// as one jsonb value: what convert_from(b, 'UTF8')::jsonb accepts, which
// every record the SQL verifier checks must pass. It is RFC 8259's grammar
// with Postgres' own limits on what jsonb may hold:
//
//   - whitespace is space, tab, newline and carriage return, and nothing
//     but whitespace may follow the value;
//   - a string holds no raw control character (below U+0020); its escapes
//     are \" \\ \/ \b \f \n \r \t and \uXXXX, where \u0000 is refused
//     (jsonb's text cannot hold it), a high surrogate must be followed by
//     an escaped low one, and a low one must follow a high one;
//   - a number is -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? that fits
//     Postgres' numeric: an exponent under 2^30-1 either way, at most 16383
//     digits after the point as written (its fraction's digits less its
//     exponent), and, unless it is zero, at most 131072 before it.
//
// It walks b once without allocating: the verifier runs it on every record
// of a chain.
func validJSONB(b []byte) bool {
	v := jsonbValidator{b: b}
	return v.whole()
}

// StorableJSON reports whether b is JSON an audit record can carry as it
// is: UTF-8 that Postgres reads as jsonb (validJSONB) — no \u0000, no lone
// surrogate, no number its numeric cannot hold. An effect's result that is
// not is refused with its record (X_AUDIT_ENTRY_INVALID), after the effect
// ran: an effect says such data some other way (in base64).
//
// It must also be what the record's canonical form (RFC 8785) takes as a
// member's value one level down (a result's body): no member name
// repeated, nesting within jcs.MaxDepth, no number literal longer than
// jcs.MaxNumberLength — else the record is refused the same way.
func StorableJSON(b []byte) bool {
	if !utf8.Valid(b) || !validJSONB(b) {
		return false
	}
	wrapped := make([]byte, 0, len(b)+2)
	wrapped = append(append(append(wrapped, '['), b...), ']')
	_, err := jcs.CanonicalizeLossless(wrapped)
	return err == nil
}

// member is one member of a JSON object as written: its name's token,
// quotes and escapes kept, and its value's bytes.
type member struct{ name, value []byte }

// object is validJSONB for a text whose value must be an object, and
// returns that object's members in order: one walk of the text both
// validates it and finds the members, so a caller need not scan it again.
// The members are held in v, which a caller keeps on its stack: reading
// an entry of a chain allocates nothing.
func (v *jsonbValidator) object(b []byte) ([]member, bool) {
	// Only first[:n] is ever read: leave the rest as it was rather than
	// clear three quarters of a kilobyte an entry.
	v.b, v.pos, v.record, v.n, v.more = b, 0, true, 0, nil
	v.space()
	if v.pos >= len(b) || b[v.pos] != '{' || !v.whole() {
		return nil, false
	}
	if v.more != nil {
		return append(v.first[:v.n:v.n], v.more...), true
	}
	return v.first[:v.n], true
}

// Postgres' limits on a numeric (src/include/utils/numeric.h and
// set_var_from_str): the digits a value may have after its point, before
// it, and the exponent its text may carry.
const (
	numericDscaleMax   = 16383
	numericIntDigitMax = 131072
	numericExponentMax = 1<<30 - 1
)

// jsonbMaxDepth bounds the nesting validJSONB follows, so that a hostile
// entry cannot exhaust the verifier's stack. Postgres' own bound
// (max_stack_depth) is lower than this with its defaults.
const jsonbMaxDepth = 100_000

type jsonbValidator struct {
	b   []byte
	pos int
	// record asks for the members of the outermost object: the first
	// ones in first, where they cost no allocation, the rest in more.
	record bool
	n      int
	first  [16]member
	more   []member
	// deepest is the deepest nesting read: 0 for a scalar, 1 for the
	// values of the outermost container.
	deepest int
}

// whole reads the one value b must hold, with whitespace around it.
func (v *jsonbValidator) whole() bool {
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.pos == len(v.b)
}

func (v *jsonbValidator) space() {
	for v.pos < len(v.b) {
		switch v.b[v.pos] {
		case ' ', '\t', '\n', '\r':
			v.pos++
		default:
			return
		}
	}
}

// value reads one value at the cursor, at the given depth of nesting.
func (v *jsonbValidator) value(depth int) bool {
	if v.pos >= len(v.b) || depth > jsonbMaxDepth {
		return false
	}
	v.deepest = max(v.deepest, depth)
	switch c := v.b[v.pos]; {
	case c == '{':
		return v.container(depth, '}', true)
	case c == '[':
		return v.container(depth, ']', false)
	case c == '"':
		return v.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(v.b)-v.pos >= len(lit) && string(v.b[v.pos:v.pos+len(lit)]) == lit {
				v.pos += len(lit)
				return true
			}
		}
		return false
	}
}

// container reads an object (members: name, colon, value) or an array,
// up to its closing byte.
func (v *jsonbValidator) container(depth int, closing byte, members bool) bool {
	v.pos++ // the opening brace or bracket
	v.space()
	if v.pos < len(v.b) && v.b[v.pos] == closing {
		v.pos++
		return true
	}
	for {
		var name []byte
		if members {
			nameStart := v.pos
			if v.pos >= len(v.b) || v.b[v.pos] != '"' || !v.str() {
				return false
			}
			name = v.b[nameStart:v.pos]
			v.space()
			if v.pos >= len(v.b) || v.b[v.pos] != ':' {
				return false
			}
			v.pos++
			v.space()
		}
		valueStart := v.pos
		if !v.value(depth + 1) {
			return false
		}
		if members && depth == 0 && v.record {
			m := member{name: name, value: v.b[valueStart:v.pos]}
			if v.n < len(v.first) {
				v.first[v.n] = m
				v.n++
			} else {
				v.more = append(v.more, m)
			}
		}
		v.space()
		if v.pos >= len(v.b) {
			return false
		}
		switch v.b[v.pos] {
		case ',':
			v.pos++
			v.space()
		case closing:
			v.pos++
			return true
		default:
			return false
		}
	}
}

// str reads a string, its escapes as Postgres accepts them in jsonb.
func (v *jsonbValidator) str() bool {
	v.pos++ // the opening quote
	for v.pos < len(v.b) {
		// Most bytes of most strings are plain: pass them in a tight loop.
		b, pos := v.b, v.pos
		for pos < len(b) && plainInString[b[pos]] {
			pos++
		}
		if v.pos = pos; pos == len(b) {
			return false
		}
		switch b[pos] {
		case '"':
			v.pos++
			return true
		case '\\':
		default:
			return false // a control character
		}
		if v.pos+1 >= len(v.b) {
			return false
		}
		switch v.b[v.pos+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			v.pos += 2
		case 'u':
			r, ok := v.hex4(v.pos + 2)
			if !ok {
				return false
			}
			v.pos += 6
			switch {
			case r == 0:
				return false // jsonb's text cannot hold U+0000
			case r >= 0xDC00 && r <= 0xDFFF:
				return false // a low surrogate that follows no high one
			case r >= 0xD800 && r <= 0xDBFF:
				// A high surrogate: an escaped low one must follow.
				if v.pos+1 >= len(v.b) || v.b[v.pos] != '\\' || v.b[v.pos+1] != 'u' {
					return false
				}
				low, ok := v.hex4(v.pos + 2)
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return false
				}
				v.pos += 6
			}
		default:
			return false
		}
	}
	return false
}

// plainInString says which bytes stand for themselves in a JSON string:
// all but a quote, a backslash and the control characters.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// hex4 reads four hex digits at i.
func (v *jsonbValidator) hex4(i int) (rune, bool) {
	if i+4 > len(v.b) {
		return 0, false
	}
	var r rune
	for _, c := range v.b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads a number and reports whether it is one and fits Postgres'
// numeric.
func (v *jsonbValidator) number() bool {
	if v.b[v.pos] == '-' {
		v.pos++
	}
	digits := func() int {
		start := v.pos
		for v.pos < len(v.b) && v.b[v.pos] >= '0' && v.b[v.pos] <= '9' {
			v.pos++
		}
		return v.pos - start
	}
	intStart := v.pos
	intLen := digits()
	if intLen == 0 || (intLen > 1 && v.b[intStart] == '0') {
		return false
	}
	fracStart, fracLen := v.pos, 0
	if v.pos < len(v.b) && v.b[v.pos] == '.' {
		v.pos++
		fracStart = v.pos
		if fracLen = digits(); fracLen == 0 {
			return false
		}
	}
	exponent := 0
	if v.pos < len(v.b) && (v.b[v.pos] == 'e' || v.b[v.pos] == 'E') {
		v.pos++
		negative := false
		if v.pos < len(v.b) && (v.b[v.pos] == '+' || v.b[v.pos] == '-') {
			negative = v.b[v.pos] == '-'
			v.pos++
		}
		start := v.pos
		if digits() == 0 {
			return false
		}
		for _, d := range v.b[start:v.pos] {
			if exponent <= numericExponentMax { // saturates past the bound, as strtol does
				exponent = exponent*10 + int(d-'0')
			}
		}
		if negative {
			exponent = -exponent
		}
	}
	if exponent >= numericExponentMax || exponent <= -numericExponentMax {
		return false
	}
	if fracLen-exponent > numericDscaleMax {
		return false
	}
	// The digits before the point once the exponent moved it, counted
	// from the first that is not zero; a zero has none.
	first := -1
	for i, d := range v.b[intStart : intStart+intLen] {
		if d != '0' {
			first = i
			break
		}
	}
	before := 0
	switch {
	case first >= 0:
		before = intLen - first + exponent
	default:
		for i, d := range v.b[fracStart : fracStart+fracLen] {
			if d != '0' {
				before = -i + exponent
				first = i
				break
			}
		}
	}
	return first < 0 || before <= numericIntDigitMax
}
