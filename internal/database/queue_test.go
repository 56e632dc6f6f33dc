package database_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestQueue: a Queue's statements run when it is sent, in order, in one
// batch on the transaction; the first that fails is named by its place,
// and none after it runs; a statement that returns rows is refused.
// (TestConfirmCommit holds the id a Queue reads to the confirmation.)
func TestQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr, rows := queuedTable(t)

	err := database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		before := tr.batches.Load()
		var q database.Queue
		for _, n := range []int{1, 2} {
			if _, err := q.Exec(ctx, "INSERT INTO queued VALUES ($1)", n); err != nil {
				return err
			}
		}
		if failed, err := q.Send(ctx, tx); failed != -1 || err != nil {
			t.Fatalf("send: statement %d failed: %v", failed, err)
		}
		if got := tr.batches.Load() - before; got != 1 {
			t.Fatalf("the queue sent %d batches, want 1", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(t); len(got) != 2 {
		t.Fatalf("rows %v after the queue committed, want [1 2]", got)
	}

	err = database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		var q database.Queue
		for _, n := range []int{3, 1, 4} { // 1 is there already
			_, _ = q.Exec(ctx, "INSERT INTO queued VALUES ($1)", n)
		}
		failed, err := q.Send(ctx, tx)
		var pgErr *pgconn.PgError
		if failed != 1 || !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation {
			t.Fatalf("send: statement %d failed: %v; want statement 1, a unique violation", failed, err)
		}
		return err
	})
	if err == nil {
		t.Fatal("a transaction whose queued statement failed committed")
	}
	if got := rows(t); len(got) != 2 {
		t.Fatalf("rows %v after a failed queue, want [1 2]", got)
	}

	var q database.Queue
	if r, err := q.Query(ctx, "SELECT 1"); err == nil {
		r.Close()
		t.Fatal("a Queue ran a Query")
	}
	if err := q.QueryRow(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Fatal("a Queue ran a QueryRow")
	}
}

// TestQueueSavepoint: a savepoint a Queue sets with its statements, in the
// same batch, is a nested transaction as pgx's Begin makes one: after a
// statement inside it failed, rolled back, it undoes only what ran inside
// it, and the transaction goes on and commits what ran before it and
// after; committed, it keeps its statements; either way it ends, and
// answers ErrTxClosed after.
func TestQueueSavepoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr, rows := queuedTable(t)
	for _, tc := range []struct {
		name   string
		commit bool
		want   []int
	}{
		{"rolled back", false, []int{1, 3}},
		{"committed", true, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := database.InTenant(ctx, pool, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "DELETE FROM queued"); err != nil {
					return err
				}
				before := tr.batches.Load()
				var q database.Queue
				_, _ = q.Exec(ctx, "INSERT INTO queued VALUES (1)")
				sp := q.Savepoint(tx)
				if failed, err := q.Send(ctx, tx); failed != -1 || err != nil {
					t.Fatalf("send: statement %d failed: %v", failed, err)
				}
				if got := tr.batches.Load() - before; got != 1 {
					t.Fatalf("the insert and the savepoint took %d batches, want 1", got)
				}
				if _, err := sp.Exec(ctx, "INSERT INTO queued VALUES (2)"); err != nil {
					return err
				}
				end := sp.Commit
				if !tc.commit {
					if _, err := sp.Exec(ctx, "INSERT INTO queued VALUES (1)"); err == nil {
						t.Fatal("a duplicate went in")
					}
					end = sp.Rollback
				}
				if err := end(ctx); err != nil {
					return err
				}
				if _, err := sp.Exec(ctx, "SELECT 1"); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("a statement on the ended savepoint: %v, want ErrTxClosed", err)
				}
				if err := sp.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("a second end: %v, want ErrTxClosed", err)
				}
				_, err := tx.Exec(ctx, "INSERT INTO queued VALUES (3)")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := rows(t); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %v, want %v", got, tc.want)
			}
		})
	}
}

// queuedTable is a test database with an empty table queued (n int
// PRIMARY KEY), a pool of one connection whose batches tr counts, and
// rows, which reads the table's numbers in order.
func queuedTable(t *testing.T) (pool *pgxpool.Pool, tr *tracer, rows func(*testing.T) []int) {
	t.Helper()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(context.Background(), "CREATE TABLE queued (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	pool, tr = onePool(t, url)
	return pool, tr, func(t *testing.T) []int {
		t.Helper()
		r, err := admin.Query(context.Background(), "SELECT n FROM queued ORDER BY n")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(r, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
}
