package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// idempotentNotes serves the example with add_order_note marked
// idempotent: it runs at once, without approval, so a second run is a
// second note.
func idempotentNotes(t *testing.T) (*exampleBundle, *engine.Engine) {
	t.Helper()
	b := setupExample(t)
	return b, newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true))
}

// idempotentNotesApart is idempotentNotes with the orders on a datasource
// of their own, so that an execution's effect commits apart from its
// records (edited further by edits): the engine, and the datasource's
// owner pool.
func idempotentNotesApart(t *testing.T, edits ...ontologytest.Edit) (*engine.Engine, *pgxpool.Pool) {
	t.Helper()
	b := setupExample(t)
	dataURL := testdb.New(t)
	data := testdb.Pool(t, dataURL)
	if _, err := data.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, testdb.RuntimePool(t, dataURL),
		append([]ontologytest.Edit{ontologytest.Set("actions.add_order_note.idempotent", true)}, edits...)...)
	return e, data
}

// notesSaying counts the notes of the datasource data that say note.
func notesSaying(t *testing.T, data *pgxpool.Pool, note string) (n int) {
	t.Helper()
	if err := data.QueryRow(context.Background(), "SELECT count(*) FROM order_notes WHERE note = $1", note).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// notesAndRuns counts the tenant's notes saying note, and the
// execution_succeeded records of add_order_note in its audit chain.
func notesAndRuns(t *testing.T, b *exampleBundle, tenant, note string) (notes, runs int) {
	t.Helper()
	ctx := context.Background()
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM order_notes WHERE org_id = $1 AND note = $2", tenant, note).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = $1 AND action = 'add_order_note' AND phase = 'execution_succeeded'",
		tenant).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	return notes, runs
}

// TestIdempotentRetryRunsOnce: sixteen concurrent calls of an idempotent
// action under one key write one note and one execution record, and every
// one of them, and a later retry, answers the first call's result; the
// key never reaches the audit chain, whose records pass verification.
func TestIdempotentRetryRunsOnce(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "called once", "idempotencyKey": "retry-7f0c"}`)
	outs := make([]*engine.Outcome, 16)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() { outs[i] = e.Call(ctx, support("acme"), "add_order_note", args) })
	}
	wg.Wait()
	for _, out := range outs {
		want(t, out, engine.StatusOK)
		if out.CorrelationID != outs[0].CorrelationID || string(out.Data) != string(outs[0].Data) {
			t.Fatalf("a retry answered %s %s, the first call %s %s", out.CorrelationID, out.Data, outs[0].CorrelationID, outs[0].Data)
		}
	}
	again := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, again, engine.StatusOK)
	if again.CorrelationID != outs[0].CorrelationID || string(again.Data) != string(outs[0].Data) {
		t.Fatalf("a later retry answered %s %s", again.CorrelationID, again.Data)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "called once"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}
	var keyed int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme' AND position('idempotencyKey' in convert_from(entry, 'UTF8')) > 0").Scan(&keyed); err != nil || keyed != 0 {
		t.Fatalf("%d audit records carry the key (%v)", keyed, err)
	}
	// Another caller's key of the same name is its own.
	other := support("acme")
	other.Subject = "agent-8"
	want(t, e.Call(ctx, other, "add_order_note", args), engine.StatusOK)
	if notes, _ := notesAndRuns(t, b, "acme", "called once"); notes != 2 {
		t.Fatalf("%d notes after another caller's call, want 2", notes)
	}
	// So is a same-named subject's of another issuer: it is not answered
	// with the other's filed result.
	namesake := support("acme")
	namesake.Issuer = "https://elsewhere.example"
	if out := e.Call(ctx, namesake, "add_order_note", args); out.Status != engine.StatusOK || out.CorrelationID == outs[0].CorrelationID {
		t.Fatalf("a namesake of another issuer: %s %s, the first call's correlation %s", out.Status, out.CorrelationID, outs[0].CorrelationID)
	}
	if notes, _ := notesAndRuns(t, b, "acme", "called once"); notes != 3 {
		t.Fatalf("%d notes after a namesake's call, want 3", notes)
	}
	// The runtime sees a tenant's keys only in that tenant.
	for tenant, keys := range map[string]int{"acme": 3, "globex": 0} {
		var n int
		if err := database.InTenant(ctx, b.runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM orangerail.idempotency_keys").Scan(&n)
		}); err != nil || n != keys {
			t.Fatalf("the runtime in %s sees %d keys (%v), want %d", tenant, n, err, keys)
		}
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIdempotentUnknownOutcomeIsFiled: a call whose effect ran on its
// separate datasource but whose end could not be recorded answers
// outcome_unknown, and a retry under its key gets that answer back and
// runs nothing — the effect may have run, so running it again could do it
// twice. A new key runs the call.
func TestIdempotentUnknownOutcomeIsFiled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, data := idempotentNotesApart(t)
	engine.SetBeforeFinish(e, panicOnce())
	notes := func() int { return notesSaying(t, data, "in doubt") }
	args := json.RawMessage(`{"order_id": "o-1001", "note": "in doubt", "idempotencyKey": "doubt-1"}`)
	first := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusOutcomeUnknown)
	if n := notes(); n != 1 {
		t.Fatalf("the first call wrote %d notes, want 1", n)
	}
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusOutcomeUnknown)
	if retry.CorrelationID != first.CorrelationID || !retry.Replayed || first.Replayed {
		t.Fatalf("the retry answered %s (replayed %v), not the first call's outcome (%s)", retry.CorrelationID, retry.Replayed, first.CorrelationID)
	}
	if n := notes(); n != 1 {
		t.Fatalf("a retry under the key ran the call again: %d notes", n)
	}
	fresh := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "in doubt", "idempotencyKey": "doubt-2"}`))
	want(t, fresh, engine.StatusOK)
	if n := notes(); n != 2 {
		t.Fatalf("a new key: %d notes, want 2", n)
	}
}

