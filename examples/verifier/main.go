// Command verifier checks an orangerail proof file (orangerail-proof/v1)
// with nothing but Go's standard library and golang.org/x/mod/sumdb/note:
//
//	go run ./examples/verifier PUBKEY < proof.json
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type proofFile struct {
	Format        string   `json:"format"`
	Kind          string   `json:"kind"`
	Checkpoint    string   `json:"checkpoint"`
	OldCheckpoint string   `json:"old_checkpoint"`
	Proof         []string `json:"proof"`
	Record        *struct {
		Seq      int64  `json:"seq"`
		Entry    []byte `json:"entry"` // base64 in the JSON
		PrevHash string `json:"prev_hash"`
		Hash     string `json:"hash"`
	} `json:"record"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: verifier PUBKEY < proof.json")
		os.Exit(2)
	}
	if err := verify(os.Args[1], os.Stdin); err != nil {
		fmt.Println("FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("OK")
}

func verify(pubkey string, r io.Reader) error {
	var p proofFile
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return err
	}
	if p.Format != "orangerail-proof/v1" {
		return errors.New("not an orangerail-proof/v1 file")
	}
	v, err := note.NewVerifier(pubkey)
	if err != nil {
		return err
	}
	size, root, err := openCheckpoint(p.Checkpoint, v)
	if err != nil {
		return err
	}
	path := make([][]byte, len(p.Proof))
	for i, h := range p.Proof {
		if path[i], err = hex.DecodeString(h); err != nil {
			return err
		}
	}
	switch {
	case p.Kind == "inclusion" && p.Record != nil:
		// The leaf is the record's chain hash, recomputed from its bytes:
		// sha256(prev_hash || int8send(seq) || sha256(entry)).
		prev, err := hex.DecodeString(p.Record.PrevHash)
		if err != nil || p.Record.Seq < 1 {
			return errors.New("bad record")
		}
		entry := sha256.Sum256(p.Record.Entry)
		chain := sha256.Sum256(append(binary.BigEndian.AppendUint64(prev, uint64(p.Record.Seq)), entry[:]...))
		if hex.EncodeToString(chain[:]) != p.Record.Hash {
			return errors.New("the record's hash is not its bytes'")
		}
		return inclusion(uint64(p.Record.Seq-1), size, leafHash(chain[:]), path, root)
	case p.Kind == "consistency":
		size1, root1, err := openCheckpoint(p.OldCheckpoint, v)
		if err != nil {
			return err
		}
		return consistency(size1, size, path, root1, root)
	}
	return errors.New("unknown kind")
}

// openCheckpoint verifies a signed note and reads its C2SP checkpoint
// body: origin, tree size, base64 root hash.
func openCheckpoint(text string, v note.Verifier) (uint64, []byte, error) {
	n, err := note.Open([]byte(text), note.VerifierList(v))
	if err != nil {
		return 0, nil, err
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		return 0, nil, errors.New("not a checkpoint")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return 0, nil, err
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	return size, root, err
}

func leafHash(data []byte) []byte {
	h := sha256.Sum256(append([]byte{0}, data...))
	return h[:]
}

func nodeHash(left, right []byte) []byte {
	h := sha256.Sum256(append(append([]byte{1}, left...), right...))
	return h[:]
}

// inclusion is RFC 9162, section 2.1.3.2.
func inclusion(index, size uint64, leaf []byte, path [][]byte, root []byte) error {
	if index >= size {
		return errors.New("index beyond the tree")
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return errors.New("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || !bytes.Equal(r, root) {
		return errors.New("the record is not in the checkpoint's tree")
	}
	return nil
}

// consistency is RFC 9162, section 2.1.4.2.
func consistency(size1, size2 uint64, path [][]byte, root1, root2 []byte) error {
	if size1 == size2 && len(path) == 0 && bytes.Equal(root1, root2) {
		return nil
	}
	if size1 == 0 || size1 >= size2 || len(path) == 0 {
		return errors.New("no consistency proof between these sizes")
	}
	if size1&(size1-1) == 0 {
		path = append([][]byte{root1}, path...)
	}
	fn, sn := size1-1, size2-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return errors.New("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = nodeHash(c, fr), nodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = nodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || !bytes.Equal(fr, root1) || !bytes.Equal(sr, root2) {
		return errors.New("the old checkpoint's tree is not a prefix of the new one's")
	}
	return nil
}
