package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
)

// support is an agent allowed to call the example's governed actions.
func support(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
}

// quiet drops the engine's failure log: the tests assert on outcomes.
var quiet = slog.New(slog.DiscardHandler)

func approver(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "alice@example.com", Tenant: tenant, Roles: []string{"approver"}, Kind: engine.ActorHuman}
}

// newEngine serves the example's config, with edits applied to its YAML
// tree, on b's database.
func newEngine(t *testing.T, b *testBundle, key []byte, mode engine.Mode, datasource *pgxpool.Pool, edits ...ontologytest.Edit) *engine.Engine {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, edits...)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Datasource: datasource, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, cmp.Or(datasource, b.runtime)), Key: key, Mode: mode, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// phases lists the phases of a tenant's audit records for a correlation id.
func phases(t *testing.T, b *testBundle, tenant, correlation string) []string {
	t.Helper()
	rows, err := b.admin.Query(context.Background(), "SELECT phase FROM orangerail.audit WHERE tenant_id = $1 AND correlation_id = $2 ORDER BY id", tenant, correlation)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func orderStatus(t *testing.T, b *testBundle, tenant, id string) string {
	t.Helper()
	var s string
	if err := b.admin.QueryRow(context.Background(), "SELECT status FROM orders WHERE org_id = $1 AND id = $2", tenant, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// orderAddress is acme's order id's shipping address.
func orderAddress(t *testing.T, b *testBundle, id string) string {
	t.Helper()
	var s string
	if err := b.admin.QueryRow(context.Background(), "SELECT shipping_address FROM orders WHERE org_id = 'acme' AND id = $1", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func verifyClean(t *testing.T, b *testBundle, tenant string) {
	t.Helper()
	r, err := engine.VerifyTenant(context.Background(), b.runtime, tenant, engine.VerifyOptions{})
	if err != nil || !r.OK() {
		t.Fatalf("verify %s: %+v %v", tenant, r, err)
	}
}

func want(t *testing.T, out *engine.Outcome, status engine.Status) {
	t.Helper()
	if out.Status != status {
		t.Fatalf("status %s, want %s (issues %v, code %s, err %v)", out.Status, status, out.Issues, out.Code, out.Err)
	}
}

func approve(t *testing.T, e *engine.Engine, tenant, id string) {
	t.Helper()
	v, err := e.ShowApproval(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.Decide(context.Background(), approver(tenant), engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest}), engine.StatusOK)
}

func TestActionWithoutApprovalExecutesAtOnce(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	out := b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "called the customer"}`))
	want(t, out, engine.StatusOK)
	var result struct {
		RowsAffected int              `json:"rows_affected"`
		Rows         []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out.Data, &result); err != nil || result.RowsAffected != 1 || len(result.Rows) != 1 || result.Rows[0]["id"] == nil {
		t.Fatalf("result %s (%v)", out.Data, err)
	}
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"execution_started", "execution_succeeded"}) {
		t.Fatalf("phases %v", got)
	}
	verifyClean(t, b.testBundle, "acme")

	// A failing effect is recorded with its full text, and classified.
	if _, err := b.admin.Exec(ctx, "REVOKE INSERT ON order_notes FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	out = b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "x"}`))
	want(t, out, engine.StatusFailed)
	if out.Diagnostic != engine.DiagnosticDatasourcePermission || out.Err == nil || !strings.Contains(out.Err.Error(), "order_notes") {
		t.Fatalf("failure: %s %v", out.Diagnostic, out.Err)
	}
	if _, err := b.admin.Exec(ctx, "GRANT INSERT (org_id, order_id, note) ON order_notes TO orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	// A call whose target does not exist is refused before anything runs.
	want(t, b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-9999", "note": "x"}`)), engine.StatusNotFound)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"execution_started", "execution_failed"}) {
		t.Fatalf("phases %v", got)
	}
	var errText string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->>'error' FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_failed'", out.CorrelationID).Scan(&errText); err != nil || !strings.Contains(errText, "order_notes") {
		t.Fatalf("audit error text %q (%v)", errText, err)
	}
	verifyClean(t, b.testBundle, "acme")
}

func TestActionInputAndAuthorization(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	invalid := []struct{ args, path string }{
		{`{"order_id": "o-1001"}`, ""},
		{`{"order_id": "o-1001", "reason": "x", "extra": 1}`, ""},
		{`{"order_id": "o-1001", "reason": "` + strings.Repeat("x", 501) + `"}`, "/reason"},
		{`{"order_id": 1001, "reason": "x"}`, "/order_id"},
		{`not json`, ""},
	}
	for _, tt := range invalid {
		out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(tt.args))
		if out.Status != engine.StatusInvalidInput || len(out.Issues) == 0 || out.Issues[0].Path != tt.path {
			t.Errorf("Call(%.50s) = %s %v, want invalid_input at %q", tt.args, out.Status, out.Issues, tt.path)
		}
	}
	// JSON that is no I-JSON is refused at the value refused, saying what
	// is wrong with it in the agent's terms (not the parser's, nor a byte
	// offset), and repeating no more of a name than any answer does.
	long := strings.Repeat("k", 100)
	notIJSON := []struct{ args, path, says string }{
		{`{"order_id": 1e400, "reason": "x"}`, "/order_id", "number out of range of a double"},
		{`{"order_id": 12345678901234567890, "reason": "x"}`, "/order_id", "send it as a string"},
		{`{"order_id": "o-1001", "reason": "\ud800"}`, "/reason", "not I-JSON (RFC 7493), which an input must be: lone surrogate in string"},
		{`{"order_id": "o-1001", "reason": "x", "reason": "y"}`, "/reason", "duplicate member name"},
		{`{"order_id": "o-1001", "reason": "x", "a/b": [0, {"` + long + `": 1, "` + long + `": 2}]}`, "/a~1b/1/" + display.Echo(long), "duplicate member name"},
	}
	for _, tt := range notIJSON {
		out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(tt.args))
		if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 {
			t.Fatalf("Call(%.60s) = %s %v, want one issue", tt.args, out.Status, out.Issues)
		}
		issue := out.Issues[0]
		if issue.Path != tt.path || !strings.Contains(issue.Message, tt.says) || strings.Contains(issue.Message, "jcs") ||
			strings.Contains(issue.Message, "offset") || strings.Contains(issue.Message, long[:display.EchoMax+1]) {
			t.Errorf("Call(%.60s): %q at %q, want %q at %q", tt.args, issue.Message, issue.Path, tt.says, tt.path)
		}
	}
	// Outside the action's roles, or unauthenticated: the tool does not
	// exist for the caller. Without its scope: refused, naming it, and
	// recorded in the tenant's chain.
	for _, c := range []*engine.Caller{agent("acme"), {Tenant: "acme"}} {
		out := b.engine.Call(ctx, c, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
		if out.Status != engine.StatusNotFound || out.Code != errcode.MCPToolUnknown {
			t.Errorf("caller %+v: %s %s, want not_found %s", c, out.Status, out.Code, errcode.MCPToolUnknown)
		}
	}
	noScope := support("acme")
	noScope.Scopes = nil
	out := b.engine.Call(ctx, noScope, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	if out.Status != engine.StatusDenied || out.Code != errcode.MCPScopeDenied || out.Scope != "orders:write" {
		t.Fatalf("a token without the scope: %s %s %q", out.Status, out.Code, out.Scope)
	}
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"refused"}) {
		t.Fatalf("the scope refusal's records: %v", got)
	}
	want(t, b.engine.Call(ctx, support("acme"), "drop_tables", json.RawMessage(`{}`)), engine.StatusNotFound)
	want(t, b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-9999", "reason": "x"}`)), engine.StatusNotFound)
	// o-1003 shipped: the precondition refuses before anything is staged.
	out = b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1003", "reason": "x"}`))
	want(t, out, engine.StatusPreconditionFailed)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"precondition_failed"}) {
		t.Fatalf("phases %v", got)
	}
	var approvals int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals").Scan(&approvals); err != nil || approvals != 0 {
		t.Fatalf("%d approvals staged by refused calls", approvals)
	}
}

