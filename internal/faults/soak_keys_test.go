package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// The soak's keyed writes: a share of its staged notes carry an
// idempotencyKey, retried under it as a step fails, once more after their
// lifecycle ended, and once more after the load (every fault injected by
// then: a replica that answered a key may have been killed since).
// add_order_note is made idempotent for them; the rest of its calls send
// no key.
var soakKeyed = ontologytest.Set("actions.add_order_note.idempotent", true)

// soakClaimLease is how long a key's claim lasts in the fleet (README,
// idempotency_ttl): three transaction bounds of lock_timeout + 2 ×
// statement_timeout + 5s. A claim its replica's kill left holds no
// outcome until then, and its agent's stage waits that long to be told
// outcome_unknown.
const soakClaimLease = 3 * (time.Second + 2*fleetStatementTimeout + 5*time.Second)

// soakKeyedKillWait bounds how long a replica kill waits for a keyed
// stage on its replica to cut.
const soakKeyedKillWait = 2 * time.Second

// awaitKeyedStage waits, at most soakKeyedKillWait, until one of agents
// stages under a key on r, then a moment more (jitter), so that the kill
// that follows cuts a keyed call — before its claim, between the claim
// and its outcome (a claim left to run out), or after — and reports
// whether it found one.
func awaitKeyedStage(agents []*fleetAgent, r *replica, jitter time.Duration) bool {
	deadline := time.Now().Add(soakKeyedKillWait)
	for time.Now().Before(deadline) {
		if slices.ContainsFunc(agents, func(a *fleetAgent) bool { return a.via.stagingOn(r) }) {
			time.Sleep(jitter)
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// keyAnswer is one call under a cycle's key.
type keyAnswer struct {
	status, approval, correlation, diagnostic string
	// answered: a replica answered it (classified). killedUnder: none
	// did, and the replica it went to was killed after it was sent.
	answered, killedUnder bool
	// after: sent once the cycle had an answer under its key already, as
	// a retry of it; firstKilled: the replica that gave that first answer
	// had been killed since.
	after, firstKilled bool
	via                *replica
	kills              int64
}

func (k keyAnswer) String() string {
	if !k.answered {
		return fmt.Sprintf("no answer (replica killed under it: %t)", k.killedUnder)
	}
	return fmt.Sprintf("%s approval %q correlation %q %s", k.status, k.approval, k.correlation, k.diagnostic)
}

// keyFiled are the statuses a key answers as its call's outcome (filed,
// or a poll of the approval filed): every other status says nothing ran,
// and the key is retried.
var keyFiled = map[string]bool{
	string(engine.StatusApprovalPending): true, string(engine.StatusPending): true, "executed": true,
	string(engine.StatusConsumed): true, string(engine.StatusExecuting): true, string(engine.StatusRejected): true,
	string(engine.StatusExpired): true, string(engine.StatusOutcomeUnknown): true,
}

// keyedLifecycle is lifecycle with its stage under an idempotencyKey;
// once it ended, the agent calls again under the key, as a client that
// lost the first answer would.
func (a *fleetAgent) keyedLifecycle(note string, reject bool) (*cycle, error) {
	args := map[string]any{"order_id": "o-1001", "note": note}
	c, err := a.drive(&cycle{action: "add_order_note", note: note, key: "key-" + note}, args, reject)
	if err != nil || (!c.done && !c.abandoned) {
		return c, err
	}
	return c, a.retryKey(c)
}

// keyedCall calls c's action under c's key and records what it answered.
func (a *fleetAgent) keyedCall(c *cycle) keyAnswer {
	args := map[string]any{"order_id": "o-1001", "note": c.note, ontology.IdempotencyKeyArg: c.key}
	var first *keyAnswer
	for i := range c.keyed {
		if c.keyed[i].answered && keyFiled[c.keyed[i].status] {
			first = &c.keyed[i]
			break
		}
	}
	answer, err := a.tool(c.action, args)
	k := keyAnswer{answered: err == nil || errors.Is(err, errAnswered), after: first != nil}
	k.via, k.kills = a.via.snapshot()
	if first != nil && first.via != nil {
		k.firstKilled = first.via.kills.Load() != first.kills
	}
	if !k.answered {
		_, k.killedUnder = a.via.last()
	} else {
		k.status, _ = answer["status"].(string)
		k.approval, _ = answer["approvalId"].(string)
		k.correlation, _ = answer["correlationId"].(string)
		k.diagnostic, _ = answer["diagnostic"].(string)
	}
	c.keyed = append(c.keyed, k)
	return k
}

// stageKeyed is one try of a keyed stage: done once it answered
// approval_pending, or outcome_unknown with no approval (the claim of a
// call that ended without filing ran out: the agent is told not to call
// again under the key, and the cycle ends there, abandoned).
func (a *fleetAgent) stageKeyed(c *cycle, _ map[string]any) bool {
	a.via.staging.Store(true)
	k := a.keyedCall(c)
	a.via.staging.Store(false)
	switch {
	case k.status == string(engine.StatusApprovalPending) && k.approval != "":
		c.approval = k.approval
		return true
	case k.status == string(engine.StatusOutcomeUnknown) && k.approval == "":
		c.abandoned = true
		return true
	}
	return false
}

// retryKey calls again under c's key until a replica answers it with a
// filed outcome (a busy key, a store's failure and no answer are tried
// again).
func (a *fleetAgent) retryKey(c *cycle) error {
	return retry(c.note+": retry under its key", func() bool {
		k := a.keyedCall(c)
		return k.answered && keyFiled[k.status]
	})
}

// keyProblems holds what each keyed cycle's calls answered under its key
// to what the product promises (README, idempotency_ttl): (a) a key that
// answered an approval answers that approval thereafter, and once the
// cycle ended, its end (consumed, or outcome_unknown after an unfinished
// execution; rejected); no answer under a key says a second execution
// ran. (c) A key answers outcome_unknown with no approval only for a
// claim that ran out with no outcome filed, which the product allows for
// a call whose replica stopped mid-call, or whose outcome could not be
// filed nor its key given back (the host log says so, under the call's
// correlation id, warned says whether it did); thereafter it answers the
// same. Nothing else excuses it.
func keyProblems(cycles []*cycle, warned func(correlation string) bool) []string {
	var problems []string
	for _, c := range cycles {
		if c.key == "" {
			continue
		}
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("key %s (approval %q, polls %v): ", c.key, c.approval, c.polls)+fmt.Sprintf(format, args...)+
				"; answers under the key: "+keyHistory(c.keyed))
		}
		executed := c.executions()
		var abandoned *keyAnswer
		killed := false
		end := c.polls
		for i, k := range c.keyed {
			if !k.answered {
				killed = killed || k.killedUnder
				continue
			}
			if !keyFiled[k.status] {
				continue
			}
			if k.status == "executed" {
				executed++
			}
			switch {
			case abandoned != nil:
				if k.status != string(engine.StatusOutcomeUnknown) || k.approval != "" || k.correlation != abandoned.correlation {
					bad("answer %d is %s after the key answered outcome_unknown for its abandoned claim (correlation %q)", i, k, abandoned.correlation)
				}
			case k.status == string(engine.StatusOutcomeUnknown) && k.approval == "":
				abandoned = &c.keyed[i]
				if c.approval != "" && !warned(k.correlation) {
					bad("answer %d: outcome_unknown for a claim that ran out, where the key had answered approval %s and no host log says its outcome could not be filed", i, c.approval)
				} else if c.approval == "" && !killed && !warned(k.correlation) {
					bad("answer %d: outcome_unknown for a claim that ran out, and no call under the key had its replica killed under it nor does a host log say its outcome could not be filed", i)
				}
			case k.approval != c.approval:
				bad("answer %d is %s: another approval than the key's first", i, k)
			case k.after && c.done && !endsAs(c.decision, end, k.status):
				bad("answer %d is %s after the lifecycle ended (%s, polls %v)", i, k, c.decision, end)
			}
		}
		if executed > 1 {
			bad("%d answers said the approval executed", executed)
		}
	}
	return problems
}

// endsAs reports whether status is what a call under the key of a cycle
// that ended (decision, its polls) answers: rejected for a rejected one;
// consumed for an executed one, or outcome_unknown too when its polls
// gave up on an execution with no recorded end.
func endsAs(decision string, polls []string, status string) bool {
	if decision == "reject" {
		return status == string(engine.StatusRejected)
	}
	return status == string(engine.StatusConsumed) ||
		(status == string(engine.StatusOutcomeUnknown) && slices.Contains(polls, string(engine.StatusOutcomeUnknown)))
}

func keyHistory(ks []keyAnswer) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k.String()
	}
	return strings.Join(parts, "; ")
}

