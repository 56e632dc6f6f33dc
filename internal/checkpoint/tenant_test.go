package checkpoint

import (
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

// TestAProofOfAnotherTenantSaysSo: a proof file's "tenant" names whose log
// it is, and its checkpoint's origin ends in "/<tenant>". A file that says
// "tenant": "globex" over a checkpoint of acme's log verified: whoever
// reads the file (or its name) takes it for a proof about globex, and
// check-proof said OK. The two must agree: X_AUDIT_PROOF_INVALID.
func TestAProofOfAnotherTenantSaysSo(t *testing.T) {
	t.Parallel()
	hashes, entries := chain(12)
	tree := NewTree(hashes)
	key := newKey(t, "orangerail.test")
	known := verifiers(t, key)
	head, old := sign(t, key, tree, 12), sign(t, key, tree, 5)
	for name, p := range map[string]*Proof{
		"inclusion":   inclusion(t, tree, hashes, entries, head, 3, 12),
		"consistency": consistency(t, tree, old, head, 5, 12),
	} {
		if _, err := check(t, p, known, CheckOptions{}); err != nil {
			t.Fatalf("%s of acme: %v", name, err)
		}
		for _, other := range []string{"globex", "cme", ""} {
			p.Tenant = other
			_, err := check(t, p, known, CheckOptions{})
			if errcode.Of(err) != errcode.AuditProofInvalid && errcode.Of(err) != errcode.AuditProofMalformed {
				t.Errorf("%s of acme's log, said to be of tenant %q: %v, want it refused", name, other, err)
			}
		}
	}
}
