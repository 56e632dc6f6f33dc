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
func (q *Queue) ConfirmCommit(tx pgx.Tx, w Witness) {
	if c, ok := tx.(*committing); ok {
		c.witness = mustWitness(w)
		q.confirm = c
	}
}

// Send sends the queued statements on tx in one round trip. It returns
// -1 and nil when every one succeeded, or the place in the queue of the
// first that failed and its error: Postgres runs none after it, and tx is
// then aborted, as after any statement that fails.
func (q *Queue) Send(ctx context.Context, tx pgx.Tx) (int, error) {
	n := q.b.Len()
	var o origin
	if q.confirm != nil {
		q.b.Queue(currentXID).QueryRow(func(row pgx.Row) error { return row.Scan(&o.xid, &o.server) })
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
		q.confirm.origin = o
	}
	return -1, nil
}

// failedRow is a pgx.Row whose Scan fails with err.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// savepointName names the savepoint a Queue sets. pgx names its own
// sp_1, sp_2…, so a savepoint begun inside this one (Begin) never shares
// its name.
const savepointName = "orangerail_queued"

// Savepoint queues a savepoint of tx after the statements queued so far,
// and returns the transaction that runs within it once Send succeeded:
// its Rollback rolls tx back to the savepoint, undoing only what ran
// after it, and its Commit releases it; each ends it, as pgx's nested
// transactions end. It is tx.Begin without a round trip of its own: a
// savepoint set with the statements before it.
func (q *Queue) Savepoint(tx pgx.Tx) pgx.Tx {
	q.b.Queue("SAVEPOINT " + savepointName)
	return &savepoint{tx: tx}
}

// savepoint is the transaction Queue.Savepoint returns, as pgx's
// dbSimulatedNestedTx is Begin's.
type savepoint struct {
	tx     pgx.Tx
	closed bool
}

func (s *savepoint) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Begin(ctx)
}

func (s *savepoint) Commit(ctx context.Context) error {
	return s.end(ctx, "RELEASE SAVEPOINT "+savepointName)
}

func (s *savepoint) Rollback(ctx context.Context) error {
	return s.end(ctx, "ROLLBACK TO SAVEPOINT "+savepointName)
}

// end ends the savepoint with sql, once.
func (s *savepoint) end(ctx context.Context, sql string) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.tx.Exec(ctx, sql)
	return err
}

func (s *savepoint) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if s.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return s.tx.Exec(ctx, sql, args...)
}

func (s *savepoint) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Query(ctx, sql, args...)
}

func (s *savepoint) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if s.closed {
		return failedRow{pgx.ErrTxClosed}
	}
	return s.tx.QueryRow(ctx, sql, args...)
}

func (s *savepoint) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if s.closed {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	return s.tx.SendBatch(ctx, b)
}

func (s *savepoint) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if s.closed {
		return 0, pgx.ErrTxClosed
	}
	return s.tx.CopyFrom(ctx, table, columns, src)
}

func (s *savepoint) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Prepare(ctx, name, sql)
}

func (s *savepoint) LargeObjects() pgx.LargeObjects { return s.tx.LargeObjects() }

func (s *savepoint) Conn() *pgx.Conn { return s.tx.Conn() }
