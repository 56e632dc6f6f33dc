package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/checkpoint"
)

// TestVerifierAgreesWithCheck: the README's standard-library verifier
// accepts what checkpoint.Check accepts — every record of a log and
// random consistency pairs — and refuses a changed proof.
func TestVerifierAgreesWithCheck(t *testing.T) {
	t.Parallel()
	skey, vkey, err := checkpoint.GenerateKey("orangerail.test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoint.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	known, err := checkpoint.Verifiers([]string{vkey})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	prev := make([]byte, checkpoint.HashSize)
	var hashes, prevs, entries [][]byte
	for i := range n {
		entry := fmt.Appendf(nil, `{"n":%d}`, i)
		h := checkpoint.ChainHash(prev, int64(i+1), entry)
		hashes, prevs, entries = append(hashes, h), append(prevs, prev), append(entries, entry)
		prev = h
	}
	tree := checkpoint.NewTree(hashes)
	sign := func(size uint64) string {
		root, err := tree.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		note, err := signer.Sign(checkpoint.Checkpoint{Origin: "orangerail.test/o/acme", Size: size, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		return note
	}
	both := func(p *checkpoint.Proof) (error, error) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		_, checkErr := checkpoint.Check(bytes.NewReader(b), known, checkpoint.CheckOptions{})
		return checkErr, verify(vkey, bytes.NewReader(b))
	}
	hexes := func(hs [][]byte) []checkpoint.Hex {
		out := make([]checkpoint.Hex, len(hs))
		for i, h := range hs {
			out[i] = h
		}
		return out
	}
	for _, size := range []uint64{1, 2, 3, 64, 100, n} {
		note := sign(size)
		for seq := uint64(1); seq <= size; seq++ {
			path, err := tree.Inclusion(seq-1, size)
			if err != nil {
				t.Fatal(err)
			}
			p := &checkpoint.Proof{Format: checkpoint.Format, Kind: checkpoint.KindInclusion, Tenant: "acme", Checkpoint: note,
				Record: &checkpoint.Record{Seq: int64(seq), Entry: entries[seq-1], PrevHash: prevs[seq-1], Hash: hashes[seq-1]}, Hashes: hexes(path)}
			if c, v := both(p); c != nil || v != nil {
				t.Fatalf("seq %d of %d: Check %v, verifier %v", seq, size, c, v)
			}
			if len(path) > 0 {
				p.Hashes[0] = bytes.Clone(p.Hashes[0])
				p.Hashes[0][0] ^= 1
				if c, v := both(p); c == nil || v == nil {
					t.Fatalf("seq %d of %d changed: Check %v, verifier %v", seq, size, c, v)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(17, 3))
	for i := range 100 {
		a, b := 1+rng.Uint64N(n), 1+rng.Uint64N(n)
		if i < 8 {
			a, b = 1<<(i%4), 1<<(i%4)+uint64(i) // exact powers of two, and equal sizes
		}
		from, to := min(a, b), max(a, b)
		path, err := tree.Consistency(from, to)
		if err != nil {
			t.Fatal(err)
		}
		p := &checkpoint.Proof{Format: checkpoint.Format, Kind: checkpoint.KindConsistency, Tenant: "acme", Checkpoint: sign(to), OldCheckpoint: sign(from), Hashes: hexes(path)}
		if c, v := both(p); c != nil || v != nil {
			t.Fatalf("%d to %d: Check %v, verifier %v", from, to, c, v)
		}
		if from < to {
			p.Checkpoint = sign(to - 1)
			if c, v := both(p); c == nil || v == nil {
				t.Fatalf("%d to %d against %d: Check %v, verifier %v", from, to, to-1, c, v)
			}
		}
	}
}

// TestREADMEListsTheVerifier: the README's listing is this file.
func TestREADMEListsTheVerifier(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(source)+"```\n") {
		t.Fatal("the README's verifier listing is not examples/verifier/main.go: copy the file into the README")
	}
}
