// Package checkpoint is the open format that lets someone outside
// orangerail check its audit log: each tenant's sealed chain read as an
// RFC 6962 Merkle tree, signed checkpoints of that tree in the C2SP
// tlog-checkpoint and signed-note formats, and proof files of inclusion
// and consistency checked offline, with no database (Check).
//
// A leaf is a sealed record's chain hash, the 32 bytes of
//
//	hash = sha256(prev_hash || int8send(seq) || sha256(entry))
//
// and the record of seq N is leaf N-1: the tree of size N holds the
// records of seq 1 to N. So the tree commits to every record's exact
// canonical bytes, its seq and the chain before it, and a verifier
// recomputes a leaf from the record itself (ChainHash). The package reads
// no database and imports nothing of orangerail's: what it checks, a
// short program with the standard library and golang.org/x/mod/sumdb/note
// checks as well (README, "Signed checkpoints and proofs").
package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/orangerail/orangerail/internal/errcode"
)

// HashSize is the size of a chain hash, a leaf hash and a root.
const HashSize = sha256.Size

// ChainHash is a record's link in its tenant's chain (the formula of
// orangerail.audit_seal and engine.ChainHash):
// sha256(prev || int8send(seq) || sha256(entry)).
func ChainHash(prev []byte, seq int64, entry []byte) []byte {
	e := sha256.Sum256(entry)
	buf := make([]byte, 0, len(prev)+8+HashSize)
	buf = append(buf, prev...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(seq)) //nolint:gosec // G115: int8send is the two's complement bytes
	buf = append(buf, e[:]...)
	h := sha256.Sum256(buf)
	return h[:]
}

// Checkpoint is the body of a signed checkpoint (C2SP tlog-checkpoint):
// the log's origin, the tree's size and its root hash.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   []byte
}

// Origin is the origin line of a tenant's log: the deployment's origin
// (audit.checkpoint.origin), a slash and the tenant id.
func Origin(deployment, tenant string) string { return deployment + "/" + tenant }

// Marshal returns the checkpoint's body: three lines, the origin, the
// size in decimal and the root in standard base64.
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root))
}

// Parse reads a checkpoint's body (a verified note's text). Extension
// lines after the root are allowed by the format and ignored.
func Parse(text string) (Checkpoint, error) {
	bad := func(why string) (Checkpoint, error) {
		return Checkpoint{}, errcode.New(errcode.AuditProofMalformed, "the checkpoint is not a tlog checkpoint: "+why, nil)
	}
	if !strings.HasSuffix(text, "\n") {
		return bad("its text does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return bad("it has fewer than three lines (origin, size, root hash)")
	}
	if lines[0] == "" {
		return bad("its origin line is empty")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || lines[1] != strconv.FormatUint(size, 10) {
		return bad("its second line is not a tree size in decimal")
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != HashSize {
		return bad("its third line is not a base64 SHA-256 root hash")
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// Equal reports whether two checkpoints name the same tree.
func (c Checkpoint) Equal(o Checkpoint) bool {
	return c.Origin == o.Origin && c.Size == o.Size && bytes.Equal(c.Root, o.Root)
}
