package display_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/orangerail/orangerail/internal/display"
)

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		// Plain text, in any script, reads as it is.
		{"ascii", "Cancel o-1002 only", "Cancel o-1002 only"},
		{"empty", "", ""},
		{"unicode", "Zoë, 東京, שלום, مرحبا, 🎉", "Zoë, 東京, שלום, مرحبا, 🎉"},
		{"backslashes and inner quotes", `C:\orders\"o-1"`, `C:\orders\"o-1"`},
		{"a literal escape is text", `o-1001\u202e`, `o-1001\u202e`},
		{"replacement character", "a\uFFFDb", "a\uFFFDb"},
		// Anything else is a JSON string literal.
		{"carriage return", "o-1001\r    Cancel o-1002 only", `"o-1001\r    Cancel o-1002 only"`},
		{"newline and tab", "a\nb\tc", `"a\nb\tc"`},
		{"escape sequence", "\x1b[2J\x1b[1;1Hok", `"\u001b[2J\u001b[1;1Hok"`},
		{"backspace and form feed", "ab\b\fc", `"ab\b\fc"`},
		{"NUL and DEL", "a\x00b\x7f", `"a\u0000b\u007f"`},
		{"C1 CSI", "a\u009b31mred", `"a\u009b31mred"`},
		{"right-to-left override", "invoice \u202Efdp.exe", `"invoice \u202efdp.exe"`},
		{"every bidi control", "\u202A\u202B\u202C\u202D\u202E\u2066\u2067\u2068\u2069\u200E\u200F\u061C",
			`"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"`},
		{"zero-width characters", "ad\u200Bmin\u200C\u200D\u2060\uFEFF", `"ad\u200bmin\u200c\u200d\u2060\ufeff"`},
		{"soft hyphen", "o-10\u00AD01", `"o-10\u00ad01"`},
		{"line and paragraph separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"variation selector and hangul filler", "a\uFE0Fb\u3164c", `"a\ufe0fb\u3164c"`},
		{"tag characters", "ok\U000E0041\U000E007F", `"ok\udb40\udc41\udb40\udc7f"`},
		{"a quote and a backslash beside an unsafe rune", "\"\\\u202E", `"\"\\\u202e"`},
		{"a leading quote", `"quoted"`, `"\"quoted\""`},
		{"invalid UTF-8", "a\xffb\xc3", `"a\ufffdb\ufffd"`},
	}
	for _, tt := range tests {
		if got := display.Text(tt.in); got != tt.want {
			t.Errorf("%s: Text(%q) = %s, want %s", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"the spoof: a carriage return between tokens",
			"{\"order_id\":\"o-1001\",\r    \"reason\":\"Cancel o-1002 only\"}",
			"{\n  \"order_id\": \"o-1001\",\n  \"reason\": \"Cancel o-1002 only\"\n}"},
		{"tabs, newlines and spaces between tokens",
			"\t{ \"a\" :\n[1 ,\t2.50e0, true,null ] }\r\n",
			"{\n  \"a\": [\n    1,\n    2.50e0,\n    true,\n    null\n  ]\n}"},
		{"key order and duplicates as stored", `{"z":1,"a":2,"z":3}`, "{\n  \"z\": 1,\n  \"a\": 2,\n  \"z\": 3\n}"},
		{"escapes are shown as written", `{"a":"\u001b[2J\r\n\"\\\u202e"}`, "{\n  \"a\": \"\\u001b[2J\\r\\n\\\"\\\\\\u202e\"\n}"},
		{"a raw bidi override", "{\"reason\":\"Cancel \u202E2001-o\u202C only\"}", "{\n  \"reason\": \"Cancel \\u202e2001-o\\u202c only\"\n}"},
		{"raw zero-width, C1 and separators", "[\"ad\u200Bmin\", \"\u009b2J\", \"a\u2028b\"]", "[\n  \"ad\\u200bmin\",\n  \"\\u009b2J\",\n  \"a\\u2028b\"\n]"},
		{"raw tag characters", "\"\U000E0041\"", `"\udb40\udc41"`},
		{"invalid UTF-8 in a string", "{\"a\":\"x\xffy\"}", "{\n  \"a\": \"x\\ufffdy\"\n}"},
		{"plain unicode is kept", `{"name":"Zoë 東京 🎉"}`, "{\n  \"name\": \"Zoë 東京 🎉\"\n}"},
		{"not JSON: shown as Text shows it", "{\"a\":1,\r\"b\"", `"{\"a\":1,\r\"b\""`},
	}
	for _, tt := range tests {
		if got := display.JSON([]byte(tt.in), "", "  "); got != tt.want {
			t.Errorf("%s: JSON(%q) =\n%s\nwant\n%s", tt.name, tt.in, got, tt.want)
		}
	}
	// A prefix begins every line after the first.
	if got := display.JSON([]byte(`{"a":[1]}`), "    ", "  "); got != "{\n      \"a\": [\n        1\n      ]\n    }" {
		t.Errorf("with a prefix:\n%s", got)
	}
}

