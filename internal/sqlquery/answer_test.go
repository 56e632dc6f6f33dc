package sqlquery

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzEncode holds a row's encoding to valid JSON whatever text Postgres
// sends for a column of any kind, and to cutting only whole characters.
func FuzzEncode(f *testing.F) {
	for _, seed := range []string{"1", "-0.5", "NaN", "Infinity", "true", "t", `{"a": 1}`, "[1,", `"`, "\x00\xff", "é😀", "1e+300", "01"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for k := kindText; k <= kindArray; k++ {
			a := &answer{kinds: []kind{k, k}, share: 3}
			row, cut := a.encode([][]byte{[]byte(text), nil})
			if !json.Valid(row) {
				t.Fatalf("kind %d, text %q: %s is not JSON", k, text, row)
			}
			if !k.cut() && len(cut) > 0 || k.cut() && (len(cut) > 0) != (utf8.RuneCountInString(text) > a.share) {
				t.Fatalf("kind %d, text %q: cut %v", k, text, cut)
			}
			var values []any
			if err := json.Unmarshal(row, &values); err != nil || len(values) != 2 || values[1] != nil {
				t.Fatalf("kind %d, text %q: %s", k, text, row)
			}
			if s, ok := values[0].(string); ok && len(cut) > 0 && utf8.ValidString(text) && s != string([]rune(text)[:a.share]) {
				t.Fatalf("kind %d, text %q cut to %q", k, text, s)
			}
		}
	})
}
