package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
)

// cluster is a Postgres server of the test's own, which it may restart
// without disturbing the tests that share the machine's server.
type cluster struct {
	pgCtl, data, log string
	// opts are the server's options, for a start after a stop.
	opts string
	url  string
}

// newCluster initializes and starts a private cluster on a free loopback
// port, as the postgres user when the test runs as root (initdb refuses
// root). It fails the test when the machine has no Postgres binaries.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("no initdb under /usr/lib/postgresql: install Debian's postgresql (the machine's server comes from it)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "orangerail-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: the postgres user must reach its data directory
		t.Fatal(err)
	}
	c := &cluster{pgCtl: filepath.Join(bin, "pg_ctl"), data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown the cluster's directory: %v\n%s", err, out)
		}
	}
	c.run(t, filepath.Join(bin, "initdb"), "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	c.opts = fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off", port, dir)
	c.run(t, c.pgCtl, "-D", c.data, "-l", c.log, "-w", "-t", "30", "start", "-o", c.opts)
	t.Cleanup(func() { _ = c.command(c.pgCtl, "-D", c.data, "-m", "immediate", "-w", "stop").Run() })
	c.url = "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
	return c
}

// command runs name as the postgres user when the test runs as root.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...) //nolint:gosec // G204: Postgres' own binaries
	}
	return exec.Command(name, args...) //nolint:gosec // G204: Postgres' own binaries
}

// run runs a Postgres binary to its end, failing the test when it fails.
func (c *cluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := c.exec(name, args...); err != nil {
		t.Fatal(err)
	}
}

// exec runs a Postgres binary to its end. Its output goes to a file, not
// a pipe: pg_ctl start (and restart) leaves the server running with the
// descriptors it inherited, and a pipe would wait for the server to exit.
func (c *cluster) exec(name string, args ...string) error {
	out, err := os.CreateTemp("", "orangerail-pg-")
	if err != nil {
		return err
	}
	defer func() { _ = out.Close(); _ = os.Remove(out.Name()) }()
	cmd := c.command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		said, _ := os.ReadFile(out.Name())
		log, _ := os.ReadFile(c.log)
		return fmt.Errorf("%s %v: %w\n%s\n%s", filepath.Base(name), args, err, said, log)
	}
	return nil
}

// TestPostgresRestartUnderTraffic restarts Postgres (pg_ctl restart, fast
// shutdown: every session is ended) while agents stage, an approver
// decides and the agents poll. Calls during the restart fail, classified
// and within the deadline; the pools reconnect by themselves, each
// lifecycle retried as its agent would ends executed once, and the
// invariants hold.
func TestPostgresRestartUnderTraffic(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	if err := database.MigrateUp(context.Background(), c.url); err != nil {
		t.Fatal(err)
	}
	// Agents poll at once: the example's budget (2 executions at once)
	// would answer some rate_limited, which is not this test's fault.
	b := setupOn(t, c.url, ontologytest.Set("actions.add_order_note.budget",
		map[string]int{"per_minute": 100_000, "max_concurrent": 100, "per_day": 1_000_000}))

	const agents, each = 3, 4
	var (
		mu       sync.Mutex
		outcomes []string
		wg       sync.WaitGroup
	)
	restarted := make(chan struct{})
	for a := range agents {
		wg.Go(func() {
			for i := range each {
				if a == 0 && i == 1 {
					// One agent's second cycle starts as the restart does.
					<-restarted
				}
				note := fmt.Sprintf("fault-restart-%d-%d", a, i)
				polls, err := b.patientLifecycle(t, note)
				if err != nil {
					t.Error(err)
					return
				}
				oks := 0
				for _, p := range polls {
					if p.Status == engine.StatusOK {
						oks++
					}
				}
				mu.Lock()
				outcomes = append(outcomes, fmt.Sprintf("%s: %d polls, last %s", note, len(polls), polls[len(polls)-1].Status))
				mu.Unlock()
				if oks > 1 {
					t.Errorf("%s: %d polls said the approval executed", note, oks)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the traffic is under way
	start := time.Now()
	c.run(t, c.pgCtl, "-D", c.data, "-m", "fast", "-w", "-t", "30", "restart")
	t.Logf("Postgres restarted in %s", time.Since(start).Round(time.Millisecond))
	close(restarted)
	wg.Wait()
	for _, o := range outcomes {
		t.Log(o)
	}
	faults.Require(t, b.admin, noteEffect)
	for _, l := range b.log {
		t.Log(l)
	}
}

// patientLifecycle is lifecycle for a fault that lasts a while: each
// step is retried, after a classified failure, until it succeeds or
// patience runs out, as an agent backing off would.
func (b *bundle) patientLifecycle(t *testing.T, note string) ([]*engine.Outcome, error) {
	const patience = 30 * time.Second
	deadline := time.Now().Add(patience)
	var failed error
	retry := func(what string, f func() bool) {
		for failed == nil && !f() {
			if time.Now().After(deadline) {
				failed = fmt.Errorf("%s: %s did not succeed in %s", note, what, patience)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	input := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "note": %q}`, note))
	var id string
	retry("stage", func() bool {
		out := b.call(t, "stage", func(ctx context.Context) *engine.Outcome { return b.engine.Call(ctx, agent, "add_order_note", input) })
		if out.Status == engine.StatusApprovalPending {
			id = out.ApprovalID.String()
		}
		return id != ""
	})
	retry("decide", func() bool {
		v, err := b.engine.ShowApproval(context.Background(), "acme", id)
		if err != nil {
			return false
		}
		if v.Status == store.ApprovalApproved {
			// A decision that committed, its answer lost with the
			// connection: deciding again would be refused as decided.
			return true
		}
		out := b.call(t, "decide", func(ctx context.Context) *engine.Outcome {
			return b.engine.Decide(ctx, approver, engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest})
		})
		return out.Status == engine.StatusOK
	})
	var polls []*engine.Outcome
	retry("check", func() bool {
		out := b.call(t, "check", func(ctx context.Context) *engine.Outcome { return b.engine.Check(ctx, agent, id) })
		polls = append(polls, out)
		return out.Status == engine.StatusOK || out.Status == engine.StatusConsumed
	})
	return polls, failed
}
