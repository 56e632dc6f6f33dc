package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestFunctionStatsCountEveryCall: with -function-stats' setting, each
// call of an orangerail plpgsql function on a pool opened after it is
// counted, none before the first reading and all by the second, and the
// report divides them by the cycles.
func TestFunctionStatsCountEveryCall(t *testing.T) {
	t.Parallel()
	if testdb.Bouncing() {
		t.Skip("a pooler keeps server connections, and their counts, past a pool's Reset")
	}
	ctx := t.Context()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if err := trackFunctions(ctx, admin); err != nil {
		t.Fatal(err)
	}
	// A pool opened after the setting, as the lifecycle's engine is.
	owner := testdb.Pool(t, url)
	call := func() {
		t.Helper()
		if err := database.InTenant(ctx, owner, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			var tenant string
			return tx.QueryRow(ctx, "SELECT orangerail.approval_tenant()").Scan(&tenant)
		}); err != nil {
			t.Fatal(err)
		}
	}
	call() // before the first reading: not counted
	before, err := readFunctionStats(ctx, admin, owner)
	if err != nil {
		t.Fatal(err)
	}
	const calls, cycles = 6, 3
	for range calls {
		call()
	}
	after, err := readFunctionStats(ctx, admin, owner)
	if err != nil {
		t.Fatal(err)
	}
	var got []result
	emitFunctionStats(before, after, cycles, func(r result) { got = append(got, r) })
	if len(got) != 1 || got[0].Name != "lifecycle_pg_function_approval_tenant" || !strings.HasSuffix(got[0].Unit, "; 2.00 calls/cycle)") {
		t.Fatalf("reported %+v, want approval_tenant at 2.00 calls a cycle", got)
	}
}
