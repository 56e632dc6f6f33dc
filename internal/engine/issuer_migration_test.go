package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestMigrationFillsInRequesterIssuers: migration 00043 fills in the issuer
// of the approvals and idempotency keys filed before it, from their
// records — as a superuser and as an owner that is none, whom the row
// policies bind — so a requester keeps its approvals and its filed
// results across the upgrade.
func TestMigrationFillsInRequesterIssuers(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{false, true} {
		t.Run(map[bool]string{false: "superuser", true: "owner"}[owned], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var b *testBundle
			if owned {
				url, admin := testdb.NewOwned(t)
				b = &testBundle{url: url, admin: admin, runtime: testdb.RuntimePool(t, url)}
			} else {
				b = setup(t)
			}
			if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true))
			caller, unvouched := support("acme"), support("acme")
			caller.Issuer = "https://one.example"
			staged := e.Call(ctx, caller, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "before"}`))
			want(t, staged, engine.StatusApprovalPending)
			plain := e.Call(ctx, unvouched, "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "before"}`))
			want(t, plain, engine.StatusApprovalPending)
			filed := e.Call(ctx, caller, "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "before", "idempotencyKey": "k-1"}`))
			want(t, filed, engine.StatusOK)

			// The owner migrates as no member of the runtime's role, which
			// the runtime's row policies name.
			membership := func(sql string) {
				t.Helper()
				if !owned {
					return
				}
				var owner string
				if err := testdb.Pool(t, testdb.Direct(b.url)).QueryRow(ctx, "SELECT current_user").Scan(&owner); err != nil {
					t.Fatal(err)
				}
				if _, err := b.admin.Exec(ctx, fmt.Sprintf(sql, pgx.Identifier{owner}.Sanitize())); err != nil {
					t.Fatal(err)
				}
			}
			membership("REVOKE orangerail_runtime FROM %s")
			m, err := database.NewMigrator(ctx, testdb.Direct(b.url)) // migrations hold a session lock
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = m.Close() }()
			if _, err := m.DownTo(ctx, 42); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Up(ctx); err != nil {
				t.Fatal(err)
			}
			membership("GRANT orangerail_runtime TO %s")

			got := issuers(t, b.admin, "SELECT id::text, requested_issuer FROM orangerail.approvals UNION ALL SELECT key, issuer FROM orangerail.idempotency_keys")
			want := map[string]string{staged.ApprovalID.String(): caller.Issuer, plain.ApprovalID.String(): "", "k-1": caller.Issuer}
			if !maps.Equal(got, want) {
				t.Fatalf("filled in %v, want %v", got, want)
			}
			// The requester still reads its approval, and its retry is
			// answered with its filed result.
			if _, err := e.ReadApproval(ctx, caller, staged.ApprovalID.String()); err != nil {
				t.Fatalf("the requester's approval after the upgrade: %v", err)
			}
			again := e.Call(ctx, caller, "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "before", "idempotencyKey": "k-1"}`))
			if again.Status != engine.StatusOK || again.CorrelationID != filed.CorrelationID {
				t.Fatalf("a retry after the upgrade: %s %s, want the filed %s", again.Status, again.CorrelationID, filed.CorrelationID)
			}
		})
	}
}

// issuers reads sql's rows, two text columns each, as a map: what is
// filed, and the issuer it is filed under.
func issuers(t *testing.T, pool *pgxpool.Pool, sql string) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var k, v string
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRollbackPastIssuersRefusesWhatItWouldLose: below migration 00043 an
// open call and an idempotency key are keyed by the subject alone. The
// Down is refused, X_ROLLBACK_REFUSED, naming them, while one subject's
// same call is open from callers of two issuers, or while their keys are
// live — where it failed on the unique index or the primary key (23505),
// naming nothing — and the database stays at 00043. Once the approvals
// were decided and the keys expired (and are dropped), it goes through.
func TestRollbackPastIssuersRefusesWhatItWouldLose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true))
	one, two := support("acme"), support("acme")
	one.Issuer, two.Issuer = "https://one.example", "https://two.example"
	call := json.RawMessage(`{"order_id": "o-1001", "reason": "same call"}`)
	first, second := e.Call(ctx, one, "cancel_order", call), e.Call(ctx, two, "cancel_order", call)
	want(t, first, engine.StatusApprovalPending)
	want(t, second, engine.StatusApprovalPending)

	m, err := database.NewMigrator(ctx, testdb.Direct(b.url))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	refused := func(names ...string) {
		t.Helper()
		_, err := m.DownTo(ctx, 42)
		if errcode.Of(err) != errcode.RollbackRefused {
			t.Fatalf("down past 00043: %v, want %s", err, errcode.RollbackRefused)
		}
		for _, name := range names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("the refusal does not name %s: %v", name, err)
			}
		}
		if v, err := m.Version(ctx); err != nil || v != 43 {
			t.Fatalf("after the refusal the database is at %d (%v), want 43", v, err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		b.runtime.Reset()
	}
	refused(first.ApprovalID.String(), second.ApprovalID.String())
	want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: first.ApprovalID.String()}), engine.StatusOK)

	note := json.RawMessage(`{"order_id": "o-1001", "note": "n", "idempotencyKey": "k-1"}`)
	want(t, e.Call(ctx, one, "add_order_note", note), engine.StatusOK)
	want(t, e.Call(ctx, two, "add_order_note", note), engine.StatusOK)
	refused("'k-1'")

	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 42); err != nil {
		t.Fatalf("down past 00043 once the approvals ended and the keys expired: %v", err)
	}
	var left int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.idempotency_keys").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d expired keys left (%v), want them dropped", left, err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationFilesIdempotencyKeysUnderCanonicalIssuers: migration 00069
