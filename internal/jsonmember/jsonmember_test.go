package jsonmember_test

import (
	"slices"
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
