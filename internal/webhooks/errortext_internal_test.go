package webhooks

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestErrorTextIsUTF8: the recorded failure is cut on a character's
// boundary, so Postgres takes it (a receiver chooses the text a redirect
// error quotes, and could put a character across the cut).
func TestErrorTextIsUTF8(t *testing.T) {
	t.Parallel()
	for pad := range 4 {
		s := errorText([]string{strings.Repeat("x", maxErrorText-pad) + strings.Repeat("€", 10)})
		if !utf8.ValidString(s) || len(s) > maxErrorText {
			t.Errorf("pad %d: %d bytes, valid %v", pad, len(s), utf8.ValidString(s))
		}
	}
	if s := errorText([]string{"bad \xff byte"}); !utf8.ValidString(s) {
		t.Errorf("%q is not UTF-8", s)
	}
}
