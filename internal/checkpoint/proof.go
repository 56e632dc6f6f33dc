package checkpoint

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jsonmember"
)

// Format is the value of a proof file's "format" member.
const Format = "orangerail-proof/v1"

// The kinds of proof.
const (
	KindInclusion   = "inclusion"
	KindConsistency = "consistency"
)

// MaxProofBytes bounds a proof file: a proof is a few kilobytes, and a
// record's entry holds at most limits.max_input_bytes of input (16 MiB at
// most), which base64 grows by a third.
const MaxProofBytes = 64 << 20

// Hex is bytes written as lower-case hex in JSON.
type Hex []byte

// MarshalText writes h as hex.
func (h Hex) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

// UnmarshalText reads hex.
func (h *Hex) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	if err != nil {
		return fmt.Errorf("not hex: %w", err)
	}
	*h = v
	return nil
}

// Proof is a proof file: everything an offline check needs, the signed
// checkpoint(s) included. JSON members:
//
//	format          "orangerail-proof/v1"
//	kind            "inclusion" or "consistency"
//	tenant          the tenant: the checkpoint's origin must end in "/<tenant>"
//	checkpoint      the signed note of the tree the proof is against
//	old_checkpoint  consistency only: the signed note of the older tree
//	record          inclusion only: {seq, entry (base64 of the canonical
//	                bytes), prev_hash, hash (hex)} — the leaf is recomputed
//	                from seq, entry and prev_hash
//	proof           the RFC 6962 audit path or consistency proof, hex
//	                hashes in the order RFC 6962 (and RFC 9162) lists them
type Proof struct {
	Format        string  `json:"format"`
	Kind          string  `json:"kind"`
	Tenant        string  `json:"tenant"`
	Checkpoint    string  `json:"checkpoint"`
	OldCheckpoint string  `json:"old_checkpoint,omitempty"`
	Record        *Record `json:"record,omitempty"`
	Hashes        []Hex   `json:"proof"`
}

// Record is the record an inclusion proof is of.
type Record struct {
	Seq      int64  `json:"seq"`
	Entry    []byte `json:"entry"`
	PrevHash Hex    `json:"prev_hash"`
	Hash     Hex    `json:"hash"`
}

// Result is what a proof proved.
type Result struct {
	Kind   string `json:"kind"`
	Origin string `json:"origin"`
	// Size is the size of the checkpoint the proof is against.
	Size uint64 `json:"size"`
	// OldSize is, for a consistency proof, the older checkpoint's size.
	OldSize uint64 `json:"old_size,omitempty"`
	// Seq is, for an inclusion proof, the record's seq.
	Seq int64 `json:"seq,omitempty"`
	// Keys are the ids of the known keys that signed the checkpoint(s).
	Keys []string `json:"keys"`
	// Root is the root of the checkpoint the proof is against, and
	// OldRoot, for a consistency proof, the older checkpoint's: what ties
	// a proof to a checkpoint kept (Anchored).
	Root    Hex `json:"root"`
	OldRoot Hex `json:"old_root,omitempty"`
}

// CheckOptions tunes Check. The zero value checks the proof alone.
type CheckOptions struct {
	// Origin, when set, is the origin the checkpoints must name.
	Origin string
	// Kept are checkpoints (bodies from notes the caller verified, such
	// as one an auditor kept): a checkpoint of the proof of the same
	// origin and size must have the same root.
	Kept []Checkpoint
}

