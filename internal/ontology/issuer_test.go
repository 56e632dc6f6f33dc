package ontology

import "testing"

// TestSameIssuer: an issuer re-spelled (a trailing slash, its scheme or
// host's case, its default port) is the same issuer; another host, port,
// path or scheme, or no issuer at all, is another.
func TestSameIssuer(t *testing.T) {
	t.Parallel()
	const issuer = "https://id.example/realms/acme"
	for _, same := range []string{issuer, issuer + "/", "https://ID.Example/realms/acme", "HTTPS://id.example:443/realms/acme//"} {
		if !SameIssuer(issuer, same) || !SameIssuer(same, issuer) {
			t.Errorf("%s is not %s", same, issuer)
		}
	}
	for _, other := range []string{"", "https://id.example/realms/ACME", "https://id.example/realms/acme2", "https://id.example:8443/realms/acme",
		"http://id.example/realms/acme", "https://id.example.evil/realms/acme", "https://id.example/realms"} {
		if SameIssuer(issuer, other) || SameIssuer(other, issuer) {
			t.Errorf("%q is %s", other, issuer)
		}
	}
	if !SameIssuer("http://127.0.0.1:8080", "http://127.0.0.1:8080/") || !SameIssuer("http://localhost", "http://LOCALHOST:80") {
		t.Error("a loopback issuer re-spelled")
	}
}
