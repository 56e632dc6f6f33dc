package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/store"
)

// lastRow is a store.DBTX that remembers the statement and arguments of
// the last QueryRow it ran.
type lastRow struct {
	store.DBTX
	sql  string
	args []any
}

func (r *lastRow) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return r.DBTX.QueryRow(ctx, sql, args...)
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	Relation     string     `json:"Relation Name"`
	Index        string     `json:"Index Name"`
	Relationship string     `json:"Parent Relationship"`
	SubplanName  string     `json:"Subplan Name"`
	Plans        []planNode `json:"Plans"`
}

// TestConsumeAsksTheChainOnce: the consume asks whether the chain holds
// its approval's approved record as one question, an InitPlan probing
// audit_approval_idx — never as a subplan of the consumed row, which
// Postgres makes a hash of every approved record of the tenant: a scan of
// the whole chain at every consume.
func TestConsumeAsksTheChainOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		rec := &lastRow{DBTX: tx}
		if _, _, err := store.New(rec).ApprovalConsume(ctx, "acme", uuid.New()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("consume of no approval: %v, want ErrNotFound", err)
		}
		// An index the planner may use, it uses: an empty table's seq scan
		// would be cheaper and tell nothing.
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		var out []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+rec.sql, rec.args...).Scan(&out); err != nil {
			return err
		}
		var plan []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("plan %s: %v", out, err)
		}
		var audit []string
		var walk func(n planNode, under string)
		walk = func(n planNode, under string) {
			if n.SubplanName != "" {
				under = n.SubplanName
			}
			if n.Relation == "audit" {
				audit = append(audit, under+": "+n.NodeType+" "+n.Index)
			}
			for _, c := range n.Plans {
				walk(c, under)
			}
		}
		walk(plan[0].Plan, "")
		if len(audit) != 1 || !strings.HasPrefix(audit[0], "InitPlan") || !strings.HasSuffix(audit[0], "Scan audit_approval_idx") {
			t.Fatalf("the consume reads the chain as %q, want once, by audit_approval_idx, in an InitPlan; plan %s", audit, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
