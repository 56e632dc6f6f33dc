// Package keyring holds the server's secret keys: a ring of keys, each
// named by a key id (kid), one of them active. The active key signs what
// is made now (input digests, list cursors, the wrapping of sealed
// inputs); every key of the ring still verifies or opens what it made,
// so a rotation leaves open cursors and pending approvals working.
//
// A ring is written as entries separated by commas, each kid:key with the
// key as 64 hex characters; the first entry is the active key:
//
//	k20261201-3f9a:6b1e…,legacy:0c4d…
//
// A bare 64-hex value, the form before rings, is a ring of one whose kid
// is Legacy. What that key made carries no kid, and what carries no kid is
// verified with the key named Legacy: digests and cursors made before the
// ring existed stay valid for as long as the ring keeps that key.
package keyring

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
)

// Size is the size of a key in bytes.
const Size = 32

// KID names a key of a ring.
type KID string

// Legacy is the kid of the key that was the whole server key before rings:
// what carries no kid was made under it. It is reserved for that key.
const Legacy KID = "legacy"

// kidShape is the form of a kid: short, and free of the separators of a
// ring (',' and ':') and of a cursor ('.').
var kidShape = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Valid reports whether k has the form of a kid.
func (k KID) Valid() bool { return kidShape.MatchString(string(k)) }

// Key is one key of a ring.
type Key struct {
	ID     KID
	secret []byte
}

// Secret returns the key's bytes (a copy).
func (k Key) Secret() []byte { return slices.Clone(k.secret) }

// Ring is a set of keys, one active. The zero Ring is empty, with no
// active key: make a ring with Parse or Single, or add a first key to the
// zero Ring with With. A Ring is immutable and safe for concurrent use.
type Ring struct {
	// keys[0] is the active key.
	keys []Key
}

// Single returns a ring of one key, secret, under the kid Legacy: the
// ring a bare key stands for.
func Single(secret []byte) (*Ring, error) {
	if len(secret) != Size {
		return nil, errcode.New(errcode.KeyRingKeyInvalid, fmt.Sprintf("a key is %d bytes, not %d", Size, len(secret)), nil)
	}
	return &Ring{keys: []Key{{ID: Legacy, secret: slices.Clone(secret)}}}, nil
}

// Bare reports whether text is the form before rings: one key, no kid.
func Bare(text string) bool {
	return !strings.ContainsAny(text, ":,")
}

// Parse reads a ring as it is written (see the package doc); source names
// where the text came from, for errors. A bare value is a ring of one
// under Legacy. Every malformed ring is refused with its code: an entry
// that is not kid:key or whose kid has not the form of one
// (KeyRingEntryInvalid), a key that is not 64 hex characters
// (KeyRingKeyInvalid), a kid named twice (KeyRingDuplicateKID), no entry
// at all (KeyRingNoActiveKey). No error quotes a key.
func Parse(text, source string) (*Ring, error) {
	text = strings.TrimSpace(text)
	if Bare(text) {
		if text == "" {
			return nil, errcode.New(errcode.KeyRingNoActiveKey, source+" holds no key", nil)
		}
		secret, err := decodeKey(text)
		if err != nil {
			return nil, errcode.New(errcode.KeyRingKeyInvalid, source+" is not 64 hex characters", nil)
		}
		return Single(secret)
	}
	r := &Ring{}
	for i, entry := range strings.Split(text, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" && i == 0 {
			return nil, errcode.New(errcode.KeyRingNoActiveKey, fmt.Sprintf("%s: the first entry, the active key, is empty", source), nil)
		}
		kid, hexKey, ok := strings.Cut(entry, ":")
		id := KID(strings.TrimSpace(kid))
		if !ok || !id.Valid() {
			return nil, errcode.New(errcode.KeyRingEntryInvalid,
				fmt.Sprintf("%s: entry %d is not kid:key with a kid of 1 to 32 of [a-z0-9_-] (first a letter or digit)", source, i+1), nil)
		}
		secret, err := decodeKey(strings.TrimSpace(hexKey))
		if err != nil {
			return nil, errcode.New(errcode.KeyRingKeyInvalid, fmt.Sprintf("%s: the key of %s is not 64 hex characters", source, id), nil)
		}
		if _, dup := r.lookup(id); dup {
			return nil, errcode.New(errcode.KeyRingDuplicateKID, fmt.Sprintf("%s: the kid %s is named twice", source, id), nil)
		}
		r.keys = append(r.keys, Key{ID: id, secret: secret})
	}
	return r, nil
}

func decodeKey(text string) ([]byte, error) {
	secret, err := hex.DecodeString(text)
	if err != nil {
		return nil, err
	}
	if len(secret) != Size {
		return nil, fmt.Errorf("%d bytes", len(secret))
	}
	return secret, nil
}

// Active returns the active key: the one that signs what is made now.
func (r *Ring) Active() Key { return r.keys[0] }

