package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// The COMMIT of an execution on the shared database is where "done" and
// "not done" part: the tests below cut it both ways, and the engine, which
// read the transaction's id before the COMMIT, asks Postgres which it was
// instead of answering outcome_unknown.

// TestKillBeforeCommit: the backend dies as the execution's COMMIT is
// about to be sent (after the transaction's id was read, the effect and
// its records written): the COMMIT fails, Postgres confirms the
// transaction aborted, and the poll answers store_unavailable — nothing
// ran, the approval still approved — not outcome_unknown; the next poll
// executes it once.
func TestKillBeforeCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	trap := b.killer.Arm(faults.Trap{Match: []string{"pg_current_xact_id"}, When: faults.After})
	polls := b.lifecycle(t, "fault-before-commit")
	executedOnce(t, polls)
	fired(t, trap)
	if first := polls[0]; first.Status != engine.StatusInternalError || first.Diagnostic != engine.DiagnosticStoreUnavailable {
		t.Errorf("the poll whose COMMIT met a dead backend answered %s %q, want %s %q", first.Status, first.Diagnostic,
			engine.StatusInternalError, engine.DiagnosticStoreUnavailable)
	}
	if len(polls) != 2 {
		t.Errorf("%d polls, want 2: the one cut, and the one executing", len(polls))
	}
	b.finish(t)
}

// dialAs returns a pool's dial func whose connections are TCP ones as
// wrap makes them: a network that misbehaves as a test needs.
func dialAs(wrap func(net.Conn) net.Conn) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(conn), nil
	}
}

// setupTraced is the example's bundle with the config edited by edits, the
// engine's pool traced by tracer (which sees what it sends) and dialed by
// dial (which makes the connections tracer arms).
func setupTraced(t *testing.T, tracer pgx.QueryTracer, dial pgconn.DialFunc, edits ...ontologytest.Edit) *bundle {
	t.Helper()
	url := testdb.New(t)
	return setupPool(t, url, func(*faults.Killer) *pgxpool.Pool {
		cfg := faults.RuntimePoolConfig(t, url)
		cfg.ConnConfig.Tracer, cfg.ConnConfig.DialFunc = tracer, dial
		return faults.NewPool(t, cfg)
	}, edits...)
}

// answerEater is a pool's tracer whose connections (eatingConns, dialAs
// makes them), once armed, read and drop every byte Postgres sends until
// their read deadline: the answers of a half-open network, lost on their
// way. It arms the connection that is about to send the COMMIT of an
// execution (one that has just read its transaction's id), once.
type answerEater struct {
	xidWatch
	// armed is closed once a COMMIT's connection was armed.
	armed chan struct{}
}

// xidWatch notes the connection that read its transaction's id last, as
// the engine does before an execution's COMMIT: in a statement of its own
// or sent with the execution's last statements (a database.Queue's
// batch). Its mutex guards what the tracer embedding it keeps too.
type xidWatch struct {
	mu      sync.Mutex
	xidConn *pgx.Conn
}

// readsXID reports whether sql reads the transaction's id.
func readsXID(sql string) bool { return strings.Contains(sql, "pg_current_xact_id") }

func (w *xidWatch) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range data.Batch.QueuedQueries {
		if readsXID(q.SQL) {
			w.xidConn = conn
		}
	}
	return ctx
}

func (w *xidWatch) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (w *xidWatch) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// eatingConn is a connection answerEater arms.
type eatingConn struct {
	net.Conn
	eat atomic.Bool
}

func (c *eatingConn) Read(b []byte) (int, error) {
	for c.eat.Load() {
		if _, err := c.Conn.Read(b); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

func (a *answerEater) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case readsXID(data.SQL):
		a.xidConn = conn
	case conn == a.xidConn && strings.EqualFold(strings.TrimSpace(data.SQL), "commit") && a.armed != nil:
		if c, ok := conn.PgConn().Conn().(*eatingConn); ok {
			c.eat.Store(true)
			close(a.armed)
			a.armed = nil
		}
	}
	return ctx
}

func (a *answerEater) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// eatAnswers is the example's bundle with the config edited by edits and
// the proxy runs' short limits, its pool's connections dialed as
// eatingConns under an answerEater: armed is closed once the answer to an
// execution's COMMIT is being eaten.
func eatAnswers(t *testing.T, edits ...ontologytest.Edit) (b *bundle, armed <-chan struct{}) {
	t.Helper()
	eater := &answerEater{armed: make(chan struct{})}
	armed = eater.armed
	b = setupTraced(t, eater, dialAs(func(c net.Conn) net.Conn { return &eatingConn{Conn: c} }), append(edits, shortLimits)...)
	b.deadline = blackHoleDeadline
	return b, armed
}

