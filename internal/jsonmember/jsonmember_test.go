package jsonmember_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/jsonmember"
)

// TestScanner: members come in the order sent, each value as sent, a
// repeated one too; Whole tells one object from one cut short, one
// followed by more, and what is no object at all.
func TestScanner(t *testing.T) {
	for _, c := range []struct {
		in      string
		members []string // name=value, as sent
		object  bool
		whole   bool
		stopped bool // Err set
	}{
		{`{}`, nil, true, true, false},
		{` { "a" : 1 , "b":{"c": [1, 2]}, "a":"x" } `, []string{`a=1`, `b={"c": [1, 2]}`, `a="x"`}, true, true, false},
		{`{"a":1} {"b":2}`, []string{`a=1`}, true, false, false},
		{`{"a":1,"b":`, []string{`a=1`}, true, false, true},
		{`{"a":1`, []string{`a=1`}, true, false, true},
		{`{"a" 1}`, nil, true, false, true},
		{`[{"a":1}]`, nil, false, false, true},
		{`"a"`, nil, false, false, true},
		{``, nil, false, false, true},
	} {
		s := jsonmember.New([]byte(c.in))
		var got []string
		for s.Scan() {
			got = append(got, s.Name()+"="+string(s.Value()))
		}
		if !slices.Equal(got, c.members) || s.IsObject() != c.object || (s.Err() != nil) != c.stopped || s.Whole() != c.whole {
			t.Errorf("%q: members %q object %v err %v whole %v; want %q %v stopped %v whole %v",
				c.in, got, s.IsObject(), s.Err(), s.Whole(), c.members, c.object, c.stopped, c.whole)
		}
	}
}

// TestOffset: after a member, the offset is just past its value, so a
// reader of a body cut short can tell a value that ended from one cut.
func TestOffset(t *testing.T) {
	body := []byte(`{"id": 12, "x": 3`)
	s := jsonmember.New(body)
	if !s.Scan() || s.Name() != "id" || s.Offset() != int64(len(`{"id": 12`)) {
		t.Fatalf("after id: %q offset %d", s.Name(), s.Offset())
	}
	if !s.Scan() || s.Offset() != int64(len(body)) {
		t.Fatalf("after x: offset %d, want %d", s.Offset(), len(body))
	}
}

// TestRepeated: a member named twice in its object is found at any depth,
// in objects within arrays too, at the path leading to it; the same name
// in two objects, escaped spellings that decode apart, and data that is no
// JSON (up to where it stops being JSON) are not.
func TestRepeated(t *testing.T) {
	for _, c := range []struct {
		in   string
		path []string // nil: none
	}{
		{`{"a":1,"b":2}`, nil},
		{`{"a":1,"a":2}`, []string{"a"}},
		{`{"a":1,"\u0061":2}`, []string{"a"}}, // the same name, spelled otherwise
		{`{"a\"b":1,"a\u0022b":2}`, []string{`a"b`}},
		{`{"x":[{"a\\":1,"a\\":2}]}`, []string{"x", "0", `a\`}},
		{`{"a":"}","b":"{\"a\":1}","a":0}`, []string{"a"}}, // braces and names within strings are no members
		{`[[],{},[[]],{"":1,"":2}]`, []string{"3", ""}},
		{manyMembers(40, false), nil},
		{manyMembers(40, true), []string{"m", "k38"}},
		{"{\"a\xff\":1,\"a\xfe\":2}", []string{"a\ufffd"}}, // not UTF-8: a decoder reads both as a\ufffd
		{"{\"a\xff\":1,\"b\xfe\":2}", nil},
		{`{"a":1,"A":2}`, nil},
		{`{"a":{"b":1},"c":{"b":2}}`, nil},
		{`{"a":{"b":1,"c":[1,{"d":1,"d":2}]}}`, []string{"a", "c", "1", "d"}},
		{`[{"x":1},[0,0,{"y":1,"z":{},"y":[]}]]`, []string{"1", "2", "y"}},
		{`{"a":[],"b":{},"c":null,"a":0}`, []string{"a"}},
		{`{"a":1}{"a":1}`, nil}, // the root value ends there
		{`{"a":1,"a"`, []string{"a"}},
		{`{"a":1,}`, nil},
		{`"a"`, nil},
		{`not json`, nil},
		{``, nil},
	} {
		path, ok := jsonmember.Repeated([]byte(c.in))
		if ok != (c.path != nil) || !slices.Equal(path, c.path) {
			t.Errorf("Repeated(%.80s) = %q %v, want %q", c.in, path, ok, c.path)
		}
		if json.Valid([]byte(c.in)) {
			if path, ok := jsonmember.RepeatedByDecoder([]byte(c.in)); ok != (c.path != nil) || !slices.Equal(path, c.path) {
				t.Errorf("RepeatedByDecoder(%.80s) = %q %v, want %q", c.in, path, ok, c.path)
			}
		}
	}
	// The common case, every tool call's, allocates nothing.
	args := []byte(`{"id": "o-1001", "filter": {"status": ["paid", "open"], "limit": 5}}`)
	if n := testing.AllocsPerRun(100, func() { jsonmember.Repeated(args) }); n != 0 {
		t.Errorf("Repeated allocates %v times for small arguments", n)
	}
}

// manyMembers is an object of one member, m, an object of n members
// k0…k(n-1), the last named k(n-2) again when repeated.
func manyMembers(n int, repeated bool) string {
	var b strings.Builder
	b.WriteString(`{"m":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := i
		if repeated && i == n-1 {
			name = n - 2
		}
		fmt.Fprintf(&b, `"k%d":%d`, name, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// FuzzRepeated: on any JSON, reading the bytes finds what the decoder
// finds.
func FuzzRepeated(f *testing.F) {
	for _, seed := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `[{"\u0061":1,"a":2}]`, `{"a":"\"","b":{}}`,
		manyMembers(33, true), `[]`, `{}`, `"x"`, `0`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		path, ok := jsonmember.Repeated(data)
		want, wantOK := jsonmember.RepeatedByDecoder(data)
		if ok != wantOK || !slices.Equal(path, want) {
			t.Fatalf("Repeated(%q) = %q %v; by the decoder %q %v", data, path, ok, want, wantOK)
		}
	})
}
