package engine_test

// Regression tests for the findings of the adversarial review: each failed
// on the code the review tried.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
)

// TestForgedApprovalNeitherRunsNorVerifiesClean is finding 4: the runtime
// login inserted an approval already 'approved', the agent's poll executed
// it, and both verifiers stayed clean. Now the runtime cannot write
// approvals at all; a row written around orangerail (here by the owner)
// does not execute, whether its digest is zero or right; and both
// verifiers report the approval and the refusal that followed it.
func TestForgedApprovalNeitherRunsNorVerifiesClean(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	const forge = `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash,
			status, decided_by, decided_at, expires_at)
		SELECT $1, 'acme', 'cancel_order', 'agent-7', '{"order_id":"o-1001","reason":"x"}', $2, $3,
			'approved', 'alice@example.com', now(), now() + interval '1 hour'`
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	var definition []byte
	if err := b.admin.QueryRow(ctx, "SELECT definition_hash FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&definition); err != nil {
		t.Fatal(err)
	}

	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, forge, uuid.New(), make([]byte, 32), definition)
		return err
	})
	if sqlState(err) != "42501" {
		t.Fatalf("runtime insert of an approved approval = %v, want permission denied", err)
	}

	right := engine.InputDigest(b.engine, "acme", "cancel_order", []byte(`{"order_id":"o-1001","reason":"x"}`))
	forged := map[string][]byte{"zero digest": make([]byte, 32), "right digest": right}
	var ids []uuid.UUID
	for name, digest := range forged {
		id := uuid.New()
		ids = append(ids, id)
		if _, err := b.admin.Exec(ctx, forge, id, digest, definition); err != nil {
			t.Fatal(err)
		}
		out := b.engine.Check(ctx, support("acme"), id.String())
		want(t, out, engine.StatusSignatureMismatch)
		if got := phases(t, b.testBundle, "acme", id.String()); !slices.Equal(got, []string{"signature_mismatch"}) {
			t.Fatalf("%s: phases %v", name, got)
		}
	}
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("a forged approval executed")
	}

	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || r.OK() {
		t.Fatalf("verify = %+v %v, want findings", r, err)
	}
	var approvals, executions []uuid.UUID
	for _, u := range r.UnexplainedApprovals {
		approvals = append(approvals, u.ApprovalID)
		if !slices.Equal(u.Missing, []engine.Phase{engine.PhaseStaged, engine.PhaseApproved}) {
			t.Errorf("approval %s missing %v", u.ApprovalID, u.Missing)
		}
	}
	for _, u := range r.UnexplainedExecutions {
		executions = append(executions, u.ApprovalID)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	for _, got := range [][]uuid.UUID{approvals, executions} {
		slices.SortFunc(got, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		if !slices.Equal(got, ids) {
			t.Fatalf("reported %v, want exactly the forged %v", got, ids)
		}
	}

	// An auditor's SQL alone finds the same.
	auditor := auditorLogin(t, b.testBundle, "acme")
	var unexplained, unexplainedRuns int
	if err := auditor.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals_unexplained('acme')").Scan(&unexplained); err != nil {
		t.Fatal(err)
	}
	if err := auditor.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_unexplained_executions('acme')").Scan(&unexplainedRuns); err != nil {
		t.Fatal(err)
	}
	if unexplained != len(ids) || unexplainedRuns != len(ids) {
		t.Fatalf("SQL: %d unexplained approvals and %d executions, want %d each", unexplained, unexplainedRuns, len(ids))
	}

	// The approval staged and decided through the engine is explained.
	approve(t, b.engine, "acme", staged.ApprovalID.String())
	want(t, b.engine.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	r, err = engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || len(r.UnexplainedApprovals) != len(ids) || len(r.UnexplainedExecutions) != len(ids) {
		t.Fatalf("after a governed execution: %+v %v", r, err)
	}
}

// TestApprovalChangesCarryTheirRecord: the functions refuse a record that
// does not describe the change they make, so nothing can change an
// approval and write something else in the chain.
func TestApprovalChangesCarryTheirRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := uuid.New()
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return stageApproval(ctx, tx, "acme", id, `{}`)
	}); err != nil {
		t.Fatal(err)
	}
	wrong := map[string]func(*engine.Record){
		"another phase":    func(r *engine.Record) { r.Phase = engine.PhaseRejected },
		"another approval": func(r *engine.Record) { other := uuid.New(); r.ApprovalID = &other },
		"another actor":    func(r *engine.Record) { r.Actor.Subject = "mallory" },
		"another action":   func(r *engine.Record) { r.Action = "refund_order" },
		"no approval":      func(r *engine.Record) { r.ApprovalID = nil },
	}
	for name, edit := range wrong {
		rec := record("acme", engine.PhaseApproved, id.String())
		rec.ApprovalID, rec.Actor = &id, engine.Actor{Subject: "alice", Kind: engine.ActorHuman}
		edit(rec)
		entry, err := rec.Entry()
		if err != nil {
			t.Fatal(err)
		}
		err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := store.New(tx).ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: id, Status: store.ApprovalApproved, DecidedBy: "alice", Entry: entry})
			return err
		})
		if sqlState(err) != "ORA05" {
			t.Errorf("%s: decide = %v, want ORA05", name, err)
		}
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || !r.OK() {
		t.Fatalf("verify = %+v %v", r, err)
	}
}