// TestIdempotentOutcomeIsFiledWhenTheCallerLeaves: a caller that hangs
// up while its call's effect runs (the usual reason to retry) still has
// the outcome filed under its key, so the retry gets it back and runs
// nothing.
func TestIdempotentOutcomeIsFiledWhenTheCallerLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, data := idempotentNotesApart(t)
	callerCtx, hangUp := context.WithCancel(ctx)
	engine.SetBeforeFinish(e, hangUp) // the effect committed; the caller goes
	args := json.RawMessage(`{"order_id": "o-1001", "note": "caller left", "idempotencyKey": "left-1"}`)
	first := e.Call(callerCtx, support("acme"), "add_order_note", args)
	if callerCtx.Err() == nil {
		t.Fatal("the caller never left")
	}
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	if retry.Status != first.Status || retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry answered %s under %s, the first call %s under %s", retry.Status, retry.CorrelationID, first.Status, first.CorrelationID)
	}
	if notes := notesSaying(t, data, "caller left"); notes != 1 {
		t.Fatalf("%d notes, want 1: a retry ran the call again", notes)
	}
}

// TestIdempotentFailureTheCallerCausedIsNotFiled: a caller that hangs up
// while its call's effect runs on a separate datasource cuts the effect
// short — its transaction rolls back, the execution is recorded failed —
// and that failure is not filed under the key: a retry runs the call.
func TestIdempotentFailureTheCallerCausedIsNotFiled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, data := idempotentNotesApart(t, ontologytest.Set("actions.add_order_note.execute.sql",
		"INSERT INTO order_notes (org_id, order_id, note) SELECT current_setting('orangerail.tenant_id'), :order_id, :note FROM pg_sleep(2) RETURNING id"))
	callerCtx, hangUp := context.WithCancel(ctx)
	// The caller hangs up once the effect's statement runs.
	go func() {
		defer hangUp()
		for callerCtx.Err() == nil {
			var running bool
			if err := data.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%FROM pg_sleep(2)%'
				AND pid <> pg_backend_pid())`).Scan(&running); err != nil || running {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "cut by the caller", "idempotencyKey": "cut-1"}`)
	first := e.Call(callerCtx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusFailed)
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusOK)
	if retry.Replayed || retry.CorrelationID == first.CorrelationID {
		t.Fatalf("the retry answered the failure filed under the key (%s)", retry.CorrelationID)
	}
	if notes := notesSaying(t, data, "cut by the caller"); notes != 1 {
		t.Fatalf("%d notes, want 1", notes)
	}
}

// TestIdempotentFailureOfItsOwnIsFiledWhenTheCallerLeaves: a call whose
// effect failed of its own accord (the datasource refused it), whose
// caller hung up before its end was recorded, has that failure filed
// under its key as any other: the cut did not cause it, and the effect
// ran. A retry answers it and runs nothing.
func TestIdempotentFailureOfItsOwnIsFiledWhenTheCallerLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, data := idempotentNotesApart(t, ontologytest.Set("actions.add_order_note.execute.sql",
		"INSERT INTO order_notes (org_id, order_id, note) SELECT current_setting('orangerail.tenant_id'), :order_id, :note FROM generate_series(1, 1) g WHERE g / (g - 1) = 1 RETURNING id"))
	callerCtx, hangUp := context.WithCancel(ctx)
	engine.SetBeforeFinish(e, hangUp) // the effect failed; the caller goes
	args := json.RawMessage(`{"order_id": "o-1001", "note": "refused", "idempotencyKey": "refused-1"}`)
	first := e.Call(callerCtx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusFailed)
	if callerCtx.Err() == nil {
		t.Fatal("the caller never left")
	}
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusFailed)
	if !retry.Replayed || retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry ran the call again (%s, replayed %t) instead of answering the first call's failure (%s)",
			retry.CorrelationID, retry.Replayed, first.CorrelationID)
	}
	if notes := notesSaying(t, data, "refused"); notes != 0 {
		t.Fatalf("%d notes, want none", notes)
	}
}

