package jcs

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
		want string
	}{
		// RFC 8785 section 3.2.2 example, but for 333333333.33333329, which a
		// double cannot hold exactly (see TestCanonicalizeRefuses).
		{
			name: "rfc8785 primitives",
			in:   `{"numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		// RFC 8785 section 3.2.3: member names sort by UTF-16 code units, so
		// the emoji (a surrogate pair, 0xD83D...) sorts before U+FB33.
		{
			name: "rfc8785 sorting",
			in:   `{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{name: "negative zero", in: `-0`, want: `0`},
		{name: "small exponent", in: `1.5e-7`, want: `1.5e-7`},
		{name: "large integer exact", in: `9007199254740992`, want: `9007199254740992`},
		{name: "exponent form of integer", in: `1e2`, want: `100`},
		{name: "html is not escaped", in: `"<a&b>\u2028"`, want: "\"<a&b>\u2028\""},
		{name: "nested whitespace", in: " { \"b\" : [ 1 , { } , [ ] ] , \"a\" : \"x\" } ", want: `{"a":"x","b":[1,{},[]]}`},
		{name: "del is literal", in: "\"\x7f\"", want: "\"\x7f\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonicalize(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
	}{
		{"empty", ``},
		{"duplicate member", `{"a":1,"a":1}`},
		{"duplicate member after unescaping", `{"a":1,"\u0061":2}`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00"`},
		{"high surrogate then non-surrogate", `"\ud800\u0041"`},
		{"invalid utf-8", "\"\xff\""},
		{"control character", "\"a\nb\""},
		{"inexact number", `333333333.33333329`},
		{"integer beyond a double", `12345678901234567890`},
		{"number out of range", `1e400`},
		{"leading zero", `012`},
		{"bare minus", `-`},
		{"trailing data", `{} {}`},
		{"unterminated", `{"a":`},
		{"trailing comma", `[1,]`},
		{"invalid escape", `"\x"`},
		{"single quotes", `'a'`},
		{"NaN", `NaN`},
		{"huge literal", "1" + strings.Repeat("0", 600)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonicalize([]byte(tt.in))
			var syntaxErr *SyntaxError
			if !errors.As(err, &syntaxErr) {
				t.Fatalf("Canonicalize(%q) = %q, %v; want a *SyntaxError", tt.in, got, err)
			}
		})
	}
}

// TestSyntaxErrorPath: a refusal says where in the document the value it
// refuses is, as member names and array indexes from the root.
func TestSyntaxErrorPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{`1e400`, nil},
		{`{"a": 1e400}`, []string{"a"}},
		{`{"a": {"b": [1, 2, "\ud800"]}}`, []string{"a", "b", "2"}},
		{`[[], [0, 12345678901234567890]]`, []string{"1", "1"}},
		{`{"a": [{"x": 1, "x": 2}]}`, []string{"a", "0", "x"}},
		{`{"a/b~": {"": 1e400}}`, []string{"a/b~", ""}},
		{`{"a": 1, "b": }`, []string{"b"}},
		{`{"a": 1 "b": 2}`, nil},
	}
	for _, tt := range tests {
		_, err := Canonicalize([]byte(tt.in))
		var syntaxErr *SyntaxError
		if !errors.As(err, &syntaxErr) {
			t.Fatalf("Canonicalize(%s) = %v; want a *SyntaxError", tt.in, err)
		}
		if !slices.Equal(syntaxErr.Path, tt.want) {
			t.Errorf("Canonicalize(%s): path %q, want %q (%v)", tt.in, syntaxErr.Path, tt.want, err)
		}
	}
}

func TestNestingBound(t *testing.T) {
	t.Parallel()
	deep := func(n int) []byte {
		b := make([]byte, 0, 2*n)
		for range n {
			b = append(b, '[')
		}
		for range n {
			b = append(b, ']')
		}
		return b
	}
	if _, err := Canonicalize(deep(MaxDepth)); err != nil {
		t.Fatalf("depth %d refused: %v", MaxDepth, err)
	}
	if _, err := Canonicalize(deep(MaxDepth + 1)); err == nil {
		t.Fatalf("depth %d accepted", MaxDepth+1)
	}
}