// TestApprovalDecisionIsAPersons: approval_decide moves an approval only
// on a record of a person's decision. A runtime that records the
// requesting agent approving its own call — or the system approving it —
// must not get an approval approval_consume then hands over for execution.
func TestApprovalDecisionIsAPersons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, actor := range []engine.Actor{
		{Subject: "agent-7", Kind: engine.ActorAgent}, // the requester itself
		{Subject: "sweeper", Kind: engine.ActorSystem},
	} {
		id := uuid.New()
		if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			return stageApproval(ctx, tx, "acme", id, `{}`)
		}); err != nil {
			t.Fatal(err)
		}
		rec := record("acme", engine.PhaseApproved, id.String())
		rec.ApprovalID, rec.Actor, rec.Input = &id, actor, nil
		entry, err := rec.Entry()
		if err != nil {
			t.Fatal(err)
		}
		err = database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := store.New(tx).ApprovalDecide(ctx, &store.ApprovalDecideParams{ID: id, Status: store.ApprovalApproved,
				DecidedBy: actor.Subject, Entry: entry}); err != nil {
				return err
			}
			_, _, err := store.New(tx).ApprovalConsume(ctx, "acme", id)
			return err
		})
		if sqlState(err) != "ORA05" {
			t.Errorf("an approval decided by %s %q: decide and consume = %v, want ORA05", actor.Kind, actor.Subject, err)
		}
	}
}

// TestRequiredPhasesMatchSQL holds the Go table of the records each status
// needs and orangerail.approval_required_phases to the same table.
func TestRequiredPhasesMatchSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, status := range append(store.ApprovalStatuses(), "unknown") {
		var names []string
		if err := b.admin.QueryRow(context.Background(), "SELECT orangerail.approval_required_phases($1)", status).Scan(&names); err != nil {
			t.Fatal(err)
		}
		var goNames []string
		for _, p := range engine.RequiredPhases(status) {
			goNames = append(goNames, string(p))
		}
		if !slices.Equal(names, goNames) {
			t.Errorf("%s: SQL %v, Go %v", status, names, goNames)
		}
	}
}

// TestApproverSeesTheCanonicalInput is finding 5: JSON allows CR, LF and
// TAB between tokens, so an input laid out to overwrite itself on a
// terminal was stored and shown as sent. The approval now keeps the
// canonical form, the bytes its digest covers; an oversized input is
// refused before it is parsed, and the refusal is recorded.
func TestApproverSeesTheCanonicalInput(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	spoof := "{\"order_id\":\"o-1001\",\r    \"reason\":\"Cancel o-1002 only\"}"
	out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(spoof))
	want(t, out, engine.StatusApprovalPending)
	const canonical = `{"order_id":"o-1001","reason":"Cancel o-1002 only"}`
	var stored string
	if err := b.admin.QueryRow(ctx, "SELECT input::text FROM orangerail.approvals WHERE id = $1", out.ApprovalID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != canonical {
		t.Fatalf("stored %q, want %q", stored, canonical)
	}
	v, err := b.engine.ShowApproval(ctx, "acme", out.ApprovalID.String())
	if err != nil || string(v.Input) != canonical {
		t.Fatalf("shown %s %v", v.Input, err)
	}

	padded := `{"order_id":"o-1001",` + strings.Repeat(" ", 900<<10) + `"reason":"x"}`
	out = b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(padded))
	want(t, out, engine.StatusInvalidInput)
	if out.Code != errcode.InputTooLarge || out.CorrelationID == "" {
		t.Fatalf("oversized input: code %q, correlation %q", out.Code, out.CorrelationID)
	}
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"invalid_input"}) {
		t.Fatalf("phases %v", got)
	}
	var approvals int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&approvals); err != nil || approvals != 1 {
		t.Fatalf("%d approvals (%v), want only the first", approvals, err)
	}

	// The limit is the config's.
	raised := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("limits.max_input_bytes", 1<<20))
	want(t, raised.Call(ctx, support("acme"), "cancel_order", json.RawMessage(padded)), engine.StatusApprovalPending)
	verifyClean(t, b.testBundle, "acme")
}

