package cli

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestServeRefusesStdioFlagsOverHTTP: the flags that only mean something
// with --stdio (the development identity's --dev-*, --key-file,
// --token-env) are refused over HTTP, X_USAGE, before anything opens. serve
// took `--dev-tenant acme --dev-roles admin` without --stdio in silence
// and served HTTP on the config's address (its operator expecting a local
// development identity), and refused --token-env without a code.
func TestServeRefusesStdioFlagsOverHTTP(t *testing.T) {
	url, _, issuerURL := serveFixture(t)
	config := serveConfig(t, issuerURL, testdb.FreePort(t), "")
	for _, extra := range [][]string{
		{"--dev-tenant", "acme"},
		{"--dev-subject", "me", "--dev-roles", "admin"},
		{"--dev-scopes", "orders:write"},
		{"--key-file", filepath.Join(t.TempDir(), "k")},
		{"--token-env", "ORANGERAIL_TOKEN"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var stderr bytes.Buffer
		code := Run(ctx, append([]string{"serve", "--config", config, "--database-url", url}, extra...), io.Discard, &stderr)
		served := ctx.Err() != nil // it served until stopped
		cancel()
		if served || code != exitError {
			t.Errorf("%v without --stdio: exit %d (served until stopped: %v) %q", extra, code, served, stderr.String())
			continue
		}
		oneLine(t, stderr.String(), "X_USAGE")
	}
}
