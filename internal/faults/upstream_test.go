package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// labelAction is the example's upstream call: a return label from the
// carrier.
const labelAction = "create_return_label"

// carrier is an upstream that makes one label per Idempotency-Key, as the
// example's carrier does, and counts what it made: the effect the
// database cannot see. A request's label is made as it arrives, before
// its answer, so that a fault while the answer waits (see hold) meets a
// label made and an answer not yet given.
type carrier struct {
	*httptest.Server
	mu     sync.Mutex
	labels map[string]int // Idempotency-Key → requests that made or found its label
	// reasons: a label request's reason (a test's key for its approval)
	// → the Idempotency-Keys of its labels.
	reasons map[string]map[string]bool
	// sent: a reason → the replicas its requests came from, and when the
	// first from each arrived.
	sent map[string]map[string]time.Time
	// hold, when set, is called with each request after its label is
	// made, and the answer waits until it returns.
	hold atomic.Pointer[func(carrierRequest)]
}

// carrierRequest is a label request the carrier took.
type carrierRequest struct {
	// replica names the replica that sent it, from the path its base URL
	// gives (/replica-N/labels); "" when the path names none.
	replica, reason, key string
	// gone is done when the caller went away (its connection closed).
	gone <-chan struct{}
}

func newCarrier(t *testing.T) *carrier {
	t.Helper()
	c := &carrier{labels: map[string]int{}, reasons: map[string]map[string]bool{}, sent: map[string]map[string]time.Time{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		var body struct {
			Reason string `json:"reason"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := carrierRequest{reason: body.Reason, key: key, gone: r.Context().Done()}
		if rest, ok := strings.CutPrefix(r.URL.Path, "/replica-"); ok {
			req.replica, _, _ = strings.Cut(rest, "/")
		}
		c.mu.Lock()
		c.labels[key]++
		if c.reasons[body.Reason] == nil {
			c.reasons[body.Reason] = map[string]bool{}
		}
		c.reasons[body.Reason][key] = true
		if c.sent[body.Reason] == nil {
			c.sent[body.Reason] = map[string]time.Time{}
		}
		if _, ok := c.sent[body.Reason][req.replica]; !ok {
			c.sent[body.Reason][req.replica] = time.Now()
		}
		c.mu.Unlock()
		if hold := c.hold.Load(); hold != nil {
			(*hold)(req)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"label_id": %q, "tracking_number": "1Z999", "label_url": "https://carrier.example.com/l/1"}`, key)
	}))
	t.Cleanup(c.Close)
	return c
}

// holdNext holds the answer to the next request the carrier takes (one
// only): it is sent on held, and its answer waits until release is
// closed or its caller goes away.
func (c *carrier) holdNext(release <-chan struct{}) (held <-chan carrierRequest) {
	ch := make(chan carrierRequest, 1)
	var once atomic.Bool
	hold := func(r carrierRequest) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		ch <- r
		select {
		case <-release:
		case <-r.gone:
		}
	}
	c.hold.Store(&hold)
	return ch
}

// sentBetween reports whether the carrier took the first request for
// reason from replica after from and before to.
func (c *carrier) sentBetween(reason, replica string, from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first, ok := c.sent[reason][replica]
	return ok && first.After(from) && first.Before(to)
}

// cutBeforeRequest returns the approvals (their ids) of label cycles a
// killed replica may have cut between their execution_started and their
// request: one of their polls got no answer (its replica died under it),
// and no replica asked the carrier for their label. The log reports such
// an execution unfinished, rightly: only the upstream can say that
// nothing ran.
func (c *carrier) cutBeforeRequest(cycles []*cycle) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := map[string]bool{}
	for _, cy := range cycles {
		if cy.action == labelAction && cy.approval != "" && slices.Contains(cy.polls, "") && len(c.sent[cy.note]) == 0 {
			cut[cy.approval] = true
		}
	}
	return cut
}

// made is how many labels the carrier made, and how many requests asked.
func (c *carrier) made() (labels, requests int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.labels {
		labels++
		requests += n
	}
	return labels, requests
}

