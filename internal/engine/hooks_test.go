package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/engine/enginetest"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// hookedEngine serves the example on b's database, emitting into hooks,
// its clock now.
func hookedEngine(t *testing.T, b *exampleBundle, hooks *engine.Hooks, now func() time.Time) *engine.Engine {
	t.Helper()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: b.key,
		Logger: quiet, Hooks: hooks, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestHooksSeeTheLifecycle: a subscriber sees each kind of event the
// engine emits — a gate outcome per call, every approval transition, every
// audit append, the effect attempt — each once its transaction committed:
// an expiry a rolled-back transaction made and undid is not reported.
func TestHooksSeeTheLifecycle(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	rec := &enginetest.Recorder{}
	hooks.Subscribe(0, rec.Record)
	e := hookedEngine(t, b, hooks, nil)
	// A clock almost a day behind stages approvals that lapse at once.
	past := hookedEngine(t, b, nil, func() time.Time { return time.Now().Add(-24*time.Hour + 300*time.Millisecond) })

	want(t, e.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)), engine.StatusOK)
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := *staged.ApprovalID
	view, err := e.ShowApproval(ctx, "acme", id.String())
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id.String(), Approve: true, Digest: view.Digest}), engine.StatusOK)
	executed := e.Check(ctx, support("acme"), id.String())
	want(t, executed, engine.StatusOK)

	old := past.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, old, engine.StatusApprovalPending)
	lapsed := *old.ApprovalID
	for lapsing := true; lapsing; { // until the database's clock passes its expiry
		if err := b.admin.QueryRow(ctx, "SELECT expires_at > now() FROM orangerail.approvals WHERE id = $1", lapsed).Scan(&lapsing); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Polling an unknown approval expires the lapsed one in a transaction
	// that then rolls back (nothing found): no expiry happened.
	want(t, e.Check(ctx, support("acme"), uuid.NewString()), engine.StatusNotFound)
	want(t, e.Check(ctx, support("acme"), lapsed.String()), engine.StatusExpired)
	hooks.Close()

	var got []string
	for _, ev := range rec.All() {
		switch ev := ev.(type) {
		case engine.Gate:
			got = append(got, fmt.Sprintf("gate %s %s", ev.Op, ev.Status))
			if ev.Tenant != "acme" || ev.Actor == "" {
				t.Errorf("gate without its caller: %+v", ev)
			}
			if ev.Duration <= 0 {
				t.Errorf("gate without its duration: %+v", ev)
			}
		case engine.ApprovalChanged:
			got = append(got, fmt.Sprintf("approval %s %s", ev.Transition, map[uuid.UUID]string{id: "staged-call", lapsed: "lapsed-call"}[ev.ApprovalID]))
			// An approval's age is told where it was open: at its
			// decision and its consumption.
			aged := ev.Transition == engine.TransitionApproved || ev.Transition == engine.TransitionConsumed
			if aged != (ev.Age > 0) || ev.Age < 0 {
				t.Errorf("approval %s with age %v", ev.Transition, ev.Age)
			}
		case engine.AuditAppended:
			got = append(got, fmt.Sprintf("audit %s", ev.Phase))
		case engine.EffectAttempted:
			got = append(got, fmt.Sprintf("effect %s %s", ev.Action, ev.Outcome))
			if ev.ApprovalID != id || ev.CorrelationID != executed.CorrelationID {
				t.Errorf("effect of another call: %+v", ev)
			}
		default:
			t.Errorf("an event the engine does not emit: %#v", ev)
		}
	}
	wantEvents := []string{
		"gate get ok",
		"approval staged staged-call", "audit staged", "gate call approval_pending",
		"approval approved staged-call", "audit approved", "gate decide ok",
		"approval consumed staged-call", "audit execution_started", "audit execution_succeeded",
		"effect cancel_order ok", "gate check ok",
		"gate check not_found",
		"approval expired lapsed-call", "audit expired", "gate check expired",
	}
	if !slices.Equal(got, wantEvents) {
		t.Fatalf("events:\n%q\nwant:\n%q", got, wantEvents)
	}
}

