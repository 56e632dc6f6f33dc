package checkpoint

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/opfile"
)

// algEd25519 is the signed-note algorithm byte of an Ed25519 key.
const algEd25519 = 1

// Signer signs checkpoints with one Ed25519 signed-note key. Its key id is
// the key's name and 32-bit hash (KeyID), which every checkpoint stores,
// so that checkpoints signed before a rotation stay verifiable with the
// old public key. It holds the private key: it never prints it.
type Signer struct {
	signer note.Signer
	vkey   string
}

// NewSigner parses a signer key, "PRIVATE+KEY+<name>+<hash>+<keydata>"
// (GenerateKey, or note.GenerateKey), Ed25519 only. An error never
// repeats the key.
func NewSigner(skey string) (*Signer, error) {
	skey = strings.TrimSpace(skey)
	bad := func(why string) (*Signer, error) {
		return nil, errcode.New(errcode.CheckpointKeyInvalid, "the checkpoint signing key is not a signed-note Ed25519 signer key: "+why, nil)
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+") {
		return bad(`it does not begin "PRIVATE+KEY+" (was a public key given?)`)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		return bad("it does not parse as PRIVATE+KEY+<name>+<hash>+<keydata>")
	}
	// PRIVATE+KEY+<name>+<hash>+<keydata>: the key data's base64 may
	// hold '+' itself.
	parts := strings.SplitN(skey, "+", 5)
	data, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if len(parts) != 5 || err != nil || len(data) != 1+ed25519.SeedSize || data[0] != algEd25519 {
		return bad("its key data is not an Ed25519 key")
	}
	pub, ok := ed25519.NewKeyFromSeed(data[1:]).Public().(ed25519.PublicKey)
	if !ok {
		return bad("its key data is not an Ed25519 key")
	}
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return bad("its public key cannot be derived")
	}
	if v, err := note.NewVerifier(vkey); err != nil || v.KeyHash() != s.KeyHash() {
		return bad("its public key does not match its hash")
	}
	return &Signer{signer: s, vkey: vkey}, nil
}

// maxSignerKeyBytes bounds a signer key file: a key is under a hundred
// bytes, a line of text.
const maxSignerKeyBytes = 4096

// LoadSigner reads the signer key from the file keyFile, or else from the
// environment variable keyEnv (getenv reads it). Both empty: nil, nil
// (checkpoints are off).
func LoadSigner(keyFile, keyEnv string, getenv func(string) string) (*Signer, error) {
	switch {
	case keyFile != "":
		b, err := opfile.Read(keyFile, maxSignerKeyBytes, "signer key")
		if err != nil {
			return nil, errcode.New(errcode.CheckpointKeyInvalid, "audit.checkpoint.key_file: "+err.Error(), err)
		}
		return NewSigner(string(b))
	case keyEnv != "":
		v := getenv(keyEnv)
		if v == "" {
			return nil, errcode.New(errcode.CheckpointKeyInvalid, "audit.checkpoint.key_env names "+keyEnv+", which is not set", nil)
		}
		return NewSigner(v)
	}
	return nil, nil
}

// Name is the key's name.
func (s *Signer) Name() string { return s.signer.Name() }

// KeyHash is the key's 32-bit hash.
func (s *Signer) KeyHash() uint32 { return s.signer.KeyHash() }

// KeyID is "<name>+<hash>", the key's id in notes and key lists.
func (s *Signer) KeyID() string { return KeyID(s.Name(), s.KeyHash()) }

// VerifierKey is the public key, "<name>+<hash>+<keydata>": what a
// verifier is given.
func (s *Signer) VerifierKey() string { return s.vkey }

// Sign returns the signed note of c.
func (s *Signer) Sign(c Checkpoint) (string, error) {
	// note.Sign signs text note.Open refuses (a control character but
	// the newline): such a note would be stored, and open for no one.
	if strings.ContainsFunc(c.Origin, func(r rune) bool { return r < 0x20 }) || !utf8.ValidString(c.Origin) {
		return "", fmt.Errorf("sign checkpoint: its origin %q is not one line of printable text", c.Origin)
	}
	msg, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s.signer)
	if err != nil {
		return "", fmt.Errorf("sign checkpoint: %w", err)
	}
	return string(msg), nil
}

// KeyID formats a key's id, "<name>+<hash as 8 hex digits>".
func KeyID(name string, hash uint32) string { return name + "+" + fmt.Sprintf("%08x", hash) }

// GenerateKey makes a new Ed25519 key pair named name: the signer key
// (secret) and the verifier key (public).
func GenerateKey(name string) (skey, vkey string, err error) {
	if name == "" || strings.ContainsAny(name, "+ \t\n") {
		return "", "", errcode.New(errcode.CheckpointKeyInvalid, "a key name must be non-empty, without spaces or '+'", nil)
	}
	return note.GenerateKey(rand.Reader, name)
}

// Verifiers parses public keys, "<name>+<hash>+<keydata>", into the set a
// note is checked against: a checkpoint verifies when any key of the set
// signed it, so a set holding the old and new keys verifies checkpoints
// from both sides of a rotation.
func Verifiers(vkeys []string) (note.Verifiers, error) {
	if len(vkeys) == 0 {
		return nil, errcode.New(errcode.CheckpointKeyInvalid, "no public key given: pass the checkpoint key's public key (--key)", nil)
	}
	list := make([]note.Verifier, 0, len(vkeys))
	// A key given twice (by --key and in --keys-file, say) is one key:
	// note.Open refuses a name and hash two verifiers share as ambiguous,
	// which would fail every note that key signed. Two different keys of
	// one name and hash cannot be told apart by a signature: refused here.
	seen := make(map[string]string, len(vkeys))
	for i, k := range vkeys {
		k = strings.TrimSpace(k)
		if strings.HasPrefix(k, "PRIVATE+") {
			return nil, errcode.New(errcode.CheckpointKeyInvalid, "key "+strconv.Itoa(i+1)+" is a private signer key: give its public key, and keep the private one secret", nil)
		}
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, errcode.New(errcode.CheckpointKeyInvalid, fmt.Sprintf("key %d is not a signed-note public key <name>+<hash>+<keydata>", i+1), nil)
		}
		id := KeyID(v.Name(), v.KeyHash())
		// <name>+<hash>+<keydata>: the key data's base64 may hold '+'.
		data := strings.SplitN(k, "+", 3)[2]
		if prev, dup := seen[id]; dup {
			if prev != data {
				return nil, errcode.New(errcode.CheckpointKeyInvalid, fmt.Sprintf("key %d has the name and hash %s of another key given, with other key data: a signature cannot tell them apart", i+1, id), nil)
			}
			continue
		}
		seen[id] = data
		list = append(list, v)
	}
	return note.VerifierList(list...), nil
}