// Lookup returns the secret of the key kid names. The empty kid, what a
// thing made before rings carries, names Legacy.
func (r *Ring) Lookup(kid KID) ([]byte, bool) {
	k, ok := r.lookup(kid)
	return k.secret, ok
}

func (r *Ring) lookup(kid KID) (Key, bool) {
	if kid == "" {
		kid = Legacy
	}
	return r.find(kid)
}

// find returns the key whose kid is kid, exactly.
func (r *Ring) find(kid KID) (Key, bool) {
	i := slices.IndexFunc(r.keys, func(k Key) bool { return k.ID == kid })
	if i < 0 {
		return Key{}, false
	}
	return r.keys[i], true
}

// named returns the key an operator names by kid (keys activate, keys
// drop): by its kid exactly. Not as lookup reads a carried kid, where the
// empty kid is Legacy's: an empty argument (a script's variable unset)
// would name the legacy key, and drop what signed everything made before
// rings, or make it active again, undoing a rotation.
func (r *Ring) named(kid KID) (Key, error) {
	k, ok := r.find(kid)
	switch {
	case ok:
		return k, nil
	case kid == "":
		return Key{}, errcode.New(errcode.KeyRingKIDUnknown, fmt.Sprintf("no kid was named (an empty argument: a variable unset?); the ring has %v", r.IDs()), nil)
	}
	return Key{}, errcode.New(errcode.KeyRingKIDUnknown, fmt.Sprintf("the ring has no key %s; it has %v", kid, r.IDs()), nil)
}

// Keys returns every key, the active first.
func (r *Ring) Keys() []Key { return slices.Clone(r.keys) }

// IDs returns every kid, the active first.
func (r *Ring) IDs() []KID {
	ids := make([]KID, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	return ids
}

// Carried is the kid that what key k makes carries: none for Legacy, so
// that a digest or cursor made under the legacy key is the one made
// before rings, and replicas not yet upgraded still read it.
func Carried(k KID) KID {
	if k == Legacy {
		return ""
	}
	return k
}

// Encode writes the ring as Parse reads it. It holds every secret: print
// it only where the operator asked for it.
func (r *Ring) Encode() string {
	parts := make([]string, len(r.keys))
	for i, k := range r.keys {
		parts[i] = string(k.ID) + ":" + hex.EncodeToString(k.secret)
	}
	return strings.Join(parts, ",")
}

// NewKey makes a fresh random key whose kid says when it was made:
// k<yyyymmdd>-<4 random hex>. It is not yet in any ring.
func NewKey(now time.Time, random io.Reader) (Key, error) {
	b := make([]byte, Size+2)
	if _, err := io.ReadFull(random, b); err != nil {
		return Key{}, fmt.Errorf("keyring: read random bytes: %w", err)
	}
	return Key{ID: KID(fmt.Sprintf("k%s-%s", now.UTC().Format("20060102"), hex.EncodeToString(b[Size:]))), secret: b[:Size]}, nil
}

// Generate makes a fresh key with crypto/rand (NewKey).
func Generate(now time.Time) (Key, error) { return NewKey(now, rand.Reader) }

// With returns the ring with k added, as the active key when active, else
// as the last, inactive. A kid the ring has already is KeyRingDuplicateKID.
func (r *Ring) With(k Key, active bool) (*Ring, error) {
	if _, dup := r.lookup(k.ID); dup {
		return nil, errcode.New(errcode.KeyRingDuplicateKID, fmt.Sprintf("the ring has a key %s already", k.ID), nil)
	}
	if !k.ID.Valid() || len(k.secret) != Size {
		return nil, errcode.New(errcode.KeyRingEntryInvalid, fmt.Sprintf("the key %q has no valid kid or is not %d bytes", k.ID, Size), nil)
	}
	if active || len(r.keys) == 0 {
		return &Ring{keys: append([]Key{k}, r.keys...)}, nil
	}
	return &Ring{keys: append(slices.Clone(r.keys), k)}, nil
}

// Activate returns the ring with the key kid names moved first, active.
func (r *Ring) Activate(kid KID) (*Ring, error) {
	k, err := r.named(kid)
	if err != nil {
		return nil, err
	}
	rest := slices.DeleteFunc(slices.Clone(r.keys), func(o Key) bool { return o.ID == k.ID })
	return &Ring{keys: append([]Key{k}, rest...)}, nil
}

// Drop returns the ring without the key kid names. The active key cannot
// be dropped (KeyRingNoActiveKey): activate another first.
func (r *Ring) Drop(kid KID) (*Ring, error) {
	k, err := r.named(kid)
	if err != nil {
		return nil, err
	}
	if k.ID == r.Active().ID {
		return nil, errcode.New(errcode.KeyRingNoActiveKey, fmt.Sprintf("%s is the active key: activate another before dropping it", k.ID), nil)
	}
	return &Ring{keys: slices.DeleteFunc(slices.Clone(r.keys), func(o Key) bool { return o.ID == k.ID })}, nil
}
