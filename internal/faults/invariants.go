// Package faults is test support for fault runs: an invariant checker that
// reads only the database, and a tracer that terminates the backend
// serving a chosen statement of the lifecycle. Tests import it; nothing
// the binary links does (internal/app's layering test holds that).
package faults

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
)

// Kind names what a violation breaks, from a closed set.
type Kind string

// The kinds.
const (
	// KindExecutionCount: a consumed approval without exactly one
	// execution (execution_started or a refusal recorded after the
	// consume), or an approval not consumed that has one.
	KindExecutionCount Kind = "execution_count"
	// KindUnfinished: an execution_started with no execution_succeeded,
	// execution_failed or execution_settled after it. On the shared-database path none is
	// possible; a separate datasource's is "reported unfinished", which a
	// test of that path may expect.
	KindUnfinished Kind = "unfinished_execution"
	// KindEffectWithoutRecord: the data holds an effect no succeeded
	// execution records (or more of them than executions).
	KindEffectWithoutRecord Kind = "effect_without_record"
	// KindRecordWithoutEffect: a succeeded execution whose effect the data
	// does not hold: "done" for something that did not happen.
	KindRecordWithoutEffect Kind = "record_without_effect"
	// KindChainBroken: a verifier found a broken link or head.
	KindChainBroken Kind = "chain_broken"
	// KindUnsealed: a record still unsealed after sealing.
	KindUnsealed Kind = "unsealed_record"
	// KindUnexplained: an approval or execution the chain does not
	// explain, or a consumed approval with no post-consume record.
	KindUnexplained Kind = "unexplained"
	// KindStuck: a row in a state no path leaves.
	KindStuck Kind = "stuck"
	// KindNegativeCounter: a budget counter below zero.
	KindNegativeCounter Kind = "negative_counter"
)

// Violation is one broken invariant.
type Violation struct {
	Kind   Kind
	Tenant string
	// Source says which check found it: "sql", "go verifier", "sql
	// verifier".
	Source string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s [%s] tenant %q: %s", v.Kind, v.Source, v.Tenant, v.Detail)
}

// Effect tells the checker how to see one action's effect in the data:
// Query returns a (tenant, key) row for each effect present, and
// InputMember names the member of the action's input that holds the key.
// Each key must appear as often in the data as succeeded executions of the
// action record it.
type Effect struct {
	Action      string
	Query       string
	InputMember string
}

