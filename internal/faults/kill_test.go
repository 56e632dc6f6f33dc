package faults_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

func TestMain(m *testing.M) {
	// A toxic's goroutines end a moment after its proxy stopped, on their
	// own: toxiproxy's teardown, not a leak of the code under test.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}

// statementTimeout is the fault runs' limits.statement_timeout: a call
// must answer within it and the effect's grace, never hang past.
const statementTimeout = 3 * time.Second

// callDeadline bounds one engine call under a fault: the statement
// timeout, the effect's own deadline after it, and slack for -race on a
// shared machine.
const callDeadline = 3*statementTimeout + 5*time.Second

// noteEffect is how the invariant checker sees add_order_note's effect:
// the fault runs' notes, keyed by their text.
var noteEffect = faults.Effect{Action: "add_order_note", InputMember: "note",
	Query: `SELECT org_id, note FROM order_notes WHERE note LIKE 'fault-%'`}

type bundle struct {
	admin   *pgxpool.Pool // superuser: the checker's and the killer's
	runtime *pgxpool.Pool // the engine's, traced by killer
	killer  *faults.Killer
	engine  *engine.Engine
	// deadline bounds one call (callDeadline when zero).
	deadline time.Duration
	// log lists what each call answered, for the test's log.
	log   []string
	logMu sync.Mutex
	// hostLog is the engine's log, its warnings and errors.
	hostLog logbuf.Buffer
}

// setup serves the orders example on a database of its own, through a
// pool the killer traces. add_order_note needs an approval here, and its
// effect sleeps a moment, so that a fault can land while it runs.
func setup(t *testing.T) *bundle {
	t.Helper()
	return setupOn(t, testdb.New(t))
}

// setupOn is setup on the migrated database at url, the config edited
// further by edits.
func setupOn(t *testing.T, url string, edits ...ontologytest.Edit) *bundle {
	t.Helper()
	return setupPool(t, url, func(k *faults.Killer) *pgxpool.Pool { return k.RuntimePool(t, url) }, edits...)
}

// setupPool is setupOn with the engine's pool opened by open.
func setupPool(t *testing.T, url string, open func(*faults.Killer) *pgxpool.Pool, edits ...ontologytest.Edit) *bundle {
	t.Helper()
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	k := faults.NewKiller(admin)
	runtime := open(k)
	cfg := ontologytest.Parse(t, orders.Config, append([]ontologytest.Edit{
		ontologytest.Set("limits", map[string]string{"lock_timeout": "1s", "statement_timeout": statementTimeout.String()}),
		ontologytest.Set("actions.add_order_note.policy.approval", "required"),
		ontologytest.Set("actions.add_order_note.execute.sql",
			"INSERT INTO order_notes (org_id, order_id, note) SELECT current_setting('orangerail.tenant_id'), :order_id, :note FROM pg_sleep(0.2) RETURNING id")}, edits...)...)
	catalog, err := cfg.ReadCatalog(context.Background(), runtime)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	b := &bundle{admin: admin, runtime: runtime, killer: k}
	b.engine, err = engine.New(engine.Config{Ontology: cfg, Store: runtime, Effects: effects.Factories(), Catalog: catalog, Key: key,
		Logger: slog.New(slog.NewJSONHandler(&b.hostLog, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	agent    = &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"support"}, Kind: engine.ActorAgent}
	approver = &engine.Caller{Subject: "alice@example.com", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
)

// call runs one engine call, holds it to the deadline, and holds a
// failure to a classified one.
func (b *bundle) call(t *testing.T, what string, f func(ctx context.Context) *engine.Outcome) *engine.Outcome {
	t.Helper()
	start := time.Now()
	out := f(context.Background())
	took := time.Since(start)
	b.logMu.Lock()
	b.log = append(b.log, fmt.Sprintf("%s: %s %s (%v) in %s", what, out.Status, out.Diagnostic, out.Err, took.Round(time.Millisecond)))
	b.logMu.Unlock()
	if deadline := cmp.Or(b.deadline, callDeadline); took > deadline {
		t.Errorf("%s took %s, past the deadline %s", what, took, deadline)
	}
	if !out.OK() && !classified(out) {
		t.Errorf("%s: unclassified failure %s %q (%v)", what, out.Status, out.Diagnostic, out.Err)
	}
	return out
}

// classified reports whether a failing outcome tells its caller what
// happened: a correlation id, and a status that names the cause — or,
// for the statuses that do not (internal_error, audit_blocked), a
// diagnostic that does.
func classified(out *engine.Outcome) bool {
	if out.Status == engine.StatusRejected || out.Status == engine.StatusExpired {
		// What became of an approval: an answer, not a failure.
		return out.CorrelationID != ""
	}
	if out.CorrelationID == "" || out.Err == nil {
		return false
	}
	switch out.Status {
	case engine.StatusInternalError, engine.StatusAuditBlocked:
		return out.Diagnostic != ""
	}
	return true
}

// stage stages action with input, fails t unless it waits for a person,
// and returns its approval's id.
func (b *bundle) stage(t *testing.T, action string, input json.RawMessage) string {
	t.Helper()
	staged := b.call(t, "stage", func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, action, input) })
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s (%v)", staged.Status, staged.Err)
	}
	return staged.ApprovalID.String()
}

// approve approves the approval id as the approver, failing t unless it
// is approved.
func (b *bundle) approve(t *testing.T, id string) {
	t.Helper()
	v, err := b.engine.ShowApproval(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if out := b.call(t, "decide", func(ctx context.Context) *engine.Outcome {
		return b.engine.Decide(ctx, approver, engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest})
	}); out.Status != engine.StatusOK {
		t.Fatalf("decide: %s (%v)", out.Status, out.Err)
	}
}

// attempts bounds how often a step is retried after a classified failure.
const attempts = 3

// lifecycle stages a note, approves it and polls until it executed,
// retrying each step after a failure as an agent or approver would, and
// returns the outcomes of the polls.
func (b *bundle) lifecycle(t *testing.T, note string) []*engine.Outcome {
	t.Helper()
	input := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": %q}`, note))
	var staged *engine.Outcome
	for range attempts {
		staged = b.call(t, "stage", func(ctx context.Context) *engine.Outcome {
			return b.engine.Call(ctx, agent, "add_order_note", input)
		})
		if staged.Status == engine.StatusApprovalPending {
			break
		}
	}
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("never staged: %s", staged.Status)
	}
	id := staged.ApprovalID.String()
	decided := false
	for i := 0; i < attempts && !decided; i++ {
		v, err := b.engine.ShowApproval(context.Background(), "acme", id)
		if err != nil {
			b.log = append(b.log, fmt.Sprintf("show approval: %v", err))
			continue
		}
		out := b.call(t, "decide", func(ctx context.Context) *engine.Outcome {
			return b.engine.Decide(ctx, approver, engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest})
		})
		decided = out.Status == engine.StatusOK
	}
	if !decided {
		t.Fatalf("never decided")
	}
	var polls []*engine.Outcome
	for range attempts {
		out := b.call(t, "check", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
		polls = append(polls, out)
		if out.Status == engine.StatusOK || out.Status == engine.StatusConsumed {
			break
		}
	}
	return polls
}