// files every stored idempotency key under its issuer's canonical form
// (issuer_key) — as a superuser and as an owner that is none, whom the row
// policies bind — so a key filed before under the config's spelling
// answers a retry under any spelling; of keys that are one under that
// form it keeps one, decided in a fixed order (a live one, then a filed
// outcome, then the canonical spelling, then the lowest issuer byte by
// byte); a key whose issuer issuer_key keeps as it is stays as it was.
func TestMigrationFilesIdempotencyKeysUnderCanonicalIssuers(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{false, true} {
		t.Run(map[bool]string{false: "superuser", true: "owner"}[owned], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var b *testBundle
			if owned {
				url, admin := testdb.NewOwned(t)
				b = &testBundle{url: url, admin: admin, runtime: testdb.RuntimePool(t, url)}
			} else {
				b = setup(t)
			}
			if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, b, make([]byte, engine.KeySize), engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true))
			caller := support("acme")
			caller.Issuer = "https://m.example/"
			note := json.RawMessage(`{"order_id": "o-1001", "note": "before", "idempotencyKey": "m-1"}`)
			filed := e.Call(ctx, caller, "add_order_note", note)
			want(t, filed, engine.StatusOK)

			membership := func(sql string) {
				t.Helper()
				if !owned {
					return
				}
				var owner string
				if err := testdb.Pool(t, testdb.Direct(b.url)).QueryRow(ctx, "SELECT current_user").Scan(&owner); err != nil {
					t.Fatal(err)
				}
				if _, err := b.admin.Exec(ctx, fmt.Sprintf(sql, pgx.Identifier{owner}.Sanitize())); err != nil {
					t.Fatal(err)
				}
			}
			m, err := database.NewMigrator(ctx, testdb.Direct(b.url))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = m.Close() }()
			if _, err := m.DownTo(ctx, 68); err != nil {
				t.Fatal(err)
			}
			// Keys as earlier versions filed them: under the config's
			// spelling, and of one issuer under two or three.
			if _, err := b.admin.Exec(ctx, `
UPDATE orangerail.idempotency_keys SET issuer = 'https://m.example/' WHERE key = 'm-1';
INSERT INTO orangerail.idempotency_keys (tenant_id, action, subject, issuer, key, input_digest, outcome, expires_at, claim, claimed_until, correlation_id)
SELECT 'acme', 'add_order_note', 'agent-7', k.issuer, k.key, '\x00', CASE WHEN k.filed THEN '{}'::bytea END,
       now() + k.expires, gen_random_uuid(), now() + interval '1 hour', k.correlation
FROM (VALUES
    ('https://c.example/', 'c-1', true, interval '1 hour', 'c1-live'),
    ('https://c.example', 'c-1', true, interval '-1 second', 'c1-expired'),
    ('https://c.example/', 'c-2', true, interval '1 hour', 'c2-filed'),
    ('HTTPS://c.example/', 'c-2', false, interval '1 hour', 'c2-claim'),
    ('https://c.example/', 'c-3', true, interval '1 hour', 'c3-slash'),
    ('https://c.example', 'c-3', true, interval '1 hour', 'c3-canonical'),
    ('HTTPS://c.example:443', 'c-3', true, interval '1 hour', 'c3-upper'),
    ('https://c.example/', 'c-4', true, interval '1 hour', 'c4-slash'),
    ('HTTPS://c.example', 'c-4', true, interval '1 hour', 'c4-upper'),
    ('https://[::1]/', 'x-1', true, interval '1 hour', 'x1')
) AS k (issuer, key, filed, expires, correlation)`); err != nil {
				t.Fatal(err)
			}
			membership("REVOKE orangerail_runtime FROM %s")
			if _, err := m.Up(ctx); err != nil {
				t.Fatal(err)
			}
			membership("GRANT orangerail_runtime TO %s")
			b.runtime.Reset()

			got := issuers(t, b.admin, "SELECT key || ' ' || coalesce(correlation_id, ''), issuer FROM orangerail.idempotency_keys WHERE key <> 'm-1' UNION ALL SELECT key, issuer FROM orangerail.idempotency_keys WHERE key = 'm-1'")
			want := map[string]string{
				"m-1": "https://m.example", "c-1 c1-live": "https://c.example", "c-2 c2-filed": "https://c.example",
				"c-3 c3-canonical": "https://c.example", "c-4 c4-upper": "https://c.example", "x-1 x1": "https://[::1]/",
			}
			if !maps.Equal(got, want) {
				t.Fatalf("after 00069 the keys are %v, want %v", got, want)
			}
			caller.Issuer = "https://m.example"
			again := e.Call(ctx, caller, "add_order_note", note)
			if again.Status != engine.StatusOK || again.CorrelationID != filed.CorrelationID {
				t.Fatalf("a retry under the re-spelled issuer after the upgrade: %s %s, want the filed %s", again.Status, again.CorrelationID, filed.CorrelationID)
			}
		})
	}
}
