package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestSettleNeverStandsBesideTheEnd: an execution on a separate datasource
// whose effect took a while and whose end then waits for a connection of
// its store's pool (every one busy: a replica under load) records its end
// later than ExecutionBound after its start. An operator who settles it
// once that bound has passed is not refused; the end the execution then
// records must not stand beside the settle (README: "no settle ever
// stands beside an end the execution records itself").
func TestSettleNeverStandsBesideTheEnd(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	config := ontologytest.Apply(t, orders.Config,
		ontologytest.SetYAML("limits", "{lock_timeout: 1s, statement_timeout: 2s}"),
		ontologytest.SetYAML("actions.slow_note", `
description: Sleep, then answer.
input: {type: object, properties: {seconds: {type: number}}}
policy: {roles: [support]}
destructive: false
execute: {sql: "SELECT true AS slept FROM pg_sleep(:seconds)"}`))
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.SetYAML("limits", "{lock_timeout: 1s, statement_timeout: 2s}"))
	bound := engine.ExecutionBound(cfg.Limits) // 10s
	apart := exampleEngine(t, b, config, seededDatasource(t), quiet)

	settled := make(chan error, 1)
	engine.SetBeforeFinish(apart, func() {
		// Every connection of the store's pool is busy until the settle
		// is done.
		held := make([]*pgxpool.Conn, 0, b.runtime.Stat().MaxConns())
		for range cap(held) {
			c, err := b.runtime.Acquire(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			held = append(held, c)
		}
		go func() {
			defer func() {
				for _, c := range held {
					c.Release()
				}
			}()
			var correlation string
			if err := b.admin.QueryRow(ctx, "SELECT correlation_id FROM orangerail.audit WHERE phase = 'execution_started' AND action = 'slow_note'").Scan(&correlation); err != nil {
				settled <- err
				return
			}
			for deadline := time.Now().Add(2 * bound); ; time.Sleep(100 * time.Millisecond) {
				_, err := engine.SettleExecution(ctx, b.admin, "acme", correlation, engine.SettledFailed, "the carrier has no such note", bound, time.Now())
				var c *errcode.Error
				if errors.As(err, &c) && c.Code == errcode.ExecutionMayBeRunning && time.Now().Before(deadline) {
					continue
				}
				settled <- err
				return
			}
		}()
	})
	out := apart.Call(ctx, support("acme"), "slow_note", json.RawMessage(`{"seconds": 1.5}`))
	settleErr := <-settled
	var phases []string
	if err := b.admin.QueryRow(ctx, "SELECT array_agg(phase ORDER BY seq NULLS LAST, id) FROM orangerail.audit WHERE action = 'slow_note'").Scan(&phases); err != nil {
		t.Fatal(err)
	}
	t.Logf("the call: %s (%v); the settle: %v; the chain: %q", out.Status, out.Err, settleErr, phases)
	var ends int
	for _, p := range phases {
		if engine.Phase(p).Finishes() {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("the execution has %d ends, want one (its own, or the operator's): %q", ends, phases)
	}
}
