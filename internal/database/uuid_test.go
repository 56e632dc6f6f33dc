package database_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestUUIDsRoundTrip: an approval id goes to Postgres and back unchanged,
// NULL included, in each of pgx's query exec modes — binary (the runtime's
// prepared statements) and text (the simple protocol a pooler may need).
func TestUUIDsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	id := uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")
	for _, mode := range execModes {
		t.Run(mode, func(t *testing.T) {
			pool := openInMode(t, url, mode)
			var (
				got, some *uuid.UUID
				text      string
				plain     uuid.UUID
			)
			err := pool.QueryRow(ctx, "SELECT $1::uuid, $1::uuid::text, $2::uuid, $3::uuid", id, id, (*uuid.UUID)(nil)).Scan(&plain, &text, &got, &some)
			if err != nil || plain != id || text != id.String() || got == nil || *got != id || some != nil {
				t.Fatalf("round trip: %v %q %v %v (%v)", plain, text, got, some, err)
			}
			// NULL into a UUID leaves it as it was, as uuid.UUID's own
			// Scan always did.
			if err := pool.QueryRow(ctx, "SELECT NULL::uuid").Scan(&plain); err != nil || plain != id {
				t.Fatalf("NULL into a uuid.UUID: %v (%v)", plain, err)
			}
			if err := pool.QueryRow(ctx, "SELECT $1::uuid", uuid.Nil).Scan(&plain); err != nil || plain != uuid.Nil {
				t.Fatalf("the nil UUID: %v (%v)", plain, err)
			}
		})
	}
}

// TestUUIDsCostNothing: a runtime connection writes an approval id into a
// statement and reads one from a row without allocating — sixteen bytes
// copied, not a string formatted and parsed through database/sql's Valuer
// and Scanner, for every id of every statement.
func TestUUIDsCostNothing(t *testing.T) {
	ctx := context.Background()
	pool := testdb.RuntimePool(t, testdb.New(t))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	id := uuid.New()
	buf := make([]byte, 0, 64)
	encode := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id)
	scan := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &id)
	var out uuid.UUID
	var arg any = id // as a statement's arguments hold it
	if n := testing.AllocsPerRun(100, func() {
		b, err := encode.Encode(arg, buf[:0])
		if err != nil {
			t.Fatal(err)
		}
		if err := scan.Scan(b, &out); err != nil || out != id {
			t.Fatalf("read back %v (%v)", out, err)
		}
	}); n != 0 {
		t.Fatalf("an id written and read allocates %v times, want 0", n)
	}
	// A nullable id, as sqlc passes it: a *uuid.UUID, written by pgx's
	// whole path for an argument (a nil pointer is NULL before any plan).
	var none *uuid.UUID
	for _, tc := range []struct {
		arg  *uuid.UUID
		want []byte
	}{{&id, id[:]}, {none, nil}} {
		if n := testing.AllocsPerRun(100, func() {
			b, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, tc.arg, buf[:0])
			if err != nil || !bytes.Equal(b, tc.want) || (b == nil) != (tc.want == nil) {
				t.Fatalf("%v written as %x (%v), want %x", tc.arg, b, err, tc.want)
			}
		}); n != 0 {
			t.Fatalf("a nullable id (%v) written allocates %v times, want 0", tc.arg, n)
		}
	}
}
