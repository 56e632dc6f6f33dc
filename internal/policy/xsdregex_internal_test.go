package policy

import (
	"regexp"
	"strings"
	"testing"
)

// TestXSDToRE2: what xsdToRE2 writes matches and refuses values as XML
// Schema's pattern does (XSD 1.0 Part 2, Appendix F), and is read alike
// by ECMA-262 with the u flag: no identity escape but a syntax
// character's, no RE2-only syntax.
func TestXSDToRE2(t *testing.T) {
	for _, tt := range []struct {
		pattern   string
		match, no []string
	}{
		{`\d+$`, []string{"12$", "\u0661\u0662$", "\U0001D7CE$"}, []string{"12", "$", "a$"}},
		{`^\d{2}`, []string{"^12"}, []string{"12", "^1"}},
		{`a$b|^`, []string{"a$b", "^"}, []string{"ab", ""}},
		{`a\sb`, []string{"a b", "a\tb", "a\nb", "a\rb"}, []string{"a\u00a0b", "a\u2028b", "a\fb", "a\vb", "a\ufeffb"}},
		{`a\Sb`, []string{"a\u00a0b", "axb", "a\fb"}, []string{"a b", "a\nb"}},
		{`a.b`, []string{"a\u2028b", "a\u2029b", "a\u00a0b", "a\fb", "a\U0001F600b"}, []string{"a\nb", "a\rb", "ab"}},
		{`\w+`, []string{"abc", "é9", "€"}, []string{"a b", "a_b", "a-b", "a\u00a0b", "a\u200bb"}},
		{`\W`, []string{" ", "_", "-", "\u00a0", "\u200b"}, []string{"a", "€"}},
		{`\D`, []string{"a", "_"}, []string{"1", "\u0661"}},
		{`\p{Lu}\p{Ll}*`, []string{"Ab", "Éé"}, []string{"ab", "A1"}},
		{`\P{L}`, []string{"1", " "}, []string{"a"}},
		{`\p{IsBasicLatin}+`, []string{"abc~\x00"}, []string{"é"}},
		{`\P{IsBasicLatin}`, []string{"é"}, []string{"a"}},
		{`[a-z-[aeiou]]+`, []string{"bcd", "xyz"}, []string{"bad", "B"}},
		// A subtraction over categories is written out from Go's tables.
		{`[\w-[\d]]+`, []string{"abc", "é€"}, []string{"a1", "\u0661", " ", "_"}},
		{`[\p{L}-[\p{Lu}]]+`, []string{"abé", "\u01c5", "\u02b0"}, []string{"A", "É", "1"}},
		{`[a-z-[\p{IsBasicLatin}]]`, nil, nil}, // refused below: it matches no character
		{`[\p{L}-[\p{IsBasicLatin}]]+`, []string{"éλ"}, []string{"a", "Z"}},
		{`[\P{Nd}-[\s]]`, []string{"a", "\u00a0"}, []string{"1", " ", "\u0661"}},
		{`[a\P{L}]`, []string{"a", "1", " "}, []string{"b", "é"}},
		// \i and \c are XML 1.0 (5th ed.) NameStartChar and NameChar.
		{`\i+`, []string{":_aZ", "\u00c0\u00d6\u00d8\u00f6\u00f8\u02ff", "\u0370\u037d\u037f\u1fff", "\u200c\u200d", "\u2070\u218f",
			"\u2c00\u2fef\u3001\ud7ff", "\uf900\ufdcf\ufdf0\ufffd", "\U00010000\U000effff"},
			[]string{"9", "-", ".", "\u00b7", "\u00d7", "\u00f7", "\u0300", "\u037e", "\u2000", "\u200b", "\u200e", "\u203f", "\u206f", "\u2190",
				"\u2bff", "\u2ff0", "\u3000", "\uf8ff", "\ufdd0", "\ufdef", "\ufffe", "\U000f0000", " "}},
		{`\c+`, []string{"a-.09\u00b7\u0300\u036f\u203f\u2040:_", "\U000effff"}, []string{"/", "\u00b6", "\u00b8", "\u203e", "\u2041", " ", "\u00d7"}},
		{`\i\c*`, []string{"a1", "_x.y-z"}, []string{"1a", "-a", ".a"}},
		{`[\i-[:]]+`, []string{"a_"}, []string{":", "1"}},
		// Blocks, as XML Schema 1.0 names them (Unicode 3.1).
		{`\p{IsGreek}+`, []string{"\u0370\u03ff"}, []string{"\u036f", "\u0400"}},
		{`\p{IsCJKUnifiedIdeographsExtensionA}`, []string{"\u3400", "\u4db5"}, []string{"\u4db6", "\u33ff"}},
		{`\p{IsSpecials}`, []string{"\ufeff", "\ufff0", "\ufffd"}, []string{"\ufffe", "\ufefe"}},
		{`\p{IsPrivateUse}`, []string{"\ue000", "\uf8ff", "\U000f0000", "\U0010fffd"}, []string{"\uf900", "\U000effff"}},
		{`\p{IsMathematicalAlphanumericSymbols}`, []string{"\U0001d400", "\U0001d7ff"}, []string{"\U0001d3ff", "\U0001d800"}},
		{`\p{IsTags}`, []string{"\U000e0000", "\U000e007f"}, []string{"\U000e0080"}},
		{`[\p{IsGreek}-[\p{Ll}]]+`, []string{"\u0391\u0374"}, []string{"\u03b1"}},
		{`\P{IsLatin-1Supplement}`, []string{"a", "\u0100"}, []string{"\u00e9"}},
		{`[^a-c]`, []string{"d", "^"}, []string{"a", "b"}},
		{`[a^]`, []string{"^", "a"}, []string{"b"}},
		{`[-a]+`, []string{"-a"}, []string{"b"}},
		{`[a-]+`, []string{"-a"}, []string{"b"}},
		{`[\S]`, []string{"a"}, []string{" "}},
		{`[^\S]`, []string{" ", "\t"}, []string{"a", "\u00a0"}},
		{`[a\S]`, []string{"a", "b", "\u00a0"}, []string{" ", "\n"}},
		{`[\S-[a]]`, []string{"b"}, []string{"a", " "}},
		{`[^a\S]`, []string{" ", "\t"}, []string{"a", "b"}},
		{`[^\s\P{IsBasicLatin}]`, []string{"a"}, []string{" ", "é"}},
		// What is left ends in the surrogates, which are not written.
		{"[\\P{IsBasicLatin}-[\ue000-\uffff]]", []string{"é", "\ud7ff", "\U0001F600"}, []string{"a", "\ue000", "\ufffd"}},
		{`[\s\d]+`, []string{" 1\u0661"}, []string{"a", "\u00a0"}},
		{`[\-\[\]\\\^]+`, []string{`-[]\^`}, []string{"a"}},
		{`\$`, nil, nil}, // refused below: $ is not escaped in XML Schema
		{`(ab)*c{2,3}`, []string{"abcc", "ccc"}, []string{"abc", "cccc"}},
		{`\\\|\.\-\^\?\*\+\{\}\(\)\[\]\n\r\t`, []string{"\\|.-^?*+{}()[]\n\r\t"}, []string{""}},
		{`a/b#c`, []string{"a/b#c"}, []string{"a/bc"}},
		{``, []string{""}, []string{"a"}},
		{`a|`, []string{"a", ""}, []string{"b"}},
	} {
		got, err := xsdToRE2(tt.pattern)
		if tt.match == nil {
			if err == nil {
				t.Errorf("%s: written %q, want it refused", tt.pattern, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.pattern, err)
			continue
		}
		re := regexp.MustCompile(got)
		for _, v := range tt.match {
			if !re.MatchString(v) {
				t.Errorf("%s (written %q) does not match %q, which XML Schema's does", tt.pattern, got, v)
			}
		}
		for _, v := range tt.no {
			if re.MatchString(v) {
				t.Errorf("%s (written %q) matches %q, which XML Schema's does not", tt.pattern, got, v)
			}
		}
		// Outside the escapes of the u flag ECMA reads as RE2 does, none.
		if bad := regexp.MustCompile(`\\[^\\^$.*+?()\[\]{}|\-pPnrtx]`).FindString(strings.ReplaceAll(got, `\\`, "")); bad != "" {
			t.Errorf("%s: written %q, whose %s ECMA-262's u flag refuses or reads otherwise", tt.pattern, got, bad)
		}
	}
	// \I, \C and a negated or subtracted \i or \c: see
	// TestXSDNameCharComplementsAreNeverStricter.
	for _, pattern := range []string{`\I`, `\C`, `[^\c]`, `[\I1]`, `[\c-[\i]]+`, `[\p{L}-[\i]]`, `[\p{L}-[\p{Ll}-[\c]]]`,
		`[a-z-[\p{IsBasicLatin}]]`, `[\w-[\p{Lu}\p{Mn}]]`, `\p{IsHighSurrogates}`, `a*?`, `a**`, `a{2}{3}`, `(?:a)`, `(?=a)`, `(a)\1`, `a{,3}`, `a{1001}`, `a{3,2}`,
		`\p{IsNoSuchBlock}`, `\p{Xx}`, `\pL`, `[]`, `[a-[a]]`, `[a-b-c]`, `[z-a]`, `[a[b]`, `a]`, `a}`, `(a`, `a)`, `\`, `\x41`, `\u0041`,
		`\b`, `\A`, "\xff"} {
		if got, err := xsdToRE2(pattern); err == nil {
			t.Errorf("%s: written %q, want it refused", pattern, got)
		}
	}
}

// TestXSDToRE2WrittenOutIsBounded: each class written out as ranges was
// bounded (maxWrittenRanges), the pattern was not, so a pattern that
// repeats a class over a category was written out as hundreds of KB (200
// copies of the 16 bytes [\p{L}-[\p{Lu}]] were 1.1 MB) into every schema
// that holds it, and compiled so at every load. What a pattern writes out
// is bounded as a whole: past it, the pattern is left to the upstream.
func TestXSDToRE2WrittenOutIsBounded(t *testing.T) {
	class := `[\p{L}-[\p{Lu}]]`
	for _, n := range []int{1, 2} {
		if _, err := xsdToRE2(strings.Repeat(class, n)); err != nil {
			t.Errorf("%d classes: %v", n, err)
		}
	}
	for _, n := range []int{3, 200} {
		if got, err := xsdToRE2(strings.Repeat(class, n)); err == nil {
			t.Errorf("%d classes written out, %d bytes, want it refused", n, len(got))
		}
	}
	// What is not written out (a category, a literal) is not bounded so.
	if _, err := xsdToRE2(strings.Repeat(`\p{L}a`, 5000)); err != nil {
		t.Errorf("5000 categories: %v", err)
	}
}

// TestXSDNameCharComplementsAreNeverStricter: \i and \c are written as XML
// 1.0 (Fifth Edition)'s name characters, a superset of the earlier
// editions' (Appendix B, Unicode 2.0's letters) that XML Schema 1.0's
// processors (Xerces among them) still read them by: what an upstream
// takes, orangerail takes. Their complements are the other way round: \I,
// \C, [^\c] or a subtraction of \i written from the Fifth Edition hold
// fewer characters than the earlier editions' do, and refused what such
// an upstream takes (U+2C00, a Glagolitic letter since Unicode 4.1, is no
// name character in Appendix B, so \I holds it there; U+0661, an
// Arabic-Indic digit, is a NameChar and no Letter there). Such a pattern
// is left to the upstream, or, written, holds them.
func TestXSDNameCharComplementsAreNeverStricter(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		olderEd []string // the pattern holds it by XML 1.0's earlier editions
	}{
		{`\I`, []string{"\u2c00", "\u037f"}},
		{`\C`, []string{"\u2c00"}},
		{`[^\i]`, []string{"\u2c00"}},
		{`[^\c]`, []string{"\u2c00"}},
		{`[\I1]`, []string{"\u2c00"}},
		{`[\c-[\i]]`, []string{"\u0661"}},
		{`[\p{Nd}-[\i]]`, []string{"\u0661"}},
	} {
		got, err := xsdToRE2(tt.pattern)
		if err != nil {
			continue
		}
		re := regexp.MustCompile(got)
		for _, v := range tt.olderEd {
			if !re.MatchString(v) {
				t.Errorf("%s (written %q) refuses %q, which XML Schema takes by XML 1.0's earlier editions", tt.pattern, got, v)
			}
		}
	}
	// \i and \c themselves, and a subtraction from them, hold the Fifth
	// Edition's characters, which are all the earlier editions' too.
	for _, pattern := range []string{`\i\c*`, `[\i-[:]]+`, `[\c\s]`} {
		if _, err := xsdToRE2(pattern); err != nil {
			t.Errorf("%s: %v", pattern, err)
		}
	}
}