// TestUnderflowIsCheap: a number whose exponent underflows a double
// ("1e-999999": ten bytes an agent or an upstream sends) is refused, or
// kept as its literal losslessly, without the work of comparing it with 0
// exactly — a rational of 10^999999, some 400 KB and 25 ms a number, so
// an agent's 64 KiB input cost minutes of CPU. What it allocates tells:
// not parallel, so that nothing else allocates meanwhile.
func TestUnderflowIsCheap(t *testing.T) {
	in := []byte("[1e-999999,-2.5E-400000]")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, strictErr := Canonicalize(in)
	lossless, err := CanonicalizeLossless(in)
	runtime.ReadMemStats(&after)
	if strictErr == nil {
		t.Error("an underflowing number was taken as exact")
	}
	if err != nil || string(lossless) != `["1e-999999","-2.5E-400000"]` {
		t.Errorf("lossless: %s %v", lossless, err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<10 {
		t.Errorf("two underflowing numbers allocated %d bytes: compared exactly", allocated)
	}
	// Zero, with an exponent or not, is zero.
	for _, zero := range []string{"0e-999999", "0.000e5", "-0.0", "0E+999999"} {
		if got, err := Canonicalize([]byte(zero)); err != nil || string(got) != "0" {
			t.Errorf("%s: %s %v", zero, got, err)
		}
	}
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	got, err := Marshal(struct {
		Z string  `json:"z"`
		A float64 `json:"a"`
	}{Z: "<tag>", A: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":0.1,"z":"<tag>"}`; string(got) != want {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}
}

// FuzzCanonicalize checks that canonical output is valid JSON, that it is a
// fixed point, and that it means what the input meant.
func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{`{"a":[1,2.5,"x"],"b":null}`, `"\u00e9\ud83d\ude00"`, `[1e-7,1e21,-0.0]`, `{"\u20ac":1,"\r":2}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("encoding/json disagrees on validity of %q", in)
		}
		// DeepEqual compares numbers with ==, so -0 and 0 agree, as RFC 8785 has them.
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

func TestCanonicalizeLossless(t *testing.T) {
	t.Parallel()
	got, err := CanonicalizeLossless([]byte(`{"id": 12345678901234567890, "n": 1234567890123456.78, "ok": 1.50, "big": 1e400}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"big":"1e400","id":"12345678901234567890","n":"1234567890123456.78","ok":1.5}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if _, err := CanonicalizeLossless([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Fatal("a repeated member was accepted")
	}
}

// FuzzAppendGoString: a Go string's canonical form is what Marshal (that
// is, encoding/json, then Canonicalize) makes of it, invalid UTF-8 and all.
func FuzzAppendGoString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\n\t\x01\x1f\x7f", "<>&\u2028\u2029é😀", "a\xffb\xc3", "\xed\xa0\x80", "\xe2\x82x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendGoString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendGoString(%q) = %s, want x%s", s, got, want)
		}
	})
}

// FuzzAppendInt: an integer's canonical form is what Canonicalize makes
// of its digits, refusals included.
func FuzzAppendInt(f *testing.F) {
	for _, n := range []int64{0, -1, 1 << 53, -1 << 53, 1<<53 + 1, 1<<53 + 2, 1 << 62, -1 << 63, 1<<63 - 1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		want, wantErr := Canonicalize([]byte(strconv.FormatInt(n, 10)))
		got, err := AppendInt([]byte("x"), n)
		if (err != nil) != (wantErr != nil) || (err == nil && string(got) != "x"+string(want)) {
			t.Fatalf("AppendInt(%d) = %s, %v; want x%s, %v", n, got, err, want, wantErr)
		}
	})
}
