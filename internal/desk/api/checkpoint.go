package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/errcode"
)

// The signed checkpoints of the tenant's audit log and proofs against
// them (package checkpoint), for a person who may read the audit log.
// A proof is the file `orangerail audit check-proof` verifies offline.

// Checkpoint is the tenant's latest signed checkpoint.
type Checkpoint struct {
	Origin      string         `json:"origin"`
	Size        int64          `json:"size"`
	RootHash    checkpoint.Hex `json:"root_hash"`
	KeyID       string         `json:"key_id"`
	VerifierKey string         `json:"verifier_key"`
	SignedAt    time.Time      `json:"signed_at"`
	// Note is the signed note (C2SP tlog-checkpoint body and Ed25519
	// signatures), as verifiers check it.
	Note string `json:"note"`
}

func (a *API) auditCheckpoint(w http.ResponseWriter, r *http.Request) {
	c, err := a.eng.CheckpointOf(r.Context(), caller(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Checkpoint{Origin: c.Origin, Size: c.Size, RootHash: c.RootHash, KeyID: checkpoint.KeyID(c.KeyName, c.KeyHash),
		VerifierKey: c.VerifierKey, SignedAt: c.SignedAt, Note: c.Note})
}

func (a *API) inclusionProof(w http.ResponseWriter, r *http.Request) {
	seq, err := sizeParam(r, "seq", true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	size, err := sizeParam(r, "size", false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.eng.ProveInclusionOf(r.Context(), caller(r), seq, size)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (a *API) consistencyProof(w http.ResponseWriter, r *http.Request) {
	from, err := sizeParam(r, "from", true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := sizeParam(r, "to", false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.eng.ProveConsistencyOf(r.Context(), caller(r), from, to)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// sizeParam reads a seq or tree size from the query: a whole number, 0
// when absent and not required.
func sizeParam(r *http.Request, name string, required bool) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if required {
			return 0, errcode.New(errcode.RequestInvalid, name+" is required", nil)
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errcode.New(errcode.RequestInvalid, fmt.Sprintf("%s must be a whole number", name), nil)
	}
	return n, nil
}