// executedOnce holds the polls to one execution: the last poll says it
// ran (ok) or ran already (consumed), and no poll said ok but the one.
func executedOnce(t *testing.T, polls []*engine.Outcome) {
	t.Helper()
	last := polls[len(polls)-1]
	if last.Status != engine.StatusOK && last.Status != engine.StatusConsumed {
		t.Fatalf("the approval did not execute: last poll %s", last.Status)
	}
	oks := 0
	for _, p := range polls {
		if p.Status == engine.StatusOK {
			oks++
		}
	}
	if oks > 1 {
		t.Fatalf("%d polls said the approval executed", oks)
	}
}

// finish checks the invariants and logs what each call answered.
func (b *bundle) finish(t *testing.T) {
	t.Helper()
	if err := b.killer.Err(); err != nil {
		t.Fatal(err)
	}
	if b.killer.Kills() == 0 {
		t.Fatal("no backend was terminated: the fault never happened")
	}
	faults.Require(t, b.admin, noteEffect)
	for _, l := range b.log {
		t.Log(l)
	}
}

func fired(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	default:
		t.Fatal("the trap was never sprung")
	}
}

// TestKillAfterStage: every connection of the pool dies between the stage
// and the decision (a failover): a transaction that meets a dead one at
// its BEGIN begins again on another, so no call after it fails, and the
// approval executes once.
func TestKillAfterStage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	input := json.RawMessage(`{"order_id": "o-1001", "note": "fault-after-stage"}`)
	staged := b.call(t, "stage", func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", input) })
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("stage: %s", staged.Status)
	}
	if n, err := b.killer.KillIdle(context.Background()); err != nil || n == 0 {
		t.Fatalf("killed %d backends: %v", n, err)
	}
	// The same call again is the same approval, and the lifecycle goes on
	// from there.
	executedOnce(t, b.lifecycle(t, "fault-after-stage"))
	for _, l := range b.log[1:] {
		if !strings.Contains(l, string(engine.StatusApprovalPending)) && !strings.Contains(l, ": ok ") {
			t.Errorf("a call failed after the pool's connections died: %s", l)
		}
	}
	b.finish(t)
}

