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
	problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 6 { // three tables, three statements
		t.Fatalf("unseeded datasource: %d problems, want 6:\n%v", len(problems), problems)
	}

	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if problems, err := cfg.CheckCatalog(ctx, conn); err != nil || len(problems) != 0 {
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
	problems, err = cfg.CheckCatalog(ctx, conn)
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
