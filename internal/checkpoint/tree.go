package checkpoint

import (
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// hasher is RFC 6962's SHA-256 tree hasher.
var hasher = rfc6962.DefaultHasher

// rangeFactory builds compact ranges with RFC 6962's node hash.
func rangeFactory() *compact.RangeFactory {
	return &compact.RangeFactory{Hash: hasher.HashChildren}
}

// LeafHash is the RFC 6962 leaf hash of a record of the given chain
// hash: sha256(0x00 || chainHash).
func LeafHash(chainHash []byte) []byte { return hasher.HashLeaf(chainHash) }

// EmptyRoot is the root of the empty tree, sha256 of no bytes.
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// Frontier is the compact range of a tree's leaves [0, size): the roots of
// its perfect subtrees, left to right, at most one a level. It extends
// with new leaves without the old ones, so signing a checkpoint reads only
// the records sealed since the last.
type Frontier struct {
	r *compact.Range
}

// NewFrontier returns the frontier of a tree of size leaves from its
// subtree roots (Hashes); an empty tree has none.
func NewFrontier(size uint64, hashes [][]byte) (*Frontier, error) {
	r, err := rangeFactory().NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint frontier of size %d: %w", size, err)
	}
	return &Frontier{r: r}, nil
}

// Append appends a record's leaf, given its chain hash.
func (f *Frontier) Append(chainHash []byte) error { return f.AppendLeaf(LeafHash(chainHash)) }

// AppendLeaf appends a leaf already hashed (LeafHash): a caller may hash
// leaves in parallel and append them in order.
func (f *Frontier) AppendLeaf(leaf []byte) error { return f.r.Append(leaf, nil) }

// Size is the number of leaves.
func (f *Frontier) Size() uint64 { return f.r.End() }

// Hashes returns the roots of the frontier's perfect subtrees, left to
// right.
func (f *Frontier) Hashes() [][]byte { return f.r.Hashes() }

// Root returns the tree's root hash.
func (f *Frontier) Root() ([]byte, error) {
	if f.r.End() == 0 {
		return EmptyRoot(), nil
	}
	return f.r.GetRootHash(nil)
}

// Tree holds every node of the perfect subtrees of a log's leaves, so any
// inclusion or consistency proof within it costs a lookup per node. It
// takes 64 bytes a record. It is not safe for concurrent mutation; once
// built, it is read-only and safe for concurrent use.
type Tree struct {
	levels [][][]byte
}

// NewTree builds the tree of the given chain hashes, the record of seq 1
// first.
func NewTree(chainHashes [][]byte) *Tree {
	leaves := make([][]byte, len(chainHashes))
	for i, h := range chainHashes {
		leaves[i] = LeafHash(h)
	}
	levels := [][][]byte{leaves}
	for cur := leaves; len(cur) > 1; {
		next := make([][]byte, len(cur)/2)
		for i := range next {
			next[i] = hasher.HashChildren(cur[2*i], cur[2*i+1])
		}
		levels = append(levels, next)
		cur = next
	}
	return &Tree{levels: levels}
}

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

func (t *Tree) node(id compact.NodeID) ([]byte, error) {
	if int(id.Level) >= len(t.levels) || id.Index >= uint64(len(t.levels[id.Level])) {
		return nil, fmt.Errorf("checkpoint: node %d/%d is outside a tree of %d leaves", id.Level, id.Index, t.Size())
	}
	return t.levels[id.Level][id.Index], nil
}

func (t *Tree) hashes(ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// Root returns the root of the tree's first size leaves.
func (t *Tree) Root(size uint64) ([]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("checkpoint: size %d is beyond a tree of %d leaves", size, t.Size())
	}
	if size == 0 {
		return EmptyRoot(), nil
	}
	hashes, err := t.hashes(compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	f, err := NewFrontier(size, hashes)
	if err != nil {
		return nil, err
	}
	return f.Root()
}

// Inclusion returns the audit path of leaf index in the tree of the first
// size leaves.
func (t *Tree) Inclusion(index, size uint64) ([][]byte, error) {
	if size > t.Size() || index >= size {
		return nil, fmt.Errorf("checkpoint: no leaf %d in a tree of %d leaves", index, min(size, t.Size()))
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

// Consistency returns the proof that the tree of size1 leaves is a prefix
// of the tree of size2.
func (t *Tree) Consistency(size1, size2 uint64) ([][]byte, error) {
	if size1 > size2 || size2 > t.Size() {
		return nil, fmt.Errorf("checkpoint: no consistency from size %d to %d in a tree of %d leaves", size1, size2, t.Size())
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

func (t *Tree) rehash(nodes proof.Nodes) ([][]byte, error) {
	hashes, err := t.hashes(nodes.IDs)
	if err != nil {
		return nil, err
	}
	out, err := nodes.Rehash(hashes, hasher.HashChildren)
	if err != nil {
		return nil, errors.Join(errors.New("checkpoint: rehash a proof"), err)
	}
	return out, nil
}
