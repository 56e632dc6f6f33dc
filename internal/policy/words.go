package policy

import (
	"strings"
	"unicode"
)

// words splits an identifier into its lower-case words: at every
// character that is not a letter or digit, where a lower-case letter or
// digit meets an upper-case one (accessToken), and where an acronym meets
// a word (HTTPServer → http, server), but not before a plural's s that
// ends the word (getURLs → get, urls; userPINs → user, pins). Digits stay
// with the letters before them (oauth2, in0).
func words(s string) []string {
	var out []string
	runes := []rune(s)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(string(runes[start:end])))
		}
		start = -1
	}
	for i, r := range runes {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := runes[i-1]
		switch {
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush(i)
			start = i
		case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(runes) && unicode.IsLower(runes[i+1]) && !pluralS(runes, i+1):
			flush(i)
			start = i
		}
	}
	flush(len(runes))
	return out
}

// pluralS reports whether runes[i] is a lower-case s that ends its word,
// after an acronym: the plural's s (URLs), not a word's first letter.
func pluralS(runes []rune, i int) bool {
	return runes[i] == 's' && (i+1 == len(runes) || !unicode.IsLower(runes[i+1]))
}

// lastNoun returns the word a name ends on, skipping trailing words that
// are only digits and the digits a word ends on (cvv2's is cvv, a
// positional in0's is in), and the word before it ("" when there is
// none).
func lastNoun(name string) (noun, before string) {
	ws := words(name)
	for len(ws) > 0 && strings.Trim(ws[len(ws)-1], "0123456789") == "" {
		ws = ws[:len(ws)-1]
	}
	if len(ws) == 0 {
		return "", ""
	}
	noun = strings.TrimRight(ws[len(ws)-1], "0123456789")
	if noun == "" {
		noun = ws[len(ws)-1]
	}
	if len(ws) > 1 {
		before = ws[len(ws)-2]
	}
	return noun, before
}