// TestKillAfterConsume: the backend dies right after the consume, inside
// the executing transaction: the consume rolls back with it, so the
// approval stays approved and a later poll executes it once.
func TestKillAfterConsume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: ApprovalConsume"}, When: faults.After})
	executedOnce(t, b.lifecycle(t, "fault-after-consume"))
	fired(t, trap)
	b.finish(t)
}

// TestKillDuringEffect: the backend dies while the effect's statement
// runs: nothing of the execution commits, and a later poll executes it
// once.
func TestKillDuringEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"INSERT INTO order_notes", "pg_sleep"}, When: faults.During})
	executedOnce(t, b.lifecycle(t, "fault-during-effect"))
	fired(t, trap)
	b.finish(t)
}

// TestKillBeforeAuditAppend: the backend dies as execution_started is
// about to be appended: nothing ran, nothing commits.
func TestKillBeforeAuditAppend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditAppend"}, Arg: `"phase":"execution_started"`, When: faults.Before})
	executedOnce(t, b.lifecycle(t, "fault-before-append"))
	fired(t, trap)
	b.finish(t)
}

// TestKillAfterAuditAppend: the backend dies right after execution_started
// was appended, before the effect.
func TestKillAfterAuditAppend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditAppend"}, Arg: `"phase":"execution_started"`, When: faults.After})
	executedOnce(t, b.lifecycle(t, "fault-after-append"))
	fired(t, trap)
	b.finish(t)
}

// TestKillAfterFinishAppend: the backend dies after the effect ran and
// execution_succeeded was appended, before the COMMIT: nothing committed,
// and the engine knows it — it read the transaction's id with the record,
// so when the COMMIT meets the dead connection it asks Postgres, which
// confirms the transaction aborted — so the poll says store_unavailable,
// never ok, nor outcome_unknown. The approval is still approved, and the
// next poll executes it once.
func TestKillAfterFinishAppend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditAppend"}, Arg: `"phase":"execution_succeeded"`, When: faults.After})
	polls := b.lifecycle(t, "fault-after-finish")
	executedOnce(t, polls)
	fired(t, trap)
	if first := polls[0]; first.Status != engine.StatusInternalError || first.Diagnostic != engine.DiagnosticStoreUnavailable {
		t.Errorf("the poll whose transaction died before its COMMIT answered %s %q, want %s %q", first.Status, first.Diagnostic,
			engine.StatusInternalError, engine.DiagnosticStoreUnavailable)
	}
	b.finish(t)
}

// TestKillDuringSealing: the backend of a sealing transaction dies after
// it gave a batch its seqs, before its COMMIT: the batch rolls back whole
// and is sealed again at once, on another connection, no seq lost or given
// twice; the round reports no failure.
func TestKillDuringSealing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	executedOnce(t, b.lifecycle(t, "fault-during-sealing"))
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditSeal"}, When: faults.After})
	if n, err := engine.Seal(context.Background(), b.runtime); err != nil || n == 0 {
		t.Fatalf("a sealing round whose backend died sealed %d: %v", n, err)
	}
	fired(t, trap)
	if n, err := engine.Seal(context.Background(), b.runtime); err != nil || n != 0 {
		t.Fatalf("the next round sealed %d: %v; want nothing left", n, err)
	}
	b.finish(t)
}

// TestKillAtStage: the backend dies as the approval is staged — before
// the stage reaches it, and after it, before the stage's COMMIT — the
// stage runs once more on another connection, so the agent is answered
// approval_pending at once, and one approval exists.
func TestKillAtStage(t *testing.T) {
	t.Parallel()
	for _, trap := range []faults.Trap{
		{Match: []string{"-- name: ApprovalStage"}, When: faults.Before},
		{Match: []string{"-- name: ApprovalStage"}, When: faults.After},
	} {
		b := setup(t)
		sprung := b.killer.Arm(trap)
		input := json.RawMessage(`{"order_id": "o-1001", "note": "fault-at-stage"}`)
		staged := b.call(t, "stage", func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", input) })
		fired(t, sprung)
		if staged.Status != engine.StatusApprovalPending {
			t.Fatalf("killed after %s: the stage answered %s %q (%v), want approval_pending", trap.Match, staged.Status, staged.Diagnostic, staged.Err)
		}
		var n int
		if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM orangerail.approvals").Scan(&n); err != nil || n != 1 {
			t.Fatalf("killed after %s: %d approvals (%v), want 1", trap.Match, n, err)
		}
		executedOnce(t, b.lifecycle(t, "fault-at-stage"))
		b.finish(t)
	}
}

