package ontology

import (
	"errors"
	"testing"
)

// TestAuditCheckpointOriginIsPrintable: audit.checkpoint.origin is said to
// be "one line of printable text": an origin holding a control character
// (a YAML "\x01", "\e") was accepted, and every checkpoint signed with it
// is a note no verifier opens (a signed note holds no control character):
// every proof malformed, every checkpoint note_invalid in audit verify.
func TestAuditCheckpointOriginIsPrintable(t *testing.T) {
	t.Parallel()
	for _, origin := range []string{`a\x01b`, `audit.example.com\e[31m`, `x\x7f`} {
		extra := "audit: {checkpoint: {key_env: K, origin: \"" + origin + "\"}}\n"
		_, err := Parse([]byte(base + extra))
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0].Path != "audit.checkpoint.origin" {
			t.Errorf("%q: %v, want one problem at audit.checkpoint.origin", extra, err)
		}
	}
}