// account holds what the carrier made to what the audit log records, for
// approvals (a label's reason → its approval's id): at most one label per
// approval; no execution_succeeded without a label (nothing reported done
// that the carrier did not do); no label without an execution that
// succeeded or is unfinished (nothing the carrier did unreported, or
// reported failed); no label for a reason no approval has. It returns
// what does not hold, and seen: the approvals whose execution is
// unfinished after the carrier made their label — the ones a checker may
// report unfinished, flagged.
func (c *carrier) account(ctx context.Context, admin *pgxpool.Pool, approvals map[string]string) (problems []string, seen map[string]bool, err error) {
	c.mu.Lock()
	reasons := map[string]int{}
	for reason, keys := range c.reasons {
		reasons[reason] = len(keys)
	}
	c.mu.Unlock()
	seen = map[string]bool{}
	for reason := range reasons {
		if _, ok := approvals[reason]; !ok {
			problems = append(problems, fmt.Sprintf("the carrier made a label for %q, which no approval asked for", reason))
		}
	}
	for reason, id := range approvals {
		var started, succeeded, failed int
		err := admin.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE phase = 'execution_started'),
			       count(*) FILTER (WHERE phase = 'execution_succeeded'),
			       count(*) FILTER (WHERE phase = 'execution_failed')
			FROM orangerail.audit WHERE correlation_id = $1`, id).Scan(&started, &succeeded, &failed)
		if err != nil {
			return nil, nil, fmt.Errorf("read the executions of approval %s: %w", id, err)
		}
		labels := reasons[reason]
		what := fmt.Sprintf("%s (approval %s): %d labels, %d executions started, %d succeeded, %d failed", reason, id, labels, started, succeeded, failed)
		switch {
		case labels > 1:
			problems = append(problems, "more than one label for one approval: "+what)
		case started > 1:
			problems = append(problems, "executed twice: "+what)
		case succeeded > 0 && labels == 0:
			problems = append(problems, "reported done, and the carrier made no label: "+what)
		case labels > 0 && failed > 0:
			problems = append(problems, "reported failed, and the carrier made the label: "+what)
		case labels > 0 && started == 0:
			problems = append(problems, "a label with no execution: "+what)
		case labels > 0 && succeeded == 0:
			seen[id] = true
		}
	}
	return problems, seen, nil
}

// upstreamBundle serves the example's create_return_label, an upstream
// call, against c, through a pool the killer traces.
func upstreamBundle(t *testing.T, c *carrier) *bundle {
	t.Helper()
	return setupOn(t, testdb.New(t), labelEdits(c.URL)...)
}

// labelEdits point the shipping upstream at baseURL, and give
// create_return_label a budget no fault run reaches (the defaults of an
// action that needs an approval allow 2 calls a minute).
func labelEdits(baseURL string) []ontologytest.Edit {
	return []ontologytest.Edit{
		ontologytest.Set("upstreams.shipping", map[string]any{"base_url": baseURL}),
		ontologytest.Set("actions."+labelAction+".budget", map[string]int{"per_minute": 1_000_000, "max_concurrent": 1000, "per_day": 100_000_000}),
	}
}

// labelLifecycle stages a return label for reason, approves it and polls
// until it executed or a poll answers outcome_unknown, retrying each step
// after a classified failure as an agent or approver would.
func (b *bundle) labelLifecycle(t *testing.T, reason string) (id string, polls []*engine.Outcome) {
	t.Helper()
	input := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1003", "reason": %q, "weight_grams": 1200}`, reason))
	id = b.stage(t, "create_return_label", input)
	b.approve(t, id)
	for range attempts {
		out := b.call(t, "check", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
		polls = append(polls, out)
		if out.Status == engine.StatusOK || out.Status == engine.StatusConsumed || out.Status == engine.StatusOutcomeUnknown {
			break
		}
	}
	return id, polls
}

// requireFinishedOrFlagged checks the invariants of an upstream effect's
// run: none is violated but an unfinished execution, and each unfinished
// one is the execution of an approval whose poll answered
// outcome_unknown — every effect the database cannot see either finished
// in the audit log or was flagged.
func requireFinishedOrFlagged(t *testing.T, b *bundle, flagged map[string]bool) {
	t.Helper()
	requireOnlyFlagged(t, b.admin, flagged)
}

// requireOnlyFlagged is requireFinishedOrFlagged on the database admin
// reaches, the checker holding effects too: every unfinished execution
// must be flagged (an approval id in flagged).
func requireOnlyFlagged(t *testing.T, admin *pgxpool.Pool, flagged map[string]bool, effects ...faults.Effect) {
	t.Helper()
	vs, err := faults.Check(context.Background(), admin, effects...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Kind == faults.KindUnfinished && len(flagged) > 0 && flaggedIn(v.Detail, flagged) {
			continue
		}
		t.Errorf("invariant violated: %s", v)
	}
}

func flaggedIn(detail string, flagged map[string]bool) bool {
	for id := range flagged {
		if strings.Contains(detail, "(correlation "+id+")") {
			return true
		}
	}
	return false
}