// TestRepeatedCallAnswersItsApproval: an agent that calls again with the
// same input while its call is open is answered by the approval it made —
// pending while it waits, and once approved the call is a poll and
// executes it, once — and after that the same call stages anew.
// TestCallerOfNoTenantIsNoOne: a caller reaching the engine with no
// tenant of the accepted form (the door refuses such a token; a new door
// might not) is served as no one — the tool unknown, the approval not
// found, the decision forbidden, each coded — where each call failed on
// its first store, internal_error or audit_blocked with no code.
func TestCallerOfNoTenantIsNoOne(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "1 Tenantless Street"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	for _, tenant := range []string{"", "Not A Tenant!", "acme\x00"} {
		agent, person := support(tenant), approver(tenant)
		for _, c := range []struct {
			name   string
			out    *engine.Outcome
			status engine.Status
			code   errcode.Code
		}{
			{"stage", b.engine.Call(ctx, agent, "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "2 Tenantless Street"}`)), engine.StatusNotFound, errcode.MCPToolUnknown},
			{"read", b.engine.Get(ctx, agent, "order", json.RawMessage(`{"id": "o-1001"}`)), engine.StatusNotFound, errcode.MCPToolUnknown},
			{"poll", b.engine.Check(ctx, agent, id), engine.StatusNotFound, errcode.ApprovalNotFound},
			{"decide", b.engine.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true}), engine.StatusDenied, errcode.Forbidden},
		} {
			if c.out.Status != c.status || c.out.Code != c.code {
				t.Errorf("tenant %q, %s: %s %s (%v), want %s %s", tenant, c.name, c.out.Status, c.out.Code, c.out.Err, c.status, c.code)
			}
		}
	}
	// acme's approval is as it was staged: nothing decided it.
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged"}) {
		t.Fatalf("acme's records %v", got)
	}
}