// TestBlockedSubscriberBlocksNoCall: a subscriber that stops reading does
// not slow or block a call — its events are dropped and counted — and
// another subscriber still receives every event.
func TestBlockedSubscriberBlocksNoCall(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stuck := hooks.Subscribe(1, func(engine.Event) {
		once.Do(func() { close(blocked) })
		<-release
	})
	rec := &enginetest.Recorder{}
	hooks.Subscribe(0, rec.Record)
	e := hookedEngine(t, b, hooks, nil)

	want(t, e.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)), engine.StatusOK)
	<-blocked // the subscriber holds its first event and reads no more
	const calls = 20
	for range calls {
		want(t, e.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)), engine.StatusOK)
	}
	// One event is held, one fits the buffer; every other was dropped.
	if got := stuck.Dropped(); got != calls-1 {
		t.Fatalf("dropped %d events, want %d", got, calls-1)
	}
	close(release)
	hooks.Close()
	if n := len(rec.All()); n != calls+1 {
		t.Fatalf("the other subscriber received %d events, want %d", n, calls+1)
	}
}

// TestPanickingSubscriberBreaksNoCall: a subscriber that panics on every
// event changes no answer, and another subscriber receives every event.
func TestPanickingSubscriberBreaksNoCall(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	hooks := engine.NewHooks()
	t.Cleanup(hooks.Close)
	panicking := hooks.Subscribe(0, func(engine.Event) { panic("a subscriber's bug") })
	rec := &enginetest.Recorder{}
	hooks.Subscribe(0, rec.Record)
	e := hookedEngine(t, b, hooks, nil)

	got := e.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`))
	want(t, got, engine.StatusOK)
	if plain := b.engine.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)); string(plain.Data) != string(got.Data) {
		t.Fatalf("the answer changed: %s, want %s", got.Data, plain.Data)
	}
	want(t, e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`)), engine.StatusApprovalPending)
	hooks.Close()
	n := uint64(len(rec.All()))
	if n == 0 || panicking.Panics() != n {
		t.Fatalf("%d panics for %d events", panicking.Panics(), n)
	}
}

// TestHooksDeliver holds the dispatcher to its contract: each subscriber
// gets every event in order, Close delivers what is buffered, a closed
// subscription or Hooks gets nothing more, and nil Hooks are inert.
func TestHooksDeliver(t *testing.T) {
	t.Parallel()
	var none *engine.Hooks
	none.Emit(engine.Gate{}) // nil Hooks: nothing happens
	none.Close()

	hooks := engine.NewHooks()
	a, b := &enginetest.Recorder{}, &enginetest.Recorder{}
	subA := hooks.Subscribe(0, a.Record)
	hooks.Subscribe(0, b.Record)
	for i := range 100 {
		hooks.Emit(engine.AuditAppended{CorrelationID: fmt.Sprintf("%03d", i)})
	}
	subA.Close()
	subA.Close() // twice is fine
	hooks.Emit(engine.AuditAppended{CorrelationID: "100"})
	hooks.Close()
	hooks.Emit(engine.AuditAppended{CorrelationID: "101"})
	late := &enginetest.Recorder{}
	hooks.Subscribe(0, late.Record).Close()

	seqs := func(r *enginetest.Recorder) []string {
		var out []string
		for _, ev := range r.All() {
			out = append(out, ev.(engine.AuditAppended).CorrelationID)
		}
		return out
	}
	if got := seqs(a); len(got) != 100 || !slices.IsSorted(got) {
		t.Fatalf("a closed subscriber got %v", got)
	}
	if got := seqs(b); len(got) != 101 || !slices.IsSorted(got) || got[100] != "100" {
		t.Fatalf("an open subscriber got %v", got)
	}
	if len(late.All()) != 0 {
		t.Fatal("closed Hooks delivered")
	}
}

