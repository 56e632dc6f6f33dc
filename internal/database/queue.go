package database

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errNotQueued is what a Queue answers a statement that returns rows.
var errNotQueued = errors.New("database: a Queue queues statements that return no rows (Exec) only")

// Queue is a store.DBTX that sends nothing: each Exec run on it queues its
// statement, and Send sends them all, in order, on a transaction in one
// round trip. For statements whose only answer is whether they succeeded
// (sqlc :exec queries) that a transaction runs one after the other: the
// end of an execution (its slot's release, its record) costs one round
// trip instead of one each. Exec returns no error; a statement's error is
// Send's. Query and QueryRow fail. A Queue is used once, by one goroutine.
type Queue struct {
	b pgx.Batch
	// confirm is the transaction whose id the queue reads last, for
	// ConfirmCommit.
	confirm *committing
}

// Exec queues sql with args.
func (q *Queue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// Query fails: a queued statement's rows are never read.
func (q *Queue) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errNotQueued
}

// QueryRow fails, at Scan: a queued statement's row is never read.
func (q *Queue) QueryRow(context.Context, string, ...any) pgx.Row {
	return failedRow{errNotQueued}
}

// Len is how many statements are queued.
func (q *Queue) Len() int { return q.b.Len() }

// ConfirmCommit is database.ConfirmCommit for the transaction q is sent
// on: the transaction's id is read with the queued statements, after
// them, instead of in a round trip of its own. Given a transaction
// InTenant did not begin, it does nothing.
func (q *Queue) ConfirmCommit(tx pgx.Tx) {
	if c, ok := tx.(*committing); ok {
		q.confirm = c
	}
}

// Send sends the queued statements on tx in one round trip. It returns
// -1 and nil when every one succeeded, or the place in the queue of the
// first that failed and its error: Postgres runs none after it, and tx is
// then aborted, as after any statement that fails.
func (q *Queue) Send(ctx context.Context, tx pgx.Tx) (int, error) {
	n := q.b.Len()
	var xid string
	if q.confirm != nil {
		q.b.Queue(currentXID).QueryRow(func(row pgx.Row) error { return row.Scan(&xid) })
	}
	br := tx.SendBatch(ctx, &q.b)
	for i := range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return i, err
		}
	}
	// The id's read, when queued, is the one left: Close runs its
	// callback.
	if err := br.Close(); err != nil {
		return n, err
	}
	if q.confirm != nil {
		q.confirm.xid = xid
	}
	return -1, nil
}

// failedRow is a pgx.Row whose Scan fails with err.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }
