package policy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestECMAToRE2: what ecmaToRE2 writes, and what it refuses because RE2
// would read it otherwise than ECMA-262 does.
func TestECMAToRE2(t *testing.T) {
	for pattern, want := range map[string]string{
		`^\d{3}-\w+\b$`: `^\d{3}-\w+\b$`,
		`^a.b$`:         "^a" + ecmaDot + "b$",
		`[.]`:           `[.]`,
		`\s`:            "[" + ecmaSpace + "]",
		`\S`:            "[^" + ecmaSpace + "]",
		`[\s\d]`:        "[" + ecmaSpace + `\d]`,
		`[\b]`:          `[\x08]`,
		`\u00e9\u002e`:  `é\.`,
		`[a[]`:          `[a\[]`,
		`(?:a)(?<n>b)`:  `(?:a)(?<n>b)`,
		`\/\.`:          `\/\.`,
	} {
		got, err := ecmaToRE2(pattern)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", pattern, got, err, want)
		}
	}
	for _, pattern := range []string{`\Ax`, `x\Z`, `x\z`, `\Qa\E`, `\pL`, `\cA`, `(?=a)`, `(?!a)`, `(?<=a)`, `(?i)a`, `(?P<n>a)`,
		`[]a]`, `[^]`, `[[:alpha:]]`, `[\S]`, `(a)\1`, `\ud83d`, `\x{41}`, `a\`, "\xff"} {
		if got, err := ecmaToRE2(pattern); err == nil {
			t.Errorf("%s: written %q, which RE2 reads otherwise than ECMA", pattern, got)
		}
	}
}

// TestECMAToRE2WritesUnicodeModeEscapes: a \uHHHH of ASCII punctuation is
// written as an escape ECMA-262 also reads with the u flag — which JSON
// Schema asks validators to use (2020-12 core 6.4) and Ajv does — since
// the written pattern is what agents are shown: with u, an identity
// escape is only of a syntax character or /, so \  or \~ is a SyntaxError
// (^[\u0020-\u007E]+$ was shown as ^[\ -\~]+$). RE2 reads it as the
// character still.
func TestECMAToRE2WritesUnicodeModeEscapes(t *testing.T) {
	unicodeMode := func(written string) bool {
		for i := 0; i < len(written); i++ {
			if written[i] != '\\' {
				continue
			}
			i++
			if !strings.ContainsRune(`^$\.*+?()[]{}|/`+"xtnvfrdDwWsSbB", rune(written[i])) {
				return false
			}
		}
		return true
	}
	for c := rune(0x20); c < 0x7f; c++ {
		if isAlnum(byte(c)) {
			continue
		}
		for _, pattern := range []string{fmt.Sprintf(`^\u%04X$`, c), fmt.Sprintf(`^[\u%04X]$`, c)} {
			got, err := ecmaToRE2(pattern)
			if err != nil {
				t.Errorf("%s: %v", pattern, err)
				continue
			}
			if !unicodeMode(got) {
				t.Errorf("%s: written %q, an escape ECMA's u flag refuses", pattern, got)
			}
			if re := regexp.MustCompile(got); !re.MatchString(string(c)) || re.MatchString("a") {
				t.Errorf("%s: written %q, which RE2 reads as another character", pattern, got)
			}
		}
	}
}

// TestECMAToRE2ClassEscapeBesideADash: \s beside a class's - is no range
// in ECMA (Annex B: the class holds \s, - and the other end); written out
// as its characters, whose first is \t and last U+FEFF, RE2 would read a
// range to or from one of them, and refuse a - the upstream takes. Such
// a pattern is refused, or written to match - still.
func TestECMAToRE2ClassEscapeBesideADash(t *testing.T) {
	for _, pattern := range []string{`^[\t-\s]$`, `^[\x00-\s]$`, `^[\u0001-\s]$`, `^[\s-\uffff]$`} {
		got, err := ecmaToRE2(pattern)
		if err != nil {
			continue
		}
		if re := regexp.MustCompile(got); !re.MatchString("-") || re.MatchString("\x05") {
			t.Errorf("%s: written %q, a range RE2 reads where ECMA reads \\s, - and a character", pattern, got)
		}
	}
}
