package faults_test

import (
	"context"
	"testing"
	"time"
)

// TestBackendKillStorm: three replicas of the real binary serve agents
// running lifecycles while, for twelve seconds, a backend of a replica is
// terminated every 80 ms — whatever it is doing. A transaction that may
// run twice (a read, a stage, a poll up to its consume, a sealing batch, a
// rate-count flush) runs again on another connection; one that may not (a
// decision, a consume and its execution) fails classified, and its agent
// retries. Every lifecycle ends with its approval executed once and the
// invariants hold; the log says how many calls failed, and how.
func TestBackendKillStorm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFleet(t, fleetOptions{replicas: 3})
	stats := newFleetStats()

	over := make(chan struct{})
	wait := f.busyAgents(t, stats, "agent", "fault-storm", 8, 2, over, func(a *fleetAgent, note string) (*cycle, error) {
		return a.lifecycle(note, false)
	})
	killed := 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(80 * time.Millisecond) {
		var ok bool
		err := f.admin.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM (
			SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1
			ORDER BY random() LIMIT 1) AS victim`, replicaAppPrefix+"%").Scan(&ok)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			killed++
		}
	}
	close(over)
	cycles := wait()

	calls := 0
	stats.mu.Lock()
	for _, n := range stats.calls {
		calls += n
	}
	stats.mu.Unlock()
	failed, why := stats.failed()
	t.Logf("%d backends terminated; %d lifecycles; %d of %d calls failed: %v", killed, len(cycles), failed, calls, why)
	if killed == 0 {
		t.Fatal("no backend was terminated: the fault never happened")
	}
	f.requireNotesOnce(t, stats, cycles)
}
