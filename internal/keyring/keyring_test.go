package keyring

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
)

var (
	hexA = strings.Repeat("a1", 32)
	hexB = strings.Repeat("b2", 32)
)

func TestParse(t *testing.T) {
	t.Parallel()
	r, err := Parse(" k2:"+hexB+" , legacy:"+hexA+"\n", "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.Active().ID != "k2" || !bytes.Equal(r.Active().Secret(), mustHex(t, hexB)) {
		t.Fatalf("active = %s, want k2", r.Active().ID)
	}
	if ids := r.IDs(); len(ids) != 2 || ids[1] != Legacy {
		t.Fatalf("ids = %v", ids)
	}
	// What carries no kid was made under the legacy key.
	if got, ok := r.Lookup(""); !ok || !bytes.Equal(got, mustHex(t, hexA)) {
		t.Fatalf("Lookup(\"\") = %x, %v; want the legacy key", got, ok)
	}
	if _, ok := r.Lookup("k3"); ok {
		t.Fatal("Lookup(k3) found a key the ring does not hold")
	}
	if again, err := Parse(r.Encode(), "encoded"); err != nil || again.Encode() != r.Encode() {
		t.Fatalf("Encode does not round-trip: %v", err)
	}

	bare, err := Parse(hexA, "test")
	if err != nil || bare.Active().ID != Legacy || len(bare.IDs()) != 1 {
		t.Fatalf("a bare key = %v, %v; want a ring of one under legacy", bare, err)
	}
	if _, ok := (&Ring{keys: []Key{{ID: "k2", secret: mustHex(t, hexB)}}}).Lookup(""); ok {
		t.Fatal("a ring without the legacy key verified what carries no kid")
	}
	if Carried(Legacy) != "" || Carried("k2") != "k2" {
		t.Fatal("the legacy key's things must carry no kid, the others their kid")
	}
}

func TestParseRefusesMalformedRings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		code       errcode.Code
	}{
		{"empty", "  ", errcode.KeyRingNoActiveKey},
		{"empty first entry", ",k2:" + hexB, errcode.KeyRingNoActiveKey},
		{"bare not hex", "zz", errcode.KeyRingKeyInvalid},
		{"bad hex", "k2:" + strings.Repeat("zz", 32), errcode.KeyRingKeyInvalid},
		{"short key", "k2:" + hexB[:62], errcode.KeyRingKeyInvalid},
		{"duplicate kid", "k2:" + hexB + ",k2:" + hexA, errcode.KeyRingDuplicateKID},
		{"duplicate legacy", "legacy:" + hexB + ",legacy:" + hexA, errcode.KeyRingDuplicateKID},
		{"no kid", ":" + hexB, errcode.KeyRingEntryInvalid},
		{"kid with a dot", "k.2:" + hexB, errcode.KeyRingEntryInvalid},
		{"kid upper case", "K2:" + hexB, errcode.KeyRingEntryInvalid},
		{"trailing comma", "k2:" + hexB + ",", errcode.KeyRingEntryInvalid},
		{"entry without a key", "k2:" + hexB + ",k3", errcode.KeyRingEntryInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.text, "ORANGERAIL_SECRET_KEY")
			if errcode.Of(err) != tc.code {
				t.Fatalf("Parse(%q) = %v, want %s", tc.text, err, tc.code)
			}
			// No refusal quotes a key.
			if strings.Contains(err.Error(), hexA[:16]) || strings.Contains(err.Error(), hexB[:16]) {
				t.Fatalf("the refusal quotes a key: %v", err)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	r, err := Parse(hexA, "test")
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey(time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), bytes.NewReader(bytes.Repeat([]byte{0xcd}, Size+2)))
	if err != nil || k.ID != "k20261201-cdcd" || !k.ID.Valid() {
		t.Fatalf("NewKey = %s, %v", k.ID, err)
	}
	added, err := r.With(k, false)
	if err != nil || added.Active().ID != Legacy || added.IDs()[1] != k.ID {
		t.Fatalf("With inactive = %v, %v", added.IDs(), err)
	}
	if _, err := added.With(k, true); errcode.Of(err) != errcode.KeyRingDuplicateKID {
		t.Fatalf("adding a kid twice = %v", err)
	}
	active, err := added.Activate(k.ID)
	if err != nil || active.Active().ID != k.ID || active.IDs()[1] != Legacy {
		t.Fatalf("Activate = %v, %v", active.IDs(), err)
	}
	rotated, err := r.With(k, true)
	if err != nil || rotated.Encode() != active.Encode() {
		t.Fatalf("With active = %v, want %v (%v)", rotated.IDs(), active.IDs(), err)
	}
	if _, err := active.Drop(k.ID); errcode.Of(err) != errcode.KeyRingNoActiveKey {
		t.Fatalf("dropping the active key = %v", err)
	}
	if _, err := active.Activate("k404"); errcode.Of(err) != errcode.KeyRingKIDUnknown {
		t.Fatalf("activating an unknown kid = %v", err)
	}
	// An empty kid (a script's variable unset) names no key: not the
	// legacy one, which what carries no kid is verified with.
	if _, err := active.Drop(""); errcode.Of(err) != errcode.KeyRingKIDUnknown {
		t.Fatalf("dropping the empty kid = %v, want %s", err, errcode.KeyRingKIDUnknown)
	}
	if _, err := active.Activate(""); errcode.Of(err) != errcode.KeyRingKIDUnknown {
		t.Fatalf("activating the empty kid = %v, want %s", err, errcode.KeyRingKIDUnknown)
	}
	dropped, err := active.Drop(Legacy)
	if err != nil || len(dropped.IDs()) != 1 || dropped.Active().ID != k.ID {
		t.Fatalf("Drop = %v, %v", dropped.IDs(), err)
	}
	if _, ok := dropped.Lookup(""); ok {
		t.Fatal("after the legacy key is dropped, what carries no kid still verifies")
	}
	// Changes return new rings: the one changed is as it was.
	if len(r.IDs()) != 1 || len(added.IDs()) != 2 || added.Active().ID != Legacy {
		t.Fatal("a change altered the ring it was made from")
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse: no text panics the parser; a ring it accepts encodes to a
// text that parses to the same ring; a refusal carries a code and never
// the text's hex.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{hexA, "k2:" + hexB + ",legacy:" + hexA, "", ",", "k2:", ":" + hexA, "k2:" + hexB + ",k2:" + hexB, "a:b:c", "k.2:" + hexA} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(text, "fuzz")
		if err != nil {
			if errcode.Of(err) == "" {
				t.Fatalf("Parse(%q) = %v, without a code", text, err)
			}
			if trimmed := strings.TrimSpace(text); len(trimmed) >= 2*Size && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("the refusal quotes the ring: %v", err)
			}
			return
		}
		again, err := Parse(r.Encode(), "encoded")
		if err != nil || again.Encode() != r.Encode() || again.Active().ID != r.Active().ID {
			t.Fatalf("Parse(%q) does not round-trip: %v", text, err)
		}
		for _, k := range r.Keys() {
			if !k.ID.Valid() || len(k.Secret()) != Size {
				t.Fatalf("Parse(%q) accepted the key %q", text, k.ID)
			}
		}
	})
}
