package engine

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
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.pos == len(b)
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
		if members {
			if v.pos >= len(v.b) || v.b[v.pos] != '"' || !v.str() {
				return false
			}
			v.space()
			if v.pos >= len(v.b) || v.b[v.pos] != ':' {
				return false
			}
			v.pos++
			v.space()
		}
		if !v.value(depth + 1) {
			return false
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
		c := v.b[v.pos]
		switch {
		case c == '"':
			v.pos++
			return true
		case c < 0x20:
			return false
		case c != '\\':
			v.pos++
			continue
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
