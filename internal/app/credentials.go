package app

import (
	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/ontology"
)

// CredentialState is whether one upstream scheme's credential is set:
// what config check and serve report. It never holds the credential.
type CredentialState struct {
	Path string            `json:"path"`
	Type ontology.AuthType `json:"type"`
	Env  string            `json:"env"`
	Set  bool              `json:"set"`
	// PresentedBy lists the calls that present the scheme, by field path:
	// a call presents only the schemes its auth names.
	PresentedBy []string `json:"presented_by"`
	// Problem says why a set credential cannot be read; serve refuses to
	// start with one.
	Problem string `json:"problem,omitempty"`
}

// CredentialStates reports every upstream scheme's credential: set, or
// unset and so omitted from every request.
func CredentialStates(cfg *ontology.Config) []CredentialState {
	states := []CredentialState{}
	if cfg == nil {
		return states
	}
	for _, slot := range cfg.CredentialSlots() {
		set, err := httpeffect.CheckCredential(slot.Upstream, slot.Scheme, cfg.Upstreams[slot.Upstream].Auth[slot.Scheme])
		st := CredentialState{Path: slot.Path, Type: slot.Type, Env: slot.Env, Set: set, PresentedBy: slot.PresentedBy}
		if err != nil {
			st.Problem = err.Error()
		}
		states = append(states, st)
	}
	return states
}
