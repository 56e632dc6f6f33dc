package sqlquery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestQueryBehindATransactionPoolerFailsClosed: the query login's URL
// leads through PgBouncer in transaction pooling mode, against README's
// advice. The Querier binds a backend to the tenant in one transaction
// and runs the agent's statement in a later one, which the pooler may run
// on another backend — one bound to another tenant's query, whose rows
// Row Level Security would show it: 19 to 26 of 160 such queries read the
// other tenant's rows. A statement that lands on another backend than its
// own is refused now, *sqlquery.BackendError, before it runs: no query of
// one tenant reads another's.
func TestQueryBehindATransactionPoolerFailsClosed(t *testing.T) {
	b := setup(t) // acme and globex, 3 audit records each
	ctx := context.Background()
	pooled := testdb.Bouncer(t, testdb.WithUser(t, b.url, sqlquery.QueryRole, ""))
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: pooled, Store: b.runtime})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu              sync.Mutex
		leaks           []string
		refused, blanks int
		answered        int
		wg              sync.WaitGroup
	)
	for _, tenant := range []string{"acme", "globex"} {
		for w := range sqlquery.MaxPerTenant {
			wg.Go(func() {
				for i := range 40 {
					res, err := q.Query(ctx, tenant, "SELECT coalesce(string_agg(DISTINCT tenant_id, ','), '') FROM audit")
					mu.Lock()
					var moved *sqlquery.BackendError
					switch {
					case errors.As(err, &moved):
						refused++
					case err != nil:
						t.Errorf("%s: %v", tenant, err)
					case string(res.Rows[0]) == fmt.Sprintf("[%q]", tenant):
						answered++
					case string(res.Rows[0]) == `[""]`:
						blanks++
					default:
						leaks = append(leaks, fmt.Sprintf("worker %d run %d: tenant %s read the rows of %s", w, i, tenant, res.Rows[0]))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d answered, %d refused as run on another backend, %d saw no rows", answered, refused, blanks)
	if len(leaks) > 0 {
		t.Fatalf("%d cross-tenant reads, e.g. %s", len(leaks), leaks[0])
	}
	if blanks > 0 {
		t.Fatalf("%d queries ran on a backend bound to no tenant, and were not refused", blanks)
	}
}
