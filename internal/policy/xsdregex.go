package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// xsdSpace is XML Schema's \s, [ \t\n\r] alone, as class members.
const xsdSpace = ` \t\n\r`

// xsdToRE2 writes an XML Schema regular expression (a pattern facet; XSD
// 1.0 Part 2, Appendix F) as a pattern that RE2, which orangerail
// validates with, and ECMA-262 with the u flag, which JSON Schema 2020-12
// asks agents to read patterns with, both read as XML Schema does: the
// whole value matched (the anchors added), ^ and $ characters, \s
// [ \t\n\r], . all but \n and \r, \d \p{Nd}, \w all but \p{P}, \p{Z} and
// \p{C}, categories kept, blocks, \i and \c written as their ranges, a
// subtraction [a-z-[aeiou]] written out. Categories are read with Go's
// Unicode tables, as the server reads them; an agent's engine may carry
// another Unicode version.
//
// It refuses, with the reason, what it cannot write so (a block not in
// xsdBlocks, a class written out as more than maxWrittenRanges ranges,
// a pattern's classes as more than maxPatternRanges together)
// and what is not XML Schema (a lazy or doubled quantifier, a group (?,
// a backslash before a character XML Schema does not escape).
func xsdToRE2(pattern string) (string, error) {
	if !utf8.ValidString(pattern) {
		return "", errors.New("it is not UTF-8")
	}
	p := &xsdReader{s: []rune(pattern)}
	var b strings.Builder
	b.WriteString("^(?:")
	depth := 0
	quantifiable := false // the last thing written is an atom
	for p.more() {
		r := p.next()
		switch r {
		case '(':
			depth++
			b.WriteByte('(')
			quantifiable = false
			continue
		case ')':
			if depth == 0 {
				return "", errors.New("a ) closes no group")
			}
			depth--
			b.WriteByte(')')
		case '|':
			b.WriteByte('|')
			quantifiable = false
			continue
		case '?', '*', '+', '{':
			if !quantifiable {
				return "", fmt.Errorf("the quantifier %c follows no atom (XML Schema has no lazy quantifiers, no (?)", r)
			}
			q := string(r)
			if r == '{' {
				var err error
				if q, err = p.quantity(); err != nil {
					return "", err
				}
			}
			b.WriteString(q)
			quantifiable = false
			continue
		case '}', ']':
			return "", fmt.Errorf("a lone %c is not an XML Schema character; it is escaped", r)
		case '.':
			b.WriteString(`[^\n\r]`)
		case '[':
			s, err := p.class()
			if err != nil {
				return "", err
			}
			b.WriteString(s.written())
		case '\\':
			c, s, err := p.escape()
			if err != nil {
				return "", err
			}
			if s != nil {
				b.WriteString(s.written())
			} else {
				b.WriteString(xsdChar(c))
			}
		default:
			b.WriteString(xsdChar(r))
		}
		quantifiable = true
	}
	if depth != 0 {
		return "", errors.New("a ( is not closed")
	}
	b.WriteString(")$")
	out := b.String()
	if _, err := regexp.Compile(out); err != nil {
		return "", fmt.Errorf("RE2 does not take it as written: %w", err)
	}
	return out, nil
}