func TestRepeatedCallAnswersItsApproval(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := b.engine
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "asked twice"}`)
	staged := e.Call(ctx, support("acme"), "cancel_order", args)
	want(t, staged, engine.StatusApprovalPending)
	id := *staged.ApprovalID
	again := e.Call(ctx, support("acme"), "cancel_order", args)
	want(t, again, engine.StatusApprovalPending)
	if *again.ApprovalID != id || !again.ExpiresAt.Equal(*staged.ExpiresAt) {
		t.Fatalf("the repeated call answered %s expiring %s, want %s expiring %s", again.ApprovalID, again.ExpiresAt, id, staged.ExpiresAt)
	}
	view, err := e.ShowApproval(ctx, "acme", id.String())
	if err != nil {
		t.Fatal(err)
	}
	want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id.String(), Approve: true, Digest: view.Digest}), engine.StatusOK)
	executed := e.Call(ctx, support("acme"), "cancel_order", args)
	want(t, executed, engine.StatusOK)
	if got := phases(t, b.testBundle, "acme", id.String()); !slices.Equal(got, []string{"staged", "approved", "execution_started", "execution_succeeded"}) {
		t.Fatalf("phases of the approval the repeated calls answered with: %v", got)
	}
	// Consumed, it holds the call's place no more: the same call is new.
	fresh := e.Call(ctx, support("acme"), "cancel_order", args)
	if fresh.Status == engine.StatusApprovalPending && *fresh.ApprovalID == id {
		t.Fatalf("a call after the execution answered with the consumed approval %s", id)
	}
}

// TestDecisionsRaceBetweenReadAndWrite: a person's decision reads its
// approval, then makes it (decideQuickly). One whose approval another
// person decides in between makes nothing: it answers that the approval
// is decided, and the chain holds the other decision alone. One whose
// approval lapses in between, by the database's clock only, expires it.
// Each is answered by the full decision, which reads the approval again.
// And one whose very decision committed in between — a first send whose
// answer was lost, and RowWriter sent it again — answers as the first
// send would have: decided, by that decision's record.
func TestDecisionsRaceBetweenReadAndWrite(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	// behind sets the engine's clock back: a lapse only the database sees.
	var behind atomic.Int64
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Set("approvals.ttl", "1s"))
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: b.key, Mode: engine.ModeLive, Logger: quiet, NowFunc: func() time.Time { return time.Now().Add(-time.Duration(behind.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	stage := func(order, reason string) *engine.ApprovalView {
		t.Helper()
		behind.Store(0)
		staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "`+order+`", "reason": "`+reason+`"}`))
		want(t, staged, engine.StatusApprovalPending)
		view, err := e.ShowApproval(ctx, "acme", staged.ApprovalID.String())
		if err != nil {
			t.Fatal(err)
		}
		// Its second of life does not pass for the engine.
		behind.Store(int64(time.Minute))
		return view
	}
	// meanwhile runs f the first time a decision is about to be made (f's
	// own decisions run it no more), and returns how many times it ran.
	meanwhile := func(f func(*store.ApprovalDecideParams)) *atomic.Int32 {
		var ran atomic.Int32
		engine.SetBeforeDecide(e, func(p *store.ApprovalDecideParams) {
			if ran.Add(1) == 1 {
				f(p)
			}
		})
		return &ran
	}
	other := approver("acme")
	other.Subject = "carol"

	raced := stage("o-1001", "decided meanwhile")
	ran := meanwhile(func(*store.ApprovalDecideParams) {
		want(t, e.Decide(ctx, other, engine.Decision{ApprovalID: raced.ID.String(), Approve: false, Note: "no"}), engine.StatusOK)
	})
	if out := e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: raced.ID.String(), Approve: true, Digest: raced.Digest}); out.Code != errcode.ApprovalDecided {
		t.Fatalf("a decision raced by another: %s %s, want %s", out.Status, out.Code, errcode.ApprovalDecided)
	}
	if got := phases(t, b.testBundle, "acme", raced.ID.String()); ran.Load() < 1 || !slices.Equal(got, []string{"staged", "rejected"}) {
		t.Fatalf("phases of the raced approval: %v (the race ran %d times), want the other's decision alone", got, ran.Load())
	}
	if now, err := e.ShowApproval(ctx, "acme", raced.ID.String()); err != nil || now.Status != "rejected" || now.DecidedBy == nil || *now.DecidedBy != "carol" {
		t.Fatalf("the raced approval: %+v, %v", now, err)
	}

	lapsing := stage("o-1002", "lapsed meanwhile")
	ran = meanwhile(func(*store.ApprovalDecideParams) { time.Sleep(time.Until(lapsing.ExpiresAt) + 100*time.Millisecond) })
	if out := e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: lapsing.ID.String(), Approve: true, Digest: lapsing.Digest}); out.Code != errcode.ApprovalExpired {
		t.Fatalf("a decision of an approval that lapsed meanwhile: %s %s, want %s", out.Status, out.Code, errcode.ApprovalExpired)
	}
	if got := phases(t, b.testBundle, "acme", lapsing.ID.String()); ran.Load() != 1 || !slices.Equal(got, []string{"staged", "expired"}) {
		t.Fatalf("phases of the lapsed approval: %v (the lapse ran %d times)", got, ran.Load())
	}

	sentTwice := stage("o-1001", "sent twice")
	ran = meanwhile(func(p *store.ApprovalDecideParams) {
		// The first send, committed: the same statement, the same record.
		err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := store.New(tx).ApprovalDecide(ctx, p)
			return err
		})
		if err != nil {
			t.Error(err)
		}
	})
	out, decided := e.DecideApproval(ctx, approver("acme"), engine.Decision{ApprovalID: sentTwice.ID.String(), Approve: true, Digest: sentTwice.Digest})
	want(t, out, engine.StatusOK)
	if decided == nil || decided.Status != store.ApprovalApproved || decided.DecidedBy != approver("acme").Subject || decided.DecidedAt.IsZero() {
		t.Fatalf("a decision sent twice: decided %+v", decided)
	}
	if got := phases(t, b.testBundle, "acme", sentTwice.ID.String()); ran.Load() != 1 || !slices.Equal(got, []string{"staged", "approved"}) {
		t.Fatalf("phases of the approval decided by a decision sent twice: %v (sent first %d times)", got, ran.Load())
	}
	if _, err := engine.SealTenant(ctx, b.runtime, "acme"); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, b.testBundle, "acme")
}