// TestNULIsRefusedAtItsPath is finding 7: a U+0000 anywhere in an input
// ended in audit_blocked with no record, so an agent could make attempts
// that left no trace. It is now invalid input at its path, refused before
// anything is staged, and recorded.
func TestNULIsRefusedAtItsPath(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	cases := []struct {
		input string
		path  string
	}{
		{`{"order_id": "o-1001", "reason": "a\u0000b"}`, "/reason"},
		{`{"order_id": "o-\u0000", "reason": "x"}`, "/order_id"},
		{`{"order_id": "o-1001", "reason": "x", "k\u0000": 1}`, "/k\u0000"},
	}
	for _, tc := range cases {
		out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(tc.input))
		want(t, out, engine.StatusInvalidInput)
		if out.Code != errcode.InputInvalid || len(out.Issues) == 0 || out.Issues[0].Path != tc.path {
			t.Fatalf("%s: code %q issues %v", tc.input, out.Code, out.Issues)
		}
		if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"invalid_input"}) {
			t.Fatalf("%s: phases %v", tc.input, got)
		}
	}
	var approvals int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&approvals); err != nil || approvals != 0 {
		t.Fatalf("%d approvals staged (%v)", approvals, err)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestAuditTextWithNULIsStored: an operator's text (an error) that carries
// a U+0000 is recorded with it spelled out, not refused by jsonb.
func TestAuditTextWithNULIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := record("acme", engine.PhaseExecutionFailed, "c-nul")
	rec.Error = "upstream said a\x00b"
	err := database.InTenant(context.Background(), b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		err := engine.AppendAudit(context.Background(), tx, rec)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if err := b.admin.QueryRow(context.Background(), "SELECT convert_from(entry, 'UTF8')::jsonb->>'error' FROM orangerail.audit").Scan(&text); err != nil {
		t.Fatal(err)
	}
	if text != `upstream said a\u0000b` {
		t.Fatalf("error text %q", text)
	}
}

// TestBackfilledRecordsAreJudgedInChainOrder: the records an execution
// lacks, inserted afterwards by the table's owner with ids chosen below the
// execution's (the id column is no part of what the chain covers), sit
// after the execution in the chain once sealed. Both verifiers judge the
// relations in chain order, so the execution stays unexplained — they
// compared ids, and found nothing missing.
func TestBackfilledRecordsAreJudgedInChainOrder(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	var definition []byte
	if err := b.admin.QueryRow(ctx, "SELECT definition_hash FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&definition); err != nil {
		t.Fatal(err)
	}
	// An approval written around orangerail: its poll is refused, and the
	// refusal (an execution's record) names it with nothing before it.
	id := uuid.New()
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash,
			status, decided_by, decided_at, expires_at)
		SELECT $1, 'acme', 'cancel_order', 'agent-7', '{"order_id":"o-1001","reason":"x"}', $2, $3,
			'approved', 'alice@example.com', now(), now() + interval '1 hour'`, id, make([]byte, 32), definition); err != nil {
		t.Fatal(err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id.String()), engine.StatusSignatureMismatch)
	if _, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil {
		t.Fatal(err)
	}
	unexplained := func(when string) {
		t.Helper()
		r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
		if err != nil || len(r.UnexplainedExecutions) != 1 || r.UnexplainedExecutions[0].ApprovalID != id {
			t.Fatalf("%s: the Go verifier's unexplained executions %+v (%v), want the forged approval's", when, r, err)
		}
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_unexplained_executions('acme') WHERE approval_id = $1", id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: SQL's unexplained executions of the forged approval: %d (%v), want 1", when, n, err)
		}
	}
	unexplained("before the back-fill")

	// The owner back-fills the staged and approved records, dated an hour
	// earlier, under ids below every record's, and lets them be sealed.
	at := time.Now().UTC().Add(-time.Hour)
	for i, rec := range []struct{ phase, kind, subject string }{{"staged", "agent", "agent-7"}, {"approved", "human", "alice@example.com"}} {
		entry := fmt.Sprintf(`{"action":"cancel_order","actor":{"kind":%q,"subject":%q},"approval_id":%q,"at":%q,"correlation_id":%q,"dev_mode":false,"phase":%q,"tenant":"acme","v":1}`,
			rec.kind, rec.subject, id, at.Add(time.Duration(i)*time.Second).Format("2006-01-02T15:04:05.000000Z"), id, rec.phase)
		if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.audit (id, tenant_id, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id)
			OVERRIDING SYSTEM VALUE
			SELECT $1, c.tenant_id, $2, c.at, c.correlation_id, c.phase, c.action, c.actor, c.actor_kind, c.dev_mode, c.approval_id
			FROM orangerail.audit_entry_columns($2) c`, -10+i, []byte(entry)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil {
		t.Fatal(err)
	}
	var chain []string
	rows, err := b.admin.Query(ctx, "SELECT phase FROM orangerail.audit WHERE tenant_id = 'acme' AND approval_id = $1 ORDER BY seq", id)
	if err != nil {
		t.Fatal(err)
	}
	if chain, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(chain, []string{"signature_mismatch", "staged", "approved"}) {
		t.Fatalf("the forged approval's records in chain order: %v (%v)", chain, err)
	}
	unexplained("after the back-fill")
}
