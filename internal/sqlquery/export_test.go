package sqlquery

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// InSession runs fn exactly where Query runs an agent's statement — its own
// connection, bound to tenant, read-only, under the limits, as AgentRole —
// but without the parse layer: the tests' stand-in for a guard bypassed.
func (q *Querier) InSession(ctx context.Context, tenant string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return q.session(ctx, tenant, fn)
}
