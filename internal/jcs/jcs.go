// Package jcs implements the JSON Canonicalization Scheme of RFC 8785: one
// byte sequence for each JSON value, so that a hash of it means the same thing
// to every reader.
//
// Input must be I-JSON (RFC 7493): valid UTF-8, no lone surrogates, no
// duplicate member names, and numbers an IEEE 754 double holds exactly as
// written. Anything else is refused rather than silently changed, so
// canonicalizing never loses information.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects the parser accepts.
const MaxDepth = 512

// MaxNumberLength bounds a number literal: a double never needs more, and
// comparing a longer one exactly would cost time for nothing.
const MaxNumberLength = 512

// SyntaxError reports input that is not I-JSON, at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
	// Path leads from the root to the value the error is in: its member
	// names and array indexes (in decimal), outermost first; a repeated
	// member's name last. Empty for the root value.
	Path []string
}

// within returns err, a value's error, as the error of the container
// member or element seg holding the value.
func within(err error, seg string) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		se.Path = append([]string{seg}, se.Path...)
	}
	return err
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jcs: %s at offset %d", e.Msg, e.Offset)
}

// Number is a JSON number as its canonical text.
type Number string

// Canonicalize returns the canonical form of one JSON value.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return Append(make([]byte, 0, len(data)), v), nil
}

// CanonicalizeLossless is Canonicalize for data orangerail records but did
// not receive as input (a row, a statement's result): a number a double
// cannot hold exactly becomes a JSON string of its literal, instead of
// refusing the whole value. Everything else is as Canonicalize.
func CanonicalizeLossless(data []byte) ([]byte, error) {
	p := parser{data: data, lossless: true}
	v, err := p.parse()
	if err != nil {
		return nil, err
	}
	return Append(make([]byte, 0, len(data)), v), nil
}

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(raw)
}

// Parse decodes one I-JSON value into nil, bool, Number, string, []any or
// map[string]any.
func Parse(data []byte) (any, error) {
	p := parser{data: data}
	return p.parse()
}

func (p *parser) parse() (any, error) {
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail("data after the JSON value")
	}
	return v, nil
}

// Append appends the canonical form of a value produced by Parse.
func Append(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case Number:
		return append(b, v...)
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = Append(b, e)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = Append(b, v[k])
		}
		return append(b, '}')
	default:
		panic(fmt.Sprintf("jcs: Append of %T, which Parse never returns", v))
	}
}

// compareUTF16 orders member names by their UTF-16 code units, as RFC 8785
// section 3.2.3 requires.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return slices.Compare(utf16.Encode([]rune{ra}), utf16.Encode([]rune{rb}))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

const hexDigits = "0123456789abcdef"

// appendString escapes exactly what RFC 8785 section 3.2.2.2 escapes.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	return append(AppendEscaped(b, s), '"')
}

// AppendEscaped is appendString without the quotes: a string's text as
// it stands inside a JSON string.
func AppendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return b
}

// AppendGoString appends the canonical form of s as encoding/json would
// give it: each byte that is not part of valid UTF-8 becomes U+FFFD, as
// Marshal then Canonicalize would write it, and the rest is escaped as
// RFC 8785 escapes it.
func AppendGoString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // of the run not yet appended
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(AppendEscaped(b, s[start:i]), utf8.RuneError)
			start = i + 1
		}
		i += size
	}
	return append(AppendEscaped(b, s[start:]), '"')
}

// AppendInt appends the canonical form of n: its digits when a double
// holds it exactly as they are (|n| <= 2^53), else what Canonicalize
// makes of the digits — the double's own form, or the refusal of a
// number no double holds.
func AppendInt(b []byte, n int64) ([]byte, error) {
	if -1<<53 <= n && n <= 1<<53 {
		return strconv.AppendInt(b, n, 10), nil
	}
	c, err := Canonicalize(strconv.AppendInt(nil, n, 10))
	if err != nil {
		return nil, err
	}
	return append(b, c...), nil
}

