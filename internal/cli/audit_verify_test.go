package cli

import (
	"context"
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
	if code != exitOK || !strings.Contains(out, "tenant acme: OK") || stderr != "audit verify: "+narrowListing+"\n" {
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
	if !strings.Contains(stderr, narrowListing) {
		t.Fatalf("the owner naming the deleted chain: %q does not say why it may be unknown", stderr)
	}
	if code, _, stderr := cli(t, "audit", "verify", "--database-url", superURL, "--tenant", "nosuch"); code != exitError || strings.Contains(stderr, narrowListing) {
		t.Fatalf("a superuser naming no tenant: exit %d, %q", code, stderr)
	}
}