// TestEventsAreValues: every event is made of plain values — no pointer,
// slice, map, channel, function or interface — so that the copy each
// subscriber gets is its own, and nothing it does reaches an emitter.
func TestEventsAreValues(t *testing.T) {
	t.Parallel()
	var check func(path string, typ reflect.Type)
	check = func(path string, typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
			t.Errorf("%s is a %s", path, typ.Kind())
		case reflect.Struct:
			for i := range typ.NumField() {
				check(path+"."+typ.Field(i).Name, typ.Field(i).Type)
			}
		case reflect.Array:
			check(path+"[]", typ.Elem())
		}
	}
	for _, ev := range []engine.Event{engine.ToolCalled{}, engine.Gate{}, engine.ApprovalChanged{}, engine.AuditAppended{},
		engine.EffectAttempted{}, engine.RateRefused{}, engine.RequestRefused{}} {
		check(reflect.TypeOf(ev).Name(), reflect.TypeOf(ev))
	}
}

// TestHostLogLines: the host-log subscriber writes a tool call's and a
// refused request's lines with exactly their fields.
func TestHostLogLines(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	log := hostLogTo(&buf)
	log(engine.ToolCalled{Tool: "order_get", Outcome: engine.StatusOK, Actor: "agent-7", Tenant: "acme", CorrelationID: "c-1"})
	log(engine.ToolCalled{Tool: "order_list", Outcome: engine.StatusInvalidInput, Actor: "agent-7", Tenant: "acme", Code: errcode.InputInvalid})
	log(engine.ToolCalled{Tool: "cancel_order", Outcome: engine.StatusNotFound, Actor: "agent-7", Tenant: "acme", Code: errcode.MCPToolUnknown, Refusal: engine.RefusalHidden})
	log(engine.ToolCalled{Tool: "cancel_order", Outcome: engine.StatusDenied, Actor: "agent-7", Tenant: "acme", Code: errcode.MCPScopeDenied,
		Scope: "orders:write", CorrelationID: "c-2", Refusal: engine.RefusalScope})
	log(engine.RequestRefused{Path: "/mcp", HTTPStatus: 429, Code: errcode.MCPRateLimited})
	log(engine.Gate{Op: engine.OpGet}) // no line of its own
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		lines = append(lines, m)
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "tool call", "tool": "order_get", "outcome": "ok", "refusal": "", "actor": "agent-7", "tenant": "acme", "code": "", "scope": "", "correlation_id": "c-1"},
		{"level": "INFO", "msg": "tool call", "tool": "order_list", "outcome": "invalid_input", "refusal": "", "actor": "agent-7", "tenant": "acme", "code": "X_INPUT_INVALID", "scope": "", "correlation_id": ""},
		{"level": "WARN", "msg": "tool call", "tool": "cancel_order", "outcome": "not_found", "refusal": "hidden", "actor": "agent-7", "tenant": "acme", "code": "X_MCP_TOOL_UNKNOWN", "scope": "", "correlation_id": ""},
		{"level": "WARN", "msg": "tool call", "tool": "cancel_order", "outcome": "denied", "refusal": "scope", "actor": "agent-7", "tenant": "acme", "code": "X_MCP_SCOPE_DENIED", "scope": "orders:write", "correlation_id": "c-2"},
		{"level": "WARN", "msg": "request refused", "code": "X_MCP_RATE_LIMITED", "status": float64(429), "path": "/mcp"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines %v, want %v", lines, want)
	}
}

// hostLogTo is the host-log subscriber writing JSON to w.
func hostLogTo(w io.Writer) func(engine.Event) {
	return engine.HostLog(slog.New(slog.NewJSONHandler(w, nil)))
}

// panicOnce returns a hook that panics the first time it runs, with text
// no answer may carry.
func panicOnce() func() {
	var once sync.Once
	return func() { once.Do(func() { panic("the secret panic text") }) }
}

// panicLine finds the host log's line of a contained panic under
// correlation, and checks it carries the stack and the panic.
func panicLine(t *testing.T, logged, correlation, frame string) {
	t.Helper()
	for _, line := range strings.Split(logged, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "engine panic" || m["correlation_id"] != correlation {
			continue
		}
		if stack, _ := m["stack"].(string); !strings.Contains(stack, frame) || m["panic"] != "the secret panic text" {
			t.Fatalf("the panic's line lacks its stack or text: %v", m)
		}
		return
	}
	t.Fatalf("no panic line under %q in:\n%s", correlation, logged)
}

