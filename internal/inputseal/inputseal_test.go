package inputseal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpens(t *testing.T) {
	t.Parallel()
	ringKey := bytes.Repeat([]byte{1}, 32)
	binding := Binding("acme", [16]byte{9})
	plaintext := []byte(`{"reason":"a distinctive string"}`)
	sealed, wrapped, err := Seal(ringKey, binding, plaintext)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("distinctive")) || bytes.Contains(wrapped, ringKey[:8]) {
		t.Fatal("the sealed input holds its plaintext")
	}
	got, err := Open(ringKey, binding, sealed, wrapped)
	if err != nil || !bytes.Equal(got, plaintext) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	again, _, err := Seal(ringKey, binding, plaintext)
	if err != nil || bytes.Equal(again, sealed) {
		t.Fatal("two seals of one input are alike: the data key or nonce is not fresh")
	}

	otherWrapped := func() []byte { _, w, _ := Seal(ringKey, binding, plaintext); return w }()
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct{ key, binding, sealed, wrapped []byte }{
		"another ring key":         {bytes.Repeat([]byte{2}, 32), binding, sealed, wrapped},
		"another approval":         {ringKey, Binding("acme", [16]byte{8}), sealed, wrapped},
		"another tenant":           {ringKey, Binding("globex", [16]byte{9}), sealed, wrapped},
		"another input's data key": {ringKey, binding, sealed, otherWrapped},
		"a changed ciphertext":     {ringKey, binding, flipped, wrapped},
		"a shredded data key":      {ringKey, binding, sealed, nil},
		"a truncated input":        {ringKey, binding, sealed[:5], wrapped},
	} {
		if _, err := Open(tc.key, tc.binding, tc.sealed, tc.wrapped); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: Open = %v, want ErrOpen", name, err)
		}
	}
}