// Check verifies a proof file offline: the checkpoint notes are signed by
// a key of known, their bodies are tlog checkpoints, and the proof holds
// against their roots. A proof that does not hold is X_AUDIT_PROOF_INVALID;
// a file that is no proof, X_AUDIT_PROOF_MALFORMED.
func Check(r io.Reader, known note.Verifiers, opts CheckOptions) (*Result, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxProofBytes+1))
	if err != nil {
		return nil, malformed("cannot read it: " + err.Error())
	}
	if len(data) > MaxProofBytes {
		return nil, malformed(fmt.Sprintf("it is larger than %d bytes", MaxProofBytes))
	}
	if err := exactMembers(data); err != nil {
		return nil, malformed(err.Error())
	}
	var p Proof
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, malformed("it is not a proof file's JSON: " + err.Error())
	}
	if dec.More() {
		return nil, malformed("it holds more than one JSON value")
	}
	if p.Format != Format {
		return nil, malformed(fmt.Sprintf("its format is %q, not %q", p.Format, Format))
	}
	cp, keys, err := OpenNote(p.Checkpoint, known)
	if err != nil {
		return nil, err
	}
	// The file's tenant is what a reader takes the proof to be about: it
	// must be the one the signed origin names (<deployment>/<tenant>).
	if p.Tenant == "" {
		return nil, malformed("it names no tenant")
	}
	if !strings.HasSuffix(cp.Origin, "/"+p.Tenant) {
		return nil, invalid(fmt.Sprintf("it says it is of the tenant %q, and its checkpoint is of the log %q", p.Tenant, cp.Origin))
	}
	res := &Result{Kind: p.Kind, Origin: cp.Origin, Size: cp.Size, Keys: keys, Root: cp.Root}
	if err := checkAgainst(cp, opts); err != nil {
		return nil, err
	}
	switch p.Kind {
	case KindInclusion:
		if p.Record == nil || p.OldCheckpoint != "" {
			return nil, malformed("an inclusion proof carries a record and no old_checkpoint")
		}
		res.Seq = p.Record.Seq
		return res, checkInclusion(cp, p.Record, p.Hashes)
	case KindConsistency:
		if p.Record != nil || p.OldCheckpoint == "" {
			return nil, malformed("a consistency proof carries an old_checkpoint and no record")
		}
		old, oldKeys, err := OpenNote(p.OldCheckpoint, known)
		if err != nil {
			return nil, err
		}
		if err := checkAgainst(old, opts); err != nil {
			return nil, err
		}
		res.OldSize, res.OldRoot, res.Keys = old.Size, old.Root, appendNew(res.Keys, oldKeys)
		if old.Origin != cp.Origin {
			return nil, invalid(fmt.Sprintf("the checkpoints are of two logs, %q and %q", old.Origin, cp.Origin))
		}
		if old.Size > cp.Size {
			return nil, invalid(fmt.Sprintf("the old checkpoint's size %d is larger than the new one's %d", old.Size, cp.Size))
		}
		if err := proof.VerifyConsistency(hasher, old.Size, cp.Size, bytesOf(p.Hashes), old.Root, cp.Root); err != nil {
			return nil, invalid(fmt.Sprintf("the tree of size %d is not a prefix of the tree of size %d: %v", old.Size, cp.Size, err))
		}
		return res, nil
	}
	return nil, malformed(fmt.Sprintf("its kind is %q, not %q or %q", p.Kind, KindInclusion, KindConsistency))
}

// Anchored reports, for each of results (proofs that verified), whether it
// is tied to one of kept: its checkpoint is a kept one, an extension of one
// (reached from it by consistency proofs among results, old to new), or a
// prefix of a kept one or of such an extension (reached from it new to
// old). A tie does not spread both ways: a prefix of a kept checkpoint and
// a later tree it is a prefix of need not agree with the kept one past the
// prefix — that later tree may be a rewrite of what the auditor kept, so
// it is tied only if a proof ties it forwards from something tied
// forwards. A proof that verified but is tied to nothing kept proves
// something only about checkpoints its key's holder signed: one rewritten
// after the auditor kept theirs verifies as well.
func Anchored(results []*Result, kept []Checkpoint) []bool {
	// extends holds the kept checkpoints and those they are prefixes of;
	// prefixes, those that are prefixes of one in extends.
	extends, prefixes := slices.Clone(kept), []Checkpoint(nil)
	in := func(set []Checkpoint, cp Checkpoint) bool { return slices.ContainsFunc(set, cp.Equal) }
	tied := func(cp Checkpoint) bool { return in(extends, cp) || in(prefixes, cp) }
	ends := func(r *Result) (Checkpoint, Checkpoint) {
		return Checkpoint{Origin: r.Origin, Size: r.Size, Root: r.Root}, Checkpoint{Origin: r.Origin, Size: r.OldSize, Root: r.OldRoot}
	}
	for grew := true; grew; {
		grew = false
		for _, r := range results {
			if r == nil || r.Kind != KindConsistency {
				continue
			}
			newer, older := ends(r)
			if in(extends, older) && !in(extends, newer) {
				extends, grew = append(extends, newer), true
			}
			if tied(newer) && !tied(older) {
				prefixes, grew = append(prefixes, older), true
			}
		}
	}
	out := make([]bool, len(results))
	for i, r := range results {
		if r != nil {
			newer, _ := ends(r)
			out[i] = tied(newer)
		}
	}
	return out
}