// TestPanicsAreContained: a panic in a read or an execution is recovered,
// logged with its stack under a correlation id, and answered — never with
// its text — and the engine serves on. Before its execution_started record
// commits, an execution that panics ran nothing (internal_error); after,
// on a separate datasource, its effect may have run (outcome_unknown,
// which audit verify explains as unfinished).
func TestPanicsAreContained(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	log, logged := capturedLog()

	together := exampleEngine(t, b, orders.Config, nil, log)
	engine.SetBeforeRead(together, panicOnce())
	out := together.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`))
	want(t, out, engine.StatusInternalError)
	panicLine(t, logged(), out.CorrelationID, "engine.(*Engine).Get")
	want(t, together.Get(ctx, support("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)), engine.StatusOK)

	engine.SetAfterConsume(together, panicOnce())
	staged := together.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	approve(t, together, "acme", staged.ApprovalID.String())
	out = together.Check(ctx, support("acme"), staged.ApprovalID.String())
	want(t, out, engine.StatusInternalError)
	panicLine(t, logged(), out.CorrelationID, "engine.(*execution).consume")
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("an execution that panicked before its effect changed the order")
	}
	want(t, together.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")

	apart := exampleEngine(t, b, orders.Config, seededDatasource(t), log)
	engine.SetBeforeFinish(apart, panicOnce())
	out = apart.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "ran"}`))
	want(t, out, engine.StatusOutcomeUnknown)
	panicLine(t, logged(), out.CorrelationID, "engine.(*execution).apart")
	if out.Err == nil || !strings.Contains(out.Err.Error(), "the secret panic text") {
		t.Fatalf("the outcome's error (an operator's) lacks the panic: %v", out.Err)
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || len(r.Unfinished) != 1 || r.Unfinished[0].CorrelationID != out.CorrelationID {
		t.Fatalf("verify: %+v %v", r, err)
	}
	want(t, apart.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "again"}`)), engine.StatusOK)
}

// capturedLog returns a JSON logger and what it has logged so far.
func capturedLog() (log *slog.Logger, logged func() string) {
	var buf strings.Builder
	var mu sync.Mutex
	log = slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	return log, func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

// seededDatasource returns a runtime pool on a database of its own holding
// the example's data: an effect there is apart from the audit log's.
func seededDatasource(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.RuntimePool(t, seededDatabase(t))
}

// seededDatabase returns the URL of a new database the example is seeded
// in.
func seededDatabase(t *testing.T) string {
	t.Helper()
	u := testdb.New(t)
	if _, err := testdb.Pool(t, u).Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	return u
}

// exampleEngine serves config on b's store, its data in datasource (nil:
// the store's database), logging to log.
func exampleEngine(t *testing.T, b *exampleBundle, config []byte, datasource *pgxpool.Pool, log *slog.Logger) *engine.Engine {
	t.Helper()
	cfg, err := ontology.Parse(config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Datasource: datasource,
		Catalog: readCatalog(t, cfg, cmp.Or(datasource, b.runtime)), Key: b.key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRoutineRefusalsAreNotFailures: a precondition that does not hold of
// its target, when staged and again when the approved call runs, is a
// refusal the action declared — recorded with its cause, and not logged as
// an engine failure at error, which an operator is paged on. One that
// cannot be evaluated (the config's mistake) is.
func TestRoutineRefusalsAreNotFailures(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	log, logged := capturedLog()
	failures := func() []string {
		var lines []string
		for _, line := range strings.Split(logged(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) {
				lines = append(lines, line)
			}
		}
		return lines
	}

	e := exampleEngine(t, b, orders.Config, nil, log)
	// o-1003 shipped: refused at staging.
	want(t, e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1003", "reason": "x"}`)), engine.StatusPreconditionFailed)
	// o-1002 shipped after its approval: refused when it runs.
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, e, "acme", staged.ApprovalID.String())
	if _, err := b.admin.Exec(ctx, "UPDATE orders SET status = 'shipped' WHERE org_id = 'acme' AND id = 'o-1002'"); err != nil {
		t.Fatal(err)
	}
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusPreconditionFailed)
	if lines := failures(); len(lines) > 0 {
		t.Fatalf("a precondition that does not hold was logged at error:\n%s", strings.Join(lines, "\n"))
	}

	// A precondition that raises when evaluated: a failure, logged.
	broken := exampleEngine(t, b, ontologytest.Apply(t, orders.Config, ontologytest.Set("actions.cancel_order.where", `int(input.reason) > 0`)), nil, log)
	out := broken.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "not a number"}`))
	want(t, out, engine.StatusPreconditionFailed)
	if lines := failures(); len(lines) != 1 || !strings.Contains(lines[0], out.CorrelationID) || !strings.Contains(lines[0], "could not be evaluated") {
		t.Fatalf("a precondition that could not be evaluated was not logged at error once: %q", lines)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestPollsOfAnySpellingShareTheExecution: a poll that spells the
// approval's id otherwise (upper case) executes it under the id as staged:
// its execution's records are the approval's, and a poll as staged finds
// them — outcome_unknown for an execution with no recorded end, not
// consumed.
func TestPollsOfAnySpellingShareTheExecution(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	apart := exampleEngine(t, b, orders.Config, seededDatasource(t), quiet)
	staged := apart.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, apart, "acme", id)
	engine.SetBeforeFinish(apart, panicOnce()) // the effect commits; its end is never recorded
	first := apart.Check(ctx, support("acme"), "{"+strings.ToUpper(id)+"}")
	want(t, first, engine.StatusOutcomeUnknown)
	if first.CorrelationID != id {
		t.Fatalf("the poll answered under correlation id %q, want %q", first.CorrelationID, id)
	}
	var elsewhere int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme' AND lower(correlation_id) LIKE '%' || $1 || '%' AND correlation_id <> $1`, id).Scan(&elsewhere); err != nil {
		t.Fatal(err)
	}
	if elsewhere != 0 {
		t.Fatalf("%d records of the execution are under another spelling of %s", elsewhere, id)
	}
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)
}

