package sqlquery

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzEncode holds a row's encoding to valid JSON whatever text Postgres
// sends for a column of any kind, and to cutting only whole characters.
func FuzzEncode(f *testing.F) {
	for _, seed := range []string{"1", "-0.5", "NaN", "Infinity", "true", "t", `{"a": 1}`, "[1,", `"`, "\x00\xff", "é😀", "1e+300", "01",
		"9007199254740993", `[1.5, "NaN", null, [2]]`, `["\\x0a"]`, `"2024-05-01T10:00:00+00:00"`, `[9007199254740993]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for k := range kinds {
			for elem := range kinds {
				if k != kindArray && elem > 0 || elem == kindArray {
					continue // only an array has elements, never arrays
				}
				fuzzEncode(t, column{kind: k, elem: elem}, text)
			}
		}
	})
}

func fuzzEncode(t *testing.T, c column, text string) {
	t.Helper()
	k := c.kind
	a := &answer{columns: []column{c, c}, share: 3}
	row, cut := a.encode([][]byte{[]byte(text), nil})
	if !json.Valid(row) {
		t.Fatalf("kind %d/%d, text %q: %s is not JSON", k, c.elem, text, row)
	}
	if !k.cut() && len(cut) > 0 || k.cut() && (len(cut) > 0) != (utf8.RuneCountInString(text) > a.share) {
		t.Fatalf("kind %d/%d, text %q: cut %v", k, c.elem, text, cut)
	}
	var values []any
	if err := json.Unmarshal(row, &values); err != nil || len(values) != 2 || values[1] != nil {
		t.Fatalf("kind %d/%d, text %q: %s", k, c.elem, text, row)
	}
	if s, ok := values[0].(string); ok && len(cut) > 0 && utf8.ValidString(text) && s != string([]rune(text)[:a.share]) {
		t.Fatalf("kind %d/%d, text %q cut to %q", k, c.elem, text, s)
	}
}
