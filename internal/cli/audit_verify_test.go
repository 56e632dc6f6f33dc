package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAuditVerifySaysWhatALoginBoundByRowSecurityCannotList: audit verify
// run by a login that cannot bypass Row Level Security (the schema's owner,
// no superuser) says that a chain whose tenant row and head were deleted
// is not listed, and an unknown --tenant says why it may be unknown; a
// superuser's run says neither, and finds such a chain.
func TestAuditVerifySaysWhatALoginBoundByRowSecurityCannotList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL, admin := testdb.NewOwned(t)
	runtime := testdb.RuntimePool(t, ownerURL)
	for _, tenant := range []string{"acme", "bystander"} {
		if err := database.InTenant(ctx, runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.AppendAudit(ctx, tx, &engine.Record{Tenant: tenant, At: time.Now(), CorrelationID: "c-1", Phase: engine.PhaseStaged,
				Action: "cancel_order", Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}})
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.SealTenant(ctx, runtime, tenant); err != nil {
			t.Fatal(err)
		}
	}
	superURL := admin.Config().ConnString()

	code, out, stderr := cli(t, "audit", "verify", "--database-url", ownerURL)
	if code != exitOK || !strings.Contains(out, "tenant acme: OK") || stderr != "audit verify: "+listingNotes[engine.ListingKnown]+"\n" {
		t.Fatalf("the owner's run: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", superURL); code != exitOK || stderr != "" || !strings.Contains(out, "tenant bystander: OK") {
		t.Fatalf("a superuser's run: exit %d\n%s%s", code, out, stderr)
	}

	if _, err := admin.Exec(ctx, `BEGIN;
		ALTER TABLE orangerail.audit_heads DISABLE TRIGGER USER;
		DELETE FROM orangerail.audit_heads WHERE tenant_id = 'acme';
		DELETE FROM orangerail.tenants WHERE id = 'acme';
		ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_advance_only;
		ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_delete;
		ALTER TABLE orangerail.audit_heads ENABLE ALWAYS TRIGGER audit_heads_refuse_truncate;
		COMMIT`); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "audit", "verify", "--database-url", superURL); code != exitFindings || stderr != "" || !strings.Contains(out, "tenant acme: ") {
		t.Fatalf("a superuser's run over the deleted chain: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = cli(t, "audit", "verify", "--database-url", ownerURL, "--tenant", "acme")
	if code != exitError || out != "" {
		t.Fatalf("the owner naming the deleted chain: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")
	if !strings.Contains(stderr, listingNotes[engine.ListingKnown]) {
		t.Fatalf("the owner naming the deleted chain: %q does not say why it may be unknown", stderr)
	}
	if code, _, stderr := cli(t, "audit", "verify", "--database-url", superURL, "--tenant", "nosuch"); code != exitError || strings.Contains(stderr, listingNotes[engine.ListingKnown]) {
		t.Fatalf("a superuser naming no tenant: exit %d, %q", code, stderr)
	}
}

// TestAuditVerifyAsAnAuditorLogin: an auditor login (orangerail auditor
// grant) runs audit verify with its own rights: it verifies the tenants
// granted to it, the signed checkpoints it may read with them, and no
// other tenant, says so on stderr, and finds a break in its chain; a login
// that is neither the runtime's member nor an auditor is told so, coded.
func TestAuditVerifyAsAnAuditorLogin(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	runtime := testdb.RuntimePool(t, url)
	admin := testdb.Pool(t, url)
	appendSealed(t, runtime, "acme", 3)
	appendSealed(t, runtime, "globex", 2)
	keyFile := filepath.Join(t.TempDir(), "checkpoint.key")
	code, vkey, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", keyFile)
	if code != exitOK {
		t.Fatalf("generate: exit %d %s", code, stderr)
	}
	vkey = strings.TrimSpace(vkey)
	if _, err := engine.SignCheckpoint(ctx, runtime, "acme", signerOf(t, keyFile), "orangerail.test/orders"); err != nil {
		t.Fatal(err)
	}
	auditor := fmt.Sprintf("auditor_%d", time.Now().UnixNano()%1e9)
	stranger := auditor + "_stranger"
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DELETE FROM orangerail.auditor_grants WHERE role_name = $1", auditor)
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+auditor)
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+stranger)
	})
	t.Setenv("AUDITOR_PASSWORD", "correct horse battery staple")
	if code, _, stderr = cli(t, "auditor", "grant", auditor, "--tenant", "acme", "--password-env", "AUDITOR_PASSWORD", "--database-url", url); code != exitOK {
		t.Fatalf("grant: exit %d %s", code, stderr)
	}
	auditorURL := testdb.WithUser(t, url, auditor, "correct horse battery staple")
	granted := "audit verify: " + listingNotes[engine.ListingGranted] + "\n"
	// The grant is the owner's record in acme's chain, sealed as a
	// server's sealer would.
	if _, err := engine.Seal(ctx, runtime); err != nil {
		t.Fatal(err)
	}
	// The grant set the login's password: the owner's record of that
	// follows the grant's.
	var grantedAt time.Time
	if err := admin.QueryRow(ctx, "SELECT at FROM orangerail.audit WHERE tenant_id = 'acme' AND seq = 4 AND phase = 'auditor_granted'").Scan(&grantedAt); err != nil {
		t.Fatal(err)
	}
	at := grantedAt.UTC().Format(time.RFC3339)

	code, out, stderr := cli(t, "audit", "verify", "--database-url", auditorURL, "--key", vkey, "--require-checkpoint")
	if want := "tenant acme: OK — 5 records, head at seq 5, 1 signed checkpoint(s) checked (the latest of size 3)\n" +
		"  2 operator record(s) by the database owner — break-glass decisions, settled executions, auditors granted or revoked or their passwords set (reported, not a failure):\n" +
		fmt.Sprintf("    seq 4  %s  auditor_granted  auditor %q  operator \"postgres\"\n", at, auditor) +
		fmt.Sprintf("    seq 5  %s  auditor_password_set  auditor %q  operator \"postgres\"\n", at, auditor); code != exitOK || out != want || stderr != granted {
		t.Fatalf("the auditor's run: exit %d\n%s%s\nwant\n%s", code, out, stderr, want)
	}
	code, out, stderr = cli(t, "audit", "verify", "--database-url", auditorURL, "--tenant", "globex")
	if code != exitError || out != "" {
		t.Fatalf("the auditor naming a tenant not granted: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")
	if !strings.Contains(stderr, listingNotes[engine.ListingGranted]) {
		t.Fatalf("the auditor naming a tenant not granted: %q does not say why it may be unknown", stderr)
	}

	// The auditor keeps the checkpoint and asks for proofs with its own
	// login: the granted tenant is its only one, and another is unknown.
	code, kept, stderr := cli(t, "audit", "checkpoint", "--database-url", auditorURL)
	if code != exitOK || !strings.HasPrefix(kept, "orangerail.test/orders/acme\n3\n") {
		t.Fatalf("the auditor's checkpoint: exit %d\n%s%s", code, kept, stderr)
	}
	proof := filepath.Join(t.TempDir(), "seq2.json")
	if code, _, stderr = cli(t, "audit", "prove", "--database-url", auditorURL, "--tenant", "acme", "--seq", "2", "--out", proof); code != exitOK {
		t.Fatalf("the auditor's proof: exit %d %s", code, stderr)
	}
	if code, out, stderr = cli(t, "audit", "check-proof", "--key", vkey, proof); code != exitOK || !strings.Contains(out, "OK: record 2 is in the tree of size 3") {
		t.Fatalf("the auditor's proof checked: exit %d\n%s%s", code, out, stderr)
	}
	for _, args := range [][]string{{"checkpoint", "--tenant", "globex"}, {"prove", "--tenant", "globex", "--seq", "1"}} {
		code, out, stderr = cli(t, append([]string{"audit"}, append(args, "--database-url", auditorURL)...)...)
		if code != exitError || out != "" || !strings.Contains(stderr, listingNotes[engine.ListingGranted]) {
			t.Fatalf("the auditor's %v of a tenant not granted: exit %d\n%s%s", args, code, out, stderr)
		}
		oneLine(t, stderr, "X_TENANT_UNKNOWN")
	}

	if _, err := admin.Exec(ctx, `ALTER TABLE orangerail.audit DISABLE TRIGGER USER;
		UPDATE orangerail.audit SET entry = entry || '\x20'::bytea WHERE tenant_id = 'acme' AND seq = 2;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_operator_guard`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "audit", "verify", "--database-url", auditorURL, "--tenant", "acme")
	if code != exitFindings || !strings.Contains(out, "tenant acme: FAILED") || !strings.Contains(out, "chain broken at seq 2") {
		t.Fatalf("the auditor's run over a tampered chain: exit %d\n%s", code, out)
	}

	// Its grant revoked, the auditor sees nothing: not "no records yet",
	// exit 0, but a run that could not verify, its metrics failed.
	if code, _, stderr = cli(t, "auditor", "revoke", auditor, "--tenant", "acme", "--database-url", url); code != exitOK {
		t.Fatalf("revoke: exit %d %s", code, stderr)
	}
	metrics := filepath.Join(t.TempDir(), "verify.prom")
	code, out, stderr = cli(t, "audit", "verify", "--database-url", auditorURL, "--metrics-file", metrics)
	if code != exitError || out != "" || !strings.Contains(stderr, "granted no tenant") {
		t.Fatalf("an auditor granted nothing: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_TENANT_UNKNOWN")
	if prom, err := os.ReadFile(metrics); err != nil || !strings.Contains(string(prom), "orangerail_audit_verify_success 0") {
		t.Fatalf("the metrics of an auditor granted nothing: %v\n%s", err, prom)
	}

	if _, err := admin.Exec(ctx, "CREATE ROLE "+stranger+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = cli(t, "audit", "verify", "--database-url", testdb.WithUser(t, url, stranger, ""))
	if code != exitError || out != "" {
		t.Fatalf("a login of neither role: exit %d\n%s%s", code, out, stderr)
	}
	oneLine(t, stderr, "X_DATABASE_ROLE_MISSING")
}
