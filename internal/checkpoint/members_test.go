package checkpoint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
)

// TestAProofFileNamesEachMemberOnce: encoding/json matches member names
// without regard to case, the last of those matching winning. A proof file holding a forged "record" and,
// after it, the real one as "Record" verified: check-proof said OK of the
// real record, while every other reader of the file (jq, a script, the
// short program of the README's own offline check) reads the forged
// "record" as the one proven. A member spelled otherwise than the format
// spells it, or named twice, is refused: X_AUDIT_PROOF_MALFORMED.
func TestAProofFileNamesEachMemberOnce(t *testing.T) {
	t.Parallel()
	hashes, entries := chain(10)
	tree := NewTree(hashes)
	key := newKey(t, "orangerail.test")
	known := verifiers(t, key)
	head := sign(t, key, tree, 10)
	real := inclusion(t, tree, hashes, entries, head, 4, 10)
	realJSON, err := json.Marshal(real.Record)
	if err != nil {
		t.Fatal(err)
	}
	forged := *real.Record
	forged.Entry = []byte(`{"forged":"the agent was allowed to refund 1,000,000"}`)
	forged.Hash = ChainHash(forged.PrevHash, forged.Seq, forged.Entry)
	forgedJSON, err := json.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	path, err := json.Marshal(real.Hashes)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	prefix := `{"format":"orangerail-proof/v1","kind":"inclusion","tenant":"acme","checkpoint":` + string(cp) + `,"proof":` + string(path)
	files := map[string]string{
		"a forged record, then the real one as Record": prefix + `,"record":` + string(forgedJSON) + `,"Record":` + string(realJSON) + `}`,
		"a forged record, then the real one as ſecord": prefix + `,"record":` + string(forgedJSON) + `,"reco\u017fd":` + string(realJSON) + `}`,
		"a forged entry, then the real one as Entry": prefix + `,"record":` + strings.TrimSuffix(string(forgedJSON), "}") +
			`,"Entry":` + mustJSON(t, real.Record.Entry) + `,"hash":"` + real.Record.Hash.String() + `"}}`,
		"the record named twice": prefix + `,"record":` + string(forgedJSON) + `,"record":` + string(realJSON) + `}`,
	}
	for name, text := range files {
		// What another reader takes for the record proven.
		var other map[string]any
		if err := json.Unmarshal([]byte(text), &other); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := Check(strings.NewReader(text), known, CheckOptions{})
		if errcode.Of(err) != errcode.AuditProofMalformed {
			t.Errorf("%s: Check = %+v, %v; want %s (another reader reads the record %v)", name, res, err, errcode.AuditProofMalformed, other["record"])
		}
	}
	// The real file still verifies.
	b, err := json.Marshal(real)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(bytes.NewReader(b), known, CheckOptions{}); err != nil {
		t.Fatalf("the real proof: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (h Hex) String() string { b, _ := h.MarshalText(); return string(b) }
