package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/orangerail/orangerail/internal/login"
)

// TestLoginPromptCannotRewriteTheTerminal: `login` prints the
// issuer's verification_uri, verification_uri_complete and user_code as the
// issuer sent them, so escape sequences in its device authorization answer
// reach the person's terminal (a title set, a line erased, a different code
// or address shown than the one sent).
func TestLoginPromptCannotRewriteTheTerminal(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
				"jwks_uri": srv.URL + "/jwks", "device_authorization_endpoint": srv.URL + "/device",
				"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
				"id_token_signing_alg_values_supported": []string{"RS256"},
			})
		case "/device":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"device_code": "dc", "user_code": "WDJB-MJHT\x1b[2K\rcode ABCD-EFGH",
				"verification_uri":          srv.URL + "/device\x1b]0;owned\x07",
				"verification_uri_complete": srv.URL + "/device?c=1\u202e",
				"expires_in":                60, "interval": 1,
			})
		case "/token":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": "access_denied"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv(login.TokenFileEnv, filepath.Join(t.TempDir(), "token.json"))
	code, stdout, _ := cli(t, "login", "--issuer", srv.URL)
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	if r := unsafeRune(stdout); r != -1 {
		t.Fatalf("the issuer's device answer reached the terminal raw (%U):\n%q", r, stdout)
	}
}
