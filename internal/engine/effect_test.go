package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects/sqleffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// fakeEffect stands in for an effect of another kind (an upstream call):
// it records what it was called with, and what the audit log held then.
type fakeEffect struct {
	transactional bool
	err           error

	mu    sync.Mutex
	calls []fakeCall
}

type fakeCall struct {
	call        engine.EffectCall
	hasDeadline bool
	// startedCommitted: another connection saw execution_started while
	// the effect ran.
	startedCommitted bool
}

func (f *fakeEffect) Transactional() bool { return f.transactional }

func (f *fakeEffect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	_, hasDeadline := ctx.Deadline()
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{call: *call, hasDeadline: hasDeadline})
	f.mu.Unlock()
	if f.err != nil {
		return engine.EffectResult{}, f.err
	}
	return engine.EffectResult{Data: json.RawMessage(`{"sent":true}`), RowsAffected: 1}, nil
}

// effectEngine serves the example with every sql action run by f, and
// checks, while f runs, whether execution_started is committed.
func effectEngine(t *testing.T, b *exampleBundle, f *fakeEffect) *engine.Engine {
	t.Helper()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	watched := &watchingEffect{fakeEffect: f, b: b}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Catalog: readCatalog(t, cfg, b.runtime), Key: b.key, Logger: quiet,
		Effects: map[ontology.ExecuteKind]engine.EffectFactory{
			ontology.ExecuteSQL: func(string, *ontology.Action) (engine.Effect, error) { return watched, nil },
			// The example's create_return_label; this test never calls it.
			ontology.ExecuteHTTP: func(string, *ontology.Action) (engine.Effect, error) { return watched, nil },
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// watchingEffect looks, from a connection of its own, for the
// execution_started record of the call it runs.
type watchingEffect struct {
	*fakeEffect
	b *exampleBundle
}

func (w *watchingEffect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	var n int
	err := w.b.admin.QueryRow(context.WithoutCancel(ctx), "SELECT count(*) FROM orangerail.audit WHERE correlation_id = $1 AND phase = 'execution_started'", call.CorrelationID).Scan(&n)
	res, runErr := w.fakeEffect.Run(ctx, call)
	w.mu.Lock()
	w.calls[len(w.calls)-1].startedCommitted = err == nil && n == 1
	w.mu.Unlock()
	return res, runErr
}

// TestEffectSeam runs the lifecycle around effects of other kinds than
// sql: what an effect is given, where execution_started commits for a
// transactional effect and for one that is not, and how each ending is
// recorded — a failure, and an outcome that cannot be known.
func TestEffectSeam(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	args := json.RawMessage(`{"note": "hello", "order_id": "o-1001"}`)
	canonical, _ := jcs.Canonicalize(args)

	// An effect outside any transaction (an upstream call): given no
	// transaction, the locked target and the canonical input, under a
	// deadline, after execution_started committed.
	upstream := &fakeEffect{}
	e := effectEngine(t, b, upstream)
	out := e.Call(ctx, support("acme"), "add_order_note", args)
	want(t, out, engine.StatusOK)
	if string(out.Data) != `{"sent":true}` {
		t.Fatalf("result %s", out.Data)
	}
	got := upstream.calls[0]
	if got.call.Tx != nil || got.call.Tenant != "acme" || got.call.Action != "add_order_note" || got.call.CorrelationID != out.CorrelationID ||
		string(got.call.Input) != string(canonical) || !strings.Contains(string(got.call.Target), `"id":"o-1001"`) || !got.hasDeadline {
		t.Fatalf("the effect was called with %+v", got)
	}
	if !got.startedCommitted {
		t.Fatal("an effect outside the transaction ran before execution_started committed")
	}
	if p := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(p, []string{"execution_started", "execution_succeeded"}) {
		t.Fatalf("phases %v", p)
	}
	verifyClean(t, b.testBundle, "acme")

	// A transactional effect on the service database: one transaction,
	// so execution_started is not committed while it runs.
	inTx := &fakeEffect{transactional: true}
	out = effectEngine(t, b, inTx).Call(ctx, support("acme"), "add_order_note", args)
	want(t, out, engine.StatusOK)
	if got := inTx.calls[0]; got.call.Tx == nil || got.startedCommitted {
		t.Fatalf("a transactional effect: tx %v, execution_started committed before it ran: %v", got.call.Tx, got.startedCommitted)
	}
	verifyClean(t, b.testBundle, "acme")

	// A failure is recorded, classified where it can be.
	out = effectEngine(t, b, &fakeEffect{err: context.DeadlineExceeded}).Call(ctx, support("acme"), "add_order_note", args)
	wantTimeout(t, out, engine.StatusFailed, engine.DiagnosticDatasourceTimeout)
	if p := phases(t, b.testBundle, "acme", out.CorrelationID); !slices.Equal(p, []string{"execution_started", "execution_failed"}) {
		t.Fatalf("phases %v", p)
	}
	verifyClean(t, b.testBundle, "acme")

	// An effect that may have taken place: outcome_unknown, and its
	// execution stays unfinished for an operator to settle.
	sent := errors.New("the request was sent; no answer came")
	out = effectEngine(t, b, &fakeEffect{err: engine.OutcomeUnknown(sent)}).Call(ctx, support("acme"), "add_order_note", args)
	want(t, out, engine.StatusOutcomeUnknown)
	if !errors.Is(out.Err, sent) {
		t.Fatalf("the outcome's error %v does not carry the effect's", out.Err)
	}
	r, err := engine.VerifyTenant(ctx, b.runtime, "acme", engine.VerifyOptions{})
	if err != nil || len(r.Unfinished) != 1 || r.Unfinished[0].CorrelationID != out.CorrelationID {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

// TestEngineNeedsEachKindsEffect: an engine is not built without an effect
// for every kind its actions declare, nor with a declaration its kind
// refuses.
func TestEngineNeedsEachKindsEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The example's actions of kind sql alone: the error names the kind
	// whose effect is missing.
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.Delete("actions.create_return_label"))
	refusing := errors.New("cannot run this")
	for _, tt := range []struct {
		name    string
		effects map[ontology.ExecuteKind]engine.EffectFactory
		want    string
	}{
		{"none", nil, `no effect is configured for execute kind "sql"`},
		{"another kind's", map[ontology.ExecuteKind]engine.EffectFactory{ontology.ExecuteNotImplemented: sqleffect.New}, `no effect is configured for execute kind "sql"`},
		{"a factory that refuses", map[ontology.ExecuteKind]engine.EffectFactory{
			ontology.ExecuteSQL: func(string, *ontology.Action) (engine.Effect, error) { return nil, refusing },
		}, "cannot run this"},
	} {
		_, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: tt.effects, Catalog: &ontology.Catalog{}, Key: make([]byte, engine.KeySize)})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "actions.") {
			t.Errorf("%s: New = %v, want an error naming the action and %q", tt.name, err, tt.want)
		}
	}
}