func TestGovernedLifecycle(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := b.engine
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "customer asked"}`)

	staged := e.Call(ctx, support("acme"), "cancel_order", args)
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	if staged.ExpiresAt == nil || staged.CorrelationID != id {
		t.Fatalf("staged %+v", staged)
	}
	// An identical call returns the same approval; the same whitespace or not.
	again := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"reason":"customer asked","order_id":"o-1001"}`))
	if again.Status != engine.StatusApprovalPending || again.ApprovalID.String() != id {
		t.Fatalf("identical call: %+v", again)
	}
	if other := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "other"}`)); other.ApprovalID.String() == id {
		t.Fatalf("a different input shared the approval")
	}
	want(t, e.Check(ctx, support("acme"), id), engine.StatusPending)

	view, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	// The approver sees the canonical input: the bytes the digest covers.
	if canonical, _ := jcs.Canonicalize(args); string(view.Input) != string(canonical) || view.Effect == "" || !strings.Contains(string(view.Target), `"status":"paid"`) {
		t.Fatalf("view %+v", view)
	}
	// A target that cannot be read is said so, not shown as absent.
	if _, err := b.admin.Exec(ctx, "REVOKE SELECT ON orders FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	if unread, err := e.ShowApproval(ctx, "acme", id); err != nil || unread.Target != nil || !strings.HasPrefix(unread.TargetError, "the target could not be read now (") {
		t.Fatalf("view of an unreadable target = %+v, %v; want its error", unread, err)
	}
	if _, err := b.admin.Exec(ctx, "GRANT SELECT ON orders TO orangerail_runtime"); err != nil {
		t.Fatal(err)
	}

	decide := func(c *engine.Caller, d engine.Decision) *engine.Outcome { return e.Decide(ctx, c, d) }
	tests := []struct {
		name   string
		caller *engine.Caller
		d      engine.Decision
		code   errcode.Code
	}{
		{"an agent", support("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}, errcode.Forbidden},
		{"a person without the role", &engine.Caller{Subject: "bob", Tenant: "acme", Kind: engine.ActorHuman}, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}, errcode.Forbidden},
		{"the requester", &engine.Caller{Subject: "agent-7", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}, errcode.ApprovalFourEyes},
		{"another digest", approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: strings.Repeat("0", 64)}, errcode.ApprovalArgumentsMismatch},
		{"no digest", approver("acme"), engine.Decision{ApprovalID: id, Approve: true}, errcode.ApprovalArgumentsMismatch},
		{"another tenant", approver("globex"), engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}, errcode.ApprovalNotFound},
	}
	for _, tt := range tests {
		if out := decide(tt.caller, tt.d); out.Code != tt.code || out.OK() {
			t.Errorf("decision by %s: %s %s, want %s", tt.name, out.Status, out.Code, tt.code)
		}
	}
	want(t, decide(approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest, Note: "ok"}), engine.StatusOK)
	if out := decide(approver("acme"), engine.Decision{ApprovalID: id, Approve: false}); out.Code != errcode.ApprovalDecided {
		t.Fatalf("second decision: %s %s", out.Status, out.Code)
	}

	// Tenant B sees none of it. A poll of no approval of the caller's says
	// so by its code, as one of no approval at all.
	for _, out := range []*engine.Outcome{e.Check(ctx, support("globex"), id), e.Check(ctx, support("acme"), "6f1d0d2e-0000-4000-8000-00000000dead"), e.Check(ctx, support("acme"), "not-an-id")} {
		if want(t, out, engine.StatusNotFound); out.Code != errcode.ApprovalNotFound {
			t.Errorf("poll of no approval of the caller's: code %q, want %s", out.Code, errcode.ApprovalNotFound)
		}
	}
	want(t, e.Call(ctx, support("globex"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`)), engine.StatusNotFound)
	// Nor does another agent of the same tenant.
	other := support("acme")
	other.Subject = "agent-8"
	if out := e.Check(ctx, other, id); out.Status != engine.StatusNotFound || out.Code != errcode.ApprovalNotFound {
		t.Errorf("another agent's poll: %s %s, want not_found %s", out.Status, out.Code, errcode.ApprovalNotFound)
	}
	// The requester without the role any more, or polling with a token
	// without the action's scope, may not run it; each refusal is
	// recorded under the approval, which stays approved.
	demoted := support("acme")
	demoted.Roles = nil
	if out := e.Check(ctx, demoted, id); out.Status != engine.StatusDenied || out.Code != errcode.Forbidden {
		t.Fatalf("a demoted poller: %s %s", out.Status, out.Code)
	}
	unscoped := support("acme")
	unscoped.Scopes = nil
	if out := e.Check(ctx, unscoped, id); out.Status != engine.StatusDenied || out.Code != errcode.MCPScopeDenied || out.Scope != "orders:write" {
		t.Fatalf("a poller without the scope: %s %s %q", out.Status, out.Code, out.Scope)
	}

	out := e.Check(ctx, support("acme"), id)
	want(t, out, engine.StatusOK)
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "cancelled" {
		t.Fatal("the order was not cancelled")
	}
	want(t, e.Check(ctx, support("acme"), id), engine.StatusConsumed)
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged", "approved", "refused", "refused", "execution_started", "execution_succeeded"}) {
		t.Fatalf("phases %v", got)
	}
	var prior string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->'prior'->>'status' FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_started'", id).Scan(&prior); err != nil || prior != "paid" {
		t.Fatalf("prior state %q (%v)", prior, err)
	}
	verifyClean(t, b.testBundle, "acme")

	// A rejected approval never executes.
	rej := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, decide(approver("acme"), engine.Decision{ApprovalID: rej.ApprovalID.String(), Approve: false, Note: "no"}), engine.StatusOK)
	want(t, e.Check(ctx, support("acme"), rej.ApprovalID.String()), engine.StatusRejected)
	if orderStatus(t, b.testBundle, "acme", "o-1002") != "pending" {
		t.Fatal("a rejected approval executed")
	}
}