// killed holds the killer to one fault that happened and no failure of
// its own.
func killed(t *testing.T, b *bundle) {
	t.Helper()
	if err := b.killer.Err(); err != nil {
		t.Fatal(err)
	}
	if b.killer.Kills() == 0 {
		t.Fatal("no backend was terminated: the fault never happened")
	}
	for _, l := range b.log {
		t.Log(l)
	}
}

// TestUpstreamKillAfterConsume: the backend of an upstream call's consume
// dies before execution_started commits with it: the consume rolls back,
// the carrier is not called, the poll fails classified, and the next poll
// calls the carrier once — one label, one request, every invariant.
func TestUpstreamKillAfterConsume(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b := upstreamBundle(t, c)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: ApprovalConsume"}, When: faults.After})
	_, polls := b.labelLifecycle(t, "arrived damaged")
	fired(t, trap)
	killed(t, b)
	executedOnce(t, polls)
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Fatalf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
	requireFinishedOrFlagged(t, b, nil)
}

// TestUpstreamKillBeforeFinish: the carrier made the label, and the
// backend that would record execution_succeeded dies: the poll answers
// outcome_unknown (never "nothing ran", never "done"), and so does the
// next, without calling the carrier again, and the invariant checker
// finds exactly that execution unfinished — the effect the database
// cannot see is flagged — until an operator settles it: then a poll
// answers consumed.
func TestUpstreamKillBeforeFinish(t *testing.T) {
	t.Parallel()
	c := newCarrier(t)
	b := upstreamBundle(t, c)
	trap := b.killer.Arm(faults.Trap{Match: []string{"-- name: AuditAppend"}, Arg: `"phase":"execution_succeeded"`, When: faults.Before})
	id, polls := b.labelLifecycle(t, "arrived damaged")
	fired(t, trap)
	killed(t, b)
	if last := polls[len(polls)-1]; last.Status != engine.StatusOutcomeUnknown {
		t.Fatalf("the poll answered %s (%v), want outcome_unknown", last.Status, last.Err)
	}
	again := b.call(t, "check again", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
	if again.Status != engine.StatusOutcomeUnknown {
		t.Fatalf("a poll after outcome_unknown answered %s, want outcome_unknown: the execution has no recorded end", again.Status)
	}
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Fatalf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
	requireFinishedOrFlagged(t, b, map[string]bool{id: true})
	vs, err := faults.Check(context.Background(), b.admin)
	if err != nil {
		t.Fatal(err)
	}
	unfinished := 0
	for _, v := range vs {
		if v.Kind == faults.KindUnfinished {
			unfinished++
		}
	}
	if unfinished == 0 {
		t.Fatal("the execution the poll flagged outcome_unknown is not reported unfinished")
	}
	if _, err := engine.SettleExecution(context.Background(), b.admin, agent.Tenant, id, engine.SettledSucceeded, "the carrier shows the label", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if settled := b.call(t, "check after settling", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) }); settled.Status != engine.StatusConsumed {
		t.Fatalf("a poll after the execution was settled answered %s, want consumed", settled.Status)
	}
	if labels, requests := c.made(); labels != 1 || requests != 1 {
		t.Fatalf("the carrier made %d labels from %d requests, want 1 from 1", labels, requests)
	}
}

// labelCycles maps each label cycle that staged an approval to it: its
// reason → its approval's id; and the approvals one of whose polls
// answered outcome_unknown.
func labelCycles(cycles []*cycle) (approvals map[string]string, unknown map[string]bool) {
	approvals, unknown = map[string]string{}, map[string]bool{}
	for _, c := range cycles {
		if c.action != labelAction || c.approval == "" {
			continue
		}
		approvals[c.note] = c.approval
		if slices.Contains(c.polls, string(engine.StatusOutcomeUnknown)) {
			unknown[c.approval] = true
		}
	}
	return approvals, unknown
}

