package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestReplicaKilledMidCycle: three replicas of the real binary serve one
// database while agents run lifecycles across them (stage, a person's
// decision, polls until the execution), and a replica is killed with
// SIGKILL five times — three times while its backend runs an effect, twice
// at a moment of the traffic — and started again. Calls in flight on the
// killed replica get no answer and are retried on another, as an agent
// behind a load balancer would; every lifecycle ends with its approval
// executed once, the records the killed replica committed are sealed by
// the survivors while it is down, and the invariants hold.
func TestReplicaKilledMidCycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFleet(t, fleetOptions{replicas: 3})
	stats := newFleetStats()

	killed := make(chan struct{}) // closed once the kills are over
	wait := f.busyAgents(t, stats, "agent", "fault-replica", 4, 3, killed, func(a *fleetAgent, note string) (*cycle, error) {
		return a.lifecycle(note, false)
	})

	kills := []string{"effect", "moment", "effect", "moment", "effect"}
	var report []string
	for k, when := range kills {
		var victim *replica
		switch when {
		case "effect":
			var err error
			if victim, err = f.runningEffect(ctx); err != nil {
				t.Error(err)
				continue
			}
		case "moment":
			time.Sleep(700 * time.Millisecond)
			up := f.up()
			victim = up[k%len(up)]
		}
		f.kill(victim)
		n, last, err := unsealed(ctx, f.admin)
		if err != nil {
			t.Fatal(err)
		}
		if err := sealedBySurvivors(ctx, f.admin, last); err != nil {
			t.Errorf("kill %d (replica %s, %s): %v", k, victim.name, when, err)
		}
		what := map[string]string{"effect": "while its backend ran an effect", "moment": "at a moment of the traffic"}[when]
		report = append(report, fmt.Sprintf("kill %d: replica %s %s; %d records unsealed after it, sealed by the survivors", k, victim.name, what, n))
		if err := f.start(victim); err != nil {
			t.Fatal(err)
		}
	}
	close(killed)
	cycles := wait()

	for _, l := range report {
		t.Log(l)
	}
	stats.log(t)
	f.requireNotesOnce(t, stats, cycles)
}

// requireNotesOnce fails t on each problem the agents met, on each note
// lifecycle the data does not show executed exactly once, and on each
// violated invariant.
func (f *fleet) requireNotesOnce(t *testing.T, stats *fleetStats, cycles []*cycle) {
	t.Helper()
	for _, p := range stats.problems {
		t.Error(p)
	}
	problems, err := executedOnceInData(context.Background(), f.admin, cycles)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	faults.Require(t, f.admin, noteEffect)
}

