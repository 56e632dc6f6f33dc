package identity_test

import (
	"errors"
	"testing"

	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestAdmission: the admission policy judges each request's facts; its
// refusals wrap ErrRefused, never ErrInvalidToken, and an address that
// cannot be read is in no allowed network.
func TestAdmission(t *testing.T) {
	t.Parallel()
	a, err := identity.AdmissionOf(ontology.Identity{RefuseBrowserOrigins: true, AllowedNetworks: []string{"10.0.0.0/8", "2001:db8::/32"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		facts identity.RequestFacts
		want  error
	}{
		{identity.RequestFacts{Address: "10.1.2.3"}, nil},
		{identity.RequestFacts{Address: "::ffff:10.1.2.3"}, nil}, // as a dual-stack socket reports it
		{identity.RequestFacts{Address: "2001:db8::1"}, nil},
		{identity.RequestFacts{Address: "11.0.0.1"}, identity.ErrNetworkRefused},
		{identity.RequestFacts{Address: ""}, identity.ErrNetworkRefused},
		{identity.RequestFacts{Address: "not an address"}, identity.ErrNetworkRefused},
		{identity.RequestFacts{Address: "10.1.2.3", Origin: "https://app.example.com"}, identity.ErrOriginRefused},
	} {
		err := a.Admit(tt.facts)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Admit(%+v) = %v, want %v", tt.facts, err, tt.want)
		}
		if err != nil && (!errors.Is(err, identity.ErrRefused) || errors.Is(err, identity.ErrInvalidToken)) {
			t.Errorf("Admit(%+v) = %v: not a policy refusal", tt.facts, err)
		}
	}
	if err := (identity.Admission{}).Admit(identity.RequestFacts{Origin: "https://x.example.com"}); err != nil {
		t.Errorf("the zero admission refused: %v", err)
	}
	if _, err := identity.AdmissionOf(ontology.Identity{AllowedNetworks: []string{"10.0.0.1/8"}}); err == nil {
		t.Error("AdmissionOf read a network with host bits")
	}
}