// TestCommitAnswerLost: Postgres commits an execution whose COMMIT's
// answer never reaches the engine (a half-open network at that instant):
// the COMMIT fails at its connection's deadline, Postgres, asked on
// another connection, confirms the transaction committed, and the poll
// answers executed — not outcome_unknown, as it did before the engine
// asked. A later poll does not execute it again.
func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()
	b, armed := eatAnswers(t)
	polls := b.lifecycle(t, "fault-commit-answer-lost")
	select {
	case <-armed:
	default:
		t.Fatal("no COMMIT's answer was lost")
	}
	executedOnce(t, polls)
	if len(polls) != 1 || polls[0].Status != engine.StatusOK {
		t.Errorf("the poll whose COMMIT's answer was lost: %d polls, the first %s %q, want one, %s", len(polls), polls[0].Status, polls[0].Diagnostic, engine.StatusOK)
	}
	again := b.call(t, "check again", func(ctx context.Context) *engine.Outcome {
		return b.engine.Check(ctx, agent, polls[0].ApprovalID.String())
	})
	if again.Status != engine.StatusConsumed {
		t.Errorf("a poll after the execution answered %s, want %s", again.Status, engine.StatusConsumed)
	}
	faults.Require(t, b.admin, noteEffect)
	for _, l := range b.log {
		t.Log(l)
	}
}

// commitSwallower is a pool's tracer whose connections (swallowingConns,
// its dial makes them), once armed, send nothing more and never close
// toward Postgres: a network that swallows the COMMIT, and the
// connection's end after it, so that the server holds the transaction
// open, idle, until its idle bound ends it. tracer arms the connection
// that is about to send the COMMIT of an execution (one that has just read
// its transaction's id), once. With isolate, arming it takes the whole
// pool off the network: every connection sends nothing more, and none
// connects, so that Postgres cannot be asked what became of the
// transaction. release closes the swallowed connection and brings the
// network back, as the network healing would.
type commitSwallower struct {
	xidWatch
	isolate bool
	// armed is closed once a COMMIT was swallowed.
	armed chan struct{}
	// swallowed is the connection armed.
	swallowed *swallowingConn
	// down: the pool is off the network (isolate).
	down atomic.Bool
}

// swallowingConn is a connection commitSwallower arms.
type swallowingConn struct {
	net.Conn
	swallow atomic.Bool
	down    *atomic.Bool
}

func (c *swallowingConn) Write(b []byte) (int, error) {
	if c.swallow.Load() || c.down.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// Close leaves the connection open toward Postgres while it swallows:
// release closes it.
func (c *swallowingConn) Close() error {
	if c.swallow.Load() {
		return nil
	}
	return c.Conn.Close()
}

// dial connects as the pool's DialFunc, unless the pool is off the
// network.
func (s *commitSwallower) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.down.Load() {
		return nil, errors.New("the network is down")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &swallowingConn{Conn: conn, down: &s.down}, nil
}

func (s *commitSwallower) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case readsXID(data.SQL):
		s.xidConn = conn
	case conn == s.xidConn && strings.EqualFold(strings.TrimSpace(data.SQL), "commit") && s.swallowed == nil:
		if c, ok := conn.PgConn().Conn().(*swallowingConn); ok {
			c.swallow.Store(true)
			s.swallowed = c
			s.down.Store(s.isolate)
			close(s.armed)
		}
	}
	return ctx
}

func (s *commitSwallower) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// release closes the swallowed connection and brings the network back.
func (s *commitSwallower) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down.Store(false)
	if s.swallowed != nil {
		_ = s.swallowed.Conn.Close()
	}
}

