package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAuditSettle: an execution left unfinished fails `audit verify` until
// the schema's owner settles it with `audit settle` — the runtime's login
// is refused, coded, as is an execution not unfinished — after which verify
// exits 0 and lists the settle among the operator's records.
func TestAuditSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL := testdb.New(t) // a superuser's: as the owner's
	runtime := testdb.RuntimePool(t, ownerURL)
	admin := testdb.Pool(t, ownerURL)
	login := runtimeLogin(t, admin)
	started := time.Now()
	if err := database.InTenant(ctx, runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: "c-7", Phase: engine.PhaseExecutionStarted,
			Action: "create_label", Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
	}); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", ownerURL); code != exitFindings || !strings.Contains(out, `correlation "c-7"`) ||
		!strings.Contains(out, "orangerail audit settle") {
		t.Fatalf("verify before settling: exit %d\n%s", code, out)
	}
	// A deployment whose executions are over 7.5s after they start (its
	// settle's transaction bounded by the same limits).
	deployment := ontologytest.Apply(t, orders.Config, ontologytest.SetYAML("limits", "{lock_timeout: 500ms, statement_timeout: 1s}"))
	cfg, err := ontology.Parse(deployment)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "orangerail.yaml")
	if err := os.WriteFile(config, deployment, 0o600); err != nil {
		t.Fatal(err)
	}
	settle := func(url string, args ...string) (int, string, string) {
		return cli(t, append([]string{"audit", "settle", "--database-url", url, "--tenant", "acme", "--config", config}, args...)...)
	}
	code, _, stderr := settle(ownerURL, "c-7", "--outcome", "failed", "--reason", "the carrier has no such label")
	if code != exitError {
		t.Fatalf("an execution that may still be running was settled: exit %d %s", code, stderr)
	}
	oneLine(t, stderr, "X_EXECUTION_MAY_BE_RUNNING")
	// Another settle of it holds its lock past the config's lock_timeout:
	// refused as coded, the database's words after the code.
	holder, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT orangerail.settle_lock('acme', 'c-7')"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = settle(ownerURL, "c-7", "--outcome", "failed", "--reason", "the carrier has no such label")
	_ = holder.Rollback(ctx)
	if code != exitError || !strings.Contains(stderr, "Postgres ended the transaction at its limits") {
		t.Fatalf("a settle that waited on another's lock: exit %d %s", code, stderr)
	}
	oneLine(t, stderr, "X_DATABASE_TIMEOUT")
	time.Sleep(time.Until(started.Add(engine.ExecutionBound(cfg.Limits))))
	code, _, stderr = settle(testdb.WithUser(t, ownerURL, login, "pw"), "c-7", "--outcome", "failed", "--reason", "the carrier has no such label")
	if code != exitError {
		t.Fatalf("the runtime's login settled: exit %d %s", code, stderr)
	}
	oneLine(t, stderr, "X_BREAK_GLASS_REFUSED")
	// A login of neither role may not even name the tenant: refused as
	// coded, never with the database's words.
	code, _, stderr = settle(testdb.WithUser(t, ownerURL, makeLogin(t, admin, ""), "pw"), "c-7", "--outcome", "failed", "--reason", "x")
	if code != exitError || strings.Contains(stderr, "SQLSTATE") {
		t.Fatalf("a login of neither role settled: exit %d %s", code, stderr)
	}
	oneLine(t, stderr, "X_BREAK_GLASS_REFUSED")
	code, _, stderr = settle(ownerURL, "c-8", "--outcome", "failed", "--reason", "x")
	if code != exitError {
		t.Fatalf("an unknown execution settled: exit %d", code)
	}
	oneLine(t, stderr, "X_EXECUTION_NOT_UNFINISHED")
	// Two operators, each twice, settle it at once with opposite
	// outcomes: one settles it, the others are told it is settled.
	outcomes := []string{"failed", "succeeded", "failed", "succeeded"}
	type answer struct {
		code        int
		out, stderr string
	}
	answers := make([]answer, len(outcomes))
	var wg sync.WaitGroup
	for i, outcome := range outcomes {
		wg.Go(func() {
			code, out, stderr := settle(ownerURL, "c-7", "--outcome", outcome, "--reason", "the carrier has no such label")
			answers[i] = answer{code, out, stderr}
		})
	}
	wg.Wait()
	settled := ""
	for i, a := range answers {
		switch {
		case a.code == exitOK && settled == "" &&
			strings.Contains(a.out, `settled: execution c-7 of "create_label" in tenant acme, approval none: `+outcomes[i]):
			settled = outcomes[i]
		case a.code == exitError:
			oneLine(t, a.stderr, "X_EXECUTION_NOT_UNFINISHED")
		default:
			t.Fatalf("settle %d of 4 (%s): exit %d\n%s%s", i+1, outcomes[i], a.code, a.out, a.stderr)
		}
	}
	if settled == "" {
		t.Fatalf("no settle of four succeeded: %+v", answers)
	}
	if code, out, _ := cli(t, "audit", "verify", "--database-url", ownerURL); code != exitOK || strings.Count(out, "execution_settled") != 1 ||
		!strings.Contains(out, `reason "the carrier has no such label"  outcome "`+settled+`"`) {
		t.Fatalf("verify after settling: exit %d\n%s", code, out)
	}
}