// TestPollOfAnUndeclaredActionIsRecorded: an approval whose action the
// config no longer declares does not execute, is not consumed, and the
// poll is in the audit log with why.
func TestPollOfAnUndeclaredActionIsRecorded(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "1 Gone Street"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)
	without := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Delete("actions.update_shipping_address"))
	want(t, without.Check(ctx, support("acme"), id), engine.StatusSignatureMismatch)
	if got := phases(t, b.testBundle, "acme", id); !slices.Equal(got, []string{"staged", "approved", "refused"}) {
		t.Fatalf("the approval's records after the poll: %v", got)
	}
	var why string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->>'error' FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'refused'", id).Scan(&why); err != nil ||
		!strings.Contains(why, "no longer declared") {
		t.Fatalf("the refusal says %q (%v)", why, err)
	}
	if s := orderAddress(t, b.testBundle, "o-1001"); s == "1 Gone Street" {
		t.Fatal("an undeclared action executed")
	}
	if v, err := b.engine.ShowApproval(ctx, "acme", id); err != nil || v.Status != "approved" {
		t.Fatalf("the approval is %v (%v), want still approved", v.Status, err)
	}
}

func TestExactlyOneExecutionUnderConcurrentPolls(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "once"}`))
	want(t, staged, engine.StatusOK) // ungoverned: runs at once; now the governed one:
	staged = b.engine.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "1 New Street"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)

	// A second engine, as a second replica, polls too.
	replica := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	results := make([]engine.Status, 64)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			e := b.engine
			if i%2 == 1 {
				e = replica
			}
			results[i] = e.Check(ctx, support("acme"), id).Status
		})
	}
	wg.Wait()
	counts := map[engine.Status]int{}
	for _, s := range results {
		counts[s]++
	}
	// One poll executes. The others spent and lost the consume (and gave
	// their count back), were refused by max_concurrent while the racing
	// polls held its slots (rate_limited, recorded), or came after the
	// consume and were told so.
	if counts[engine.StatusOK] != 1 || counts[engine.StatusConsumed]+counts[engine.StatusRateLimited] != 63 {
		t.Fatalf("outcomes %v", counts)
	}
	var executions []string
	limited := 0
	for _, p := range phases(t, b.testBundle, "acme", id) {
		if p == "rate_limited" {
			limited++
			continue
		}
		executions = append(executions, p)
	}
	if !slices.Equal(executions, []string{"staged", "approved", "execution_started", "execution_succeeded"}) || limited != counts[engine.StatusRateLimited] {
		t.Fatalf("phases %v and %d rate_limited, for outcomes %v", executions, limited, counts)
	}
	// The one execution is counted once, and no slot is held now.
	var day, running int
	if err := b.admin.QueryRow(ctx, `SELECT (SELECT day_calls FROM orangerail.budget_counts WHERE tenant_id = 'acme' AND action = 'update_shipping_address'),
		(SELECT count(*) FROM orangerail.budget_leases WHERE tenant_id = 'acme')`).Scan(&day, &running); err != nil || day != 1 || running != 0 {
		t.Fatalf("the budget counts %d executions and %d running (%v), want 1 and 0", day, running, err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusConsumed)
	verifyClean(t, b.testBundle, "acme")
}

// TestPollBesideAnotherPollsSlot: a poll that finds another poll of the
// same approval holding a slot (that poll spent, then stalled, or its
// replica died, before its consume) spends as its own execution and runs
// — neither waiting on the other's slot nor running unspent — and the
// budget counts it once; the other's slot stays only until its lease
// expires.
func TestPollBesideAnotherPollsSlot(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "1 Held Street"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)
	// The other poll's lease, as its spend left it (correlation id: the
	// approval's).
	if _, err := b.admin.Exec(ctx, `INSERT INTO orangerail.budget_leases (tenant_id, action, id, correlation_id, expires_at)
		VALUES ('acme', 'update_shipping_address', gen_random_uuid(), $1, now() + interval '1 hour')`, id); err != nil {
		t.Fatal(err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if s := orderAddress(t, b.testBundle, "o-1001"); s != "1 Held Street" {
		t.Fatalf("the order's address is %q after the poll", s)
	}
	var day, running int
	if err := b.admin.QueryRow(ctx, `SELECT (SELECT day_calls FROM orangerail.budget_counts WHERE tenant_id = 'acme' AND action = 'update_shipping_address'),
		(SELECT count(*) FROM orangerail.budget_leases WHERE tenant_id = 'acme')`).Scan(&day, &running); err != nil || day != 1 || running != 1 {
		t.Fatalf("the budget counts %d executions and %d slots (%v), want 1 and the other poll's 1", day, running, err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusConsumed)
	verifyClean(t, b.testBundle, "acme")
}

func TestTOCTOU(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	approve(t, b.engine, "acme", staged.ApprovalID.String())
	if _, err := b.admin.Exec(ctx, "UPDATE orders SET status = 'shipped' WHERE org_id = 'acme' AND id = 'o-1002'"); err != nil {
		t.Fatal(err)
	}
	want(t, b.engine.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusPreconditionFailed)
	if orderStatus(t, b.testBundle, "acme", "o-1002") != "shipped" {
		t.Fatal("a shipped order was cancelled")
	}
	if got := phases(t, b.testBundle, "acme", staged.ApprovalID.String()); !slices.Equal(got, []string{"staged", "approved", "precondition_failed"}) {
		t.Fatalf("phases %v", got)
	}
	want(t, b.engine.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusConsumed)
	verifyClean(t, b.testBundle, "acme")
}

func TestDryRunBesideLive(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	sandbox := newEngine(t, b.testBundle, b.key, engine.ModeDryRun, nil)

	// The sandbox never stages.
	out := sandbox.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, out, engine.StatusDryRun)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"dry_run"}) {
		t.Fatalf("phases %v", got)
	}
	// The live engine stages; a person approves; the sandbox, polling,
	// neither executes nor burns it; the live engine completes it.
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)
	want(t, sandbox.Check(ctx, support("acme"), id), engine.StatusDryRun)
	if v, _ := b.engine.ShowApproval(ctx, "acme", id); v.Status != "approved" || orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatalf("after the sandbox polled: %s, order %s", v.Status, orderStatus(t, b.testBundle, "acme", "o-1001"))
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "cancelled" {
		t.Fatal("the live engine did not execute")
	}
	verifyClean(t, b.testBundle, "acme")
}

func TestDeclarationChangesAfterStaging(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	stageApproved := func(orderID string) string {
		out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "`+orderID+`", "reason": "a long enough reason"}`))
		want(t, out, engine.StatusApprovalPending)
		approve(t, b.engine, "acme", out.ApprovalID.String())
		return out.ApprovalID.String()
	}

	// The statement changed: the approval never runs under it.
	id := stageApproved("o-1001")
	changed := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.cancel_order.execute.sql",
		"UPDATE orders SET status = 'cancelled', total_cents = 0 WHERE id = :order_id AND org_id = current_setting('orangerail.tenant_id')"))
	want(t, changed.Check(ctx, support("acme"), id), engine.StatusSignatureMismatch)
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("executed under a changed declaration")
	}

	// An input the schema no longer admits is refused at execution.
	id = stageApproved("o-1002")
	stricter := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.cancel_order.input.properties.reason.maxLength", 5))
	// A changed input schema changes the definition hash too, so the
	// signature check refuses first.
	want(t, stricter.Check(ctx, support("acme"), id), engine.StatusSignatureMismatch)
	verifyClean(t, b.testBundle, "acme")
}