// TestKillDuringPoll: the backend dies under a poll before its consume —
// as its read of the approval is sent, or, when the approval lapsed,
// after the poll expired it and before that transaction's COMMIT: the read
// is made again, the expiry runs once more, on another connection, so the
// poll answers what became of the approval (executed, once; expired, with
// one record) and its agent never sees the fault.
func TestKillDuringPoll(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		trap faults.Trap
		ttl  string
		want engine.Status
	}{
		{"its read", faults.Trap{Match: []string{"-- name: ApprovalGet"}, When: faults.Before}, "", engine.StatusOK},
		{"its expiry", faults.Trap{Match: []string{"-- name: ApprovalExpire"}, When: faults.After}, "1s", engine.StatusExpired},
	} {
		var edits []ontologytest.Edit
		if tt.ttl != "" {
			edits = append(edits, ontologytest.Set("approvals.ttl", tt.ttl))
		}
		b := setupOn(t, testdb.New(t), edits...)
		id := b.stage(t, "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "fault-during-poll"}`))
		if tt.want == engine.StatusExpired {
			// A pending approval lapses as an approved one does.
			v, err := b.engine.ShowApproval(context.Background(), "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(v.ExpiresAt) + 100*time.Millisecond)
		} else {
			b.approve(t, id)
		}
		trap := b.killer.Arm(tt.trap)
		out := b.call(t, "check", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
		fired(t, trap)
		if out.Status != tt.want {
			t.Errorf("killed at %s: the poll answered %s %q (%v), want %s", tt.name, out.Status, out.Diagnostic, out.Err, tt.want)
		}
		b.finish(t)
	}
}

// TestKillDuringLinkedRead: the backend dies under a read of a row and its
// links, after the row was read: the read runs once more on another
// connection, and its agent gets the row and its links.
func TestKillDuringLinkedRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	args := json.RawMessage(`{"id": "o-1001", "include": ["order_customer"]}`)
	before := b.call(t, "get", func(ctx context.Context) *engine.Outcome { return b.engine.Get(ctx, agent, "order", args) })
	if before.Status != engine.StatusOK {
		t.Fatalf("a read before the fault: %s %q (%v)", before.Status, before.Diagnostic, before.Err)
	}
	trap := b.killer.Arm(faults.Trap{Match: []string{"row_to_json", "orders"}, When: faults.After})
	out := b.call(t, "get", func(ctx context.Context) *engine.Outcome { return b.engine.Get(ctx, agent, "order", args) })
	fired(t, trap)
	if out.Status != engine.StatusOK || string(out.Data) != string(before.Data) {
		t.Errorf("the read whose backend died answered %s %q (%v): %s; want ok and %s", out.Status, out.Diagnostic, out.Err, out.Data, before.Data)
	}
	b.finish(t)
}

// TestKillBeforeRead: every connection of the pool dies while idle, then
// agents read: a read that meets a dead connection before it saw a row is
// read again on another, so no read fails.
func TestKillBeforeRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func() *engine.Outcome {
		return b.call(t, "get", func(ctx context.Context) *engine.Outcome {
			return b.engine.Get(ctx, agent, "order", json.RawMessage(`{"id": "o-1001"}`))
		})
	}
	list := func() *engine.Outcome {
		return b.call(t, "list", func(ctx context.Context) *engine.Outcome {
			return b.engine.List(ctx, agent, "order", json.RawMessage(`{}`))
		})
	}
	for _, read := range []func() *engine.Outcome{get, list} {
		if out := read(); out.Status != engine.StatusOK { // the pool holds a connection or more
			t.Fatalf("a read before the fault: %s", out.Status)
		}
		if n, err := b.killer.KillIdle(context.Background()); err != nil || n == 0 {
			t.Fatalf("killed %d backends: %v", n, err)
		}
		if out := read(); out.Status != engine.StatusOK {
			t.Errorf("a read after the pool's connections died: %s %q (%v)", out.Status, out.Diagnostic, out.Err)
		}
	}
	b.finish(t)
}
