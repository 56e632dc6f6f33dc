package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/testdb"
)

// TestInitDraftPassesConfigCheck runs init and config check as a person
// would: the draft it writes is accepted against the same database.
func TestInitDraftPassesConfigCheck(t *testing.T) {
	t.Parallel()
	url := testdb.NewEmpty(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `
		CREATE TABLE customers (id bigint PRIMARY KEY, org_id text NOT NULL, name text);
		CREATE TABLE orders (id text PRIMARY KEY, org_id text NOT NULL, status text,
			customer_id bigint REFERENCES customers (id), created_at timestamptz);
		-- As a deployment must: serve reads them as the runtime, and
		-- config check checks as serve does.
		GRANT SELECT ON customers, orders TO orangerail_runtime;`)
	conn.Close(context.Background()) //nolint:errcheck,gosec // the schema is made; a close error changes nothing
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "draft", "orangerail.yaml")
	code, stdout, stderr := cli(t, "init", "--database-url", url, "--service", "shop", "-o", path)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "wrote "+path) {
		t.Fatalf("init -o: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	written, err := os.ReadFile(path) //nolint:gosec // G304: the test's own file
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = cli(t, "init", "--database-url", url, "--service", "shop")
	if code != 0 || stdout != string(written) {
		t.Fatalf("init to stdout: exit %d, stderr %s; stdout differs from the file:\n%s\n---\n%s", code, stderr, stdout, written)
	}
	if !strings.Contains(stdout, "orders_customers: {from: orders.customer_id, to: customers.id}") {
		t.Fatalf("the draft has no link from the foreign key:\n%s", stdout)
	}
	code, stdout, stderr = cli(t, "config", "check", path, "--database-url", url)
	if code != 0 || !strings.Contains(stdout, "0 problem(s); catalog checked") {
		t.Fatalf("config check: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	code, _, stderr = cli(t, "init", "--database-url", url, "--tables", "orders,nope")
	if code != exitError {
		t.Fatalf("an unknown table: exit %d, want %d", code, exitError)
	}
	oneLine(t, stderr, "X_SCAFFOLD_TABLE_UNKNOWN")
	if !strings.Contains(stderr, `"nope"`) {
		t.Fatalf("stderr does not name the table: %s", stderr)
	}
}

func TestInitRefusesAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("postgres://postgres:s3cret@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", testdb.FreePort(t))
	code, stdout, stderr := cli(t, "init", "--database-url", url)
	if code != exitError || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	oneLine(t, stderr, "X_DATABASE_UNREACHABLE")
	if strings.Contains(stderr, "s3cret") {
		t.Fatalf("stderr leaks the password: %s", stderr)
	}
}

// TestInitRefusesAServiceNameThatIsNone: a --service the config's pattern
// does not take is refused (X_USAGE, naming the one it would fit), as
// policy compile refuses it, not written as another name without a word;
// nothing is read or written.
func TestInitRefusesAServiceNameThatIsNone(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "draft.yaml")
	for _, name := range []string{"Bad Name", "orders_v2", "-x"} {
		code, stdout, stderr := cli(t, "init", "--database-url", "postgres://127.0.0.1:1/x", "--service", name, "-o", out)
		if code != exitError || stdout != "" {
			t.Fatalf("%q: exit %d, stdout %q", name, code, stdout)
		}
		oneLine(t, stderr, "X_USAGE")
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%q: the draft was written", name)
		}
	}
}