// ErrUnanchored is a proof that verified but is tied to no kept
// checkpoint (Anchored).
func ErrUnanchored(r *Result) error {
	return invalid(fmt.Sprintf("its checkpoint of size %d is tied to no checkpoint you kept: check it with a consistency proof from a kept checkpoint to it", r.Size))
}

func checkInclusion(cp Checkpoint, rec *Record, path []Hex) error {
	if rec.Seq < 1 || uint64(rec.Seq) > cp.Size {
		return invalid(fmt.Sprintf("seq %d is not in a tree of size %d", rec.Seq, cp.Size))
	}
	if len(rec.PrevHash) != HashSize {
		return malformed("the record's prev_hash is not 32 bytes")
	}
	hash := ChainHash(rec.PrevHash, rec.Seq, rec.Entry)
	if !bytes.Equal(hash, rec.Hash) {
		return invalid(fmt.Sprintf("the record's hash is not the hash of its seq, entry and prev_hash (%x)", hash))
	}
	if err := proof.VerifyInclusion(hasher, uint64(rec.Seq-1), cp.Size, LeafHash(hash), bytesOf(path), cp.Root); err != nil {
		return invalid(fmt.Sprintf("record %d is not in the tree of size %d: %v", rec.Seq, cp.Size, err))
	}
	return nil
}

func checkAgainst(cp Checkpoint, opts CheckOptions) error {
	if opts.Origin != "" && cp.Origin != opts.Origin {
		return invalid(fmt.Sprintf("the checkpoint is of %q, not of %q", cp.Origin, opts.Origin))
	}
	for _, k := range opts.Kept {
		if k.Origin == cp.Origin && k.Size == cp.Size && !bytes.Equal(k.Root, cp.Root) {
			return invalid(fmt.Sprintf("the checkpoint of size %d has another root than the kept checkpoint of that size: the log was rewritten (a split view)", cp.Size))
		}
	}
	return nil
}

// OpenNote verifies a signed checkpoint note against known keys and
// parses its body; it returns the ids of the known keys that signed it.
func OpenNote(text string, known note.Verifiers) (Checkpoint, []string, error) {
	n, err := note.Open([]byte(text), known)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var badSig *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, nil, invalid("the checkpoint is signed by no key of the given set")
		case errors.As(err, &badSig):
			return Checkpoint{}, nil, invalid(fmt.Sprintf("the checkpoint's signature by %s does not verify (the note was changed)", KeyID(badSig.Name, badSig.Hash)))
		}
		return Checkpoint{}, nil, malformed("the checkpoint is not a signed note: " + err.Error())
	}
	cp, err := Parse(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	keys := make([]string, 0, len(n.Sigs))
	for _, s := range n.Sigs {
		keys = append(keys, KeyID(s.Name, s.Hash))
	}
	return cp, keys, nil
}

func appendNew(to, from []string) []string {
	for _, s := range from {
		if !slices.Contains(to, s) {
			to = append(to, s)
		}
	}
	return to
}

func bytesOf(hs []Hex) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

func malformed(why string) error {
	return errcode.New(errcode.AuditProofMalformed, "the proof file is malformed: "+why, nil)
}

func invalid(why string) error {
	return errcode.New(errcode.AuditProofInvalid, "the proof does not verify: "+why, nil)
}

// exactMembers refuses a proof file that names a member twice, or that
// spells a member of the file or of its record otherwise than the format
// does: encoding/json matches a name whatever its case, the last match
// winning, so a file holding a forged "record" and then the real one as
// "Record" verified the real one while every other reader of the file
// (jq, a map, another language's parser) reads the forged one. What is
// not a JSON object is left for the decoder to say.
func exactMembers(data []byte) error {
	if path, ok := jsonmember.Repeated(data); ok {
		return fmt.Errorf("it names the member %s twice", strings.Join(path, "."))
	}
	var file, record map[string]json.RawMessage
	if json.Unmarshal(data, &file) == nil {
		if err := spelledAs(file, reflect.TypeFor[Proof](), "the file"); err != nil {
			return err
		}
		if json.Unmarshal(file["record"], &record) == nil {
			return spelledAs(record, reflect.TypeFor[Record](), "its record")
		}
	}
	return nil
}

// spelledAs refuses a member of object that no field of the struct t is
// named, exactly, in its json tag.
func spelledAs(object map[string]json.RawMessage, t reflect.Type, where string) error {
	for _, name := range slices.Sorted(maps.Keys(object)) {
		found := false
		for f := range t.Fields() {
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s has a member %q, which the format does not spell so", where, name)
		}
	}
	return nil
}
