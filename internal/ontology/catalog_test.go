package ontology

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestCheckCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	cfg, err := Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Before the seed, nothing the example names exists.
	_, problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 6 { // three tables, three statements
		t.Fatalf("unseeded datasource: %d problems, want 6:\n%v", len(problems), problems)
	}

	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, problems, err := cfg.CheckCatalog(ctx, conn); err != nil || len(problems) != 0 {
		t.Fatalf("seeded datasource: %v, %v", problems, err)
	}

	broken := strings.NewReplacer(
		"fields: [id, name, email, created_at]", "fields: [id, name, mail, created_at]",
		"table: products", "table: wares",
		"SET status = 'cancelled'", "SET state = 'cancelled'",
	).Replace(string(orders.Config))
	cfg, err = Parse([]byte(broken))
	if err != nil {
		t.Fatal(err)
	}
	_, problems, err = cfg.CheckCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
		if !strings.HasPrefix(p.Message, DiagnosticSchemaMismatch+": ") {
			t.Errorf("%s: message %q lacks the diagnostic", p.Path, p.Message)
		}
	}
	want := []string{"actions.cancel_order.execute.sql", "objects.customer.fields.2", "objects.product.table"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v\n%v", paths, want, problems)
	}
}

// TestReadCatalogTypes holds each column to the value kind its type's
// values are checked as: a domain's base type (through a domain over a
// domain), an integer's and a float's size, and every other type as other.
func TestReadCatalogTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		CREATE DOMAIN count AS integer CHECK (VALUE >= 0);
		CREATE DOMAIN small_count AS count;
		CREATE TYPE mood AS ENUM ('happy', 'sad');
		CREATE SCHEMA other;
		CREATE TYPE other.int4 AS (x text); -- a type named like a built-in one
		CREATE TABLE other.things (
			org_id text, v varchar(10), c char(2), n2 smallint, n4 integer, n8 bigint, d small_count,
			amount numeric(12, 2), ratio real, score double precision, ok boolean,
			at timestamptz, local_at timestamp, day date, id uuid, addr inet, m mood, tags text[], fake other.int4
		)`); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(`service: s
objects:
  thing: {table: other.things, key: id, tenant_column: org_id, fields: [id]}
  missing: {table: nowhere, key: id, tenant_column: org_id, fields: [id]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := cfg.ReadCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Column{
		"org_id": {Kind: ValueText}, "v": {Kind: ValueText}, "c": {Kind: ValueText},
		"n2": {Kind: ValueInteger, Bits: 16}, "n4": {Kind: ValueInteger, Bits: 32}, "n8": {Kind: ValueInteger, Bits: 64},
		"d": {Kind: ValueInteger, Bits: 32}, "amount": {Kind: ValueNumeric},
		"ratio": {Kind: ValueFloat, Bits: 32}, "score": {Kind: ValueFloat, Bits: 64}, "ok": {Kind: ValueBoolean},
		"at": {Kind: ValueTimestamptz}, "local_at": {Kind: ValueTimestamp}, "day": {Kind: ValueDate}, "id": {Kind: ValueUUID},
		"addr": {Kind: ValueOther}, "m": {Kind: ValueOther}, "tags": {Kind: ValueOther}, "fake": {Kind: ValueOther},
	}
	for field, w := range want {
		got, ok := cat.Column("thing", field)
		if !ok || got.Kind != w.Kind || got.Bits != w.Bits || got.TypeOID == 0 {
			t.Errorf("column %s = %+v (found %v), want kind %s, %d bits", field, got, ok, w.Kind, w.Bits)
		}
	}
	if _, ok := cat.Column("thing", "nothing"); ok {
		t.Error("a column the table lacks was found")
	}
	if _, ok := cat.Column("missing", "id"); ok {
		t.Error("a column of a table that does not exist was found")
	}
}