// xsdChar writes r, outside a class, so that RE2 and ECMA-262 (u flag)
// read it as itself: ECMA's syntax characters escaped (the only identity
// escapes the u flag allows), a control character as \xHH.
func xsdChar(r rune) string {
	switch {
	case strings.ContainsRune(`^$\.*+?()[]{}|`, r):
		return `\` + string(r)
	case r < ' ' || r == 0x7f:
		return xsdControl(r)
	}
	return string(r)
}

// xsdControl writes a control character as an escape both dialects
// read alike.
func xsdControl(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	return fmt.Sprintf(`\x%02x`, r)
}

// xsdClassChar writes r as a class member: ] [ \ ^ and - escaped.
func xsdClassChar(r rune) string {
	switch {
	case strings.ContainsRune(`\]-[^`, r):
		return `\` + string(r)
	case r < ' ' || r == 0x7f:
		return xsdControl(r)
	}
	return string(r)
}

// xsdSet is a set of characters: written as class members (negated when
// neg), or alone, outside a class, when it is one escape; and, unless it
// is a Unicode category's, as the ranges it holds, which a subtraction or
// a negated member in a class with others is written out from.
type xsdSet struct {
	members string
	neg     bool
	alone   string
	ranges  []xsdRange
	// names: it holds \i or \c, whose characters XML's editions differ
	// on (see xmlNameStart).
	names bool
}

// xsdRange is the characters lo to hi.
type xsdRange struct{ lo, hi rune }

// written is the set outside a class.
func (s *xsdSet) written() string {
	if s.alone != "" {
		return s.alone
	}
	if s.neg {
		return "[^" + s.members + "]"
	}
	return "[" + s.members + "]"
}

// xsdCategories are the categories XML Schema names (F.1.1); Go's tables
// carry each, Cn and C's unassigned characters included, as ECMA-262's do.
var xsdCategories = []string{"L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
	"P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Z", "Zs", "Zl", "Zp", "S", "Sm", "Sc", "Sk", "So", "C", "Cc", "Cf", "Co", "Cn"}

// xsdBlocks are the block escapes (\p{IsName}) XML Schema 1.0 names
// (XSD 1.0 Part 2, 2nd ed., F.1.1, whose list is Unicode 3.1's
// Blocks.txt), each with the ranges Unicode 3.1 gives it: a later
// Unicode's block of the same name may be larger (Greek and Coptic,
// CJK Unified Ideographs Extension A), and XML Schema means 3.1's. The
// three surrogate blocks, which F.1.1 leaves out (no XML character is a
// surrogate), are not here; a name not here is refused rather than
// guessed. PrivateUse and Specials are named for more than one range in
// Blocks.txt: the escape is their union.
var xsdBlocks = map[string][]xsdRange{
	"BasicLatin":                           {{0x0000, 0x007F}},
	"Latin-1Supplement":                    {{0x0080, 0x00FF}},
	"LatinExtended-A":                      {{0x0100, 0x017F}},
	"LatinExtended-B":                      {{0x0180, 0x024F}},
	"IPAExtensions":                        {{0x0250, 0x02AF}},
	"SpacingModifierLetters":               {{0x02B0, 0x02FF}},
	"CombiningDiacriticalMarks":            {{0x0300, 0x036F}},
	"Greek":                                {{0x0370, 0x03FF}},
	"Cyrillic":                             {{0x0400, 0x04FF}},
	"Armenian":                             {{0x0530, 0x058F}},
	"Hebrew":                               {{0x0590, 0x05FF}},
	"Arabic":                               {{0x0600, 0x06FF}},
	"Syriac":                               {{0x0700, 0x074F}},
	"Thaana":                               {{0x0780, 0x07BF}},
	"Devanagari":                           {{0x0900, 0x097F}},
	"Bengali":                              {{0x0980, 0x09FF}},
	"Gurmukhi":                             {{0x0A00, 0x0A7F}},
	"Gujarati":                             {{0x0A80, 0x0AFF}},
	"Oriya":                                {{0x0B00, 0x0B7F}},
	"Tamil":                                {{0x0B80, 0x0BFF}},
	"Telugu":                               {{0x0C00, 0x0C7F}},
	"Kannada":                              {{0x0C80, 0x0CFF}},
	"Malayalam":                            {{0x0D00, 0x0D7F}},
	"Sinhala":                              {{0x0D80, 0x0DFF}},
	"Thai":                                 {{0x0E00, 0x0E7F}},
	"Lao":                                  {{0x0E80, 0x0EFF}},
	"Tibetan":                              {{0x0F00, 0x0FFF}},
	"Myanmar":                              {{0x1000, 0x109F}},
	"Georgian":                             {{0x10A0, 0x10FF}},
	"HangulJamo":                           {{0x1100, 0x11FF}},
	"Ethiopic":                             {{0x1200, 0x137F}},
	"Cherokee":                             {{0x13A0, 0x13FF}},
	"UnifiedCanadianAboriginalSyllabics":   {{0x1400, 0x167F}},
	"Ogham":                                {{0x1680, 0x169F}},
	"Runic":                                {{0x16A0, 0x16FF}},
	"Khmer":                                {{0x1780, 0x17FF}},
	"Mongolian":                            {{0x1800, 0x18AF}},
	"LatinExtendedAdditional":              {{0x1E00, 0x1EFF}},
	"GreekExtended":                        {{0x1F00, 0x1FFF}},
	"GeneralPunctuation":                   {{0x2000, 0x206F}},
	"SuperscriptsandSubscripts":            {{0x2070, 0x209F}},
	"CurrencySymbols":                      {{0x20A0, 0x20CF}},
	"CombiningMarksforSymbols":             {{0x20D0, 0x20FF}},
	"LetterlikeSymbols":                    {{0x2100, 0x214F}},
	"NumberForms":                          {{0x2150, 0x218F}},
	"Arrows":                               {{0x2190, 0x21FF}},
	"MathematicalOperators":                {{0x2200, 0x22FF}},
	"MiscellaneousTechnical":               {{0x2300, 0x23FF}},
	"ControlPictures":                      {{0x2400, 0x243F}},
	"OpticalCharacterRecognition":          {{0x2440, 0x245F}},
	"EnclosedAlphanumerics":                {{0x2460, 0x24FF}},
	"BoxDrawing":                           {{0x2500, 0x257F}},
	"BlockElements":                        {{0x2580, 0x259F}},
	"GeometricShapes":                      {{0x25A0, 0x25FF}},
	"MiscellaneousSymbols":                 {{0x2600, 0x26FF}},
	"Dingbats":                             {{0x2700, 0x27BF}},
	"BraillePatterns":                      {{0x2800, 0x28FF}},
	"CJKRadicalsSupplement":                {{0x2E80, 0x2EFF}},
	"KangxiRadicals":                       {{0x2F00, 0x2FDF}},
	"IdeographicDescriptionCharacters":     {{0x2FF0, 0x2FFF}},
	"CJKSymbolsandPunctuation":             {{0x3000, 0x303F}},
	"Hiragana":                             {{0x3040, 0x309F}},
	"Katakana":                             {{0x30A0, 0x30FF}},
	"Bopomofo":                             {{0x3100, 0x312F}},
	"HangulCompatibilityJamo":              {{0x3130, 0x318F}},
	"Kanbun":                               {{0x3190, 0x319F}},
	"BopomofoExtended":                     {{0x31A0, 0x31BF}},
	"EnclosedCJKLettersandMonths":          {{0x3200, 0x32FF}},
	"CJKCompatibility":                     {{0x3300, 0x33FF}},
	"CJKUnifiedIdeographsExtensionA":       {{0x3400, 0x4DB5}},
	"CJKUnifiedIdeographs":                 {{0x4E00, 0x9FFF}},
	"YiSyllables":                          {{0xA000, 0xA48F}},
	"YiRadicals":                           {{0xA490, 0xA4CF}},
	"HangulSyllables":                      {{0xAC00, 0xD7A3}},
	"PrivateUse":                           {{0xE000, 0xF8FF}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD}},
	"CJKCompatibilityIdeographs":           {{0xF900, 0xFAFF}},
	"AlphabeticPresentationForms":          {{0xFB00, 0xFB4F}},
	"ArabicPresentationForms-A":            {{0xFB50, 0xFDFF}},
	"CombiningHalfMarks":                   {{0xFE20, 0xFE2F}},
	"CJKCompatibilityForms":                {{0xFE30, 0xFE4F}},
	"SmallFormVariants":                    {{0xFE50, 0xFE6F}},
	"ArabicPresentationForms-B":            {{0xFE70, 0xFEFE}},
	"Specials":                             {{0xFEFF, 0xFEFF}, {0xFFF0, 0xFFFD}},
	"HalfwidthandFullwidthForms":           {{0xFF00, 0xFFEF}},
	"OldItalic":                            {{0x10300, 0x1032F}},
	"Gothic":                               {{0x10330, 0x1034F}},
	"Deseret":                              {{0x10400, 0x1044F}},
	"ByzantineMusicalSymbols":              {{0x1D000, 0x1D0FF}},
	"MusicalSymbols":                       {{0x1D100, 0x1D1FF}},
	"MathematicalAlphanumericSymbols":      {{0x1D400, 0x1D7FF}},
	"CJKUnifiedIdeographsExtensionB":       {{0x20000, 0x2A6D6}},
	"CJKCompatibilityIdeographsSupplement": {{0x2F800, 0x2FA1F}},
	"Tags":                                 {{0xE0000, 0xE007F}},
}

// xmlNameStart and xmlNameChar are \i and \c: XML 1.0 (Fifth Edition)'s
// NameStartChar and NameChar (productions [4] and [4a]), which XML
// Schema 1.0 2nd ed. (F.1.1) defers to XML for. XML's earlier editions
// defined the name characters by Unicode 2.0's letters (Appendix B);
// the Fifth Edition's ranges are fixed, so every Unicode version reads
// them alike, and are a superset of the earlier ones: a name an older
// upstream refuses is left for it to refuse, never one it takes refused.
// Their complement is so a subset of the earlier editions', and would
// refuse what an older upstream takes (U+2C00, a letter since Unicode
// 4.1, is in \I by Appendix B): \I, \C, and \i or \c in a negated
// class or a subtraction's subtrahend, are left to the upstream.
var (
	xmlNameStart = []xsdRange{{':', ':'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x2FF},
		{0x370, 0x37D}, {0x37F, 0x1FFF}, {0x200C, 0x200D}, {0x2070, 0x218F}, {0x2C00, 0x2FEF}, {0x3001, 0xD7FF},
		{0xF900, 0xFDCF}, {0xFDF0, 0xFFFD}, {0x10000, 0xEFFFF}}
	xmlNameChar = normal(append([]xsdRange{{'-', '.'}, {'0', '9'}, {0xB7, 0xB7}, {0x300, 0x36F}, {0x203F, 0x2040}},
		xmlNameStart...))
)

// maxWrittenRanges bounds a class written out as ranges (a subtraction,
// a negated set beside others): a category's can be hundreds of ranges
// ([\p{L}-[\p{Lu}]] is 1180, some 6 KB), each written into every schema
// that holds the pattern. maxPatternRanges bounds the ranges a pattern's
// classes and escapes are written out as together: a pattern that repeats
// such a class is otherwise as large as its copies (200 of them, 3 KB
// read, were 1.1 MB written).
const (
	maxWrittenRanges = 1300
	maxPatternRanges = 2 * maxWrittenRanges
)

// rangesSet is a set of the ranges, negated when neg: written as the
// ranges it holds.
func (p *xsdReader) rangesSet(ranges []xsdRange, neg bool) (*xsdSet, error) {
	ranges = slices.Clone(ranges)
	members, err := p.writtenOut(ranges)
	if err != nil {
		return nil, err
	}
	if neg {
		ranges = complement(ranges)
	}
	return &xsdSet{members: members, neg: neg, ranges: ranges}, nil
}

// tableRanges is the characters a Unicode table holds, as ranges.
func tableRanges(t *unicode.RangeTable) []xsdRange {
	var out []xsdRange
	for _, r := range t.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			if r.Stride == 1 {
				out = append(out, xsdRange{rune(r.Lo), rune(r.Hi)})
				break
			}
			out = append(out, xsdRange{c, c})
		}
	}
	for _, r := range t.R32 {
		// A table's R32 holds code points, none past unicode.MaxRune.
		lo, hi, stride := rune(r.Lo), rune(r.Hi), rune(r.Stride) //nolint:gosec // G115: at most unicode.MaxRune, as above
		for c := lo; c <= hi; c += stride {
			if r.Stride == 1 {
				out = append(out, xsdRange{lo, hi})
				break
			}
			out = append(out, xsdRange{c, c})
		}
	}
	return normal(out)
}

// categorySet is \p{name} (or \P{name} when neg).
func (p *xsdReader) categorySet(name string, neg bool) (*xsdSet, error) {
	if block, ok := strings.CutPrefix(name, "Is"); ok {
		ranges, ok := xsdBlocks[block]
		if !ok {
			return nil, fmt.Errorf("the block escape \\p{%s} is not one orangerail writes out", name)
		}
		return p.rangesSet(slices.Clone(ranges), neg)
	}
	for _, c := range xsdCategories {
		if c == name {
			t := unicode.Categories[name]
			if t == nil {
				return nil, fmt.Errorf("the category %s is not in Go's Unicode tables", name)
			}
			e := `\p{` + name + "}"
			ranges := tableRanges(t)
			if neg {
				e = `\P{` + name + "}"
				ranges = complement(ranges)
			}
			return &xsdSet{members: e, alone: e, ranges: ranges}, nil
		}
	}
	return nil, fmt.Errorf("\\p{%s} is not an XML Schema category or block", name)
}

// xsdReader reads a pattern a rune at a time, counting the ranges it
// has written out.
type xsdReader struct {
	s       []rune
	i       int
	written int
}

func (p *xsdReader) more() bool { return p.i < len(p.s) }

func (p *xsdReader) next() rune {
	r := p.s[p.i]
	p.i++
	return r
}

func (p *xsdReader) peek(r rune) bool { return p.more() && p.s[p.i] == r }

// quantity reads {n}, {n,} or {n,m}, its { read.
func (p *xsdReader) quantity() (string, error) {
	var b strings.Builder
	b.WriteByte('{')
	digits := func() int {
		n := 0
		for p.more() && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
			b.WriteRune(p.next())
			n++
		}
		return n
	}
	if digits() == 0 {
		return "", errors.New("a { is not a quantifier {n}, {n,} or {n,m}")
	}
	if p.peek(',') {
		b.WriteRune(p.next())
		digits()
	}
	if !p.peek('}') {
		return "", errors.New("a { is not a quantifier {n}, {n,} or {n,m}")
	}
	b.WriteRune(p.next())
	return b.String(), nil
}

// escape reads an escape, its backslash read: a character (c) or a set.
func (p *xsdReader) escape() (c rune, s *xsdSet, err error) {
	if !p.more() {
		return 0, nil, errors.New("it ends in a lone backslash")
	}
	r := p.next()
	switch r {
	case 'n':
		return '\n', nil, nil
	case 'r':
		return '\r', nil, nil
	case 't':
		return '\t', nil, nil
	case '\\', '|', '.', '-', '^', '?', '*', '+', '{', '}', '(', ')', '[', ']':
		return r, nil, nil
	case 's', 'S':
		ranges := []xsdRange{{'\t', '\n'}, {'\r', '\r'}, {' ', ' '}}
		if r == 'S' {
			ranges = complement(ranges)
		}
		return 0, &xsdSet{members: xsdSpace, neg: r == 'S', ranges: ranges}, nil
	case 'd', 'D':
		s, err := p.categorySet("Nd", r == 'D')
		return 0, s, err
	case 'w', 'W':
		// L, M, N, S and P, Z, C part every character: \w, all but P, Z
		// and C, is written so that it can join a class.
		neg := r == 'W'
		members := `\p{L}\p{M}\p{N}\p{S}`
		var ranges []xsdRange
		for _, c := range []string{"L", "M", "N", "S"} {
			ranges = append(ranges, tableRanges(unicode.Categories[c])...)
		}
		ranges = normal(ranges)
		if neg {
			members = `\p{P}\p{Z}\p{C}`
			ranges = complement(ranges)
		}
		return 0, &xsdSet{members: members, ranges: ranges}, nil
	case 'i', 'c':
		ranges := xmlNameStart
		if r == 'c' {
			ranges = xmlNameChar
		}
		s, err := p.rangesSet(ranges, false)
		if err != nil {
			return 0, nil, err
		}
		s.names = true
		return 0, s, nil
	case 'I', 'C':
		return 0, nil, fmt.Errorf("\\%c is the complement of XML's name characters, which XML 1.0's editions define differently", r)
	case 'p', 'P':
		if !p.peek('{') {
			return 0, nil, fmt.Errorf("\\%c is not followed by {", r)
		}
		p.next()
		start := p.i
		for p.more() && p.s[p.i] != '}' {
			p.i++
		}
		if !p.more() {
			return 0, nil, fmt.Errorf("\\%c{ is not closed", r)
		}
		name := string(p.s[start:p.i])
		p.next()
		s, err := p.categorySet(name, r == 'P')
		return 0, s, err
	}
	return 0, nil, fmt.Errorf("\\%c is not an XML Schema escape", r)
}

// class reads a class expression, its [ read: [a-z\d], [^...], and a
// subtraction [group-[class]].
func (p *xsdReader) class() (*xsdSet, error) {
	neg := p.peek('^')
	if neg {
		p.next()
	}
	var members strings.Builder
	var parts []*xsdSet // the sets, and ranges, the group is the union of
	writeOut := false   // a negated member beside others: the group is written out
	var minus *xsdSet
	for {
		if !p.more() {
			return nil, errors.New("a [ is not closed")
		}
		r := p.next()
		if r == ']' {
			if len(parts) == 0 {
				return nil, errors.New("a class is empty")
			}
			break
		}
		if r == '-' && p.peek('[') {
			if len(parts) == 0 {
				return nil, errors.New("a subtraction subtracts from nothing")
			}
			p.next()
			var err error
			if minus, err = p.class(); err != nil {
				return nil, err
			}
			if !p.peek(']') {
				return nil, errors.New("a subtraction is not the last of its class")
			}
			p.next()
			break
		}
		var lo rune
		switch r {
		case '[':
			return nil, errors.New("a [ in a class is escaped in XML Schema")
		case '-':
			// A - is itself first or last in a group, and nowhere else.
			if len(parts) != 0 && !p.peek(']') {
				return nil, errors.New("a - in a class is first or last, or escaped")
			}
			lo = '-'
		case '\\':
			c, s, err := p.escape()
			if err != nil {
				return nil, err
			}
			if s != nil {
				parts = append(parts, s)
				writeOut = writeOut || s.neg
				members.WriteString(s.members)
				continue
			}
			lo = c
		default:
			lo = r
		}
		hi := lo
		if p.peek('-') && p.i+1 < len(p.s) && p.s[p.i+1] != ']' && p.s[p.i+1] != '[' {
			p.next()
			hi = p.next()
			switch hi {
			case '[', '-':
				return nil, fmt.Errorf("a range ends in an unescaped %c", hi)
			case '\\':
				c, s, err := p.escape()
				if err != nil {
					return nil, err
				}
				if s != nil {
					return nil, errors.New("a range ends in a set")
				}
				hi = c
			}
			if hi < lo {
				return nil, fmt.Errorf("the range %c-%c is out of order", lo, hi)
			}
		}
		members.WriteString(xsdClassChar(lo))
		if hi != lo {
			members.WriteString("-" + xsdClassChar(hi))
		}
		parts = append(parts, &xsdSet{ranges: []xsdRange{{lo, hi}}})
	}
	// The ranges the class holds (a category's from Go's tables, as the
	// server reads it).
	var ranges []xsdRange
	names := false
	for _, s := range parts {
		ranges = append(ranges, s.ranges...)
		names = names || s.names
	}
	if neg && names || minus != nil && minus.names {
		return nil, errors.New("XML's name characters (\\i, \\c) are negated or subtracted, and XML 1.0's editions define them differently")
	}
	ranges = normal(ranges)
	if neg {
		ranges = complement(ranges)
	}
	if minus != nil {
		ranges = complement(normal(append(complement(ranges), minus.ranges...)))
	}
	switch {
	case minus == nil && len(parts) == 1 && parts[0].neg:
		// [\S] is \S, [^\S] is \s.
		return &xsdSet{members: parts[0].members, neg: !neg, ranges: ranges, names: names}, nil
	case minus == nil && !writeOut:
		return &xsdSet{members: members.String(), neg: neg, ranges: ranges, names: names}, nil
	}
	written, err := p.writtenOut(ranges)
	if err != nil {
		return nil, err
	}
	return &xsdSet{members: written, ranges: ranges, names: names}, nil
}

// writtenOut writes ranges as class members: what neither dialect can
// say as a class (a subtraction, a negated set beside others). The
// surrogates, which no UTF-8 value holds, are left out. A category's
// ranges are Go's Unicode version's, as the server reads the category;
// more than maxWrittenRanges in a class, or maxPatternRanges in the
// pattern, are refused.
func (p *xsdReader) writtenOut(ranges []xsdRange) (string, error) {
	if len(ranges) > maxWrittenRanges {
		return "", fmt.Errorf("written out as RE2 and ECMA-262 read it, a class is %d ranges, more than the %d orangerail writes", len(ranges), maxWrittenRanges)
	}
	if p.written += len(ranges); p.written > maxPatternRanges {
		return "", fmt.Errorf("written out as RE2 and ECMA-262 read it, its classes are more than the %d ranges orangerail writes for a pattern", maxPatternRanges)
	}
	var b strings.Builder
	for _, rg := range ranges {
		for _, rg := range []xsdRange{{rg.lo, min(rg.hi, 0xd7ff)}, {max(rg.lo, 0xe000), rg.hi}} {
			if rg.lo > rg.hi {
				continue
			}
			b.WriteString(xsdClassChar(rg.lo))
			if rg.hi > rg.lo {
				b.WriteString("-" + xsdClassChar(rg.hi))
			}
		}
	}
	if b.Len() == 0 {
		return "", errors.New("a class matches no character")
	}
	return b.String(), nil
}

// normal sorts ranges and merges those that overlap or touch.
func normal(ranges []xsdRange) []xsdRange {
	slices.SortFunc(ranges, func(a, b xsdRange) int { return int(a.lo - b.lo) })
	out := []xsdRange{}
	for _, rg := range ranges {
		if n := len(out); n > 0 && rg.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, rg.hi)
			continue
		}
		out = append(out, rg)
	}
	return out
}

// complement is every character normal ranges do not hold.
func complement(ranges []xsdRange) []xsdRange {
	out := []xsdRange{}
	next := rune(0)
	for _, rg := range ranges {
		if rg.lo > next {
			out = append(out, xsdRange{next, rg.lo - 1})
		}
		next = rg.hi + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, xsdRange{next, unicode.MaxRune})
	}
	return out
}
