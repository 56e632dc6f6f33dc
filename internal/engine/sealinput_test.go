package engine_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// sealedEngine serves the example with sealed inputs and a 90-day
// retention, on the clock now.
func sealedEngine(t *testing.T, b *exampleBundle, now func() time.Time) *engine.Engine {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Set("approvals.seal_inputs", true), ontologytest.Set("approvals.retention", "90d"))
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: b.key, Logger: quiet, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// rowsHolding counts, in every table of the orangerail schema, the rows
// whose text (bytea as hex) holds marker, or whose audit entry bytes do.
func rowsHolding(t *testing.T, b *exampleBundle, marker string) int {
	t.Helper()
	ctx := context.Background()
	rows, err := b.admin.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'orangerail' AND table_type = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables %v: %v", tables, err)
	}
	total := 0
	for _, table := range tables {
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail."+pgx.Identifier{table}.Sanitize()+" t WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0",
			marker, hex.EncodeToString([]byte(marker))).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	var n int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE position(convert_to($1, 'UTF8') IN entry) > 0", marker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return total + n
}

func TestSealedInputs(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	sealed := sealedEngine(t, b, nil)

	// The scan finds an input stored in plaintext: it can fail.
	plain := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "plain-marker-5521"}`))
	want(t, plain, engine.StatusApprovalPending)
	if rowsHolding(t, b, "plain-marker-5521") == 0 {
		t.Fatal("the scan does not find an unsealed input")
	}

	const secret = "zebra-quartz-7781"
	staged := sealed.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "`+secret+`"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	// A repeat finds it: the digest is over the plaintext.
	again := sealed.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"reason": "`+secret+`", "order_id": "o-1001"}`))
	if again.Status != engine.StatusApprovalPending || again.ApprovalID.String() != id {
		t.Fatalf("an identical sealed call = %s %v, want %s", again.Status, again.ApprovalID, id)
	}
	if n := rowsHolding(t, b, secret); n != 0 {
		t.Fatalf("%d rows hold the sealed input in plaintext", n)
	}

	// The approver's view opens it; the staged record carries its digest.
	v, err := sealed.ShowApproval(ctx, "acme", id)
	if err != nil || !strings.Contains(string(v.Input), secret) || v.InputState != "" {
		t.Fatalf("the approver's view = %s (%s), %v", v.Input, v.InputState, err)
	}
	var entry []byte
	if err := b.admin.QueryRow(ctx, "SELECT entry FROM orangerail.audit WHERE approval_id = $1 AND phase = 'staged'", *staged.ApprovalID).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(entry, &rec); err != nil || rec["input_digest"] != v.Digest || rec["input"] != nil {
		t.Fatalf("the staged record %s does not carry the digest %s instead of the input", entry, v.Digest)
	}

	// Execution opens it: the approved call runs.
	approve(t, sealed, "acme", id)
	want(t, sealed.Check(ctx, support("acme"), id), engine.StatusOK)
	if s := orderStatus(t, b.testBundle, "acme", "o-1001"); s != "cancelled" {
		t.Fatalf("o-1001 is %s after the sealed approval executed", s)
	}

	// A rejected one, and one left pending.
	rejected := sealed.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "`+secret+`-2"}`))
	want(t, rejected, engine.StatusApprovalPending)
	want(t, sealed.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: rejected.ApprovalID.String()}), engine.StatusOK)
	pending := sealed.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "`+secret+`-3"}`))
	want(t, pending, engine.StatusApprovalPending)
	if n := rowsHolding(t, b, secret); n != 0 {
		t.Fatalf("after execution, %d rows hold the sealed input in plaintext", n)
	}

	// Nothing is shredded before the retention passed.
	if _, err := sealedEngine(t, b, func() time.Time { return time.Now().Add(89 * 24 * time.Hour) }).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := shredded(t, b); n != 0 {
		t.Fatalf("%d inputs shredded before the retention passed", n)
	}

	// After it: the ended approvals' data keys are gone, the pending one's kept.
	later := sealedEngine(t, b, func() time.Time { return time.Now().Add(91 * 24 * time.Hour) })
	if _, err := later.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := shredded(t, b); n != 2 {
		t.Fatalf("%d inputs shredded, want the consumed and the rejected one", n)
	}
	for _, gone := range []*uuid.UUID{staged.ApprovalID, rejected.ApprovalID} {
		v, err := later.ShowApproval(ctx, "acme", gone.String())
		if err != nil || v.Input != nil || v.InputState != engine.InputShredded {
			t.Fatalf("a shredded approval's view = %s (%s), %v", v.Input, v.InputState, err)
		}
	}
	verifyClean(t, b.testBundle, "acme")

	// A decision after shredding fails cleanly, with its code.
	out := later.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: rejected.ApprovalID.String(), Approve: true, Digest: v.Digest})
	if out.Status != engine.StatusDenied || out.Code != errcode.ApprovalInputShredded {
		t.Fatalf("deciding a shredded approval = %s %s", out.Status, out.Code)
	}

	// The pending one is still whole: reviewed, approved, executed.
	pv, err := later.ShowApproval(ctx, "acme", pending.ApprovalID.String())
	if err != nil || !strings.Contains(string(pv.Input), secret+"-3") {
		t.Fatalf("the pending approval's view = %s, %v", pv.Input, err)
	}
	// Nobody shreds an open approval, not even its table's owner.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.approvals SET input_data_key = NULL, input_shredded_at = now() WHERE id = $1", *pending.ApprovalID); err == nil {
		t.Fatal("the data key of a pending approval was deleted")
	}
	approve(t, sealed, "acme", pending.ApprovalID.String())
	want(t, sealed.Check(ctx, support("acme"), pending.ApprovalID.String()), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")
}