// keysRetriedAfterKill counts the keyed cycles retried under their key,
// answered, after the replica that first answered the key was killed.
func keysRetriedAfterKill(cycles []*cycle) int {
	n := 0
	for _, c := range cycles {
		if slices.ContainsFunc(c.keyed, func(k keyAnswer) bool { return k.after && k.firstKilled && k.answered && keyFiled[k.status] }) {
			n++
		}
	}
	return n
}

// keyedInData holds each keyed cycle to the database (b): its note staged
// at most once — as the approval its key answered, when it answered one —
// executed at most once, and written at most once.
func keyedInData(ctx context.Context, admin *pgxpool.Pool, cycles []*cycle) ([]string, error) {
	var problems []string
	for _, c := range cycles {
		if c.key == "" {
			continue
		}
		var approvals []string
		var executions, notes int
		err := admin.QueryRow(ctx, `
			SELECT coalesce(array_agg(a.id::text ORDER BY a.id), '{}'),
			       (SELECT count(*) FROM orangerail.audit x JOIN orangerail.approvals b ON b.tenant_id = x.tenant_id AND b.id = x.approval_id
			        WHERE b.tenant_id = $1 AND b.action = 'add_order_note' AND b.input->>'note' = $2 AND x.phase = 'execution_started'),
			       (SELECT count(*) FROM order_notes n WHERE n.org_id = $1 AND n.note = $2)
			FROM orangerail.approvals a WHERE a.tenant_id = $1 AND a.action = 'add_order_note' AND a.input->>'note' = $2`,
			c.tenant, c.note).Scan(&approvals, &executions, &notes)
		if err != nil {
			return nil, fmt.Errorf("read the approvals of key %s: %w", c.key, err)
		}
		if len(approvals) > 1 || (c.approval != "" && !slices.Equal(approvals, []string{c.approval})) || executions > 1 || notes > 1 {
			problems = append(problems, fmt.Sprintf("key %s (approval %q): its note is staged as approvals %v, with %d executions and %d notes; answers under the key: %s",
				c.key, c.approval, approvals, executions, notes, keyHistory(c.keyed)))
		}
	}
	return problems, nil
}