// TestPollWhileTheExecutionRuns: an approval whose execution runs apart
// (its consume and start committed, its effect under way) answers a poll
// executing — whether the poll came after the consume or lost it to the
// running one — and consumed once the end is recorded. An execution whose
// replica stopped mid-call answers executing while its budget slot's
// lease holds, and outcome_unknown once it lapsed.
func TestPollWhileTheExecutionRuns(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	// Room for two executions at once: the loser spends beside the
	// winner before it loses the consume.
	cfg := ontologytest.Apply(t, orders.Config, ontologytest.SetYAML("actions.cancel_order.budget", "{max_concurrent: 2}"))
	apart := exampleEngine(t, b, cfg, seededDatasource(t), quiet)
	stage := func(order string) string {
		staged := apart.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "`+order+`", "reason": "x"}`))
		want(t, staged, engine.StatusApprovalPending)
		approve(t, apart, "acme", staged.ApprovalID.String())
		return staged.ApprovalID.String()
	}

	// The loser: it reads the approval approved, then waits until the
	// winner consumed it and runs, and loses the consume.
	id := stage("o-1001")
	running, finish := make(chan struct{}), make(chan struct{})
	engine.SetBeforeFinish(apart, func() { close(running); <-finish })
	var executions atomic.Int32
	engine.SetBeforeExecute(apart, func(context.Context) {
		if executions.Add(1) == 1 {
			<-running // the loser, held until the winner runs
		}
	})
	loser := make(chan *engine.Outcome, 1)
	go func() { loser <- apart.Check(ctx, support("acme"), id) }()
	for executions.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	winner := make(chan *engine.Outcome, 1)
	go func() { winner <- apart.Check(ctx, support("acme"), id) }()
	want(t, <-loser, engine.StatusExecuting)
	// A poll after the consume reads it consumed, its end not recorded.
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusExecuting)
	close(finish)
	want(t, <-winner, engine.StatusOK)
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusConsumed)
	engine.SetBeforeExecute(apart, nil)

	// A replica that stopped mid-call: its slot is held until its lease
	// lapses.
	id = stage("o-1002")
	engine.SetKeepLeases(apart, true)
	engine.SetBeforeFinish(apart, panicOnce())
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusExecuting)
	if _, err := b.admin.Exec(ctx, `UPDATE orangerail.budget_leases SET expires_at = now() - interval '1 second' WHERE correlation_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	want(t, apart.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)
}

