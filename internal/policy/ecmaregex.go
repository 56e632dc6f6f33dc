package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ecmaSpace is what ECMA-262's \s matches (WhiteSpace and LineTerminator):
// RE2's \s is [\t\n\f\r ] alone. The characters are written as themselves,
// which both dialects read alike, so that the pattern written is still
// the ECMA one an agent reads.
const ecmaSpace = "\\t\\n\\v\\f\\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

// ecmaDot is what ECMA-262's . matches (no s flag): RE2's leaves out \n
// alone.
const ecmaDot = "[^\\n\\r\u2028\u2029]"

// ecmaToRE2 writes an ECMA-262 pattern (JSON Schema's dialect) so that
// RE2 reads it as ECMA does: \s, \S and . spelled out, \uHHHH as the
// character. It refuses, with the reason, a pattern it cannot write so:
// what RE2 does not have (lookaround, backreferences) or reads otherwise
// (\A, \Z, \z, \Q, \p, \c, [[:alpha:]], inline flags, an empty class).
// \d, \w, \b and their negations are ASCII in both, and kept.
func ecmaToRE2(pattern string) (string, error) {
	var b strings.Builder
	inClass := false
	// dash: the class member before was a - between two members, which
	// makes a range of them; first: none is read yet.
	dash, first := false, false
	for i := 0; i < len(pattern); {
		r, size := utf8.DecodeRuneInString(pattern[i:])
		afterDash, atFirst := dash, first
		dash, first = false, false
		switch {
		case r == utf8.RuneError && size == 1:
			return "", fmt.Errorf("it is not UTF-8")
		case r == '\\':
			if i+1 >= len(pattern) {
				return "", fmt.Errorf("it ends in a lone backslash")
			}
			// \s at a range's - is no range in ECMA (Annex B: the class
			// holds \s, - and the other end); written out, from \t to
			// U+FEFF, RE2 would read a range to or from its first or last.
			if next := pattern[i+2:]; inClass && pattern[i+1] == 's' &&
				(afterDash || strings.HasPrefix(next, "-") && len(next) > 1 && next[1] != ']') {
				return "", fmt.Errorf("\\s beside a - in a class is no range in ECMA, and would be one in RE2")
			}
			n, written, err := ecmaEscape(pattern[i+1:], inClass)
			if err != nil {
				return "", err
			}
			b.WriteString(written)
			i += 1 + n
			continue
		case inClass && r == ']':
			inClass = false
		case inClass && r == '[':
			if strings.HasPrefix(pattern[i+1:], ":") || strings.HasPrefix(pattern[i+1:], "=") || strings.HasPrefix(pattern[i+1:], ".") {
				return "", fmt.Errorf("[%c inside a class is a literal in ECMA and a POSIX class in RE2", pattern[i+1])
			}
			b.WriteString(`\[`)
			i++
			continue
		case inClass:
			dash = r == '-' && !atFirst
		case r == '[':
			inClass, first = true, true
			b.WriteByte('[')
			i++
			if strings.HasPrefix(pattern[i:], "^") {
				b.WriteByte('^')
				i++
			}
			if strings.HasPrefix(pattern[i:], "]") {
				return "", fmt.Errorf("[] and [^] match nothing and anything in ECMA; RE2 reads the ] as a member")
			}
			continue
		case r == '.':
			b.WriteString(ecmaDot)
			i++
			continue
		case r == '(' && strings.HasPrefix(pattern[i+1:], "?"):
			// (?: and (?<name> mean the same in both; lookaround, (?P<
			// and inline flags are not ECMA's, or not RE2's.
			rest := pattern[i+2:]
			if !strings.HasPrefix(rest, ":") && (!strings.HasPrefix(rest, "<") || strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, "<!")) {
				return "", fmt.Errorf("the group (?%.1s is not one both dialects read alike", rest)
			}
		}
		b.WriteString(pattern[i : i+size])
		i += size
	}
	out := b.String()
	if _, err := regexp.Compile(out); err != nil {
		return "", fmt.Errorf("it is not RE2")
	}
	return out, nil
}

// ecmaEscape writes the escape rest begins with (after its backslash)
// in a class or not; n is how many bytes of rest it took.
func ecmaEscape(rest string, inClass bool) (n int, written string, err error) {
	c := rest[0]
	switch {
	case c == 'd' || c == 'D' || c == 'w' || c == 'W' || c == 't' || c == 'n' || c == 'r' || c == 'f' || c == 'v':
		return 1, `\` + string(c), nil
	case c == 'b' && inClass:
		return 1, `\x08`, nil // a backspace in an ECMA class
	case (c == 'b' || c == 'B') && !inClass:
		return 1, `\` + string(c), nil
	case c == 's' && inClass:
		return 1, ecmaSpace, nil
	case c == 's':
		return 1, "[" + ecmaSpace + "]", nil
	case c == 'S' && !inClass:
		return 1, "[^" + ecmaSpace + "]", nil
	case c == 'x' && len(rest) >= 3 && isHex(rest[1:3]):
		return 3, `\x` + rest[1:3], nil
	case c == 'u' && len(rest) >= 5 && isHex(rest[1:5]):
		v, _ := strconv.ParseInt(rest[1:5], 16, 32) // four hex digits: at most 0xffff
		if v >= 0xd800 && v <= 0xdfff {
			return 0, "", fmt.Errorf("\\u%s is half of a UTF-16 pair, which RE2 does not match", rest[1:5])
		}
		return 5, ecmaChar(rune(v)), nil //nolint:gosec // G115: four hex digits, at most 0xffff
	case c < utf8.RuneSelf && !isAlnum(c):
		return 1, `\` + string(c), nil // punctuation, itself in both
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return 0, "", fmt.Errorf("the escape \\%c is not one both dialects read alike", r)
}

// ecmaChar writes r so that both dialects read it as itself: a letter,
// a digit or a character past ASCII as it is, a syntax character escaped,
// any other as \xHH. The pattern written is the one agents are shown,
// and ECMA's u flag (JSON Schema's advice, Ajv's default) refuses an
// identity escape of any but a syntax character or /: \  and \~ would be
// SyntaxErrors there.
func ecmaChar(r rune) string {
	switch {
	case r >= utf8.RuneSelf || isAlnum(byte(r)): //nolint:gosec // G115: r is ASCII here
		return string(r)
	case strings.ContainsRune(`^$\.*+?()[]{}|/`, r):
		return `\` + string(r)
	}
	return fmt.Sprintf(`\x%02x`, r)
}

func isHex(s string) bool {
	for i := range len(s) {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
