package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// upstreamConfig serves one http action, create_label, against base.
const upstreamConfig = `service: bench
upstreams:
  carrier: {base_url: %q}
actions:
  create_label:
    description: Create a return label.
    input: {type: object, properties: {order_id: {type: string}, weight: {type: number}}, required: [order_id]}
    policy: {roles: [support]}
    budget: {per_minute: 1000000, max_concurrent: 64, per_day: 100000000}  # measured: spending it; not: its limits
    execute:
      http: {upstream: carrier, method: POST, path: "/orders/{order_id}/labels", body: {order: ":order_id", weight: ":weight"}}
`

// benchBudget lifts an action's call budget out of a benchmark's way: the
// budget's transaction is measured, its limits are not.
var benchBudget = ontology.Budget{PerMinute: 1000000, MaxConcurrent: 64, PerDay: 100000000}

// upstreamCall measures a governed http action end to end — engine.Call,
// its execution_started, effect_attempt and execution_succeeded records,
// and the request — against a bare http.Client making the same request
// to the same local server: p50 latency, ratio governed / bare.
func upstreamCall(ctx context.Context, dbURL string, d time.Duration, emit func(result)) error {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"label_id": "L-1"}`)
	}))
	defer srv.Close()
	cfg, err := ontology.Parse(fmt.Appendf(nil, upstreamConfig, srv.URL))
	if err != nil {
		return err
	}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: dbURL})
	if err != nil {
		return err
	}
	defer rt.Close()
	agent := &engine.Caller{Subject: "agent-1", Tenant: "acme", Roles: []string{"support"}, Kind: engine.ActorAgent}
	governed, err := p50(d, func(i int) error {
		out := rt.Engine.Call(ctx, agent, "create_label", fmt.Appendf(nil, `{"order_id": "o-%d", "weight": 1.5}`, i))
		if out.Status != engine.StatusOK {
			return fmt.Errorf("call: %s %w", out.Status, out.Err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	client := &http.Client{}
	bare, err := p50(d, func(i int) error {
		body, _ := json.Marshal(map[string]any{"order": fmt.Sprintf("o-%d", i), "weight": 1.5})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/orders/o-%d/labels", srv.URL, i), bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.ReadAll(resp.Body)
		return resp.Body.Close()
	})
	if err != nil {
		return err
	}
	emit(result{Name: "upstream_call_p50", Value: round(governed), Unit: "µs", Baseline: ptr(round(bare)), Ratio: ptr(round2(governed / bare))})
	return nil
}

// p50 runs op sequentially for d and returns its median latency in µs.
func p50(d time.Duration, op func(i int) error) (float64, error) {
	var took []time.Duration
	for deadline, i := time.Now().Add(d), 0; time.Now().Before(deadline); i++ {
		start := time.Now()
		if err := op(i); err != nil {
			return 0, err
		}
		took = append(took, time.Since(start))
	}
	if len(took) == 0 {
		return 0, fmt.Errorf("no call completed in %s", d)
	}
	slices.Sort(took)
	return float64(took[len(took)/2].Microseconds()), nil
}
