package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
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
