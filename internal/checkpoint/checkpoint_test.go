package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/errcode"
)

// chain makes the chain hashes and entries of a synthetic log of n
// records, linked by ChainHash from the genesis hash.
func chain(n int) (hashes, entries [][]byte) {
	prev := make([]byte, HashSize)
	for i := range n {
		entry := fmt.Appendf(nil, `{"seq-hint":%d,"v":1}`, i+1)
		h := ChainHash(prev, int64(i+1), entry)
		hashes, entries = append(hashes, h), append(entries, entry)
		prev = h
	}
	return hashes, entries
}

// mth is RFC 6962's Merkle Tree Hash (section 2.1) written from its
// definition, as an oracle independent of package merkle.
func mth(leaves [][]byte) []byte {
	switch n := len(leaves); n {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		h := sha256.Sum256(append([]byte{0}, leaves[0]...))
		return h[:]
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		h := sha256.Sum256(append(append([]byte{1}, mth(leaves[:k])...), mth(leaves[k:])...))
		return h[:]
	}
}

type keyPair struct {
	signer *Signer
	vkey   string
}

func newKey(t *testing.T, name string) keyPair {
	t.Helper()
	skey, vkey, err := GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if s.VerifierKey() != vkey {
		t.Fatalf("derived public key %q, generated %q", s.VerifierKey(), vkey)
	}
	return keyPair{signer: s, vkey: vkey}
}

