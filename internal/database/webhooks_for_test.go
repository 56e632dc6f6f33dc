package database_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestWebhooksForSetsEachTenantsRoutes: on a pool whose webhook routes
// depend on the tenant (WebhooksFor, an endpoint scoped to tenants), each
// tenant's transaction sets orangerail.webhooks to its own, InTenant's and
// a pipelined read's alike, in each of pgx's query exec modes, and a
// prepared scope of one tenant never carries its routes to another.
func TestWebhooksForSetsEachTenantsRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	const sql = "SELECT current_setting('orangerail.webhooks', true)"
	for _, mode := range execModes {
		t.Run(mode, func(t *testing.T) {
			_, bounded := boundedInMode(t, url, mode)
			bounded.Webhooks = "for every tenant"
			bounded.WebhooksFor = func(tenant string) string { return `{"of":"` + tenant + `"}` }
			for _, tenant := range []string{"acme", "globex", "acme"} {
				want := `{"of":"` + tenant + `"}`
				var got string
				if err := database.QueryInTenant(ctx, bounded, tenant, sql, nil, func(rows pgx.Rows) error {
					for rows.Next() {
						if err := rows.Scan(&got); err != nil {
							return err
						}
					}
					return rows.Err()
				}); err != nil || got != want {
					t.Fatalf("%s, pipelined: %q (%v), want %q", tenant, got, err, want)
				}
				if err := database.InTenant(ctx, bounded, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, sql).Scan(&got)
				}); err != nil || got != want {
					t.Fatalf("%s, InTenant: %q (%v), want %q", tenant, got, err, want)
				}
			}
		})
	}
}
