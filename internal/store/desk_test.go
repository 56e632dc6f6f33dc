package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/store"
)

// TestDeskSessions: the runtime role keeps desk sessions; a session is
// found by its id's hash only while neither expired nor revoked; revoking
// a person ends each of their sessions and no one else's; pruning forgets
// only sessions that ended over a day ago.
func TestDeskSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := store.New(b.runtime)
	hash := func(id string) []byte { h := sha256.Sum256([]byte(id)); return h[:] }
	create := func(id, subject string, expires time.Time) {
		t.Helper()
		if err := s.DeskSessionCreate(ctx, &store.DeskSession{IDHash: hash(id), TenantID: "acme", Subject: subject, Issuer: "https://id.example",
			Caller: []byte(`{"Subject":"` + subject + `"}`), FormToken: "token-" + id, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	live := func(id string) bool {
		t.Helper()
		got, err := s.DeskSessionGet(ctx, hash(id))
		if errors.Is(err, store.ErrNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.IDHash, hash(id)) || got.FormToken != "token-"+id {
			t.Fatalf("session %s read as %+v", id, got)
		}
		return true
	}
	hour := time.Now().Add(time.Hour)
	create("ada-1", "ada", hour)
	create("ada-2", "ada", hour)
	create("bob-1", "bob", hour)
	create("old", "carol", time.Now().Add(-48*time.Hour))
	if !live("ada-1") || !live("bob-1") || live("old") || live("nobody") {
		t.Fatal("live sessions are not as created")
	}
	if err := s.DeskSessionCreate(ctx, &store.DeskSession{IDHash: []byte("short"), TenantID: "acme", Subject: "x", Issuer: "i",
		Caller: []byte(`{}`), FormToken: "t", ExpiresAt: hour}); err == nil {
		t.Fatal("a session keyed by something other than a SHA-256 was stored")
	}
	if err := s.DeskSessionRevoke(ctx, hash("ada-1")); err != nil {
		t.Fatal(err)
	}
	if live("ada-1") || !live("ada-2") {
		t.Fatal("signing out ended the wrong session")
	}
	if n, err := s.DeskSessionRevokeSubject(ctx, "https://id.example", "ada"); err != nil || n != 1 {
		t.Fatalf("revoking ada ended %d sessions (%v), want her one live session", n, err)
	}
	if live("ada-2") || !live("bob-1") {
		t.Fatal("revoking ada ended the wrong sessions")
	}
	// An expired session is not counted as ended: revoking someone whose
	// sessions have all expired ends none, so the operator is told no live
	// session matched.
	if n, err := s.DeskSessionRevokeSubject(ctx, "https://id.example", "carol"); err != nil || n != 0 {
		t.Fatalf("revoking carol, whose one session expired, ended %d sessions (%v), want none", n, err)
	}
	if err := s.DeskSessionPrune(ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.desk_sessions`).Scan(&left); err != nil || left != 3 {
		t.Fatalf("after pruning %d sessions are left (%v), want the three that ended within a day", left, err)
	}
}
