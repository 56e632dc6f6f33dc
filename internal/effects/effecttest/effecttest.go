// Package effecttest holds what the tests of the upstream effects
// (httpeffect, soapeffect) read back from the audit log: a call's records
// and attempts, and both verifiers' verdict. Test support only; nothing in
// the binary imports it.
package effecttest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
)

// Attempt is an effect_attempt record's attempt.
type Attempt struct {
	Number     int    `json:"number"`
	Status     int    `json:"status"`
	Failure    string `json:"failure"`
	Sent       bool   `json:"sent"`
	DurationMS int64  `json:"duration_ms"`
	// IdempotencyKey is the key the attempt sent, "" for none.
	IdempotencyKey string `json:"idempotency_key"`
}

// Audit returns the phases of correlation's records in tenant's chain, its
// attempts, and every record's text, a line each. An attempt record that
// keeps the input fails the test: an attempt holds its number, status and
// duration, never what was sent.
func Audit(t testing.TB, admin *pgxpool.Pool, tenant, correlation string) ([]string, []Attempt, string) {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT phase, convert_from(entry, 'UTF8') FROM orangerail.audit
		WHERE tenant_id = $1 AND correlation_id = $2 ORDER BY seq`, tenant, correlation)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	var attempts []Attempt
	var all strings.Builder
	for rows.Next() {
		var phase, entry string
		if err := rows.Scan(&phase, &entry); err != nil {
			t.Fatal(err)
		}
		phases = append(phases, phase)
		all.WriteString(entry + "\n")
		if phase == string(engine.PhaseEffectAttempt) {
			var e struct {
				Attempt *Attempt        `json:"attempt"`
				Input   json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal([]byte(entry), &e); err != nil || e.Attempt == nil || e.Input != nil {
				t.Fatalf("an attempt record %s (%v)", entry, err)
			}
			attempts = append(attempts, *e.Attempt)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return phases, attempts, all.String()
}

// Verify runs both verifiers over tenant's chain: the Go one (as runtime)
// and SQL's audit_verify (as admin); the only open execution is
// unfinished, when given.
func Verify(t testing.TB, runtime, admin *pgxpool.Pool, tenant, unfinished string) {
	t.Helper()
	r, err := engine.VerifyTenant(context.Background(), runtime, tenant, engine.VerifyOptions{})
	if err != nil || r.Break != nil || r.UnauditedTotal != 0 || r.UnexplainedApprovalsTotal != 0 || r.UnexplainedExecutionsTotal != 0 {
		t.Fatalf("verify: %+v %v", r, err)
	}
	var open []string
	for _, u := range r.Unfinished {
		open = append(open, u.CorrelationID)
	}
	if unfinished == "" && len(open) != 0 || unfinished != "" && !slices.Equal(open, []string{unfinished}) {
		t.Fatalf("unfinished executions %v, want %q", open, unfinished)
	}
	var problems int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM orangerail.audit_verify($1)", tenant).Scan(&problems); err != nil || problems != 0 {
		t.Fatalf("audit_verify: %d problems, %v", problems, err)
	}
}