// TestUpstreamReplicaKilledMidCall: three replicas of the real binary
// serve create_return_label against a carrier (each replica's base URL
// names it), while agents stage labels, a person approves and the agents
// poll, across the replicas. Three times the carrier takes a label
// request, makes the label and holds its answer, and the replica waiting
// on it is killed with SIGKILL (its connection to the carrier closes with
// it), then started again. The agent's poll gets no answer and polls
// again on another replica, which answers consumed without calling the
// carrier again. After: the carrier made one label per approval; every
// approval whose label it made either succeeded in the audit log or is
// reported unfinished; nothing succeeded that the carrier did not make;
// no poll executed an approval twice; and the invariant checker finds
// nothing but the unfinished executions of the killed replicas' calls —
// those the carrier held, those in flight beside them, and those a kill
// cut between their execution_started and their request.
func TestUpstreamReplicaKilledMidCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCarrier(t)
	f := newFleet(t, fleetOptions{replicas: 3, replicaEdits: func(name string) []ontologytest.Edit {
		return labelEdits(c.URL + "/replica-" + name)
	}})
	stats := newFleetStats()

	const kills = 3
	over := make(chan struct{}) // closed once the kills are over
	wait := f.busyAgents(t, stats, "label-agent", "fault-upstream-kill", 3, 2, over, (*fleetAgent).labelLifecycle)

	died := map[string]bool{} // the reasons whose call's replica was killed
	// A kill: of which replica, when, and when it was started again.
	type kill struct {
		replica          string
		at, startedAgain time.Time
	}
	var killsMade []kill // every kill, for the calls of other agents it cut short too
	var report []string
	// A failure stops the kills, and the agents end their lifecycles
	// before the test does.
kill:
	for k := range kills {
		release := make(chan struct{})
		var req carrierRequest
		select {
		case req = <-c.holdNext(release):
		case <-time.After(fleetPatience):
			close(release)
			t.Errorf("kill %d: no label request reached the carrier in %s", k, fleetPatience)
			break kill
		}
		var victim *replica
		for _, r := range f.replicas {
			if r.name == req.replica {
				victim = r
			}
		}
		if victim == nil {
			close(release)
			t.Errorf("kill %d: a label request from no replica (path names %q)", k, req.replica)
			break
		}
		killed := kill{replica: victim.name, at: time.Now()}
		f.kill(victim)
		// The kill closes the replica's connection to the carrier while
		// the answer is held: the fault lands mid-call.
		select {
		case <-req.gone:
		case <-time.After(fleetPatience):
			t.Errorf("kill %d: the carrier's caller was still connected %s after its replica was killed", k, fleetPatience)
		}
		close(release)
		died[req.reason] = true
		report = append(report, fmt.Sprintf("kill %d: replica %s killed while the carrier held the answer to %s (its label made)", k, victim.name, req.reason))
		killed.startedAgain = time.Now()
		killsMade = append(killsMade, killed)
		if err := f.start(victim); err != nil {
			t.Error(err)
			break
		}
	}
	close(over)
	cycles := wait()

	for _, l := range report {
		t.Log(l)
	}
	stats.log(t)
	for _, p := range stats.problems {
		t.Error(p)
	}
	approvals, unknown := labelCycles(cycles)
	problems, seen, err := c.account(ctx, f.admin, approvals)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, cy := range cycles {
		if !cy.done {
			t.Errorf("%s (approval %s): its lifecycle did not end (polls %v)", cy.note, cy.approval, cy.polls)
		}
	}
	// The unfinished executions a checker may report: the carrier made
	// their label, and their replica died under the call (the held one,
	// or another agent's call in flight on the same replica, whose answer
	// came before the kill but whose record had not committed) or their
	// poll answered outcome_unknown.
	killedUnder := func(reason string) bool {
		for _, k := range killsMade {
			// The replica may still have been waiting on the carrier,
			// or about to record what it answered, when it was killed:
			// an execution outlives its call by its record's statement
			// at most. Or its request was on its way: the carrier may
			// take it after the kill (the bytes were sent), but not
			// after the replica was started again, before which the
			// replica sent nothing more.
			if c.sentBetween(reason, k.replica, k.at.Add(-2*fleetStatementTimeout), k.startedAgain) {
				return true
			}
		}
		return false
	}
	excused := map[string]bool{}
	for reason, id := range approvals {
		if seen[id] && (died[reason] || unknown[id] || killedUnder(reason)) {
			excused[id] = true
		}
	}
	maps.Copy(excused, c.cutBeforeRequest(cycles))
	for reason := range died {
		if !seen[approvals[reason]] {
			t.Errorf("%s: its replica was killed while the carrier held its answer, and its execution is not reported unfinished", reason)
		}
	}
	labels, requests := c.made()
	t.Logf("%d label cycles, %d kills mid-call: the carrier made %d labels from %d requests; %d executions may be reported unfinished (each a killed call's)",
		len(approvals), len(died), labels, requests, len(excused))
	requireOnlyFlagged(t, f.admin, excused)
}