func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	short := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("approvals.ttl", "1s"))
	pending := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	approved := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "x"}`))
	approve(t, short, "acme", approved.ApprovalID.String())
	unpolled := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "y"}`))
	time.Sleep(1500 * time.Millisecond) // let them lapse: expiry is a semantic, not a speed
	want(t, short.Check(ctx, support("acme"), pending.ApprovalID.String()), engine.StatusExpired)
	want(t, short.Check(ctx, support("acme"), approved.ApprovalID.String()), engine.StatusExpired)
	if orderStatus(t, b.testBundle, "acme", "o-1002") != "pending" {
		t.Fatal("an expired approval executed")
	}
	if out := short.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: pending.ApprovalID.String(), Approve: false}); out.Status != engine.StatusExpired {
		t.Fatalf("deciding an expired approval: %s", out.Status)
	}
	for _, id := range []string{pending.ApprovalID.String(), approved.ApprovalID.String()} {
		if got := phases(t, b.testBundle, "acme", id); got[len(got)-1] != "expired" {
			t.Fatalf("phases %v", got)
		}
	}
	// The same call may be staged anew.
	want(t, short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`)), engine.StatusApprovalPending)
	// Also when nothing expired its lapsed approval yet: staging it
	// expires that one, recorded, and opens another.
	again := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "y"}`))
	want(t, again, engine.StatusApprovalPending)
	if *again.ApprovalID == *unpolled.ApprovalID {
		t.Fatal("a lapsed approval was returned for a new call")
	}
	if got := phases(t, b.testBundle, "acme", unpolled.ApprovalID.String()); !slices.Equal(got, []string{"staged", "expired"}) {
		t.Fatalf("phases of the lapsed approval %v", got)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestPollExpiryRace: a poll reads its approval lapsed, and the sweeper
// (another replica's, say) expires it before the poll's own expiry does:
// the poll answers what the approval is now, expired, with one expired
// record, not the pending status it read.
func TestPollExpiryRace(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	short := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("approvals.ttl", "1s"))
	staged := short.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	time.Sleep(time.Until(*staged.ExpiresAt) + 100*time.Millisecond) // let it lapse: expiry is a semantic, not a speed
	swept := 0
	engine.SetBeforeExpire(short, func() {
		n, err := short.Sweep(ctx)
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		swept += n
	})
	want(t, short.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusExpired)
	if swept != 1 {
		t.Fatalf("the sweeper expired %d approvals before the poll could, want 1", swept)
	}
	if got := phases(t, b.testBundle, "acme", staged.ApprovalID.String()); !slices.Equal(got, []string{"staged", "expired"}) {
		t.Fatalf("phases %v", got)
	}
	verifyClean(t, b.testBundle, "acme")
}