// Check reads the database through owner (a superuser or owner pool, which
// Row Level Security does not restrict) and returns every violated
// invariant, none when all hold. It seals every tenant's committed
// records first (engine.SealTenant), so that both verifiers see the whole
// chain. An error means the check could not run, not that an invariant
// failed.
func Check(ctx context.Context, owner *pgxpool.Pool, effects ...Effect) ([]Violation, error) {
	var vs []Violation
	add := func(kind Kind, tenant, source, detail string) {
		vs = append(vs, Violation{Kind: kind, Tenant: tenant, Source: source, Detail: detail})
	}
	rows := func(sql string, args []any, each func(r pgx.Rows) error) error {
		rs, err := owner.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			if err := each(rs); err != nil {
				return err
			}
		}
		return rs.Err()
	}

	// Exactly one execution for each consumed approval, none for another.
	// resolve_error is recorded after its transaction, consume included,
	// rolled back, so it is no execution.
	err := rows(`
		SELECT a.tenant_id, a.id::text, a.status, count(x.id)
		FROM orangerail.approvals a
		LEFT JOIN orangerail.audit x ON x.tenant_id = a.tenant_id AND x.approval_id = a.id
			AND x.phase IN ('execution_started', 'precondition_failed', 'signature_mismatch', 'invalid_input')
		GROUP BY a.tenant_id, a.id, a.status
		HAVING (a.status = 'consumed' AND count(x.id) <> 1) OR (a.status <> 'consumed' AND count(x.id) > 0)
		ORDER BY 1, 2`, nil, func(r pgx.Rows) error {
		var tenant, id, status string
		var n int64
		if err := r.Scan(&tenant, &id, &status, &n); err != nil {
			return err
		}
		add(KindExecutionCount, tenant, "sql", fmt.Sprintf("approval %s is %s with %d executions", id, status, n))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count executions: %w", err)
	}

	for _, e := range effects {
		if err := checkEffect(ctx, owner, e, add); err != nil {
			return nil, err
		}
	}

	// Nothing stuck. Sweep expires every listed tenant's lapsed pending
	// and approved approvals (engine.Sweep), so those leave by its path
	// as long as their tenant is listed; the other statuses are final (a
	// consumed one has its execution, checked above). An idempotency key
	// without its outcome once every call has ended is a claim its call
	// neither filed nor gave back: its retries wait it out and answer
	// outcome_unknown. Only a replica stopped mid-call leaves one by
	// design: a run that sends keys to a replica it stops excuses those
	// its kills cut (the soak's stuckKeyExcused), no other.
	err = rows(`
		SELECT a.tenant_id, 'approval ' || a.id || ' is ' || a.status || ' in a tenant the sweeper does not list'
		FROM orangerail.approvals a
		WHERE a.status IN ('pending', 'approved') AND NOT EXISTS (SELECT FROM orangerail.tenants t WHERE t.id = a.tenant_id)
		UNION ALL
		SELECT k.tenant_id, 'idempotency key ' || k.key || ' of ' || k.action || ' holds no outcome'
		FROM orangerail.idempotency_keys k WHERE k.outcome IS NULL
		ORDER BY 1, 2`, nil, func(r pgx.Rows) error {
		var tenant, detail string
		if err := r.Scan(&tenant, &detail); err != nil {
			return err
		}
		add(KindStuck, tenant, "sql", detail)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find stuck rows: %w", err)
	}

	err = rows(`
		SELECT tenant_id, action || ': minute_calls ' || minute_calls || ', day_calls ' || day_calls
		FROM orangerail.budget_counts WHERE minute_calls < 0 OR day_calls < 0 ORDER BY 1, 2`, nil, func(r pgx.Rows) error {
		var tenant, detail string
		if err := r.Scan(&tenant, &detail); err != nil {
			return err
		}
		add(KindNegativeCounter, tenant, "sql", detail)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read budget counters: %w", err)
	}

	tenants, err := engine.Tenants(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	for _, t := range tenants {
		if err := checkChain(ctx, owner, t, add); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// checkEffect holds e's effects in the data to its succeeded executions.
func checkEffect(ctx context.Context, owner *pgxpool.Pool, e Effect, add func(Kind, string, string, string)) error {
	type key struct{ tenant, key string }
	count := func(sql string, args ...any) (map[key]int, error) {
		rs, err := owner.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		m := map[key]int{}
		var k key
		_, err = pgx.ForEachRow(rs, []any{&k.tenant, &k.key}, func() error { m[k]++; return nil })
		return m, err
	}
	present, err := count(e.Query)
	if err != nil {
		return fmt.Errorf("read the effects of %s: %w", e.Action, err)
	}
	recorded, err := count(`
		SELECT s.tenant_id, convert_from(s.entry, 'UTF8')::jsonb->'input'->>$2
		FROM orangerail.audit s
		WHERE s.phase = 'execution_started' AND s.action = $1
		  AND EXISTS (SELECT FROM orangerail.audit f WHERE f.tenant_id = s.tenant_id
		              AND f.correlation_id = s.correlation_id AND f.id > s.id AND f.phase = 'execution_succeeded')`,
		e.Action, e.InputMember)
	if err != nil {
		return fmt.Errorf("read the executions of %s: %w", e.Action, err)
	}
	for k, n := range present {
		if n > recorded[k] {
			add(KindEffectWithoutRecord, k.tenant, "sql", fmt.Sprintf("%s %q: %d in the data, %d succeeded executions", e.Action, k.key, n, recorded[k]))
		}
	}
	for k, n := range recorded {
		if n > present[k] {
			add(KindRecordWithoutEffect, k.tenant, "sql", fmt.Sprintf("%s %q: %d succeeded executions, %d in the data", e.Action, k.key, n, present[k]))
		}
	}
	return nil
}

// checkChain seals tenant's committed records and verifies its chain with
// both verifiers: engine.VerifyTenant, and the SQL functions an auditor
// runs.
func checkChain(ctx context.Context, owner *pgxpool.Pool, tenant string, add func(Kind, string, string, string)) error {
	if _, err := engine.SealTenant(ctx, owner, tenant); err != nil {
		return fmt.Errorf("seal %s: %w", tenant, err)
	}
	r, err := engine.VerifyTenant(ctx, owner, tenant, engine.VerifyOptions{})
	if err != nil {
		return fmt.Errorf("verify %s: %w", tenant, err)
	}
	const goV = "go verifier"
	if r.NothingVisible {
		add(KindChainBroken, tenant, goV, "nothing visible: no chain head and no sealed record")
	}
	if r.Break != nil {
		add(KindChainBroken, tenant, goV, fmt.Sprintf("seq %d: %s", r.Break.Seq, r.Break.Problem))
	}
	// What SealTenant sealed is in the chain now: a record still pending
	// committed after it, and a record unsealed at all is one to report.
	if r.Pending > 0 {
		add(KindUnsealed, tenant, goV, fmt.Sprintf("%d records unsealed after sealing", r.Pending))
	}
	for _, u := range r.Unsealed {
		add(KindUnsealed, tenant, goV, fmt.Sprintf("%s %s unsealed for %s", u.Phase, u.CorrelationID, u.UnsealedFor))
	}
	for _, u := range r.Unfinished {
		add(KindUnfinished, tenant, goV, fmt.Sprintf("%s started at seq %d (correlation %s)", u.Action, u.Seq, u.CorrelationID))
	}
	for _, u := range r.Unaudited {
		add(KindUnexplained, tenant, goV, fmt.Sprintf("approval %s consumed with no post-consume record", u.ApprovalID))
	}
	for _, u := range r.UnexplainedApprovals {
		add(KindUnexplained, tenant, goV, fmt.Sprintf("approval %s (%s) lacks %v", u.ApprovalID, u.Status, u.Missing))
	}
	for _, u := range r.UnexplainedExecutions {
		add(KindUnexplained, tenant, goV, fmt.Sprintf("%s of approval %s lacks %v", u.Phase, u.ApprovalID, u.Missing))
	}

	const sqlV = "sql verifier"
	checks := []struct {
		kind Kind
		sql  string
	}{
		{KindChainBroken, `SELECT coalesce('seq ' || seq || ': ', '') || problem FROM orangerail.audit_verify($1)`},
		{KindUnfinished, `SELECT action || ' started at seq ' || coalesce(seq::text, 'unsealed') || ' (correlation ' || correlation_id || ')' FROM orangerail.audit_unfinished($1)`},
		{KindUnexplained, `SELECT 'approval ' || approval_id || ' consumed with no post-consume record' FROM orangerail.approvals_unaudited($1)`},
		{KindUnexplained, `SELECT phase || ' of approval ' || approval_id || ' lacks ' || array_to_string(missing, ',') FROM orangerail.audit_unexplained_executions($1)`},
	}
	for _, c := range checks {
		rs, err := owner.Query(ctx, c.sql, tenant)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", strings.Fields(c.sql)[len(strings.Fields(c.sql))-1], tenant, err)
		}
		var detail string
		if _, err := pgx.ForEachRow(rs, []any{&detail}, func() error { add(c.kind, tenant, sqlV, detail); return nil }); err != nil {
			return fmt.Errorf("sql verifier of %s: %w", tenant, err)
		}
	}
	return nil
}