// TestIdempotentRetryOnAnotherReplicaWaits: a retry sent to another
// replica while the first call runs finds the key claimed, waits for the
// outcome, and answers it; the call ran once.
func TestIdempotentRetryOnAnotherReplicaWaits(t *testing.T) {
	t.Parallel()
	b, first := idempotentNotes(t)
	// The retry may wait for the first call's whole run, however slow the
	// machine.
	other := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true),
		ontologytest.SetYAML("limits", "{lock_timeout: 30s}"))
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "waited for", "idempotencyKey": "wait-1"}`)
	var (
		once, waiting sync.Once
		waits         = make(chan struct{})
		retried       = make(chan *engine.Outcome, 1)
	)
	engine.SetOnKeyWait(other, func() { waiting.Do(func() { close(waits) }) })
	engine.SetBeforeExecute(first, func(context.Context) {
		once.Do(func() {
			go func() { retried <- other.Call(ctx, support("acme"), "add_order_note", args) }()
			// The first call goes on once the retry found the key
			// claimed and waits.
			select {
			case <-waits:
			case <-time.After(10 * time.Second):
				t.Error("the retry never found the key claimed")
			}
		})
	})
	out := first.Call(ctx, support("acme"), "add_order_note", args)
	want(t, out, engine.StatusOK)
	retry := <-retried
	if retry.Status != engine.StatusOK || retry.CorrelationID != out.CorrelationID || !retry.Replayed {
		t.Fatalf("the retry answered %s %s under %s (replayed %v), want the first call's outcome (%s)",
			retry.Status, retry.Diagnostic, retry.CorrelationID, retry.Replayed, out.CorrelationID)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "waited for"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}
}

// TestIdempotentRetryInLineIsBounded: a retry sent to the same replica
// while the first call runs waits in line behind it no longer than a lock
// wait may last, then fails without running (idempotency_key_busy), as a
// retry on another replica does.
func TestIdempotentRetryInLineIsBounded(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true),
		ontologytest.SetYAML("limits", "{lock_timeout: 200ms}"))
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "in line", "idempotencyKey": "line-1"}`)
	var (
		once    sync.Once
		retried *engine.Outcome
	)
	// The retry is sent from inside the first call's execution: it can
	// only end by giving up.
	engine.SetBeforeExecute(e, func(context.Context) {
		once.Do(func() {
			answered := make(chan *engine.Outcome, 1)
			go func() { answered <- e.Call(ctx, support("acme"), "add_order_note", args) }()
			select {
			case retried = <-answered:
			case <-time.After(10 * time.Second):
				t.Error("the retry in line still waits after 10s")
			}
		})
	})
	out := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, out, engine.StatusOK)
	if retried == nil {
		t.FailNow()
	}
	if retried.Status != engine.StatusInternalError || retried.Diagnostic != engine.DiagnosticIdempotencyKeyBusy {
		t.Fatalf("the retry in line answered %s %s (%v), want %s %s", retried.Status, retried.Diagnostic, retried.Err,
			engine.StatusInternalError, engine.DiagnosticIdempotencyKeyBusy)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "in line"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}
}

// TestIdempotentAbandonedClaimIsUnknown: a replica stops while its call
// runs under a key (simulated: the call is held, and its claim's time made
// to pass). A retry on another replica finds the claim with no outcome
// and its time over: the call may have run, so the retry runs nothing and
// answers outcome_unknown under the stopped call's correlation id, filed
// under the key for every later retry. The stopped call, should it come
// back, cannot give the key back; a new key runs the call. The key's time
// to live (60s, far shorter than the claim's time) does not end a claim:
// the key does not expire under the stopped call.
func TestIdempotentAbandonedClaimIsUnknown(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	edits := []ontologytest.Edit{ontologytest.Set("actions.add_order_note.idempotent", true), ontologytest.SetYAML("limits", "{idempotency_ttl: 60s}")}
	stopped := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edits...)
	other := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, edits...)
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "in limbo", "idempotencyKey": "limbo-1"}`)
	running := make(chan struct{})
	engine.SetBeforeExecute(stopped, func(ctx context.Context) {
		close(running)
		<-ctx.Done()
	})
	stoppedCtx, stop := context.WithCancel(ctx)
	done := make(chan *engine.Outcome, 1)
	go func() { done <- stopped.Call(stoppedCtx, support("acme"), "add_order_note", args) }()
	<-running
	// The claim is committed while its call runs; its time is made to
	// pass, and the key's with it.
	tag, err := b.admin.Exec(ctx, `UPDATE orangerail.idempotency_keys
		SET expires_at = expires_at - (claimed_until - now() + interval '1 second'), claimed_until = now() - interval '1 second'
		WHERE tenant_id = 'acme' AND key = 'limbo-1' AND outcome IS NULL`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the running call's claim: %v rows (%v), want it committed and open", tag.RowsAffected(), err)
	}
	retry := other.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusOutcomeUnknown)
	if !retry.Replayed {
		t.Error("the answer filed in the abandoned claim's place is not marked as the key's")
	}
	again := other.Call(ctx, support("acme"), "add_order_note", args)
	want(t, again, engine.StatusOutcomeUnknown)
	if !again.Replayed || again.CorrelationID != retry.CorrelationID {
		t.Fatalf("a later retry answered %s (replayed %v), not the outcome filed in the claim's place (%s)", again.CorrelationID, again.Replayed, retry.CorrelationID)
	}
	stop()
	first := <-done
	if retry.CorrelationID != first.CorrelationID {
		t.Errorf("the retry answered under %s, not the stopped call's correlation id %s", retry.CorrelationID, first.CorrelationID)
	}
	if last := other.Call(ctx, support("acme"), "add_order_note", args); last.Status != engine.StatusOutcomeUnknown || last.CorrelationID != retry.CorrelationID {
		t.Fatalf("after the stopped call ended, a retry answered %s under %s: the key was given back", last.Status, last.CorrelationID)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "in limbo"); notes != 0 || runs != 0 {
		t.Fatalf("%d notes and %d execution records: a retry ran the call", notes, runs)
	}
	fresh := other.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "in limbo", "idempotencyKey": "limbo-2"}`))
	want(t, fresh, engine.StatusOK)
	if notes, _ := notesAndRuns(t, b, "acme", "in limbo"); notes != 1 {
		t.Fatalf("a new key: %d notes, want 1", notes)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestAnswersThatRanNothingLeaveTheKey: a dry run and a call of an
// action not implemented yet say nothing ran, so they are not filed under
// the call's key: a live engine beside a sandbox one on the same database,
// or the deployment once it goes live or implements the action (within
// idempotency_ttl), runs the call under the key those answered, rather
// than replaying their answer with nothing done.
func TestAnswersThatRanNothingLeaveTheKey(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	idempotent := ontologytest.Set("actions.add_order_note.idempotent", true)
	live := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, idempotent)
	for _, tc := range []struct {
		name   string
		first  *engine.Engine
		status engine.Status
	}{
		{"dry run", newEngine(t, b.testBundle, b.key, engine.ModeDryRun, nil, idempotent), engine.StatusDryRun},
		{"not implemented", newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, idempotent,
			ontologytest.SetYAML("actions.add_order_note.execute", "{not_implemented: true}")), engine.StatusNotImplemented},
	} {
		note := "first " + tc.name
		args := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": %q, "idempotencyKey": %q}`, note, tc.name))
		want(t, tc.first.Call(ctx, support("acme"), "add_order_note", args), tc.status)
		out := live.Call(ctx, support("acme"), "add_order_note", args)
		if notes, runs := notesAndRuns(t, b, "acme", note); out.Status != engine.StatusOK || out.Replayed || notes != 1 {
			t.Fatalf("%s: the live call under its key answered %s (replayed %v), %d notes, %d runs in all: want it run",
				tc.name, out.Status, out.Replayed, notes, runs)
		}
		// The live call's answer is filed: a retry replays it.
		if again := live.Call(ctx, support("acme"), "add_order_note", args); again.Status != engine.StatusOK || !again.Replayed {
			t.Fatalf("%s: a retry of the live call answered %s (replayed %v)", tc.name, again.Status, again.Replayed)
		}
	}
}

