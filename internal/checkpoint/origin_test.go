package checkpoint

import "testing"

// TestSignRefusesANoteNoVerifierOpens: a note's text holds no control
// character but its newlines; note.Sign does not check, note.Open does.
// A checkpoint whose origin holds one must not be signed and stored as
// if it were a checkpoint: it is refused when signed.
func TestSignRefusesANoteNoVerifierOpens(t *testing.T) {
	t.Parallel()
	key := newKey(t, "orangerail.test")
	n, err := key.signer.Sign(Checkpoint{Origin: "orangerail.test/\x01acme", Size: 1, Root: EmptyRoot()})
	if err == nil {
		_, _, openErr := OpenNote(n, verifiers(t, key))
		t.Fatalf("signed a checkpoint with a control character in its origin; opening it: %v", openErr)
	}
}