// stuckKeyExcused reports whether a stuck idempotency key the checker
// found (detail: "idempotency key K of A holds no outcome") is one the
// product leaves by design: a claim whose call's replica was killed under
// it, which no call under the key answered an outcome of since.
func stuckKeyExcused(detail string, cycles []*cycle) bool {
	key, ok := strings.CutPrefix(detail, "idempotency key ")
	if !ok {
		return false
	}
	key, _, _ = strings.Cut(key, " ")
	for _, c := range cycles {
		if c.key != key {
			continue
		}
		killed := slices.ContainsFunc(c.keyed, func(k keyAnswer) bool { return k.killedUnder })
		filed := slices.ContainsFunc(c.keyed, func(k keyAnswer) bool { return k.answered && keyFiled[k.status] })
		return killed && !filed
	}
	return false
}

// keyWarnings reads the replicas' logs for the lines that say a key's
// outcome may not be filed, or a key not given back (engine fileKey,
// releaseKey): each names its call's correlation id. warned reports
// whether one names correlation.
func (f *fleet) keyWarnings() (warned func(correlation string) bool) {
	var lines []string
	for _, r := range f.replicas {
		b, _ := os.ReadFile(r.log) //nolint:gosec // G304: the test's own log
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, "idempotency outcome may not be filed") || strings.Contains(l, "idempotency key not given back") {
				lines = append(lines, l)
			}
		}
	}
	return func(correlation string) bool {
		return correlation != "" && slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, correlation) })
	}
}

// probeProxy connects through the proxy and runs one statement, within
// patience, and returns its error: a probe during a proxy fault says
// whether the fault took effect — a connection reset, no answer at all.
func probeProxy(proxyURL string, patience time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	conn, err := pgx.Connect(ctx, proxyURL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// proxyLanded reports whether a probe (its error) saw a proxy fault of
// kind take effect: proxy_reset, a failure before the probe's time ran
// out; proxy_half_open, no answer before it did.
func proxyLanded(kind string, err error) bool {
	timedOut := errors.Is(err, context.DeadlineExceeded)
	switch kind {
	case faultProxyReset:
		return err != nil && !timedOut
	case faultProxyHalfOpen:
		return timedOut
	}
	return false
}

// latencyProbe is a connection through the proxy, opened before a
// proxy_latency fault, that times statements while the toxic stays.
type latencyProbe struct {
	conn *pgx.Conn
	stop chan struct{}
	done chan time.Duration
}

// openLatencyProbe connects through the proxy (nil when it cannot: the
// fault then is not seen to land).
func openLatencyProbe(proxyURL string) *latencyProbe {
	ctx, cancel := context.WithTimeout(context.Background(), soakProbePatience)
	defer cancel()
	conn, err := pgx.Connect(ctx, proxyURL)
	if err != nil {
		return nil
	}
	return &latencyProbe{conn: conn, stop: make(chan struct{}), done: make(chan time.Duration, 1)}
}

// start runs SELECT 1 again and again until stopped, and sends the
// quickest round trip of those that ended before the stop (0: none did).
func (p *latencyProbe) start() {
	go func() {
		var quickest time.Duration
		ctx, cancel := context.WithTimeout(context.Background(), soakProbePatience)
		defer cancel()
		for {
			began := time.Now()
			var one int
			err := p.conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			select {
			case <-p.stop:
				p.done <- quickest
				return
			default:
			}
			if err != nil {
				p.done <- quickest
				return
			}
			if took := time.Since(began); quickest == 0 || took < quickest {
				quickest = took
			}
		}
	}()
}

// landed stops the probe and reports whether every round trip it timed
// while the toxic stayed, at least one, took the least delay the toxic
// adds (latency less its jitter, half of it): on a loopback, a round
// trip without it takes a fraction of that.
func (p *latencyProbe) landed(latency int) bool {
	if p == nil {
		return false
	}
	close(p.stop)
	quickest := <-p.done
	_ = p.conn.Close(context.Background())
	return quickest >= time.Duration(latency/2)*time.Millisecond
}
