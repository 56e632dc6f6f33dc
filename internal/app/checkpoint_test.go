package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestCheckpointKeyOthersMayReadIsWarned: a checkpoint signing key file
// its group or others may read — whoever reads it signs checkpoints as
// the server — is warned of in the host log as the server opens, naming
// the file and its mode, never the key; one only its owner reads is not.
// Not refused: a Kubernetes secret is mounted 0644 by default.
func TestCheckpointKeyOthersMayReadIsWarned(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	if _, err := testdb.Pool(t, url).Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	skey, _, err := checkpoint.GenerateKey("audit.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode   os.FileMode
		warned bool
	}{{0o644, true}, {0o640, true}, {0o600, false}, {0o400, false}} {
		file := filepath.Join(t.TempDir(), "checkpoint.key")
		if err := os.WriteFile(file, []byte(skey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, tc.mode); err != nil {
			t.Fatal(err)
		}
		var log logbuf.Buffer
		cfg := ontologytest.Parse(t, orders.Config, ontologytest.SetYAML("audit.checkpoint", "{key_file: "+file+"}"),
			ontologytest.SetYAML("identity", `{oidc: {issuer: "http://127.0.0.1:1", audience: orangerail, tenant_claim: org_id}}`))
		rt, err := Open(context.Background(), Settings{Config: cfg, DatabaseURL: url, Serve: true, SweepEvery: time.Hour,
			Logger: slog.New(slog.NewJSONHandler(&log, nil))})
		if err != nil {
			t.Fatalf("mode %v: %v", tc.mode, err)
		}
		rt.Close()
		got := log.String()
		if warned := strings.Contains(got, `"msg":"audit.checkpoint.key_file may be read by other users of this host`); warned != tc.warned ||
			(warned && !strings.Contains(got, `"mode":"`+tc.mode.String()+`"`)) || strings.Contains(got, skey) {
			t.Errorf("mode %v: warned %v, want %v:\n%s", tc.mode, warned, tc.warned, got)
		}
	}
}

// TestAStatementOfEveryTenantIsWarned: serve warns, as it opens, of an
// action's statement that never reads the caller's tenant, at its path;
// of the example's, each kept to its tenant, it warns of none.
func TestAStatementOfEveryTenantIsWarned(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	if _, err := testdb.Pool(t, url).Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	identity := ontologytest.SetYAML("identity", `{oidc: {issuer: "http://127.0.0.1:1", audience: orangerail, tenant_claim: org_id}}`)
	for _, tc := range []struct {
		edits  []ontologytest.Edit
		warned bool
	}{
		{[]ontologytest.Edit{identity}, false},
		{[]ontologytest.Edit{identity, ontologytest.Set("actions.cancel_order.execute.sql", "UPDATE orders SET status = 'cancelled' WHERE id = :order_id")}, true},
	} {
		var log logbuf.Buffer
		rt, err := Open(context.Background(), Settings{Config: ontologytest.Parse(t, orders.Config, tc.edits...), DatabaseURL: url, Serve: true,
			SweepEvery: time.Hour, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rt.Close()
		got := log.String()
		warned := strings.Contains(got, `"msg":"the statement never reads the caller's tenant`) && strings.Contains(got, `"path":"actions.cancel_order.execute.sql"`)
		if warned != tc.warned || strings.Count(got, "never reads the caller's tenant") > 1 {
			t.Errorf("warned %v, want %v:\n%s", warned, tc.warned, got)
		}
	}
}