func shredded(t *testing.T, b *exampleBundle) int {
	t.Helper()
	var n int
	if err := b.admin.QueryRow(context.Background(),
		"SELECT count(*) FROM orangerail.approvals WHERE input_sealed IS NOT NULL AND input_data_key IS NULL AND input_shredded_at IS NOT NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetentionOutlivesSealing: sealing turned off leaves the inputs it
// sealed; a retention goes on shredding them once their approvals ended,
// rather than keeping their data keys for ever. Inputs stored in the
// clear since are not touched.
func TestRetentionOutlivesSealing(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := sealedEngine(t, b, nil).Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "sealed then off"}`))
	want(t, staged, engine.StatusApprovalPending)
	want(t, b.engine.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: staged.ApprovalID.String()}), engine.StatusOK)
	plain := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "in the clear"}`))
	want(t, plain, engine.StatusApprovalPending)
	want(t, b.engine.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: plain.ApprovalID.String()}), engine.StatusOK)

	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Set("approvals.retention", "90d"))
	later, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: b.key, Logger: quiet, NowFunc: func() time.Time { return time.Now().Add(91 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := later.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := shredded(t, b); n != 1 {
		t.Fatalf("%d inputs shredded by a retention with sealing off, want the one sealed before", n)
	}
	if rowsHolding(t, b, "in the clear") == 0 {
		t.Fatal("the input stored in the clear is gone")
	}
}

// TestRetentionOfZeroShredsOnceEnded: a retention of 0d shreds a sealed
// input at the first sweep after its approval ended; it was read as no
// retention at all, which keeps every input for ever. An open approval
// keeps its input.
func TestRetentionOfZeroShredsOnceEnded(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Set("approvals.seal_inputs", true), ontologytest.Set("approvals.retention", "0d"))
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: b.key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ended := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "shred at once"}`))
	want(t, ended, engine.StatusApprovalPending)
	want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: ended.ApprovalID.String()}), engine.StatusOK)
	open := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "still open"}`))
	want(t, open, engine.StatusApprovalPending)
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := shredded(t, b); n != 1 {
		t.Fatalf("%d inputs shredded by a retention of 0d, want the rejected approval's", n)
	}
	v, err := e.ShowApproval(ctx, "acme", open.ApprovalID.String())
	if err != nil || !strings.Contains(string(v.Input), "still open") {
		t.Fatalf("the open approval's view = %s, %v", v.Input, err)
	}
}