func TestNotImplementedAndMasking(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.add_order_note.redact_audit", []string{"note"}),
		ontologytest.SetYAML("actions.refund_order", `
description: Refund an order.
target: {object: order, key_from: order_id}
input: {type: object, required: [order_id], properties: {order_id: {type: string}}}
policy: {approval: required}
execute: {not_implemented: true}`))
	out := e.Call(ctx, support("acme"), "refund_order", json.RawMessage(`{"order_id": "o-1001"}`))
	want(t, out, engine.StatusNotImplemented)
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"not_implemented"}) {
		t.Fatalf("phases %v", got)
	}

	// redact_audit masks the audit record's input; redact_prior the prior
	// state. The approval keeps the verbatim input.
	out = e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "card 4111"}`))
	want(t, out, engine.StatusOK)
	var entries []string
	rows, _ := b.admin.Query(ctx, "SELECT convert_from(entry, 'UTF8') FROM orangerail.audit WHERE correlation_id = $1", out.CorrelationID)
	entries, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	for _, entry := range entries {
		if strings.Contains(entry, "card 4111") || !strings.Contains(entry, `"note":"[redacted]"`) {
			t.Fatalf("unmasked audit entry %s", entry)
		}
	}
	staged := e.Call(ctx, support("acme"), "update_shipping_address", json.RawMessage(`{"order_id": "o-1001", "address": "2 Secret Lane"}`))
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	var prior string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->'prior'->>'shipping_address' FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_started'", staged.ApprovalID.String()).Scan(&prior); err != nil || prior != "[redacted]" {
		t.Fatalf("prior shipping_address %q (%v)", prior, err)
	}
	var input string
	if err := b.admin.QueryRow(ctx, "SELECT input::text FROM orangerail.approvals WHERE id = $1", staged.ApprovalID).Scan(&input); err != nil || !strings.Contains(input, "2 Secret Lane") {
		t.Fatalf("approval input %q (%v)", input, err)
	}
}

func TestAuditBlockedRunsNothing(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION orangerail.audit_append(bytea) FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	out := b.engine.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "never"}`))
	want(t, out, engine.StatusAuditBlocked)
	var notes int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM order_notes").Scan(&notes); err != nil || notes != 0 {
		t.Fatalf("%d notes written with the audit blocked", notes)
	}
	if out.CorrelationID == "" || out.Err == nil {
		t.Fatalf("audit_blocked without its correlation or cause: %+v", out)
	}
}

// TestSeparateDatasource runs the example's data in a database of its own:
// execution_started commits to the service database before the effect.
func TestSeparateDatasource(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	dataURL := testdb.New(t)
	dataAdmin := testdb.Pool(t, dataURL)
	if _, err := dataAdmin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	data := testdb.RuntimePool(t, dataURL)
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, data)

	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "apart"}`))
	want(t, out, engine.StatusOK)
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	var status string
	if err := dataAdmin.QueryRow(ctx, "SELECT status FROM orders WHERE org_id = 'acme' AND id = 'o-1001'").Scan(&status); err != nil || status != "cancelled" {
		t.Fatalf("datasource order %q (%v)", status, err)
	}
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("the service database's copy changed")
	}
	if _, err := dataAdmin.Exec(ctx, "REVOKE INSERT ON order_notes FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	failed := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1002", "note": "x"}`))
	want(t, failed, engine.StatusFailed)
	if got := phases(t, b.testBundle, "acme", failed.CorrelationID); !slices.Equal(got, []string{"execution_started", "execution_failed"}) {
		t.Fatalf("phases %v", got)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestVerifyFindsAnOrphanedConsume consumes an approval with no audit
// record of what followed, as a process that died between the two would
// leave it if they were not one transaction.
func TestVerifyFindsAnOrphanedConsume(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	approve(t, b.engine, "acme", staged.ApprovalID.String())
	err := database.InTenant(ctx, b.runtime, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, _, err := store.New(tx).ApprovalConsume(ctx, "acme", *staged.ApprovalID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || len(r.Unaudited) != 1 || r.Unaudited[0].ApprovalID != *staged.ApprovalID {
		t.Fatalf("verify: %+v %v", r, err)
	}
	want(t, b.engine.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusConsumed)
}

// TestApprovedAroundTheChainDoesNotExecute: an approval marked approved by
// a hand on the table, with no approved record in the chain, is consumed
// but never executes: the consume asks the chain in the same statement.
func TestApprovedAroundTheChainDoesNotExecute(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.approvals SET status = 'approved', decided_by = 'mallory', decided_at = now() WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusSignatureMismatch)
	if s := orderStatus(t, b.testBundle, "acme", "o-1001"); s == "cancelled" {
		t.Fatal("the order was cancelled by an approval the chain never decided")
	}
	var why string
	if err := b.admin.QueryRow(ctx, "SELECT convert_from(entry, 'UTF8')::jsonb->>'error' FROM orangerail.audit WHERE approval_id = $1 AND phase = 'signature_mismatch'", id).Scan(&why); err != nil ||
		!strings.Contains(why, "holds no decision") {
		t.Fatalf("the refusal's record: %q %v", why, err)
	}
}

// TestCrashAfterConsume dies right after the consume. The consume and its
// audit record are one transaction, so nothing is orphaned: the approval is
// still approved, verify finds nothing, and the next poll executes once.
func TestCrashAfterConsume(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	id := staged.ApprovalID.String()
	approve(t, b.engine, "acme", id)

	crashing := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	ran := false
	engine.SetAfterConsume(crashing, func() { ran = true; panic("process killed") })
	// The engine contains the panic (answering internal_error) as the
	// crash's transaction ends: rolled back.
	want(t, crashing.Check(ctx, support("acme"), id), engine.StatusInternalError)
	if !ran {
		t.Fatal("the hook did not run")
	}

	if v, err := b.engine.ShowApproval(ctx, "acme", id); err != nil || v.Status != "approved" {
		t.Fatalf("after the crash: %+v %v", v, err)
	}
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("the effect survived the crash")
	}
	verifyClean(t, b.testBundle, "acme")
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusOK)
	want(t, b.engine.Check(ctx, support("acme"), id), engine.StatusConsumed)
	verifyClean(t, b.testBundle, "acme")
}