// TestIdempotencyKeyReused: the same key with another input is refused
// X_IDEMPOTENCY_KEY_REUSED at /idempotencyKey, and nothing runs.
func TestIdempotencyKeyReused(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	want(t, e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "first", "idempotencyKey": "k1"}`)), engine.StatusOK)
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "second", "idempotencyKey": "k1"}`))
	want(t, out, engine.StatusInvalidInput)
	if out.Code != errcode.IdempotencyKeyReused || len(out.Issues) != 1 || out.Issues[0].Path != "/idempotencyKey" {
		t.Fatalf("code %s, issues %v", out.Code, out.Issues)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "second"); notes != 0 || runs != 1 {
		t.Fatalf("%d notes, %d runs after the refusal", notes, runs)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIdempotencyKeyRefused: a key on an action that is not idempotent,
// a key that is not a string of 1 to 255 characters, one holding U+0000
// (which Postgres cannot store: it was an internal error, unrecorded), and
// a key sent twice are refused X_INPUT_INVALID at /idempotencyKey, each
// recorded, and nothing runs.
func TestIdempotencyKeyRefused(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	for _, c := range []struct {
		e    *engine.Engine
		args string
	}{
		{b.engine, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": "k1"}`},
		{e, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": ""}`},
		{e, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": 7}`},
		{e, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": "` + longKey + `"}`},
		{e, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": "a\u0000"}`},
		{e, `{"order_id": "o-1001", "note": "refused", "idempotencyKey": "k1", "idempotencyKey": "k2"}`},
	} {
		out := c.e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(c.args))
		want(t, out, engine.StatusInvalidInput)
		if out.Code != errcode.InputInvalid || len(out.Issues) != 1 || out.Issues[0].Path != "/idempotencyKey" {
			t.Fatalf("%s: code %s, issues %v", c.args, out.Code, out.Issues)
		}
		if rec := auditEntry(t, b, out.CorrelationID, engine.PhaseInvalidInput); rec["action"] != "add_order_note" {
			t.Fatalf("%s: the refusal's record %v", c.args, rec)
		}
	}
	// Data after the object is not JSON, with a key as without one.
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "refused", "idempotencyKey": "k4"} {}`))
	want(t, out, engine.StatusInvalidInput)
	// The key taken, the rest is checked as it was sent: a member repeated
	// beside a key is refused as it is without one.
	out = e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "order_id": "o-1002", "note": "refused", "idempotencyKey": "k3"}`))
	want(t, out, engine.StatusInvalidInput)
	if len(out.Issues) != 1 || !strings.Contains(out.Issues[0].Message, "duplicate") {
		t.Fatalf("a repeated member beside a key: %v", out.Issues)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "refused"); notes != 0 || runs != 0 {
		t.Fatalf("%d notes, %d runs after refusals", notes, runs)
	}
}

// longKey is 256 characters, one past the bound.
var longKey = func() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = 'k'
	}
	return string(b)
}()