type parser struct {
	data     []byte
	pos      int
	lossless bool // inexact numbers become strings instead of errors
}

func (p *parser) fail(msg string) error {
	return &SyntaxError{Offset: p.pos, Msg: msg}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range []struct {
			text string
			v    any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if bytes.HasPrefix(p.data[p.pos:], []byte(lit.text)) {
				p.pos += len(lit.text)
				return lit.v, nil
			}
		}
		return nil, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // {
	obj := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("expected a member name")
		}
		at := p.pos
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[key]; dup {
			return nil, &SyntaxError{Offset: at, Msg: "duplicate member name", Path: []string{key}}
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("expected ':'")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, within(err, key)
		}
		obj[key] = v
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, nil
		default:
			return nil, p.fail("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // [
	arr := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return arr, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth)
		if err != nil {
			return nil, within(err, strconv.Itoa(len(arr)))
		}
		arr = append(arr, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return arr, nil
		default:
			return nil, p.fail("expected ',' or ']'")
		}
	}
}

// string decodes a string token, refusing invalid UTF-8 and lone surrogates.
func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", &SyntaxError{Offset: start, Msg: "string is not valid UTF-8"}
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", &SyntaxError{Offset: start, Msg: "string is not valid UTF-8"}
			}
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			break
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || !bytes.HasPrefix(p.data[p.pos:], []byte(`\u`)) {
					return "", p.fail("lone surrogate in string")
				}
				p.pos += 2
				lo, err := p.hex4()
				if err != nil {
					return "", err
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", p.fail("lone surrogate in string")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail(fmt.Sprintf("invalid escape \\%c", e))
		}
	}
	return "", p.fail("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.fail("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, p.fail("invalid \\u escape")
	}
	p.pos += 4
	return rune(v), nil
}

// number reads a number token and returns its canonical text: the shortest
// form that round-trips through a double, as ECMAScript prints it. A number
// whose canonical text denotes a different value is refused.
func (p *parser) number() (any, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return "", p.fail("invalid number")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		return "", &SyntaxError{Offset: intStart, Msg: "number has a leading zero"}
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return "", p.fail("invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return "", p.fail("invalid number")
		}
	}
	lit := string(p.data[start:p.pos])
	if len(lit) > MaxNumberLength {
		return "", &SyntaxError{Offset: start, Msg: fmt.Sprintf("number literal longer than %d characters", MaxNumberLength)}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		if p.lossless {
			return lit, nil
		}
		return "", &SyntaxError{Offset: start, Msg: "number out of range of a double"}
	}
	canon := formatNumber(f)
	if f == 0 && canon != lit && !zeroLiteral(lit) {
		// Underflowed: no double is its value. Comparing it as a big.Rat
		// would build 10^|exponent| (up to 10^999999, ~25ms a number).
		if p.lossless {
			return lit, nil
		}
		return "", &SyntaxError{Offset: start, Msg: "number is not exactly representable as a double; send it as a string"}
	}
	if canon != lit && !sameValue(canon, lit) {
		if p.lossless {
			return lit, nil
		}
		return "", &SyntaxError{Offset: start, Msg: "number is not exactly representable as a double; send it as a string"}
	}
	return Number(canon), nil
}

// formatNumber prints a double as ECMAScript's Number.prototype.toString.
func formatNumber(f float64) string {
	if f == 0 {
		return "0" // also for -0
	}
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		// strconv pads the exponent to two digits; ECMAScript does not.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return string(b)
}

// zeroLiteral reports whether a number literal's digits before its
// exponent are all zero.
func zeroLiteral(lit string) bool {
	for i := 0; i < len(lit); i++ {
		switch c := lit[i]; {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

func sameValue(a, b string) bool {
	ra, ok1 := new(big.Rat).SetString(a)
	rb, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && ra.Cmp(rb) == 0
}
