package yamldoc

import (
	"errors"
	"testing"
)

// TestDecodeReadsOneDocument: a file of one document is read, a closing
// "---" after it too; an empty one is no document; a second document that
// holds anything (an explicit null too) is refused, as is YAML that does
// not parse, wherever it is.
func TestDecodeReadsOneDocument(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data string
		kind int // the root's yaml.Kind; -1: refused
		more bool
	}{
		{"a: 1\n", 1, false},
		{"---\na: 1\n", 1, false},
		{"a: 1\n...\n", 1, false},
		{"", 0, false},
		{"# a comment\n", 0, false},
		{"a: 1\n---\nactions: {x: 1}\n", -1, true},
		{"a: 1\n---\n", 1, false},
		{"a: 1\n---\n---\nb: 2\n", -1, true},
		{"a: 1\n---\nnull\n", -1, true},
		{"a: 1\n---\n{: [\n", -1, false},
		{"{: [\n", -1, false},
	} {
		doc, err := Decode([]byte(c.data))
		switch {
		case c.kind < 0 && err == nil:
			t.Errorf("%q: read as a document", c.data)
		case c.kind < 0 && errors.Is(err, ErrMoreDocuments) != c.more:
			t.Errorf("%q: %v", c.data, err)
		case c.kind >= 0 && (err != nil || int(doc.Kind) != c.kind):
			t.Errorf("%q: kind %d (%v), want %d", c.data, doc.Kind, err, c.kind)
		}
	}
}
