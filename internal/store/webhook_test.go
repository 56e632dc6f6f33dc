package store_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orangerail/orangerail/internal/store"
)

// TestWebhookSetsMatchSchema holds WebhookEvents and WebhookStates to the
// CHECK constraints on orangerail.webhook_outbox.
func TestWebhookSetsMatchSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		column string
		inGo   []string
	}{
		{"event", stringsOf(store.WebhookEvents())},
		{"state", stringsOf(store.WebhookStates())},
	} {
		var def string
		err := b.admin.QueryRow(context.Background(), `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			WHERE c.conrelid = 'orangerail.webhook_outbox'::regclass AND c.contype = 'c'
			  AND c.conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = $1)]`, tt.column).Scan(&def)
		if err != nil {
			t.Fatal(err)
		}
		var inSQL []string
		for _, m := range regexp.MustCompile(`'([a-z_.]+)'::text`).FindAllStringSubmatch(def, -1) {
			inSQL = append(inSQL, m[1])
		}
		if !slices.Equal(slices.Sorted(slices.Values(inSQL)), slices.Sorted(slices.Values(tt.inGo))) {
			t.Errorf("%s: the CHECK allows %v (%s); Go has %v", tt.column, inSQL, def, tt.inGo)
		}
	}
}

func stringsOf[S ~string](values []S) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// TestWebhookOutboxFollowsApprovals: the trigger writes one message per
// staging and per decision, in the approval change's transaction (a change
// that rolls back leaves none), scoped to the tenant; the runtime claims
// and marks messages but cannot write one.
func TestWebhookOutboxFollowsApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	now := time.Now()
	if err := b.inTenant(t, "acme", func(s *store.Store) error {
		if _, err := s.ApprovalStage(ctx, stageParams(id, "x")); err != nil {
			return err
		}
		_, err := s.ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: id, Status: store.ApprovalRejected, DecidedBy: "alice",
			Entry: []byte(`{"action":"cancel_order","actor":{"kind":"human","subject":"alice"},"approval_id":"` + id.String() +
				`","at":"2026-11-29T20:56:16.000000Z","correlation_id":"c","dev_mode":false,"phase":"rejected","tenant":"acme","v":1}`)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// A staging whose audit record is refused rolls back: no message.
	bad := stageParams(uuid.New(), "y")
	bad.Entry = entry("acme", "approved", bad.ID, "agent-7")
	if err := b.inTenant(t, "acme", func(s *store.Store) error { _, err := s.ApprovalStage(ctx, bad); return err }); err == nil {
		t.Fatal("a staging with the wrong record was accepted")
	}

	var msgs []*store.WebhookMessage
	if err := b.inTenant(t, "acme", func(s *store.Store) (err error) {
		msgs, err = s.WebhookList(ctx, &store.WebhookListParams{TenantID: "acme", Limit: 10})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Event != store.WebhookApprovalRejected || msgs[1].Event != store.WebhookApprovalPending ||
		msgs[0].DecidedBy == nil || *msgs[0].DecidedBy != "alice" || msgs[1].DecidedBy != nil ||
		msgs[0].ApprovalID != id || msgs[0].State != store.WebhookQueued || msgs[0].Action != "cancel_order" {
		t.Fatalf("outbox %+v", msgs)
	}
	// Another tenant sees none of them, even by id.
	if err := b.inTenant(t, "globex", func(s *store.Store) error {
		other, err := s.WebhookList(ctx, &store.WebhookListParams{TenantID: "acme", Limit: 10})
		if err != nil || len(other) != 0 {
			t.Errorf("globex lists acme's messages: %v %v", other, err)
		}
		if _, err := s.WebhookRedeliver(ctx, "acme", msgs[0].ID, now); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("globex redelivers acme's message: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The runtime cannot forge or delete a message.
	for _, sql := range []string{
		`INSERT INTO orangerail.webhook_outbox (tenant_id, approval_id, event, action, requested_by, expires_at) VALUES ('acme', '` + id.String() + `', 'approval.approved', 'a', 'b', now())`,
		`DELETE FROM orangerail.webhook_outbox`,
		`UPDATE orangerail.webhook_outbox SET event = 'approval.approved'`,
	} {
		err := b.inTenant(t, "acme", func(*store.Store) error { _, err := b.runtime.Exec(ctx, sql); return err })
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: %v, want 42501", sql, err)
		}
	}

	// Due tenants, claim, mark.
	due, err := store.New(b.runtime).WebhookDueTenants(ctx, now.Add(time.Minute), 10)
	if err != nil || !slices.Equal(due, []string{"acme"}) {
		t.Fatalf("due tenants %v %v", due, err)
	}
	if err := b.inTenant(t, "acme", func(s *store.Store) error {
		claimed, err := s.WebhookClaim(ctx, &store.WebhookClaimParams{TenantID: "acme", Now: now.Add(time.Minute), Until: now.Add(2 * time.Minute), Limit: 10})
		if err != nil || len(claimed) != 2 || claimed[0].Attempts != 1 {
			t.Errorf("claim %+v %v", claimed, err)
		}
		again, err := s.WebhookClaim(ctx, &store.WebhookClaimParams{TenantID: "acme", Now: now.Add(time.Minute), Until: now.Add(2 * time.Minute), Limit: 10})
		if err != nil || len(again) != 0 {
			t.Errorf("leased messages claimed again: %+v %v", again, err)
		}
		// A worker whose lease is not the row's marks nothing, and is
		// told so.
		if err := s.WebhookMarkFailed(ctx, &store.WebhookMarkParams{ID: claimed[0].ID, TenantID: "acme", LastError: "stale", Lease: now}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a stale lease's mark: %v, want ErrNotFound", err)
		}
		if failed, err := s.WebhookList(ctx, &store.WebhookListParams{TenantID: "acme", State: store.WebhookFailed, Limit: 10}); err != nil || len(failed) != 0 {
			t.Errorf("a stale lease marked a message: %+v %v", failed, err)
		}
		for _, m := range claimed {
			if err := s.WebhookMarkDelivered(ctx, &store.WebhookMarkParams{ID: m.ID, TenantID: "acme", At: now, Lease: *m.LockedUntil}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if due, err := store.New(b.runtime).WebhookDueTenants(ctx, now.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("due after delivery %v %v", due, err)
	}
}

// TestWebhookOutboxAnnouncesExpiry: an approval that lapses and is
// expired makes an approval.expired message, with no decider.
func TestWebhookOutboxAnnouncesExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	if err := b.inTenant(t, "acme", func(s *store.Store) error {
		p := stageParams(id, "x")
		// Just after the transaction began (created_at): lapsed by the
		// next transaction.
		p.ExpiresAt = time.Now()
		_, err := s.ApprovalStage(ctx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var msgs []*store.WebhookMessage
	if err := b.inTenant(t, "acme", func(s *store.Store) (err error) {
		if _, err := s.ApprovalExpire(ctx, &store.ApprovalExpireParams{ID: id, Entry: entry("acme", "expired", id, "orangerail")}); err != nil {
			return err
		}
		msgs, err = s.WebhookList(ctx, &store.WebhookListParams{TenantID: "acme", Limit: 10})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Event != store.WebhookApprovalExpired || msgs[0].DecidedBy != nil || msgs[1].Event != store.WebhookApprovalPending {
		t.Fatalf("outbox %+v", msgs)
	}
}