// TestIdempotencyKeyExpires: once a key's TTL has passed, the key files a
// new call, which runs.
func TestIdempotencyKeyExpires(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "twice", "idempotencyKey": "k1"}`)
	first := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusOK)
	// The TTL passes.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	second := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, second, engine.StatusOK)
	if second.CorrelationID == first.CorrelationID {
		t.Fatal("an expired key answered its first result")
	}
	if notes, runs := notesAndRuns(t, b, "acme", "twice"); notes != 2 || runs != 2 {
		t.Fatalf("%d notes and %d runs, want 2 of each", notes, runs)
	}
	// And the new result is filed under the key again.
	third := e.Call(ctx, support("acme"), "add_order_note", args)
	if third.CorrelationID != second.CorrelationID {
		t.Fatalf("the renewed key answered %s, want %s", third.CorrelationID, second.CorrelationID)
	}
}

// TestIdempotentCallEndsBeforeItsClaim: a call the database slows past
// one transaction bound after its key's claim is cut short there, long
// before the claim (three bounds) ends, so nothing of it runs after a
// retry could find the claim abandoned. The first call is held as its
// execution begins for longer than a bound (as a slow database would hold
// it), then a retry is sent on another replica, which finds the key
// claimed and runs nothing, then the first call would execute. The cut
// gives the key back: a later retry runs the call, once.
func TestIdempotentCallEndsBeforeItsClaim(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	// A transaction bound is the lock timeout, twice the statement
	// timeout and 5s.
	short := []ontologytest.Edit{ontologytest.Set("actions.add_order_note.idempotent", true),
		ontologytest.SetYAML("limits", "{lock_timeout: 200ms, statement_timeout: 500ms}")}
	const bound = 6200 * time.Millisecond
	first := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, short...)
	other := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, short...)
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "claimed once", "idempotencyKey": "slow-1"}`)

	var (
		held    atomic.Bool
		cut     bool
		retried *engine.Outcome
	)
	engine.SetBeforeExecute(first, func(ctx context.Context) {
		if !held.CompareAndSwap(false, true) {
			return
		}
		select {
		case <-ctx.Done():
			cut = true
		case <-time.After(bound + time.Second):
		}
		retried = other.Call(context.Background(), support("acme"), "add_order_note", args)
	})
	out := first.Call(ctx, support("acme"), "add_order_note", args)
	if !held.Load() {
		t.Fatalf("the first call never reached its execution: %s %v", out.Status, out.Err)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "claimed once"); notes > 1 || runs > 1 {
		t.Fatalf("%d notes and %d execution records: the first call (%s) ran beside a retry (%s)", notes, runs, out.Status, retried.Status)
	}
	if !cut {
		t.Fatalf("the first call was not cut short before its claim ended: %s", out.Status)
	}
	if out.Status != engine.StatusInternalError || out.Diagnostic != engine.DiagnosticStoreTimeout {
		t.Fatalf("a call cut short before its execution answered %s %s, want %s %s", out.Status, out.Diagnostic,
			engine.StatusInternalError, engine.DiagnosticStoreTimeout)
	}
	// The retry meanwhile found the key claimed and ran nothing.
	if retried.Status != engine.StatusInternalError || retried.Diagnostic != engine.DiagnosticIdempotencyKeyBusy {
		t.Fatalf("the retry meanwhile: %s %s %v, want the key found busy", retried.Status, retried.Diagnostic, retried.Err)
	}
	// Nothing the cut caused is filed: a later retry runs the call, once.
	again := other.Call(ctx, support("acme"), "add_order_note", args)
	want(t, again, engine.StatusOK)
	if notes, runs := notesAndRuns(t, b, "acme", "claimed once"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records after a later retry, want one of each", notes, runs)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIdempotentPanicBeforeItsEffectGivesTheKeyBack: a call whose run
// panics before its execution could start (a bug in a resolve, a
// precondition or a budget's step: a panic past execute's containment
// means the effect was never reached) is answered internal_error, which
// says nothing ran, so its key is given back as any internal_error's is:
// a retry under the key runs the call, once, rather than wait out a
// claim nobody holds and then be told the call may have run.
func TestIdempotentPanicBeforeItsEffectGivesTheKeyBack(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true),
		ontologytest.SetYAML("limits", "{lock_timeout: 200ms}"))
	panics := panicOnce()
	engine.SetBeforeExecute(e, func(context.Context) { panics() })
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-1001", "note": "after a panic", "idempotencyKey": "panic-1"}`)
	first := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusInternalError)
	if notes, runs := notesAndRuns(t, b, "acme", "after a panic"); notes != 0 || runs != 0 {
		t.Fatalf("the panicking call wrote %d notes and %d execution records", notes, runs)
	}
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	if retry.Status != engine.StatusOK || retry.Replayed {
		t.Fatalf("a retry after an internal_error that ran nothing answered %s %s (replayed %v): the key was kept by a call that ended",
			retry.Status, retry.Diagnostic, retry.Replayed)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "after a panic"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records after the retry, want one of each", notes, runs)
	}
}

// TestIdempotentNotFoundReplaysItsCorrelation: a call whose target does
// not exist answers not_found, which is filed under its key; a retry gets
// that answer back under the first call's correlation id, as every other
// filed answer is, so that the retry's answer and the first call's host
// log line name the same call.
func TestIdempotentNotFoundReplaysItsCorrelation(t *testing.T) {
	t.Parallel()
	_, e := idempotentNotes(t)
	ctx := context.Background()
	args := json.RawMessage(`{"order_id": "o-9999", "note": "nowhere", "idempotencyKey": "missing-1"}`)
	first := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusNotFound)
	retry := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusNotFound)
	if !retry.Replayed || retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry answered under %s (replayed %v), the first call under %s", retry.CorrelationID, retry.Replayed, first.CorrelationID)
	}
}