// TestASlotNotGivenBackIsGivenBackOnceTheDatabaseAnswers: an execution
// whose effect ran and whose end could not be recorded, nor its budget slot
// given back — the store's database refused every connection from the
// effect's end on — answers outcome_unknown; once the database answers
// again, a poll answers outcome_unknown as well, not executing, for no
// execution runs: the slot is given back first. A slot no poll asks about
// is given back by the sweeper's next round.
func TestASlotNotGivenBackIsGivenBackOnceTheDatabaseAnswers(t *testing.T) {
	if testdb.Bouncing() {
		// Behind PgBouncer the database's refusals are the pooler's to
		// recover from (server_login_retry holds logins refused for a
		// while, its server connections ended under it are found dead one
		// by one): what is measured there is the pooler, not the engine.
		t.Skip("cuts the database off under the engine; run without TEST_PGBOUNCER")
	}
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	ds := seededDatabase(t)
	if _, err := testdb.Pool(t, ds).Exec(ctx, `INSERT INTO orders (org_id, id, status, total_cents, customer_id, shipping_address)
		VALUES ('acme', 'o-2001', 'paid', 100, 'c-1', 'somewhere')`); err != nil {
		t.Fatal(err)
	}
	// Room for the test's executions in a minute.
	cfg := ontologytest.Apply(t, orders.Config, ontologytest.SetYAML("actions.cancel_order.budget", "{per_minute: 10, per_day: 10}"))
	e := exampleEngine(t, b, cfg, testdb.RuntimePool(t, ds), quiet)
	var name string
	if err := b.admin.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	server, err := pgx.Connect(ctx, testdb.Direct(testdb.ServerURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(context.Background()) })
	allow := func(allowed bool) {
		t.Helper()
		if _, err := server.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", pgx.Identifier{name}.Sanitize(), allowed)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { allow(true) }) // the database is dropped after
	// The database stops answering: new connections are refused and the
	// ones open are ended.
	cut := func() {
		allow(false)
		if _, err := server.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
			t.Error(err)
		}
	}
	// The database answers again: connections are allowed (the test is
	// not run behind PgBouncer, above, so they are at once).
	restore := func() {
		t.Helper()
		allow(true)
		b.admin.Reset() // its connections were ended with the rest
	}
	leased := func(id string) bool {
		t.Helper()
		var n int
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.budget_leases WHERE correlation_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	cutUnderAnExecution := func(order string) string {
		t.Helper()
		staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "`+order+`", "reason": "x"}`))
		want(t, staged, engine.StatusApprovalPending)
		id := staged.ApprovalID.String()
		approve(t, e, "acme", id)
		var once sync.Once
		engine.SetBeforeFinish(e, func() { once.Do(cut) })
		want(t, e.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)
		restore()
		if !leased(id) {
			t.Fatalf("%s: no lease left held: the database never refused the execution's release", id)
		}
		return id
	}

	id := cutUnderAnExecution("o-1001")
	want(t, e.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)
	if leased(id) {
		t.Errorf("%s: the slot is held still after a poll", id)
	}

	id = cutUnderAnExecution("o-1002")
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if leased(id) {
		t.Errorf("%s: the slot is held still after a sweep", id)
	}
	want(t, e.Check(ctx, support("acme"), id), engine.StatusOutcomeUnknown)

	// An execution whose effect never ran — the database stopped answering
	// as it consumed — gives its count back as well as its slot.
	windows := func() (minute, day time.Time, calls int) {
		t.Helper()
		if err := b.admin.QueryRow(ctx, "SELECT minute_start, day_start, day_calls FROM orangerail.budget_counts WHERE tenant_id = 'acme' AND action = 'cancel_order'").
			Scan(&minute, &day, &calls); err != nil {
			t.Fatal(err)
		}
		return minute, day, calls
	}
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-2001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id = staged.ApprovalID.String()
	approve(t, e, "acme", id)
	_, _, before := windows()
	var once sync.Once
	engine.SetBeforeFinish(e, nil)
	engine.SetAfterConsume(e, func() { once.Do(cut) })
	if out := e.Check(ctx, support("acme"), id); out.Status == engine.StatusOK {
		t.Fatalf("%s executed with its database cut as it consumed", id)
	}
	engine.SetAfterConsume(e, nil)
	restore()
	if _, _, calls := windows(); calls != before+1 || !leased(id) {
		t.Fatalf("%s: %d calls counted and leased %t, want %d and a lease left held", id, calls, leased(id), before+1)
	}
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, calls := windows(); calls != before || leased(id) {
		t.Errorf("%s: %d calls counted and leased %t after a sweep, want %d and no lease", id, calls, leased(id), before)
	}

	// A release owed after an attempt that committed, its answer lost,
	// finds no lease, and gives no count back a second time.
	minute, day, before := windows()
	engine.OweRelease(e, "acme", "cancel_order", id, uuid.New(), minute, day)
	if _, err := e.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, calls := windows(); calls != before {
		t.Errorf("a release owed of a lease no longer held gave a count back: %d calls, want %d", calls, before)
	}
}

// TestPollWhileAnExecutionThatWaitedRuns: an execution whose waits for
// connections outlasted the lease its spend took still answers a poll
// executing while its effect runs: the start extends its lease. Here every
// datasource connection is busy past the lease (7s under limits of 1s), and
// the effect sleeps 0.7s.
func TestPollWhileAnExecutionThatWaitedRuns(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	u, err := url.Parse(seededDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	ds := testdb.RuntimePool(t, u.String())
	cfg := ontologytest.Apply(t, orders.Config,
		ontologytest.SetYAML("limits", "{lock_timeout: 1s, statement_timeout: 1s}"),
		ontologytest.SetYAML("actions.cancel_order.execute", `{sql: "SELECT true AS slept FROM pg_sleep(0.7)"}`))
	e := exampleEngine(t, b, cfg, ds, quiet)
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, e, "acme", id)

	busy, err := ds.Acquire(ctx) // the datasource's one connection is busy when the poll comes
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *engine.Outcome, 1)
	go func() { done <- e.Check(ctx, support("acme"), id) }()
	var expires time.Time
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b.admin.QueryRow(ctx, "SELECT expires_at FROM orangerail.budget_leases WHERE correlation_id = $1", id).Scan(&expires) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poll took no lease")
		}
	}
	time.Sleep(time.Until(expires) + 300*time.Millisecond) // the lease lapses; the acquire waits up to 8s
	busy.Release()

	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var status string
		if err := b.admin.QueryRow(ctx, "SELECT status FROM orangerail.approvals WHERE id = $1", id).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status == "consumed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never consumed; the poll answered %+v", <-done)
		}
	}
	during := e.Check(ctx, support("acme"), id) // while pg_sleep(0.7) runs
	want(t, <-done, engine.StatusOK)
	want(t, during, engine.StatusExecuting)
}

// TestSettleAnUnfinishedExecution: an execution left unfinished
// (outcome_unknown) is settled by the database's owner with the outcome
// found and why — an execution_settled record, listed among the
// operator's with its reason — after which both verifiers count it
// finished. Only the owner settles, with a reason and a known outcome;
// an execution not unfinished (unknown, or settled already) is refused,
// and two operators settling one at once settle it once.
func TestSettleAnUnfinishedExecution(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	apart := exampleEngine(t, b, orders.Config, seededDatasource(t), quiet)
	unfinished := func() string {
		engine.SetBeforeFinish(apart, panicOnce())
		out := apart.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "ran"}`))
		want(t, out, engine.StatusOutcomeUnknown)
		return out.CorrelationID
	}
	sqlUnfinished := func() (n int) {
		if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_unfinished('acme')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	code := func(err error) errcode.Code {
		var c *errcode.Error
		if errors.As(err, &c) {
			return c.Code
		}
		return ""
	}
	first := unfinished()
	now := time.Now()

	for _, tt := range []struct {
		name        string
		owner       database.TxBeginner
		correlation string
		outcome     engine.SettledOutcome
		reason      string
		bound       time.Duration
		code        errcode.Code
	}{
		{"a runtime login", b.runtime, first, engine.SettledSucceeded, "found it", 0, errcode.BreakGlassRefused},
		{"no reason", b.admin, first, engine.SettledSucceeded, " ", 0, errcode.BreakGlassRefused},
		{"an outcome of no kind", b.admin, first, "maybe", "found it", 0, errcode.Usage},
		{"an unknown execution", b.admin, uuid.NewString(), engine.SettledSucceeded, "found it", 0, errcode.ExecutionNotUnfinished},
		// Started within the deployment's bound: it may still be running.
		{"one that may still be running", b.admin, first, engine.SettledSucceeded, "found it", time.Hour, errcode.ExecutionMayBeRunning},
	} {
		if _, err := engine.SettleExecution(ctx, tt.owner, "acme", tt.correlation, tt.outcome, tt.reason, tt.bound, now); code(err) != tt.code {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
		}
	}
	if r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{}); err != nil || r.UnfinishedTotal != 1 || sqlUnfinished() != 1 {
		t.Fatalf("before settling: %+v %v", r, err)
	}

	s, err := engine.SettleExecution(ctx, b.admin, "acme", first, engine.SettledSucceeded, "the carrier's log shows note n-1 made", 0, now)
	if err != nil || s.Action != "add_order_note" || s.Outcome != engine.SettledSucceeded || s.Operator == "" {
		t.Fatalf("settle: %+v %v", s, err)
	}
	if _, err := engine.SettleExecution(ctx, b.admin, "acme", first, engine.SettledFailed, "again", 0, now); code(err) != errcode.ExecutionNotUnfinished {
		t.Fatalf("settled twice: %v", err)
	}
	// Two operators at once: one settles, the other finds it settled.
	second := unfinished()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := engine.SettleExecution(ctx, b.admin, "acme", second, engine.SettledFailed, "the carrier never saw it", 0, now)
			errs <- err
		}()
	}
	var refused int
	for range 2 {
		if err := <-errs; code(err) == errcode.ExecutionNotUnfinished {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 1 {
		t.Fatalf("two settles at once: %d refused, want 1", refused)
	}

	// An approved call whose execution is left unfinished: polled again,
	// its consumed approval says the outcome is unknown (that poll's
	// answer never arrived) until it is settled.
	staged := apart.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, apart, "acme", staged.ApprovalID.String())
	engine.SetBeforeFinish(apart, panicOnce())
	want(t, apart.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOutcomeUnknown)
	want(t, apart.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOutcomeUnknown)
	if _, err := engine.SettleExecution(ctx, b.admin, "acme", staged.ApprovalID.String(), engine.SettledSucceeded, "the order shows cancelled", 0, now); err != nil {
		t.Fatal(err)
	}
	want(t, apart.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusConsumed)

	verifyClean(t, b.testBundle, "acme")
	if n := sqlUnfinished(); n != 0 {
		t.Fatalf("the SQL verifier finds %d unfinished", n)
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || r.BreakGlassTotal != 3 || r.BreakGlass[0].Phase != engine.PhaseExecutionSettled || r.BreakGlass[0].Reason != "the carrier's log shows note n-1 made" {
		t.Fatalf("the operator's records: %+v %v", r.BreakGlass, err)
	}
	// Both verifiers say what each settle found, in the order written.
	var goOutcomes, sqlOutcomes []string
	for _, d := range r.BreakGlass {
		goOutcomes = append(goOutcomes, string(d.SettledOutcome))
	}
	if err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := store.New(tx).AuditListBreakGlass(ctx, "acme")
		for _, row := range rows {
			sqlOutcomes = append(sqlOutcomes, row.SettledOutcome)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"succeeded", "failed", "succeeded"}; !slices.Equal(goOutcomes, want) || !slices.Equal(sqlOutcomes, want) {
		t.Fatalf("the settles' outcomes: Go %q, SQL %q, want %q", goOutcomes, sqlOutcomes, want)
	}
}
