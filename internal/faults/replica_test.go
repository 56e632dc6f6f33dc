package faults_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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

	const agents, minCycles = 4, 3
	var (
		mu     sync.Mutex
		cycles []*cycle
		wg     sync.WaitGroup
	)
	killed := make(chan struct{}) // closed once the kills are over
	for i := range agents {
		a := f.newAgent(fmt.Sprintf("agent-%d", i), []string{"acme", "globex"}[i%2], stats)
		wg.Go(func() {
			defer a.close()
			for n := 0; ; n++ {
				select {
				case <-killed:
					if n >= minCycles {
						return
					}
				default:
				}
				c, err := a.lifecycle(fmt.Sprintf("fault-replica-%d-%d", i, n), false)
				mu.Lock()
				cycles = append(cycles, c)
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}

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
	wg.Wait()

	for _, l := range report {
		t.Log(l)
	}
	stats.log(t)
	for _, p := range stats.problems {
		t.Error(p)
	}
	problems, err := executedOnceInData(ctx, f.admin, cycles)
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