// TestIdempotentCallAnsweredByAnApprovalsRunStaysAnswered: a keyed call of
// an action that needs approval finds an identical call's approved
// approval and goes to run it, but another poll runs it first: the call
// answers consumed — its approval ran — and a retry under its key gets
// that answer back, rather than stage a second approval of the same call
// for a person to approve and run again.
func TestIdempotentCallAnsweredByAnApprovalsRunStaysAnswered(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	e := b.engine
	ctx := context.Background()
	input := `"order_id": "o-1001", "address": "1 Ran Once Street"`
	staged := e.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{`+input+`}`))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, e, "acme", staged.ApprovalID.String())
	// Another poll runs the approval as the keyed call is about to.
	var polled atomic.Bool
	engine.SetBeforeExecute(e, func(context.Context) {
		if polled.CompareAndSwap(false, true) {
			want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
		}
	})
	args := json.RawMessage(`{` + input + `, "idempotencyKey": "ran-1"}`)
	first := e.Call(ctx, support("acme"), "update_shipping_address", args)
	want(t, first, engine.StatusConsumed)
	if first.ApprovalID == nil || *first.ApprovalID != *staged.ApprovalID {
		t.Fatalf("the keyed call answered under approval %v, want %s", first.ApprovalID, staged.ApprovalID)
	}
	retry := e.Call(ctx, support("acme"), "update_shipping_address", args)
	if retry.Status != engine.StatusConsumed || retry.ApprovalID == nil || *retry.ApprovalID != *staged.ApprovalID {
		t.Fatalf("a retry under the key answered %s under approval %v: the call was staged again, want %s of %s",
			retry.Status, retry.ApprovalID, engine.StatusConsumed, staged.ApprovalID)
	}
}

// TestIdempotentRetryHoldsAcrossIssuerSpellings: a retry under the same key
// after the operator re-spelled the issuer in the config (a trailing slash,
// the host's case, the default port written out) is the same caller's
// retry (ontology.SameIssuer): it answers as the first call did and runs
// nothing. A key filed, before this version, under the spelling the config
// still has is found too.
func TestIdempotentRetryHoldsAcrossIssuerSpellings(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	caller := func(issuer string) *engine.Caller {
		c := support("acme")
		c.Issuer = issuer
		return c
	}
	args := json.RawMessage(`{"order_id": "o-1001", "note": "one issuer", "idempotencyKey": "respelled-1"}`)
	first := e.Call(ctx, caller("https://id.example/realms/acme/"), "add_order_note", args)
	want(t, first, engine.StatusOK)
	for _, respelled := range []string{"https://id.example/realms/acme", "https://ID.Example/realms/acme/", "HTTPS://id.example:443/realms/acme"} {
		again := e.Call(ctx, caller(respelled), "add_order_note", args)
		if again.Status != engine.StatusOK || again.CorrelationID != first.CorrelationID {
			t.Fatalf("a retry under the issuer spelled %s: %s %s, the first call's correlation %s", respelled, again.Status, again.CorrelationID, first.CorrelationID)
		}
	}
	if notes, runs := notesAndRuns(t, b, "acme", "one issuer"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}

	// A key an earlier version filed under the configured spelling as it
	// was (not the canonical one) still answers a retry under it.
	legacy := json.RawMessage(`{"order_id": "o-1001", "note": "filed before", "idempotencyKey": "legacy-1"}`)
	filed := e.Call(ctx, caller("https://legacy.example/"), "add_order_note", legacy)
	want(t, filed, engine.StatusOK)
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET issuer = 'https://legacy.example/' WHERE tenant_id = 'acme' AND key = 'legacy-1'"); err != nil {
		t.Fatal(err)
	}
	if again := e.Call(ctx, caller("https://legacy.example/"), "add_order_note", legacy); again.Status != engine.StatusOK || again.CorrelationID != filed.CorrelationID {
		t.Fatalf("a retry of a key filed under the old spelling: %s %s, the first call's correlation %s", again.Status, again.CorrelationID, filed.CorrelationID)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "filed before"); notes != 1 {
		t.Fatalf("%d notes and %d execution records of the legacy key's call, want one note", notes, runs)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIdempotentLegacyKeyExpiringMidCallRunsOnce: a key an earlier version
// filed under the configured spelling expires between one retry's lookup
// (which found it live, so it claims under that spelling) and its claim;
// a second retry looking up after the expiry must not claim the canonical
// spelling beside it: one of the two runs, as for any expired key.
func TestIdempotentLegacyKeyExpiringMidCallRunsOnce(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	caller := support("acme")
	caller.Issuer = "https://race.example/"
	args := json.RawMessage(`{"order_id": "o-1001", "note": "expiring legacy key", "idempotencyKey": "race-1"}`)
	want(t, e.Call(ctx, caller, "add_order_note", args), engine.StatusOK)
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET issuer = 'https://race.example/' WHERE tenant_id = 'acme' AND key = 'race-1'"); err != nil {
		t.Fatal(err)
	}
	// The first retry's claim under the legacy spelling waits, in its
	// trigger, for the advisory lock the test holds.
	if _, err := b.admin.Exec(ctx, `
CREATE FUNCTION public.r3a_hold_claim() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM set_config('lock_timeout', '0', true);
    PERFORM pg_advisory_xact_lock(734201);
    RETURN NEW;
END $$;
CREATE TRIGGER r3a_hold_claim BEFORE INSERT ON orangerail.idempotency_keys FOR EACH ROW
    WHEN (NEW.key = 'race-1' AND NEW.issuer = 'https://race.example/') EXECUTE FUNCTION public.r3a_hold_claim();`); err != nil {
		t.Fatal(err)
	}
	conn, err := b.admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(734201)"); err != nil {
		t.Fatal(err)
	}
	first := make(chan *engine.Outcome, 1)
	go func() { first <- e.Call(ctx, caller, "add_order_note", args) }()
	for waiting := false; !waiting; {
		if err := b.admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND objid = 734201 AND NOT granted)").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	// The legacy key expires now, after the first retry's lookup.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET expires_at = now() - interval '1 second' WHERE tenant_id = 'acme' AND key = 'race-1'"); err != nil {
		t.Fatal(err)
	}
	second := e.Call(ctx, caller, "add_order_note", args)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(734201)"); err != nil {
		t.Fatal(err)
	}
	one := <-first
	if notes, runs := notesAndRuns(t, b, "acme", "expiring legacy key"); notes != 2 {
		t.Fatalf("two retries of an expired key (%s %s, %s %s): %d notes and %d execution records, want two of each (the first call's, one retry's)",
			one.Status, one.CorrelationID, second.Status, second.CorrelationID, notes, runs)
	}
}

// TestIdempotentRetryOfALegacyKeyAfterARespelling: a key an earlier version
// filed under the configured spelling (a trailing slash, not the canonical
// form) answers a retry after the operator re-spelled the issuer to its
// canonical form before the key expired: the retry is the same caller's
// (ontology.SameIssuer), so it answers as the first call did and runs
// nothing, where the lookup of the configured spelling alone missed it.
func TestIdempotentRetryOfALegacyKeyAfterARespelling(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	caller := func(issuer string) *engine.Caller {
		c := support("acme")
		c.Issuer = issuer
		return c
	}
	args := json.RawMessage(`{"order_id": "o-1001", "note": "filed, then re-spelled", "idempotencyKey": "respelled-legacy-1"}`)
	filed := e.Call(ctx, caller("https://idp.example/"), "add_order_note", args)
	want(t, filed, engine.StatusOK)
	// As an earlier version filed it: under the spelling the config had.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.idempotency_keys SET issuer = 'https://idp.example/' WHERE tenant_id = 'acme' AND key = 'respelled-legacy-1'"); err != nil {
		t.Fatal(err)
	}
	for _, respelled := range []string{"https://idp.example", "HTTPS://IDP.example:443"} {
		again := e.Call(ctx, caller(respelled), "add_order_note", args)
		if again.Status != engine.StatusOK || again.CorrelationID != filed.CorrelationID {
			t.Fatalf("a retry of a key filed under https://idp.example/ once the issuer is spelled %s: %s %s, the first call's correlation %s",
				respelled, again.Status, again.CorrelationID, filed.CorrelationID)
		}
	}
	if notes, runs := notesAndRuns(t, b, "acme", "filed, then re-spelled"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIdempotentClaimsUnderTwoSpellingsMeet: a replica not yet upgraded
// claims a key under the issuer as its config spells it
// (https://idp.example/), and a replica of this version, its config
// re-spelled (https://idp.example), is sent the same call under the same
// key while that claim is held: the second claim must meet the first (here
// abandoned: outcome_unknown under the first call's correlation, nothing
// run), not file a key of its own and run the call beside it. And the
// other way round: the earlier version's claim, its own spelling's key
// taken under the other, fails on the canonical index rather than claim.
func TestIdempotentClaimsUnderTwoSpellingsMeet(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	ctx := context.Background()
	caller := func(issuer string) *engine.Caller {
		c := support("acme")
		c.Issuer = issuer
		return c
	}
	args := json.RawMessage(`{"order_id": "o-1001", "note": "claimed under two spellings", "idempotencyKey": "two-claims-1"}`)
	want(t, e.Call(ctx, caller("https://idp.example/"), "add_order_note", args), engine.StatusOK)
	// The earlier version's call under its spelling: claimed, its outcome
	// not filed, its claim's time over (its replica stopped mid-call).
	if _, err := b.admin.Exec(ctx, `UPDATE orangerail.idempotency_keys
SET issuer = 'https://idp.example/', outcome = NULL, claim = gen_random_uuid(), claimed_until = now() - interval '1 second', correlation_id = 'old-replica-call'
WHERE tenant_id = 'acme' AND key = 'two-claims-1'`); err != nil {
		t.Fatal(err)
	}
	again := e.Call(ctx, caller("https://idp.example"), "add_order_note", args)
	if again.Status != engine.StatusOutcomeUnknown || again.CorrelationID != "old-replica-call" {
		t.Fatalf("a call under https://idp.example while https://idp.example/ holds the key's abandoned claim: %s %s, want outcome_unknown old-replica-call",
			again.Status, again.CorrelationID)
	}
	if notes, _ := notesAndRuns(t, b, "acme", "claimed under two spellings"); notes != 1 {
		t.Fatalf("%d notes, want the first call's alone", notes)
	}

	// The earlier version claims against the primary key, under its
	// spelling, a key this version filed under the canonical one.
	args = json.RawMessage(`{"order_id": "o-1001", "note": "claimed under the canonical spelling", "idempotencyKey": "two-claims-2"}`)
	want(t, e.Call(ctx, caller("https://idp.example"), "add_order_note", args), engine.StatusOK)
	_, err := b.admin.Exec(ctx, `INSERT INTO orangerail.idempotency_keys AS k (tenant_id, action, subject, issuer, key, input_digest, expires_at, claim, claimed_until, correlation_id)
SELECT tenant_id, action, subject, 'https://idp.example/', key, input_digest, now() + interval '1 minute', gen_random_uuid(), now() + interval '1 minute', 'old-replica-call-2'
FROM orangerail.idempotency_keys WHERE tenant_id = 'acme' AND key = 'two-claims-2'
ON CONFLICT (tenant_id, action, subject, issuer, key) DO UPDATE
SET input_digest = excluded.input_digest, outcome = NULL, expires_at = excluded.expires_at,
    claim = excluded.claim, claimed_until = excluded.claimed_until, correlation_id = excluded.correlation_id
WHERE k.expires_at <= now() AND k.outcome IS NOT NULL`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation {
		t.Fatalf("an earlier version's claim under https://idp.example/ of a key filed under https://idp.example: %v, want a unique violation", err)
	}
}

// TestIdempotentClaimsOfOneKeyAtOnceMeet: two replicas are sent the same
// call under the same key at the same instant, and both claims pass
// ON CONFLICT's look for the key before either has filed it. The claim's
// arbiter is idempotency_keys_canonical_idx; the primary key, of the same
// row, is checked as any other unique index: the later claim, waiting
// there for the first to commit, failed with a unique violation
// (internal_error to a caller whose call was answered), where it must
// meet the first claim as it does when it looks a moment later. The test
// holds the first claim between its primary key's entry and its canonical
// one (an index, built between the two, whose expression waits for the
// test), where the race holds it for a moment.
func TestIdempotentClaimsOfOneKeyAtOnceMeet(t *testing.T) {
	t.Parallel()
	b, e := idempotentNotes(t)
	other := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.idempotent", true))
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, `
CREATE FUNCTION public.rv_hold_claim(p_key text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER AS $$
BEGIN
    IF p_key = 'at-once-1' THEN
        PERFORM set_config('lock_timeout', '0', true);
        PERFORM pg_advisory_xact_lock(734203);
    END IF;
    RETURN true;
END $$;
GRANT EXECUTE ON FUNCTION public.rv_hold_claim(text) TO orangerail_runtime;
DROP INDEX orangerail.idempotency_keys_canonical_idx;
CREATE INDEX rv_hold_claim_idx ON orangerail.idempotency_keys (public.rv_hold_claim(key));
CREATE UNIQUE INDEX idempotency_keys_canonical_idx
    ON orangerail.idempotency_keys (tenant_id, action, subject, key, orangerail.issuer_key(issuer));`); err != nil {
		t.Fatal(err)
	}
	conn, err := b.admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(734203)"); err != nil {
		t.Fatal(err)
	}
	caller := support("acme")
	args := json.RawMessage(`{"order_id": "o-1001", "note": "claimed at once", "idempotencyKey": "at-once-1"}`)
	first := make(chan *engine.Outcome, 1)
	go func() { first <- e.Call(ctx, caller, "add_order_note", args) }()
	waitFor := func(locks string) {
		t.Helper()
		for waiting := false; !waiting; {
			if err := b.admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_locks WHERE "+locks+" AND NOT granted)").Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first claim holds its primary key's entry, not yet its
	// canonical one; the second passes the look for the key and waits on
	// the first's insertion at the primary key.
	waitFor("locktype = 'advisory' AND objid = 734203")
	second := make(chan *engine.Outcome, 1)
	go func() { second <- other.Call(ctx, caller, "add_order_note", args) }()
	waitFor("locktype = 'spectoken'")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(734203)"); err != nil {
		t.Fatal(err)
	}
	one, two := <-first, <-second
	want(t, one, engine.StatusOK)
	if two.Status != engine.StatusOK || two.CorrelationID != one.CorrelationID {
		t.Fatalf("a claim at once with another of its key: %s %s (%v), want the first call's answer, ok %s",
			two.Status, two.CorrelationID, two.Err, one.CorrelationID)
	}
	if notes, runs := notesAndRuns(t, b, "acme", "claimed at once"); notes != 1 || runs != 1 {
		t.Fatalf("%d notes and %d execution records, want one of each", notes, runs)
	}
}

// TestIdempotencyStatementsReadOneKey: each statement that finds a key by
// its canonical issuer, as the runtime runs it (its tenant's row policy
// applied), scans the index entries of that one key, not every key the
// subject holds for the action. issuer_key is not leakproof, so under the
// policy its comparison is no index condition but a filter: with the
// index's issuer_key(issuer) before key, the scan bound only tenant,
// action and subject, and every call read as many entries as its caller's
// live keys.
func TestIdempotencyStatementsReadOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.tenants (id) VALUES ('acme') ON CONFLICT DO NOTHING;
INSERT INTO orangerail.idempotency_keys (tenant_id, action, subject, issuer, key, input_digest, outcome, expires_at, claim, claimed_until, correlation_id)
SELECT 'acme', 'add_order_note', 'agent-7', 'https://idp.example', 'k-' || g, '\x00', '{}', now() + interval '1 hour', gen_random_uuid(), now(), 'c'
FROM generate_series(1, 5000) g;
ANALYZE orangerail.idempotency_keys;`); err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile("../../queries/idempotency.sql")
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{
		"tenant_id": "acme", "action": "add_order_note", "subject": "agent-7", "issuer": "https://idp.example/", "key": "k-2",
		"claim": uuid.New(), "outcome": []byte("{}"), "ttl_seconds": 60.0,
	}
	param := regexp.MustCompile(`@([a-z_]+)`)
	checked := 0
	for _, stmt := range strings.Split(string(source), "-- name: ")[1:] {
		name, _, _ := strings.Cut(stmt, " ")
		if name == "IdempotencyClaim" || name == "IdempotencyPrune" {
			continue // the claim meets its key at the index itself; prune reads expired keys
		}
		var values []any
		numbered := map[string]int{}
		sql := param.ReplaceAllStringFunc(stmt, func(p string) string {
			p = p[1:]
			if numbered[p] == 0 {
				values = append(values, args[p])
				numbered[p] = len(values)
			}
			return fmt.Sprintf("$%d", numbered[p])
		})
		lines, err := func() ([]string, error) {
			var lines []string
			err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) -- name: "+sql, values...)
				if err != nil {
					return err
				}
				lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
				return err
			})
			return lines, err
		}()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		explained := strings.Join(lines, "\n")
		index := regexp.MustCompile(`Index Scan using (\S+)`).FindStringSubmatch(explained)
		cond := regexp.MustCompile(`Index Cond: (.*)`).FindStringSubmatch(explained)
		if index == nil || cond == nil {
			t.Fatalf("%s reads no index:\n%s", name, explained)
		}
		// The index's columns up to key are each bound by the condition.
		var columns []string
		if err := b.admin.QueryRow(ctx, `SELECT array_agg(pg_get_indexdef(i.indexrelid, n, false) ORDER BY n)
FROM pg_index i, generate_series(1, i.indnatts) n WHERE i.indexrelid = ('orangerail.' || $1)::regclass`, index[1]).Scan(&columns); err != nil {
			t.Fatal(err)
		}
		for _, c := range columns {
			if !strings.Contains(cond[1], "("+c+" = ") {
				t.Errorf("%s scans %s bounded by %s alone, short of %s: every key of the subject is read\n%s", name, index[1], cond[1], c, explained)
				break
			}
			if c == "key" {
				break
			}
		}
		checked++
	}
	if checked != 4 {
		t.Fatalf("%d statements checked, want find, save, abandoned and release", checked)
	}
}
