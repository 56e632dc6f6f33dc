package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestAuditorAccessIsAnOperatorRecord: an auditor granted, its password
// set, then revoked, is recorded in the tenant's chain as the owner's;
// both verifiers list the three records among the operators', naming the
// login, and the chain is whole. The runtime's login may not record one.
func TestAuditorAccessIsAnOperatorRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	record := func(conn database.TxBeginner, granted bool) error {
		return database.InTenant(ctx, conn, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return engine.RecordAuditorAccess(ctx, tx, "acme", "alice", granted, time.Now())
		})
	}
	if err := record(testdb.Pool(t, runtimeLogin(t, b)), true); errcode.Of(err) != errcode.BreakGlassRefused {
		t.Fatalf("the runtime's login recorded an auditor's access: %v", err)
	}
	if err := record(b.admin, true); err != nil {
		t.Fatal(err)
	}
	if err := database.InTenant(ctx, b.admin, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.RecordAuditorPasswordSet(ctx, tx, "acme", "alice", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if err := record(b.admin, false); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Seal(ctx, b.runtime); err != nil {
		t.Fatal(err)
	}
	type listed struct{ phase, operator, auditor, reason string }
	want := []listed{{"auditor_granted", "postgres", "alice", ""}, {"auditor_password_set", "postgres", "alice", ""}, {"auditor_revoked", "postgres", "alice", ""}}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !r.OK() {
		t.Fatalf("verify: %+v %v", r, err)
	}
	var goList []listed
	for _, d := range r.BreakGlass {
		goList = append(goList, listed{string(d.Phase), d.Operator, d.Auditor, d.Reason})
	}
	if !slices.Equal(goList, want) {
		t.Fatalf("Go verifier lists %+v, want %+v", goList, want)
	}
	var sqlList []listed
	err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := store.New(tx).AuditListBreakGlass(ctx, "acme") // orangerail.audit_break_glass
		for _, r := range rows {
			sqlList = append(sqlList, listed{r.Phase, r.Operator, r.Auditor, r.Reason})
		}
		return err
	})
	if err != nil || !slices.Equal(sqlList, want) {
		t.Fatalf("SQL verifier lists %+v (%v), want %+v", sqlList, err, want)
	}
}
