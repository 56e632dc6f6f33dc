// Package display makes text that came from an agent or a database safe to
// show a person, on a terminal or a page: nothing it returns can move the
// cursor, erase or overwrite a line, reorder what is read (bidirectional
// overrides), or hide in plain sight (zero-width and other invisible
// characters). Every human-facing rendering of approvals uses it: the
// approvals CLI today, the approver's web desk next.
//
// The escaped form is JSON's, chosen because it is visible, already
// familiar, and unambiguous: a string shown by Text either is itself, or
// begins with a double quote and is a JSON string literal that decodes to
// it; a JSON text shown by JSON still parses to the same value.
package display

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal or a page as itself:
// a control character (C0, DEL, C1), a format character (Unicode category
// Cf: the bidirectional embeddings, overrides, isolates and marks, U+061C,
// the zero-width space, joiners and no-break space U+FEFF, the soft hyphen,
// the tag characters), the line and paragraph separators U+2028 and U+2029,
// or another character Unicode says to render invisibly (variation
// selectors and the other default-ignorable code points).
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// Text returns s as it may be shown to a person. A string of safe
// characters that does not begin with a double quote is returned as it is,
// so plain text reads plainly. Any other string is returned as a JSON
// string literal: in double quotes, with \" and \\, with \b \f \n \r \t for
// those five controls, and with \uXXXX (lower-case hex; a UTF-16 surrogate
// pair above U+FFFF) for every other unsafe character. A byte that is not
// UTF-8 shows as \ufffd, since JSON cannot hold it.
func Text(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, `"`) && strings.IndexFunc(s, Unsafe) < 0 {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			writeRune(&b, r)
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// JSON returns a JSON text as it may be shown to a person: indented as
// json.Indent indents it (every line after the first begun with prefix, one
// indent per level), its key order and number spellings those of raw and
// its insignificant whitespace (carriage returns, tabs) replaced by the
// indentation, so the same raw always shows the same way. Inside its
// strings every unsafe character is written as a JSON escape (as Text
// writes it), so the text shown still parses to the same value; escapes
// already in raw are shown as written, never decoded. A raw that is not
// JSON is shown as Text shows a string.
func JSON(raw []byte, prefix, indent string) string {
	var indented bytes.Buffer
	if err := json.Indent(&indented, raw, prefix, indent); err != nil {
		return Text(string(raw))
	}
	src := bytes.TrimRight(indented.Bytes(), " \t\r\n")
	var b strings.Builder
	inString := false
	for i := 0; i < len(src); {
		c := src[i]
		if !inString {
			// Outside strings json.Indent leaves only JSON's punctuation
			// and literals, newlines, and the caller's prefix and indent.
			inString = c == '"'
			b.WriteByte(c)
			i++
			continue
		}
		switch c {
		case '"':
			inString = false
			b.WriteByte(c)
			i++
			continue
		case '\\': // an escape as raw wrote it: kept, never decoded
			b.Write(src[i : i+2])
			i += 2
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		default:
			writeRune(&b, r)
		}
		i += size
	}
	return b.String()
}

// writeRune writes r, or its JSON escape when it is unsafe.
func writeRune(b *strings.Builder, r rune) {
	if !Unsafe(r) {
		b.WriteRune(r)
		return
	}
	switch r {
	case '\b':
		b.WriteString(`\b`)
	case '\f':
		b.WriteString(`\f`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	default:
		if hi, lo := utf16.EncodeRune(r); hi != unicode.ReplacementChar {
			writeU(b, hi)
			writeU(b, lo)
			return
		}
		writeU(b, r)
	}
}

func writeU(b *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xF])
	}
}

// EchoMax is how many bytes of an agent's text an answer or a log line
// repeats (Echo).
const EchoMax = 64

// Echo returns as much of an agent's text as an answer or a log line
// repeats — a name it sent that is no property, tool or link — its first
// EchoMax bytes, cut on a rune boundary, with "…" after a cut. What an
// agent is told and what is logged of one name are then the same.
func Echo(s string) string {
	if len(s) <= EchoMax {
		return s
	}
	cut := EchoMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