// swallowCommit stages and approves a note, then polls it once with the
// execution's COMMIT swallowed (and with isolate, the pool taken off the
// network with it): the first poll's outcome, and what polls again.
func swallowCommit(t *testing.T, isolate bool, note string) (b *bundle, swallower *commitSwallower, first *engine.Outcome, check func(what string) *engine.Outcome) {
	t.Helper()
	swallower = &commitSwallower{isolate: isolate, armed: make(chan struct{})}
	b = setupTraced(t, swallower, swallower.dial, shortLimits)
	t.Cleanup(swallower.release)
	b.deadline = blackHoleDeadline

	id := b.stage(t, "add_order_note", json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": %q}`, note)))
	b.approve(t, id)
	check = func(what string) *engine.Outcome {
		return b.call(t, what, func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
	}
	first = check("check, its COMMIT swallowed")
	select {
	case <-swallower.armed:
	default:
		t.Fatal("no COMMIT was swallowed")
	}
	var status string
	if err := b.admin.QueryRow(context.Background(), `SELECT status FROM orangerail.approvals WHERE id = $1`, id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "approved" {
		t.Errorf("after the swallowed COMMIT the approval is %s to others, want approved", status)
	}
	return b, swallower, first, check
}

// executesOnceMore polls until the approval executes: once, and a later
// poll answers consumed; the invariants hold (the note written once, by
// the execution that succeeded).
func executesOnceMore(t *testing.T, b *bundle, check func(what string) *engine.Outcome, what string) {
	t.Helper()
	var polls []*engine.Outcome
	for range attempts {
		out := check(what)
		polls = append(polls, out)
		if out.Status == engine.StatusOK || out.Status == engine.StatusConsumed {
			break
		}
	}
	executedOnce(t, polls)
	if last := polls[len(polls)-1]; last.Status != engine.StatusOK {
		t.Errorf("the poll after Postgres aborted the swallowed transaction answered %s, want %s: nothing of the first ran", last.Status, engine.StatusOK)
	}
	if again := check("check again"); again.Status != engine.StatusConsumed {
		t.Errorf("a poll after the execution answered %s, want %s", again.Status, engine.StatusConsumed)
	}
	faults.Require(t, b.admin, noteEffect)
	for _, l := range b.log {
		t.Log(l)
	}
}

// TestCommitNeverArrived: an execution's COMMIT never reaches Postgres
// (the network swallows it, and the connection's end after it), so the
// client's COMMIT fails at its connection's deadline while the server,
// hearing nothing, holds the transaction open. The server's own bound
// (a bounded transaction's idle_in_transaction_session_timeout, its
// client's deadline) ends it, so Postgres, asked on another connection,
// settles it: not committed. The poll answers store_unavailable, nothing
// ran, the approval still approved, and the next poll executes it once —
// with the swallowed connection still open: the server did not wait for
// the network to heal. Without the server's bound the transaction stays
// in progress and the poll could only answer outcome_unknown.
func TestCommitNeverArrived(t *testing.T) {
	t.Parallel()
	b, _, first, check := swallowCommit(t, false, "fault-commit-never-arrived")
	if first.Status != engine.StatusInternalError || first.Diagnostic != engine.DiagnosticStoreUnavailable || !errors.Is(first.Err, database.ErrNotCommitted) {
		t.Fatalf("the poll whose COMMIT never reached Postgres answered %s %q (%v), want %s %q, the transaction not committed",
			first.Status, first.Diagnostic, first.Err, engine.StatusInternalError, engine.DiagnosticStoreUnavailable)
	}
	executesOnceMore(t, b, check, "check, the swallowed connection still open")
}

// TestCommitStatusUnknown: an execution's COMMIT never reaches Postgres,
// and the whole pool loses the network with it, so that Postgres cannot be
// asked what became of the transaction: the poll answers outcome_unknown,
// classified and within its deadline, never "executed" nor "nothing ran".
// The server ends the transaction at its idle bound meanwhile; once the
// network is back the approval is still approved, the next poll executes
// it once, a later one answers consumed, and the invariants hold.
func TestCommitStatusUnknown(t *testing.T) {
	t.Parallel()
	b, swallower, first, check := swallowCommit(t, true, "fault-commit-status-unknown")
	if first.Status != engine.StatusOutcomeUnknown {
		t.Fatalf("the poll whose COMMIT never reached an unreachable Postgres answered %s %q (%v), want %s", first.Status, first.Diagnostic, first.Err, engine.StatusOutcomeUnknown)
	}
	swallower.release()
	executesOnceMore(t, b, check, "check after the network came back")
}

// commitCutter is a pool's tracer whose connections (cuttingConns, dialAs
// makes them), once armed, let the answer to a COMMIT arrive, drop it and
// end: a COMMIT that took effect whose answer was lost with its
// connection. tracer arms, once, the connection that is about to COMMIT a
// transaction that ran a statement containing after, or to send a batch
// holding one: a statement sent with its scope and committed at the
// batch's end (database.RowWriter), whose answer comes once it committed.
type commitCutter struct {
	after string
	mu    sync.Mutex
	// marked ran after last; armed is nil once a COMMIT was armed.
	marked *pgx.Conn
	armed  chan struct{}
}

// cuttingConn is a connection commitCutter arms.
type cuttingConn struct {
	net.Conn
	cut  atomic.Bool
	done chan struct{}
}

func (c *cuttingConn) Read(b []byte) (int, error) {
	if c.cut.CompareAndSwap(true, false) {
		// The COMMIT was sent; its answer comes once it took effect,
		// and is lost with the connection.
		_, _ = c.Conn.Read(b)
		_ = c.Close()
		close(c.done)
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

func (c *commitCutter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.armed == nil:
	case strings.Contains(data.SQL, c.after):
		c.marked = conn
	case conn == c.marked && strings.EqualFold(strings.TrimSpace(data.SQL), "commit"):
		c.arm(conn)
	}
	return ctx
}

func (c *commitCutter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *commitCutter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil || conn == c.marked {
		return ctx // a transaction's batch: its COMMIT is armed above
	}
	for _, q := range data.Batch.QueuedQueries {
		if strings.Contains(q.SQL, c.after) {
			c.arm(conn)
			break
		}
	}
	return ctx
}

func (c *commitCutter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *commitCutter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// arm cuts conn's next answer.
func (c *commitCutter) arm(conn *pgx.Conn) {
	if cc, ok := conn.PgConn().Conn().(*cuttingConn); ok {
		cc.done = c.armed
		cc.cut.Store(true)
		c.armed = nil
	}
}

// cutAfter returns a bundle on a fresh database, edited by edits, whose
// runtime pool loses, once, the answer to the COMMIT of a transaction that
// sent a statement holding after, or to a batch holding it
// (commitCutter), and a channel closed once it did.
func cutAfter(t *testing.T, after string, edits ...ontologytest.Edit) (*bundle, <-chan struct{}) {
	t.Helper()
	cut := make(chan struct{})
	cutter := &commitCutter{after: after, armed: cut}
	b := setupTraced(t, cutter, dialAs(func(c net.Conn) net.Conn { return &cuttingConn{Conn: c} }), edits...)
	return b, cut
}

// TestUpstreamStartAnswerLate: the answer to an upstream execution's
// start (its consume and execution_started, committed before the call) is
// lost on a half-open network, so its COMMIT fails only at its
// connection's deadline, and Postgres, asked, confirms it committed. By
// then the datasource's transaction, which holds the target's row lock
// and began first, is past its own deadline too, and Postgres ends it as
// soon as it has sat idle that long: the call would run unguarded by the
// lock the precondition was checked under. So it does not run: the
// execution is recorded failed (datasource_timeout, nothing ran), no
// label is made, and a later poll answers consumed.
func TestUpstreamStartAnswerLate(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b, armed := eatAnswers(t, labelEdits(c.URL)...)
	_, polls := b.labelLifecycle(t, "answer late")
	select {
	case <-armed:
	default:
		t.Fatal("no COMMIT's answer was lost")
	}
	if first := polls[0]; first.Status != engine.StatusFailed || first.Diagnostic != engine.DiagnosticDatasourceTimeout {
		t.Errorf("the poll whose start answered late: %s %q (%v), want %s %q", first.Status, first.Diagnostic, first.Err,
			engine.StatusFailed, engine.DiagnosticDatasourceTimeout)
	}
	if last := polls[len(polls)-1]; last.Status != engine.StatusConsumed {
		t.Errorf("a later poll answered %s, want %s", last.Status, engine.StatusConsumed)
	}
	if labels, requests := c.made(); labels != 0 || requests != 0 {
		t.Errorf("the carrier made %d labels from %d requests, want none: the lock would not have held", labels, requests)
	}
	requireFinishedOrFlagged(t, b, nil)
	for _, l := range b.log {
		t.Log(l)
	}
}

// TestStageCommitAnswerLost: a stage's COMMIT takes effect and its answer
// is lost with its connection: the stage runs once more on another
// connection (it may: staging twice is staging once), finds the approval
// its first COMMIT made and answers it — approval_pending at once, one
// approval, one staged record — and the lifecycle goes on from there.
func TestStageCommitAnswerLost(t *testing.T) {
	t.Parallel()
	b, cut := cutAfter(t, "-- name: ApprovalStage")
	input := json.RawMessage(`{"order_id": "o-1001", "note": "fault-stage-answer-lost"}`)
	staged := b.call(t, "stage", func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", input) })
	select {
	case <-cut:
	default:
		t.Fatal("no COMMIT's answer was lost")
	}
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("the stage whose COMMIT's answer was lost answered %s %q (%v), want %s", staged.Status, staged.Diagnostic, staged.Err, engine.StatusApprovalPending)
	}
	var approvals, records int
	err := b.admin.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM orangerail.approvals),
		(SELECT count(*) FROM orangerail.audit WHERE phase = 'staged' AND correlation_id = $1)`, staged.ApprovalID.String()).Scan(&approvals, &records)
	if err != nil || approvals != 1 || records != 1 {
		t.Fatalf("%d approvals and %d staged records of it (%v), want 1 and 1", approvals, records, err)
	}
	executedOnce(t, b.lifecycle(t, "fault-stage-answer-lost"))
	faults.Require(t, b.admin, noteEffect)
}

// TestUpstreamStartCommitAnswerLost: an upstream call's consume and
// execution_started commit, and the COMMIT's answer is lost with its
// connection. Postgres, asked on another connection, says the transaction
// committed, so the execution goes on to its call: the poll answers
// executed, the carrier makes one label from one request, and the log
// holds the execution's end — not a failure answered while the log says
// the execution began, with no call made and no end ever written.
func TestUpstreamStartCommitAnswerLost(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b, cut := cutAfter(t, "-- name: ApprovalConsume", labelEdits(c.URL)...)
	_, polls := b.labelLifecycle(t, "arrived damaged")
	select {
	case <-cut:
	default:
		t.Fatal("no COMMIT's answer was lost")
	}
	if first := polls[0]; len(polls) != 1 || first.Status != engine.StatusOK {
		t.Errorf("%d polls, the first %s %q (%v), want one, %s", len(polls), first.Status, first.Diagnostic, first.Err, engine.StatusOK)
	}
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Errorf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
	requireFinishedOrFlagged(t, b, nil)
	for _, l := range b.log {
		t.Log(l)
	}
}

// TestIdempotencyClaimLost: the backend dies once the claim of an
// idempotency key is written, before it commits: the claim rolls back,
// nothing runs, and the call says so (internal_error); a retry under the
// key claims it and runs the call, once.
func TestIdempotencyClaimLost(t *testing.T) {
	t.Parallel()
	b := setupOn(t, testdb.New(t), ontologytest.Set("actions.add_order_note.policy.approval", "none"),
		ontologytest.Set("actions.add_order_note.idempotent", true))
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: IdempotencyClaim "}, When: faults.After})
	args := json.RawMessage(`{"order_id": "o-1001", "note": "fault-claim-lost", "idempotencyKey": "claim-lost-1"}`)
	call := func(what string) *engine.Outcome {
		return b.call(t, what, func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", args) })
	}
	first := call("the call whose claim met a dead backend")
	fired(t, trap)
	if first.Status != engine.StatusInternalError {
		t.Fatalf("the call answered %s %q (%v), want %s: its claim rolled back, nothing ran", first.Status, first.Diagnostic, first.Err, engine.StatusInternalError)
	}
	notes := func() (n int) {
		if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM order_notes WHERE note = 'fault-claim-lost'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := notes(); n != 0 {
		t.Fatalf("%d notes after a claim that rolled back, want 0", n)
	}
	retry := call("a retry under the key")
	if retry.Status != engine.StatusOK || retry.Replayed {
		t.Fatalf("the retry answered %s (replayed %v), want the call run", retry.Status, retry.Replayed)
	}
	if n := notes(); n != 1 {
		t.Fatalf("%d notes, want 1", n)
	}
	b.finish(t)
}

// TestIdempotencyFilingCommitLost: the backend dies as the filing of an
// idempotency key's outcome is about to commit, the call's effect done:
// Postgres confirms the filing did not commit, so the outcome is filed
// again, and a retry under the key gets it back and runs nothing — the
// note is written once.
func TestIdempotencyFilingCommitLost(t *testing.T) {
	t.Parallel()
	b := setupOn(t, testdb.New(t), ontologytest.Set("actions.add_order_note.policy.approval", "none"),
		ontologytest.Set("actions.add_order_note.idempotent", true))
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: IdempotencySave "}, When: faults.After})
	args := json.RawMessage(`{"order_id": "o-1001", "note": "fault-filing-lost", "idempotencyKey": "filing-lost-1"}`)
	call := func(what string) *engine.Outcome {
		return b.call(t, what, func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", args) })
	}
	first := call("the call whose filing's COMMIT met a dead backend")
	fired(t, trap)
	if first.Status != engine.StatusOK {
		t.Fatalf("the call answered %s %q (%v), want %s: its effect committed", first.Status, first.Diagnostic, first.Err, engine.StatusOK)
	}
	retry := call("a retry under the key")
	if retry.Status != engine.StatusOK || retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry answered %s under %s, want the first call's outcome (%s)", retry.Status, retry.CorrelationID, first.CorrelationID)
	}
	var notes int
	if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM order_notes WHERE note = 'fault-filing-lost'").Scan(&notes); err != nil || notes != 1 {
		t.Fatalf("%d notes (%v), want 1", notes, err)
	}
	if log := b.hostLog.String(); strings.Contains(log, "idempotency outcome") {
		t.Errorf("the outcome was filed again, yet the engine warned:\n%s", log)
	}
	b.finish(t)
}

// claimEater is answerEater for the filing of an idempotency key's
// outcome: it arms the connection that filed a call's outcome under its
// key, as it sends its COMMIT, once, and counts the questions asked after
// it of the transaction's status.
type claimEater struct {
	mu       sync.Mutex
	claiming *pgx.Conn
	armed    chan struct{}
	asked    int
}

func (a *claimEater) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case strings.Contains(data.SQL, "pg_xact_status") && a.armed == nil:
		a.asked++
	case strings.Contains(data.SQL, "-- name: IdempotencySave "):
		a.claiming = conn
	case conn == a.claiming && strings.EqualFold(strings.TrimSpace(data.SQL), "commit") && a.armed != nil:
		if c, ok := conn.PgConn().Conn().(*eatingConn); ok {
			c.eat.Store(true)
			close(a.armed)
			a.armed = nil
		}
	}
	return ctx
}

func (a *claimEater) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestIdempotencyFilingAnswerLost: Postgres commits the filing of an
// idempotency key's outcome, but the COMMIT's answer never reaches the
// engine: the COMMIT fails at its connection's deadline, Postgres, asked
// on another connection, confirms the filing committed (the key holds the
// outcome under the call's claim) — so the engine neither files it again
// nor warns that it may not be filed — and the call answers its outcome; a
// retry gets it back, and the note is written once.
func TestIdempotencyFilingAnswerLost(t *testing.T) {
	t.Parallel()
	eater := &claimEater{armed: make(chan struct{})}
	armed := eater.armed
	b := setupTraced(t, eater, dialAs(func(c net.Conn) net.Conn { return &eatingConn{Conn: c} }),
		ontologytest.Set("actions.add_order_note.policy.approval", "none"), ontologytest.Set("actions.add_order_note.idempotent", true), shortLimits)
	b.deadline = blackHoleDeadline
	args := json.RawMessage(`{"order_id": "o-1001", "note": "fault-claim-answer-lost", "idempotencyKey": "answer-lost-1"}`)
	call := func(what string) *engine.Outcome {
		return b.call(t, what, func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", args) })
	}
	first := call("the call whose filing's COMMIT answer was lost")
	select {
	case <-armed:
	default:
		t.Fatal("no filing's COMMIT answer was lost")
	}
	if first.Status != engine.StatusOK {
		t.Fatalf("the call answered %s %q (%v), want %s", first.Status, first.Diagnostic, first.Err, engine.StatusOK)
	}
	retry := call("a retry under the key")
	if retry.Status != engine.StatusOK || retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry answered %s under %s, want the first call's outcome (%s)", retry.Status, retry.CorrelationID, first.CorrelationID)
	}
	var notes int
	if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM order_notes WHERE note = 'fault-claim-answer-lost'").Scan(&notes); err != nil || notes != 1 {
		t.Fatalf("%d notes (%v), want 1", notes, err)
	}
	eater.mu.Lock()
	asked := eater.asked
	eater.mu.Unlock()
	if asked == 0 {
		t.Error("Postgres was never asked whether the filing committed")
	}
	if log := b.hostLog.String(); strings.Contains(log, "idempotency outcome") {
		t.Errorf("the engine doubted the filing Postgres confirmed:\n%s", log)
	}
	faults.Require(t, b.admin, noteEffect)
	for _, l := range b.log {
		t.Log(l)
	}
}