// TestUpstreamPostgresRestartMidCall: the carrier holds the answer to a
// label request while Postgres restarts (pg_ctl restart, fast: every
// session ended), then answers once it is back; and again, the carrier
// answers while Postgres is stopped, and Postgres starts after the call
// answered. Each time the pool reconnects by itself, the carrier made one
// label from one request, the call either succeeded in the audit log or
// answered outcome_unknown and is reported unfinished, polls after it
// answer outcome_unknown (the end unrecorded) or consumed without calling
// the carrier again, and the invariants hold otherwise.
func TestUpstreamPostgresRestartMidCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := newCluster(t)
	if err := database.MigrateUp(ctx, cl.url); err != nil {
		t.Fatal(err)
	}
	c := newCarrier(t)
	b := setupOn(t, cl.url, labelEdits(c.URL)...)

	approvals := map[string]string{}
	unknown := map[string]bool{}
	for _, down := range []bool{false, true} {
		reason := "fault-upstream-restart"
		if down {
			reason = "fault-upstream-down"
		}
		release := make(chan struct{})
		held := c.holdNext(release)
		fault := make(chan error, 1)
		go func() {
			req := <-held
			how := "restart"
			if down {
				how = "stop"
			}
			err := cl.exec(cl.pgCtl, "-D", cl.data, "-m", "fast", "-w", "-t", "30", how)
			select {
			case <-req.gone:
				err = errors.Join(err, fmt.Errorf("%s: the caller went away while Postgres restarted", req.reason))
			default:
			}
			close(release)
			fault <- err
		}()
		id, polls := b.labelLifecycle(t, reason)
		if err := <-fault; err != nil {
			t.Fatal(err)
		}
		approvals[reason] = id
		if down {
			cl.run(t, cl.pgCtl, "-D", cl.data, "-l", cl.log, "-w", "-t", "30", "start", "-o", cl.opts)
		}
		// Poll until the approval says it ran or ran already, as an
		// agent would once the database is back — or, once the database
		// is back, that its execution has no recorded end: that answer
		// stays until an operator settles it. No poll answers executing
		// then: the budget slot the call's poll could not give back while
		// Postgres was down is given back by the next poll, before it
		// reads whether an execution runs.
		for i := 0; ; i++ {
			last := polls[len(polls)-1].Status
			if last == engine.StatusOK || last == engine.StatusConsumed || i > 0 && last == engine.StatusOutcomeUnknown {
				break
			}
			if i > 0 && last == engine.StatusExecuting {
				t.Fatalf("%s: a poll after Postgres was back answered executing, for an execution that ended: polls %v", reason, statuses(polls))
			}
			if i >= 50 {
				t.Fatalf("%s: the approval never said it ran: polls %v", reason, statuses(polls))
			}
			time.Sleep(200 * time.Millisecond)
			polls = append(polls, b.call(t, "check after the fault", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) }))
		}
		oks := 0
		for _, p := range polls {
			switch p.Status {
			case engine.StatusOK:
				oks++
			case engine.StatusOutcomeUnknown:
				unknown[id] = true
			}
		}
		if oks > 1 {
			t.Errorf("%s: %d polls said the approval executed", reason, oks)
		}
		// Postgres was back before the carrier answered: the call's end is
		// recorded on a fresh connection, whatever became of the
		// transaction that held the target's row, so the poll that made
		// the call says it executed.
		if !down && polls[0].Status != engine.StatusOK {
			t.Errorf("%s: the poll that made the call answered %s (%v), want executed: Postgres was back when it answered", reason, polls[0].Status, polls[0].Err)
		}
		t.Logf("%s: polls %v", reason, statuses(polls))
	}

	// The checker's pool held connections the restarts ended: it starts
	// afresh, as the engine's pool did by itself.
	b.admin.Reset()
	problems, seen, err := c.account(ctx, b.admin, approvals)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if labels, requests := c.made(); labels != len(approvals) || requests != len(approvals) {
		t.Errorf("the carrier made %d labels from %d requests, want %d from %d", labels, requests, len(approvals), len(approvals))
	}
	excused := map[string]bool{}
	for id := range seen {
		if unknown[id] {
			excused[id] = true
		}
	}
	t.Logf("%d label calls under a Postgres restart: %d reported unfinished after outcome_unknown", len(approvals), len(excused))
	requireFinishedOrFlagged(t, b, excused)
	for _, l := range b.log {
		t.Log(l)
	}
}

// statuses lists the statuses of polls, for a message.
func statuses(polls []*engine.Outcome) []engine.Status {
	var s []engine.Status
	for _, p := range polls {
		s = append(s, p.Status)
	}
	return s
}