func verifiers(t *testing.T, keys ...keyPair) note.Verifiers {
	t.Helper()
	var vkeys []string
	for _, k := range keys {
		vkeys = append(vkeys, k.vkey)
	}
	v, err := Verifiers(vkeys)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const testOrigin = "orangerail.test/acme-orders/acme"

func sign(t *testing.T, k keyPair, tree *Tree, size uint64) string {
	t.Helper()
	root, err := tree.Root(size)
	if err != nil {
		t.Fatal(err)
	}
	n, err := k.signer.Sign(Checkpoint{Origin: testOrigin, Size: size, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hexes(hs [][]byte) []Hex {
	out := make([]Hex, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

func inclusion(t *testing.T, tree *Tree, hashes, entries [][]byte, note string, seq int, size uint64) *Proof {
	t.Helper()
	path, err := tree.Inclusion(uint64(seq-1), size)
	if err != nil {
		t.Fatal(err)
	}
	prev := make([]byte, HashSize)
	if seq > 1 {
		prev = hashes[seq-2]
	}
	return &Proof{Format: Format, Kind: KindInclusion, Tenant: "acme", Checkpoint: note,
		Record: &Record{Seq: int64(seq), Entry: entries[seq-1], PrevHash: prev, Hash: hashes[seq-1]}, Hashes: hexes(path)}
}

func consistency(t *testing.T, tree *Tree, oldNote, newNote string, from, to uint64) *Proof {
	t.Helper()
	path, err := tree.Consistency(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return &Proof{Format: Format, Kind: KindConsistency, Tenant: "acme", Checkpoint: newNote, OldCheckpoint: oldNote, Hashes: hexes(path)}
}

// check runs a proof through its JSON, as check-proof reads it.
func check(t *testing.T, p *Proof, known note.Verifiers, opts CheckOptions) (*Result, error) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return Check(bytes.NewReader(b), known, opts)
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if errcode.Of(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestRootsAgreeWithRFC6962(t *testing.T) {
	t.Parallel()
	hashes, _ := chain(300)
	tree := NewTree(hashes)
	f, err := NewFrontier(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaves := make([][]byte, 0, len(hashes))
	for size := 0; size <= len(hashes); size++ {
		want := mth(leaves)
		got, err := tree.Root(uint64(size))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tree root of size %d: %x, %v; want %x", size, got, err, want)
		}
		fr, err := f.Root()
		if err != nil || !bytes.Equal(fr, want) {
			t.Fatalf("frontier root of size %d: %x, %v; want %x", size, fr, err, want)
		}
		// A frontier rebuilt from its hashes (as a stored checkpoint's is)
		// extends to the same roots.
		if f, err = NewFrontier(f.Size(), f.Hashes()); err != nil {
			t.Fatal(err)
		}
		if size < len(hashes) {
			leaves = append(leaves, hashes[size])
			if err := f.Append(hashes[size]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestProofsOfATenThousandRecordLog proves every record of a 10,000-record
// log in its checkpoint, and the consistency of 50 random pairs of
// checkpoints, each through Check, the code `audit check-proof` runs.
func TestProofsOfATenThousandRecordLog(t *testing.T) {
	t.Parallel()
	const n = 10000
	hashes, entries := chain(n)
	tree := NewTree(hashes)
	key := newKey(t, "orangerail.test")
	known := verifiers(t, key)
	head := sign(t, key, tree, n)
	for seq := 1; seq <= n; seq++ {
		res, err := check(t, inclusion(t, tree, hashes, entries, head, seq, n), known, CheckOptions{Origin: testOrigin})
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		if res.Seq != int64(seq) || res.Size != n || res.Kind != KindInclusion || len(res.Keys) != 1 || res.Keys[0] != key.signer.KeyID() {
			t.Fatalf("seq %d: %+v", seq, res)
		}
	}
	rng := rand.New(rand.NewPCG(17, 1))
	for range 50 {
		a, b := 1+rng.Uint64N(n), 1+rng.Uint64N(n)
		from, to := min(a, b), max(a, b)
		p := consistency(t, tree, sign(t, key, tree, from), sign(t, key, tree, to), from, to)
		res, err := check(t, p, known, CheckOptions{})
		if err != nil {
			t.Fatalf("%d to %d: %v", from, to, err)
		}
		if res.OldSize != from || res.Size != to {
			t.Fatalf("%d to %d: %+v", from, to, res)
		}
		// The same proof does not prove another pair.
		if to > from+1 {
			bad := consistency(t, tree, sign(t, key, tree, from), sign(t, key, tree, to-1), from, to)
			if _, err := check(t, bad, known, CheckOptions{}); errcode.Of(err) != errcode.AuditProofInvalid {
				t.Fatalf("%d to %d's proof against %d: %v", from, to, to-1, err)
			}
		}
	}
}

func TestChangedProofsFail(t *testing.T) {
	t.Parallel()
	hashes, entries := chain(100)
	tree := NewTree(hashes)
	key, other := newKey(t, "orangerail.test"), newKey(t, "someone.else")
	known := verifiers(t, key)
	head := sign(t, key, tree, 100)
	good := func() *Proof { return inclusion(t, tree, hashes, entries, head, 42, 100) }
	if _, err := check(t, good(), known, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(p *Proof)
		opts   CheckOptions
		want   errcode.Code
	}{
		{"a changed entry byte", func(p *Proof) { p.Record.Entry[3] ^= 1 }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a changed entry with its hash recomputed", func(p *Proof) {
			p.Record.Entry = []byte(`{"forged":true}`)
			p.Record.Hash = ChainHash(p.Record.PrevHash, p.Record.Seq, p.Record.Entry)
		}, CheckOptions{}, errcode.AuditProofInvalid},
		{"another seq", func(p *Proof) { p.Record.Seq = 43 }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a seq beyond the tree", func(p *Proof) { p.Record.Seq = 101 }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a changed path hash", func(p *Proof) { p.Hashes[2][0] ^= 1 }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a path hash missing", func(p *Proof) { p.Hashes = p.Hashes[1:] }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a changed checkpoint text", func(p *Proof) { p.Checkpoint = strings.Replace(p.Checkpoint, "\n100\n", "\n99\n", 1) }, CheckOptions{}, errcode.AuditProofInvalid},
		{"a checkpoint by another key", func(p *Proof) { p.Checkpoint = sign(t, other, tree, 100) }, CheckOptions{}, errcode.AuditProofInvalid},
		{"another origin than required", func(*Proof) {}, CheckOptions{Origin: "orangerail.test/acme-orders/globex"}, errcode.AuditProofInvalid},
		{"a kept checkpoint of the size with another root", func(*Proof) {}, CheckOptions{Kept: []Checkpoint{{Origin: testOrigin, Size: 100, Root: make([]byte, HashSize)}}}, errcode.AuditProofInvalid},
		{"no signed note", func(p *Proof) { p.Checkpoint = "hello" }, CheckOptions{}, errcode.AuditProofMalformed},
		{"another format", func(p *Proof) { p.Format = "orangerail-proof/v0" }, CheckOptions{}, errcode.AuditProofMalformed},
		{"another kind", func(p *Proof) { p.Kind = "exclusion" }, CheckOptions{}, errcode.AuditProofMalformed},
		{"a record in a consistency proof", func(p *Proof) { p.Kind = KindConsistency; p.OldCheckpoint = head }, CheckOptions{}, errcode.AuditProofMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := good()
			p.Record.Entry = bytes.Clone(p.Record.Entry)
			for i := range p.Hashes {
				p.Hashes[i] = bytes.Clone(p.Hashes[i])
			}
			tt.change(p)
			_, err := check(t, p, known, tt.opts)
			wantCode(t, err, tt.want)
		})
	}
	for name, text := range map[string]string{"not JSON": "{", "two values": `{"format":"orangerail-proof/v1"} {}`, "an unknown member": `{"format":"orangerail-proof/v1","extra":1}`} {
		_, err := Check(strings.NewReader(text), known, CheckOptions{})
		if errcode.Of(err) != errcode.AuditProofMalformed {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRotation: checkpoints signed before and after a key rotation verify
// with the set of both public keys, and a consistency proof spans the
// rotation; the new key alone does not vouch for the old checkpoints.
func TestRotation(t *testing.T) {
	t.Parallel()
	hashes, entries := chain(64)
	tree := NewTree(hashes)
	oldKey, newKey := newKey(t, "orangerail.test"), newKey(t, "orangerail.test")
	if oldKey.signer.KeyID() == newKey.signer.KeyID() {
		t.Fatal("two keys of one name share an id")
	}
	before, after := sign(t, oldKey, tree, 30), sign(t, newKey, tree, 64)
	both := verifiers(t, oldKey, newKey)
	if _, err := check(t, inclusion(t, tree, hashes, entries, before, 7, 30), both, CheckOptions{}); err != nil {
		t.Fatalf("old checkpoint with both keys: %v", err)
	}
	res, err := check(t, consistency(t, tree, before, after, 30, 64), both, CheckOptions{})
	if err != nil {
		t.Fatalf("across the rotation: %v", err)
	}
	if len(res.Keys) != 2 {
		t.Fatalf("keys %v, want both", res.Keys)
	}
	_, err = check(t, inclusion(t, tree, hashes, entries, before, 7, 30), verifiers(t, newKey), CheckOptions{})
	wantCode(t, err, errcode.AuditProofInvalid)
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	skey, vkey, err := GenerateKey("orangerail.test")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"empty": "", "garbage": "not a key", "a public key": vkey,
		"a changed hash": strings.Replace(skey, "+", "+x", 3), "no key data": "PRIVATE+KEY+name+01234567+"} {
		_, err := NewSigner(text)
		wantCode(t, err, errcode.CheckpointKeyInvalid)
		if text != "" && strings.Contains(err.Error(), text) {
			t.Errorf("%s: the error repeats the key: %v", name, err)
		}
	}
	for name, keys := range map[string][]string{"none": nil, "garbage": {"garbage"}, "a private key": {skey}, "one bad of two": {vkey, vkey + "x"}} {
		_, err := Verifiers(keys)
		wantCode(t, err, errcode.CheckpointKeyInvalid)
		if strings.Contains(err.Error(), skey) {
			t.Errorf("%s: the error repeats the private key", name)
		}
	}
	if _, _, err := GenerateKey("a+b"); errcode.Of(err) != errcode.CheckpointKeyInvalid {
		t.Errorf("GenerateKey(a+b): %v", err)
	}
	_, err = LoadSigner("", "ORANGERAIL_TEST_UNSET_KEY", func(string) string { return "" })
	wantCode(t, err, errcode.CheckpointKeyInvalid)
	if s, err := LoadSigner("", "", nil); s != nil || err != nil {
		t.Errorf("no key configured: %v, %v", s, err)
	}
}

// TestLoadSignerReadsAKeyFile: key_file is read as the small regular file
// a key is. A device (/dev/zero), a FIFO no one writes to, a directory or
// a file far longer than a key are refused, coded, without being read
// whole (memory) or waited on (a FIFO blocked config check past its
// signal); a key file, and a link to one, load.
func TestLoadSignerReadsAKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skey, _, err := GenerateKey("orangerail.test")
	if err != nil {
		t.Fatal(err)
	}
	key, link := filepath.Join(dir, "key"), filepath.Join(dir, "link")
	if err := os.WriteFile(key, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{key, link} {
		if s, err := LoadSigner(p, "", nil); err != nil || s.Name() != "orangerail.test" {
			t.Errorf("%s: %v", p, err)
		}
	}
	fifo, long := filepath.Join(dir, "fifo"), filepath.Join(dir, "long")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, []byte(skey+"\n"+strings.Repeat("#", 8192)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, dir, long, filepath.Join(dir, "missing")} {
		_, err := LoadSigner(p, "", nil)
		wantCode(t, err, errcode.CheckpointKeyInvalid)
		if strings.Contains(fmt.Sprint(err), skey) {
			t.Errorf("%s: the error repeats the key", p)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	root := sha256.Sum256(nil)
	c := Checkpoint{Origin: "o/t", Size: 5, Root: root[:]}
	got, err := Parse(string(c.Marshal()))
	if err != nil || !got.Equal(c) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if got, err := Parse(string(c.Marshal()) + "extension line\n"); err != nil || !got.Equal(c) {
		t.Fatalf("with an extension line: %+v, %v", got, err)
	}
	for _, text := range []string{"", "o/t\n5\n", "o/t\n05\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o/t\n-1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", "o/t\n5\nAAAA\n", "\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o/t\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="} {
		if _, err := Parse(text); errcode.Of(err) != errcode.AuditProofMalformed {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
}

// TestAnchored: a proof is tied to a kept checkpoint by its own checkpoint,
// or through consistency proofs beside it, from either end; one tied to
// nothing kept is not, and the kept list is the caller's still.
func TestAnchored(t *testing.T) {
	t.Parallel()
	root := func(b byte) Hex { return bytes.Repeat([]byte{b}, HashSize) }
	const o = "log/acme"
	kept := make([]Checkpoint, 1, 8) // room past its length, which Anchored must not write
	kept[0] = Checkpoint{Origin: o, Size: 4, Root: root(4)}
	results := []*Result{
		{Kind: KindInclusion, Origin: o, Size: 8, Root: root(8)},                                 // tied through the next
		{Kind: KindConsistency, Origin: o, Size: 8, Root: root(8), OldSize: 4, OldRoot: root(4)}, // from the kept one
		{Kind: KindInclusion, Origin: o, Size: 2, Root: root(2)},                                 // tied through the next, backwards
		{Kind: KindConsistency, Origin: o, Size: 4, Root: root(4), OldSize: 2, OldRoot: root(2)}, // to the kept one
		{Kind: KindConsistency, Origin: o, Size: 9, Root: root(9), OldSize: 3, OldRoot: root(3)}, // between two unkept ones
		{Kind: KindInclusion, Origin: "log/globex", Size: 4, Root: root(4)},                      // another log's
		{Kind: KindInclusion, Origin: o, Size: 4, Root: root(5)},                                 // the kept size, another root
		nil, // a proof that failed
		{Kind: KindConsistency, Origin: o, Size: 7, Root: root(7), OldSize: 2, OldRoot: root(2)}, // from a prefix of the kept one: a rewrite past the prefix proves this as well
		{Kind: KindInclusion, Origin: o, Size: 7, Root: root(7)},                                 // in that tree
		{Kind: KindInclusion, Origin: o, Size: 6, Root: root(6)},                                 // tied through the next, backwards from an extension
		{Kind: KindConsistency, Origin: o, Size: 8, Root: root(8), OldSize: 6, OldRoot: root(6)}, // to the extension of the kept one
	}
	got := Anchored(results, kept)
	if want := []bool{true, true, true, true, false, false, false, false, false, false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("Anchored = %v, want %v", got, want)
	}
	if spare := kept[1:cap(kept)]; slices.ContainsFunc(spare, func(c Checkpoint) bool { return c.Size != 0 }) {
		t.Fatalf("Anchored wrote into the kept list's array: %v", spare)
	}
}
