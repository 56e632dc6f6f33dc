package checkpoint

import "testing"

// TestAKeyGivenTwiceStillVerifies: an auditor who names the current key
// with --key and again in --keys-file (the file of every key, kept across
// rotations) gives the same public key twice. A proof signed by it must
// still verify, not fail as a malformed note ("ambiguous key").
func TestAKeyGivenTwiceStillVerifies(t *testing.T) {
	t.Parallel()
	hashes, entries := chain(10)
	tree := NewTree(hashes)
	key := newKey(t, "orangerail.test")
	head := sign(t, key, tree, 10)
	known, err := Verifiers([]string{key.vkey, key.vkey + "\n"})
	if err != nil {
		t.Fatalf("the same key twice: %v", err)
	}
	if _, err := check(t, inclusion(t, tree, hashes, entries, head, 3, 10), known, CheckOptions{}); err != nil {
		t.Fatalf("a proof signed by a key given twice: %v", err)
	}
	if _, _, err := OpenNote(head, known); err != nil {
		t.Fatalf("OpenNote with a key given twice: %v", err)
	}
}
