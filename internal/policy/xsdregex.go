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
// \p{C}, categories and blocks kept, a subtraction [a-z-[aeiou]] written
// out. Categories are read with Go's Unicode tables, as the server reads
// them; an agent's engine may carry another Unicode version.
//
// It refuses, with the reason, what it cannot write so (\i and \c, whose
// sets differ between XML editions, a block not in xsdBlocks, a
// subtraction over a category) and what is not XML Schema (a lazy or
// doubled quantifier, a group (?, a backslash before a character XML
// Schema does not escape).
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

// xsdBlocks are the block escapes (\p{IsName}) written out, each a range
// that is the same in every Unicode version XML Schema names. Others are
// refused rather than guessed.
var xsdBlocks = map[string][2]rune{
	"BasicLatin":           {0x0000, 0x007F},
	"Latin-1Supplement":    {0x0080, 0x00FF},
	"LatinExtended-A":      {0x0100, 0x017F},
	"LatinExtended-B":      {0x0180, 0x024F},
	"IPAExtensions":        {0x0250, 0x02AF},
	"Cyrillic":             {0x0400, 0x04FF},
	"Armenian":             {0x0530, 0x058F},
	"Hebrew":               {0x0590, 0x05FF},
	"Arabic":               {0x0600, 0x06FF},
	"Thai":                 {0x0E00, 0x0E7F},
	"GeneralPunctuation":   {0x2000, 0x206F},
	"CurrencySymbols":      {0x20A0, 0x20CF},
	"Hiragana":             {0x3040, 0x309F},
	"Katakana":             {0x30A0, 0x30FF},
	"CJKUnifiedIdeographs": {0x4E00, 0x9FFF},
}

// categorySet is \p{name} (or \P{name} when neg).
func categorySet(name string, neg bool) (*xsdSet, error) {
	if block, ok := strings.CutPrefix(name, "Is"); ok {
		rg, ok := xsdBlocks[block]
		if !ok {
			return nil, fmt.Errorf("the block escape \\p{%s} is not one orangerail writes out", name)
		}
		ranges := []xsdRange{{rg[0], rg[1]}}
		if neg {
			ranges = complement(ranges)
		}
		return &xsdSet{members: xsdClassChar(rg[0]) + "-" + xsdClassChar(rg[1]), neg: neg, ranges: ranges}, nil
	}
	for _, c := range xsdCategories {
		if c == name {
			t := unicode.Categories[name]
			if t == nil {
				return nil, fmt.Errorf("the category %s is not in Go's Unicode tables", name)
			}
			e := `\p{` + name + "}"
			if neg {
				e = `\P{` + name + "}"
			}
			return &xsdSet{members: e, alone: e}, nil
		}
	}
	return nil, fmt.Errorf("\\p{%s} is not an XML Schema category or block", name)
}

// xsdReader reads a pattern a rune at a time.
type xsdReader struct {
	s []rune
	i int
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
		s, err := categorySet("Nd", r == 'D')
		return 0, s, err
	case 'w', 'W':
		// L, M, N, S and P, Z, C part every character: \w, all but P, Z
		// and C, is written so that it can join a class.
		neg := r == 'W'
		members := `\p{L}\p{M}\p{N}\p{S}`
		if neg {
			members = `\p{P}\p{Z}\p{C}`
		}
		return 0, &xsdSet{members: members}, nil
	case 'i', 'I', 'c', 'C':
		return 0, nil, fmt.Errorf("\\%c is XML's name characters, which XML 1.0's editions define differently", r)
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
		s, err := categorySet(name, r == 'P')
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
	// The ranges the class holds, unless a member is a category's.
	var ranges []xsdRange
	for _, s := range parts {
		if s.ranges == nil {
			ranges = nil
			break
		}
		ranges = append(ranges, s.ranges...)
	}
	if ranges != nil {
		ranges = normal(ranges)
		if neg {
			ranges = complement(ranges)
		}
		if minus != nil && minus.ranges != nil {
			ranges = complement(normal(append(complement(ranges), minus.ranges...)))
		}
	}
	switch {
	case minus == nil && len(parts) == 1 && parts[0].neg:
		// [\S] is \S, [^\S] is \s.
		return &xsdSet{members: parts[0].members, neg: !neg, ranges: ranges}, nil
	case minus == nil && !writeOut:
		return &xsdSet{members: members.String(), neg: neg, ranges: ranges}, nil
	case ranges == nil || minus != nil && minus.ranges == nil:
		// Written out, a category is thousands of ranges, and another
		// Unicode version's.
		return nil, errors.New("a subtraction, or a negated escape beside other members, over a Unicode category cannot be written as one class")
	}
	written, err := writtenOut(ranges)
	if err != nil {
		return nil, err
	}
	return &xsdSet{members: written, ranges: ranges}, nil
}

// writtenOut writes ranges as class members: what neither dialect can
// say as a class (a subtraction, a negated set beside others). The
// surrogates, which no UTF-8 value holds, are left out.
func writtenOut(ranges []xsdRange) (string, error) {
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