// runningEffect waits until a replica's backend runs add_order_note's
// effect (its statement sleeps a moment) and returns that replica.
func (f *fleet) runningEffect(ctx context.Context) (*replica, error) {
	deadline := time.Now().Add(fleetPatience)
	for time.Now().Before(deadline) {
		var apps []string
		rows, err := f.admin.Query(ctx, `SELECT application_name FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND application_name LIKE $1
			  AND query LIKE '%INSERT INTO order_notes%pg_sleep%'`, replicaAppPrefix+"%")
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var app string
			if err := rows.Scan(&app); err != nil {
				rows.Close()
				return nil, err
			}
			apps = append(apps, app)
		}
		rows.Close()
		for _, app := range apps {
			for _, r := range f.replicas {
				if app == replicaAppPrefix+r.name && r.up.Load() {
					return r, nil
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil, fmt.Errorf("no replica ran an effect in %s", fleetPatience)
}

// log logs what the agents' calls met.
func (s *fleetStats) log(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	for k, n := range s.calls {
		lines = append(lines, fmt.Sprintf("calls %s: %d", k, n))
	}
	for k, n := range s.failures {
		lines = append(lines, fmt.Sprintf("failed %s: %d", k, n))
	}
	sort.Strings(lines)
	t.Log(strings.Join(lines, "\n"))
}

// TestReplicaKilledSweeperResumes: approvals staged through two replicas
// lapse (approvals.ttl 2s) after one replica was killed with SIGKILL; with
// no call touching them, the survivor's sweeper expires every one — and
// records it, so the invariants hold (each expiry explained in the chain).
func TestReplicaKilledSweeperResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFleet(t, fleetOptions{replicas: 2, edits: []ontologytest.Edit{ontologytest.Set("approvals.ttl", "2s")}})
	stats := newFleetStats()
	a := f.newAgent("agent-sweep", "acme", stats)
	defer a.close()
	var ids []string
	for i := range 4 {
		answer, err := a.tool("add_order_note", map[string]any{"order_id": "o-1001", "note": fmt.Sprintf("fault-sweep-%d", i)})
		if err != nil || answer["status"] != string(engine.StatusApprovalPending) {
			t.Fatalf("stage %d: %v %v", i, answer, err)
		}
		ids = append(ids, answer["approvalId"].(string))
	}
	f.kill(f.replicas[0])
	deadline := time.Now().Add(fleetPatience)
	for {
		var pending int
		if err := f.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.approvals WHERE id = ANY($1::uuid[]) AND status <> 'expired'`, ids).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the lapsed approvals are not expired %s after the kill", pending, fleetPatience)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range stats.problems {
		t.Error(p)
	}
	faults.Require(t, f.admin, noteEffect)
}

// TestReplicaKilledWebhooksResume: two replicas queue webhook events for
// an endpoint that is down; one replica is killed, the endpoint comes
// back, and the survivor delivers every event — the delivery worker
// resumes on whichever replica is left, no event is lost, and every
// message ends delivered.
func TestReplicaKilledWebhooksResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var up atomic.Bool
	var mu sync.Mutex
	seen := map[string]int{} // approval id → deliveries
	var refused atomic.Int64
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var body struct {
			Data struct {
				ApprovalID string `json:"id"` // the approval's
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Data.ApprovalID == "" {
			t.Errorf("a webhook without an approval id: %v", err)
		}
		mu.Lock()
		seen[body.Data.ApprovalID]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(endpoint.Close)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	const secretEnv = "ORANGERAIL_TEST_WEBHOOK_SECRET" //nolint:gosec // G101: the variable's name
	f := newFleet(t, fleetOptions{replicas: 2,
		edits: []ontologytest.Edit{ontologytest.Set("webhooks", []map[string]any{{"url": endpoint.URL, "secret_env": secretEnv, "events": []string{"approval.pending"}}})},
		env:   []string{secretEnv + "=whsec_" + base64.StdEncoding.EncodeToString(secret)}})
	stats := newFleetStats()
	a := f.newAgent("agent-webhooks", "acme", stats)
	defer a.close()
	var ids []string
	for i := range 3 {
		answer, err := a.tool("add_order_note", map[string]any{"order_id": "o-1001", "note": fmt.Sprintf("fault-webhook-%d", i)})
		if err != nil || answer["status"] != string(engine.StatusApprovalPending) {
			t.Fatalf("stage %d: %v %v", i, answer, err)
		}
		ids = append(ids, answer["approvalId"].(string))
	}
	// Every event is tried while the endpoint is down: each is queued for
	// a retry, leased by no one. The kill lands then, while no replica
	// holds a claim and none is due within a second: a message a replica
	// dies holding waits out its lease (a batch's timeouts and a minute)
	// before another replica may claim it — at-least-once, by design, and
	// longer than this test waits.
	waitFor(t, "every event tried once, none claimed or due", func() bool {
		var quiet int
		if err := f.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.webhook_outbox WHERE approval_id = ANY($1::uuid[]) AND attempts > 0
			AND (locked_until IS NULL OR locked_until <= now()) AND next_attempt_at > now() + interval '1 second'`, ids).Scan(&quiet); err != nil {
			t.Fatal(err)
		}
		return quiet == len(ids)
	})
	f.kill(f.replicas[0])
	up.Store(true)
	waitForExplained(t, "every event delivered", func() bool {
		var open int
		if err := f.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.webhook_outbox WHERE approval_id = ANY($1::uuid[]) AND state <> 'delivered'`, ids).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	}, func() string {
		// Why not: each message's state, attempts, lease and next try.
		rows, err := f.admin.Query(ctx, `SELECT approval_id::text || ' ' || state || ' attempts=' || attempts || ' locked_until=' || coalesce((locked_until - now())::text, '-')
			|| ' next_in=' || (next_attempt_at - now())::text || ' error=' || coalesce(last_error, '-') FROM orangerail.webhook_outbox WHERE approval_id = ANY($1::uuid[])`, ids)
		if err != nil {
			return err.Error()
		}
		state, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return fmt.Sprintf("%q (%v)", state, err)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("approval %s: its event is marked delivered but the endpoint never took it", id)
		}
	}
	if refused.Load() < int64(len(ids)) {
		t.Errorf("the endpoint refused %d requests while down, want at least %d", refused.Load(), len(ids))
	}
	for _, p := range stats.problems {
		t.Error(p)
	}
	faults.Require(t, f.admin, noteEffect)
}

// waitFor polls done until it holds, failing the test after fleetPatience.
func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	waitForExplained(t, what, done, nil)
}

// waitForExplained is waitFor whose failure also says what explain, when
// not nil, tells of the state it gave up on.
func waitForExplained(t *testing.T, what string, done func() bool, explain func() string) {
	t.Helper()
	deadline := time.Now().Add(fleetPatience)
	for !done() {
		if time.Now().After(deadline) {
			if explain != nil {
				t.Fatalf("%s: not after %s: %s", what, fleetPatience, explain())
			}
			t.Fatalf("%s: not after %s", what, fleetPatience)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
