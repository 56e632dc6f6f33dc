package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestDeskRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	s := store.New(testdb.RuntimePool(t, url))
	hash := sha256.Sum256([]byte("ada's session"))
	if err := s.DeskSessionCreate(ctx, &store.DeskSession{IDHash: hash[:], TenantID: "acme", Subject: "ada", Issuer: "https://id.example",
		Caller: []byte(`{}`), FormToken: "t", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "desk", "revoke", "--issuer", "https://id.example", "--subject", "ada", "--database-url", url)
	if code != exitOK || !strings.Contains(out, "ended 1 desk session(s) of ada") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := s.DeskSessionGet(ctx, hash[:]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after revoking, the session reads %v", err)
	}
	// An issuer spelled otherwise (a trailing slash) ends nothing, and says
	// that nothing matched rather than only counting none.
	if code, out, stderr := cli(t, "desk", "revoke", "--issuer", "https://id.example/", "--subject", "ada", "--database-url", url); code != exitOK ||
		!strings.Contains(out, "ended 0 desk session(s)") || !strings.Contains(stderr, "warning: no live desk session matched") {
		t.Fatalf("revoke of no session: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := cli(t, "desk", "revoke", "--subject", "ada", "--database-url", url); code != exitError || !strings.Contains(stderr, "--issuer") {
		t.Fatalf("revoke without --issuer: exit %d %s", code, stderr)
	}
}
