package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/login"
)

// TestAPIErrorCodeCannotRewriteTheTerminal: the API's error
// message is shown through display.Text, but its code is printed as the
// server sent it (codedText prints string(coded.Code) raw), so a server,
// or a proxy in front of it, can put escape sequences and line breaks on
// the person's terminal through error.code.
func TestAPIErrorCodeCannotRewriteTheTerminal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"code":"X_FORBIDDEN\u001b]0;owned\u0007\u001b[2K\r\nX_APPROVED: approved 1 as ada","message":"no"}}`)
	}))
	defer srv.Close()
	t.Setenv(login.TokenFileEnv, filepath.Join(t.TempDir(), "token.json"))
	t.Setenv(login.TokenEnv, "an-opaque-token")
	code, _, stderr := cli(t, "approvals", "list", "--server", srv.URL)
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	if r := unsafeRune(strings.TrimSuffix(stderr, "\n")); r != -1 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("the server's error code reached the terminal raw (%U):\n%q", r, stderr)
	}
}

// TestNoConfigurationDirectoryIsCoded: with neither
// $ORANGERAIL_TOKEN_FILE nor a configuration directory ($HOME and
// $XDG_CONFIG_HOME unset, as under some service managers), login and the
// approvals commands fail with an error that carries no code.
func TestNoConfigurationDirectoryIsCoded(t *testing.T) {
	t.Setenv(login.TokenFileEnv, "")
	t.Setenv(login.TokenEnv, "")
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	code, _, stderr := cli(t, "approvals", "list", "--server", "http://127.0.0.1:1")
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, stderr, "X_")
	if !strings.Contains(stderr, ": X_") && !strings.HasPrefix(stderr, "orangerail: X_") {
		t.Fatalf("no code: %q", stderr)
	}
}

// TestTokenFromTheEnvironmentNeedsNoConfigurationDirectory:
// $ORANGERAIL_TOKEN is sent "over any kept token", yet the approvals
// commands first look for the kept token's path and fail where there is
// no configuration directory, before the token from the environment is
// read.
func TestTokenFromTheEnvironmentNeedsNoConfigurationDirectory(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[],"next_cursor":null}`)
	}))
	defer srv.Close()
	t.Setenv(login.TokenFileEnv, "")
	t.Setenv(login.TokenEnv, "an-opaque-token")
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	if code, _, stderr := cli(t, "approvals", "list", "--server", srv.URL); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