// safe reports the first unsafe rune in s, or -1; allowNewline allows the
// newlines JSON's indentation makes.
func firstUnsafe(s string, allowNewline bool) rune {
	for _, r := range s {
		if display.Unsafe(r) && !(allowNewline && r == '\n') {
			return r
		}
	}
	return -1
}

// FuzzText holds Text to never showing an unsafe rune or a byte that is not
// UTF-8, to showing plain text as it is, and to showing anything else as a
// JSON string literal that decodes to it.
func FuzzText(f *testing.F) {
	for _, s := range []string{"plain", "", "o-1001\r    x", "\x1b[2J", "\u202Eabc", "a\u200Bb", "\U000E0041", "\"q", "a\xffb", "\u0085", "\\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := display.Text(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q is not UTF-8", s, got)
		}
		if r := firstUnsafe(got, false); r >= 0 {
			t.Fatalf("Text(%q) = %q shows %U", s, got, r)
		}
		if got == s {
			return
		}
		if !utf8.ValidString(s) {
			return // JSON cannot hold the bytes that are not UTF-8
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back != s {
			t.Fatalf("Text(%q) = %q does not decode to it (%q, %v)", s, got, back, err)
		}
	})
}

// FuzzJSON holds JSON to never showing an unsafe rune but the newlines of
// its indentation, and to showing a JSON text as JSON that parses to the
// same value.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "{\"order_id\":\"o-1001\",\r    \"reason\":\"x\"}", "[\"\u202E\", \"\\u001b\"]", "\"a\u2028\"", "{\"a\":\"\xff\"}", "nope", "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := display.JSON(raw, "  ", "  ")
		if !utf8.ValidString(got) {
			t.Fatalf("JSON(%q) = %q is not UTF-8", raw, got)
		}
		if r := firstUnsafe(got, true); r >= 0 {
			t.Fatalf("JSON(%q) = %q shows %U", raw, got, r)
		}
		if !json.Valid(raw) {
			if strings.Contains(got, "\n") {
				t.Fatalf("JSON(%q), not JSON, = %q shows a line break", raw, got)
			}
			return
		}
		if !utf8.Valid(raw) {
			return // the bytes that are not UTF-8 show as \ufffd, as a decoder reads them
		}
		want, err := decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decode([]byte(got))
		if err != nil || !reflect.DeepEqual(want, back) {
			t.Fatalf("JSON(%q) = %q does not parse to the same value (%v)", raw, got, err)
		}
	})
}

// decode decodes JSON keeping numbers as written.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

// TestEcho: an agent's text is repeated whole up to EchoMax bytes, else
// cut there — before a character the cut would split — and marked.
func TestEcho(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("a", display.EchoMax), strings.Repeat("a", display.EchoMax)},
		{strings.Repeat("a", display.EchoMax+1), strings.Repeat("a", display.EchoMax) + "…"},
		// "€" is three bytes: the 22nd would end at byte 66.
		{strings.Repeat("€", 30), strings.Repeat("€", 21) + "…"},
		{"a" + strings.Repeat("€", 30), "a" + strings.Repeat("€", 21) + "…"},
	} {
		if got := display.Echo(c.in); got != c.want {
			t.Errorf("Echo(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