// TestApprovedInputRecheckedAtExecution executes an approval whose stored
// input today's schema refuses (its definition unchanged): nothing runs.
func TestApprovedInputRecheckedAtExecution(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	staged := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "x"}`))
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.approvals SET status = 'rejected', decided_by = 'x', decided_at = now() WHERE id = $1", staged.ApprovalID); err != nil {
		t.Fatal(err)
	}
	// A copy of the staged row with an input the schema refuses, as a
	// writer outside the engine might leave it.
	// Its digest is the forged input's, so only the schema can stop it.
	var forged string
	digest := engine.InputDigest(b.engine, "acme", "cancel_order", []byte(`{"order_id":"o-1001","reason":""}`))
	err := b.admin.QueryRow(ctx, `INSERT INTO orangerail.approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, expires_at)
		SELECT gen_random_uuid(), tenant_id, action, requested_by, '{"order_id": "o-1001", "reason": ""}', $2, definition_hash, expires_at
		FROM orangerail.approvals WHERE id = $1 RETURNING id::text`, staged.ApprovalID, digest).Scan(&forged)
	if err != nil {
		t.Fatal(err)
	}
	approve(t, b.engine, "acme", forged)
	out := b.engine.Check(ctx, support("acme"), forged)
	want(t, out, engine.StatusInvalidInput)
	if len(out.Issues) == 0 || out.Issues[0].Path != "/reason" {
		t.Fatalf("issues %v", out.Issues)
	}
	if orderStatus(t, b.testBundle, "acme", "o-1001") != "paid" {
		t.Fatal("an input the schema refuses executed")
	}
	if got := phases(t, b.testBundle, "acme", forged); !slices.Equal(got, []string{"approved", "invalid_input"}) {
		t.Fatalf("phases %v", got)
	}
}

func TestConcurrentIdenticalCallsShareOneApproval(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	ids := make([]string, 16)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "same"}`))
			if out.ApprovalID != nil {
				ids[i] = out.ApprovalID.String()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("identical concurrent calls got %v", ids)
		}
	}
	var n int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE phase = 'staged'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d staged records, want 1", n)
	}
}

// TestUnrecordedEffectIsNotNothingRan: on a separate datasource, an effect
// that committed but whose end could not be recorded is reported as an
// unknown outcome — never "nothing ran" — and audit verify flags it.
func TestUnrecordedEffectIsNotNothingRan(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	dataURL := testdb.New(t)
	if _, err := testdb.Pool(t, dataURL).Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, testdb.RuntimePool(t, dataURL))
	engine.SetBeforeFinish(e, func() {
		if _, err := b.admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION orangerail.audit_append(bytea) FROM orangerail_runtime"); err != nil {
			t.Error(err)
		}
	})
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "ran"}`))
	want(t, out, engine.StatusOutcomeUnknown)
	var notes int
	if err := testdb.Pool(t, dataURL).QueryRow(ctx, "SELECT count(*) FROM order_notes").Scan(&notes); err != nil || notes != 1 {
		t.Fatalf("the effect: %d notes (%v)", notes, err)
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || len(r.Unfinished) != 1 || r.Unfinished[0].CorrelationID != out.CorrelationID {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

// TestResultsKeepExactNumbers: a result holding numbers no double holds
// (a big numeric, NaN) is still audited, exactly.
func TestResultsKeepExactNumbers(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.add_order_note.execute.sql",
		"INSERT INTO order_notes (org_id, order_id, note) VALUES (current_setting('orangerail.tenant_id'), :order_id, :note) "+
			"RETURNING id, 12345678901234567890::numeric AS big, 'NaN'::float8 AS nan"))
	out := e.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "n"}`))
	want(t, out, engine.StatusOK)
	var big, nan string
	err := b.admin.QueryRow(ctx, `SELECT convert_from(entry, 'UTF8')::jsonb->'result'->'rows'->0->>'big', convert_from(entry, 'UTF8')::jsonb->'result'->'rows'->0->>'nan'
		FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_succeeded'`, out.CorrelationID).Scan(&big, &nan)
	if err != nil || big != "12345678901234567890" || nan != "NaN" {
		t.Fatalf("audited result: big %q nan %q (%v)", big, nan, err)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestInputFormatsAreHeld: a format an action's input schema states is
// enforced, as the tool advertises it: an address that is no address is
// X_INPUT_INVALID at its path, recorded, and nothing is staged; a valid
// one is staged.
func TestInputFormatsAreHeld(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("actions.cancel_order.input.properties.reason.format", "email"))
	out := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "not an address"}`))
	if out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != "/reason" {
		t.Fatalf("a reason that is no email: %s %v", out.Status, out.Issues)
	}
	if got := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(got, []string{"invalid_input"}) {
		t.Fatalf("the refusal's records: %v", got)
	}
	want(t, e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "ops@example.com"}`)), engine.StatusApprovalPending)
}
