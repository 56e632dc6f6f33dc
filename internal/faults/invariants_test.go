package faults_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
)

// TestCheckFindsEachViolation: a healthy run has no violation, and each
// way a superuser breaks the database around orangerail is found, by the
// check that owns it — both verifiers for the chain.
func TestCheckFindsEachViolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	executedOnce(t, b.lifecycle(t, "fault-checked"))
	if vs, err := faults.Check(ctx, b.admin, noteEffect); err != nil || len(vs) != 0 {
		t.Fatalf("a healthy run: %v %v", vs, err)
	}

	staged := b.engine.Call(ctx, agent, "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "fault-never-run"}`))
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s", staged.Status)
	}
	open := &engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: "c-open", Phase: engine.PhaseExecutionStarted,
		Action: "add_order_note", Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}}
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return engine.AppendAudit(ctx, tx, open)
	}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		// An effect nobody recorded, and a recorded one undone.
		`INSERT INTO order_notes (org_id, order_id, note) VALUES ('acme', 'o-1001', 'fault-ghost')`,
		`DELETE FROM order_notes WHERE note = 'fault-checked'`,
		// A pending approval marked consumed around the engine, with no
		// decision and no execution.
		`ALTER TABLE orangerail.approvals DISABLE TRIGGER approvals_lifecycle`,
		`ALTER TABLE orangerail.approvals DISABLE TRIGGER approvals_notify_decided`,
		`UPDATE orangerail.approvals SET status = 'consumed', decided_by = 'mallory', decided_at = now(), consumed_at = now() WHERE status = 'pending'`,
		// A counter below zero, and a key claimed but never answered.
		`ALTER TABLE orangerail.budget_counts DROP CONSTRAINT budget_counts_minute_calls_check`,
		`UPDATE orangerail.budget_counts SET minute_calls = -1 WHERE tenant_id = 'acme' AND action = 'add_order_note'`,
		`INSERT INTO orangerail.idempotency_keys (tenant_id, action, subject, key, input_digest, outcome, expires_at, claim, claimed_until)
		 VALUES ('acme', 'add_order_note', 'agent-7', 'k-1', '\x00', NULL, now() + interval '1 hour', gen_random_uuid(), now() - interval '1 minute')`,
	} {
		if _, err := b.admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// A sealed record rewritten: the chain breaks.
	if _, err := engine.SealTenant(ctx, b.admin, "acme"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`ALTER TABLE orangerail.audit DISABLE TRIGGER audit_refuse_update_delete`,
		`UPDATE orangerail.audit SET hash = sha256(hash) WHERE tenant_id = 'acme' AND seq = 2`,
	} {
		if _, err := b.admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	vs, err := faults.Check(ctx, b.admin, noteEffect)
	if err != nil {
		t.Fatal(err)
	}
	type found struct {
		kind   faults.Kind
		source string
	}
	var got []found
	for _, v := range vs {
		t.Log(v)
		got = append(got, found{v.Kind, v.Source})
	}
	for _, w := range []found{
		{faults.KindEffectWithoutRecord, "sql"},
		{faults.KindRecordWithoutEffect, "sql"},
		{faults.KindExecutionCount, "sql"},
		{faults.KindStuck, "sql"},
		{faults.KindNegativeCounter, "sql"},
		{faults.KindUnfinished, "go verifier"},
		{faults.KindUnfinished, "sql verifier"},
		{faults.KindUnexplained, "go verifier"},
		{faults.KindUnexplained, "sql verifier"},
		{faults.KindChainBroken, "go verifier"},
		{faults.KindChainBroken, "sql verifier"},
	} {
		if !slices.Contains(got, w) {
			t.Errorf("no %s violation from the %s check", w.kind, w.source)
		}
	}
}
