package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// tripCounter counts the round trips of every connection it dialed: a
// write after a read (or a connection's first write) starts one.
type tripCounter struct {
	mu    sync.Mutex
	trips int
}

type countedConn struct {
	net.Conn
	c       *tripCounter
	writing bool
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.c.mu.Lock()
	if !c.writing {
		c.c.trips++
		c.writing = true
	}
	c.c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.c.mu.Lock()
		c.writing = false
		c.c.mu.Unlock()
	}
	return n, err
}

func (tc *tripCounter) take() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n := tc.trips
	tc.trips = 0
	return n
}

// TestGovernedCycleRoundTrips pins how many times a governed cycle waits
// for Postgres: each round trip is a network latency and a wake-up of a
// backend, which bound a cycle's throughput on a busy box (make bench's
// lifecycle_8_agents). A step that needs one more fails here, and says so.
func TestGovernedCycleRoundTrips(t *testing.T) {
	t.Parallel()
	if testdb.Bouncing() {
		t.Skip("what a cycle sends is the same through a pooler: counted once, direct")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	counter := &tripCounter{}
	runtime, err := database.Open(ctx, url, func(cfg *pgxpool.Config) {
		// One connection, which prepares each statement once, and is
		// never pinged on its way out of the pool: every trip counted is
		// the cycle's own.
		cfg.MaxConns = 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countedConn{Conn: conn, c: counter}, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runtime.Close)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	// As make bench runs it: the budget spent, never the limit.
	cfg.Actions["update_shipping_address"].Budget = &ontology.Budget{PerMinute: 1000000, MaxConcurrent: 64, PerDay: 100000000}
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, runtime), Key: key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	agent := support("acme")
	cycle := func(i int) map[string]int {
		trips := map[string]int{}
		counter.take()
		args := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "address": "%d Cycle Street"}`, i))
		staged := e.Call(ctx, agent, "update_shipping_address", args)
		want(t, staged, engine.StatusApprovalPending)
		trips["stage"] = counter.take()
		// An agent polling by calling again.
		again := e.Call(ctx, agent, "update_shipping_address", args)
		want(t, again, engine.StatusApprovalPending)
		if *again.ApprovalID != *staged.ApprovalID {
			t.Fatalf("the call repeated answered approval %s, not %s", again.ApprovalID, staged.ApprovalID)
		}
		trips["again"] = counter.take()
		view, err := e.ShowApproval(ctx, "acme", staged.ApprovalID.String())
		if err != nil {
			t.Fatal(err)
		}
		trips["show"] = counter.take()
		want(t, e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: view.ID.String(), Approve: true, Digest: view.Digest}), engine.StatusOK)
		trips["decide"] = counter.take()
		want(t, e.Check(ctx, agent, view.ID.String()), engine.StatusOK)
		trips["execute"] = counter.take()
		return trips
	}
	cycle(0) // the first prepares every statement
	got := cycle(1)
	// What each step waits for, at most:
	//   stage    the target's read (its scope with it); the stage, its
	//            scope and its COMMIT together
	//   again    the same call repeated: the target's read; the stage,
	//            which finds the first's open approval and stages nothing
	//   show     the approval; its target (each with its scope)
	//   decide   the approval (its scope with it); the decision, its
	//            scope and its COMMIT together
	//   execute  the approval; the budget's spend (scope, spend and COMMIT
	//            together); BEGIN with the scope; the consume (and the
	//            chain's decision); the target, locked; the start's
	//            record and the effect's SAVEPOINT together; the effect;
	//            the slot's release, the end's record and the
	//            transaction's id together; COMMIT
	limits := map[string]int{"stage": 2, "again": 2, "show": 2, "decide": 2, "execute": 9}
	var over []string
	total := 0
	for _, step := range []string{"stage", "again", "show", "decide", "execute"} {
		total += got[step]
		if got[step] > limits[step] {
			over = append(over, fmt.Sprintf("%s %d > %d", step, got[step], limits[step]))
		}
	}
	t.Logf("round trips of a governed cycle: %v, %d in all", got, total)
	if over != nil {
		t.Fatalf("a governed cycle waits on Postgres more often than it did: %s", strings.Join(over, ", "))
	}
}
