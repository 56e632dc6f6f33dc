// Command bench measures orangerail's audit log and prints one JSON object
// per line: {"name", "value", "unit"[, "baseline", "ratio"]}. `make bench`
// runs it against $TEST_DATABASE_URL (or the demo's local server) in a
// database of its own, dropped afterwards.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/periodic"
)

// options are what the command line chose.
type options struct {
	appendDuration time.Duration
	load           loadOptions
	chainRows      int
	verifyRounds   int
	keep           bool
	// functionStats: the lifecycle reports its governed cycles' time in
	// each orangerail function (funcstats.go).
	functionStats bool
	want          func(group string) bool
	// profileVerify starts profiling the Go verifier and returns the stop
	// func.
	profileVerify func() (stop func())
}

type result struct {
	Name     string   `json:"name"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	// RatioMin and RatioMax are the spread of a ratio measured in
	// alternating rounds, whose median Ratio is; Rounds is how many.
	RatioMin *float64 `json:"ratio_min,omitempty"`
	RatioMax *float64 `json:"ratio_max,omitempty"`
	Rounds   int      `json:"rounds,omitempty"`
	// Target is the goal for the figure, where it has one; Met
	// says whether this run reached it.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

func main() {
	os.Exit(benchMain())
}

// benchMain runs the benchmarks the flags choose and returns the exit code.
func benchMain() int {
	appendDuration := flag.Duration("append-duration", 10*time.Second, "how long each append benchmark runs")
	chainRows := flag.Int("chain-rows", 1_000_000, "length of the chain the verifiers read")
	verifyRounds := flag.Int("verify-rounds", 5, "rounds of the Go verifier against its baseline (each round runs both once)")
	keep := flag.Bool("keep-database", false, "keep the bench database (its name goes to stderr) for profiling")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the verify benchmarks to this file")
	functionStats := flag.Bool("function-stats", false, "report the governed lifecycle's time in each orangerail function, per cycle (timing every call costs the governed side a little: leave it off for the ratios)")
	loadDuration := flag.Duration("load-duration", 20*time.Second, "how long mcp_http_load is measured, after its warm-up")
	loadWarmup := flag.Duration("load-warmup", 3*time.Second, "how long mcp_http_load runs unmeasured first")
	loadSessions := flag.Int("load-sessions", 200, "how many MCP sessions mcp_http_load runs at once")
	only := flag.String("run", "", "run only the benchmark groups whose name matches this regexp (sql_query, audit_append, lifecycle, mcp_read_call, mcp_http_load, rate_flush, upstream_call, token, policy_compile, audit_verify)")
	flag.Parse()
	selected, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -run:", err)
		return 2
	}
	o := options{appendDuration: *appendDuration, chainRows: *chainRows, verifyRounds: *verifyRounds, keep: *keep, functionStats: *functionStats, want: selected.MatchString,
		load:          loadOptions{sessions: *loadSessions, warmup: *loadWarmup, duration: *loadDuration, keep: *keep},
		profileVerify: func() func() { return func() {} }}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		o.profileVerify = func() func() {
			_ = pprof.StartCPUProfile(f)
			return pprof.StopCPUProfile
		}
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, o options) error {
	appendDuration, chainRows, keep, want := o.appendDuration, o.chainRows, o.keep, o.want
	server := os.Getenv("TEST_DATABASE_URL")
	if server == "" {
		server = devdb.LocalURL
	}
	name := "orangerail_bench_" + randomHex(6)
	if err := adminExec(ctx, server, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create bench database: %w", err)
	}
	if keep {
		fmt.Fprintln(os.Stderr, "bench database:", name)
	} else {
		defer func() { _ = adminExec(context.WithoutCancel(ctx), server, "DROP DATABASE "+name+" WITH (FORCE)") }()
	}
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	u.Path = "/" + name
	// Both pools get one connection per writer and more, so neither side
	// of a comparison waits for a connection.
	q := u.Query()
	q.Set("pool_max_conns", "16")
	u.RawQuery = q.Encode()
	dbURL := u.String()

	if err := database.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	adminCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	// The baselines send ids as the runtime's connections do, as sixteen
	// bytes: pgx alone would send a nullable one (a *uuid.UUID) through
	// database/sql's Valuer, formatting and parsing its text.
	adminCfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		database.RegisterUUID(conn.TypeMap())
		return nil
	}
	admin, err := pgxpool.NewWithConfig(ctx, adminCfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	runtime, err := database.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer runtime.Close()
	if _, err := admin.Exec(ctx, "CREATE TABLE plain_audit (LIKE orangerail.audit INCLUDING ALL)"); err != nil {
		return err
	}

	emit := func(r result) {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	// First, while the process is small: it measures the process's memory.
	if want("sql_query") {
		if err := sqlQueryHostileRSS(ctx, dbURL, runtime, emit); err != nil {
			return fmt.Errorf("sql_query_hostile_rss: %w", err)
		}
	}
	if want("audit_append") {
		if err := appendBenchmarks(ctx, admin, runtime, appendDuration, emit); err != nil {
			return err
		}
	}
	if want("lifecycle") {
		if err := lifecycleBenchmarks(ctx, admin, dbURL, appendDuration, o.functionStats, emit); err != nil {
			return err
		}
	}
	if want("mcp_read_call") {
		if err := mcpReadCall(ctx, server, emit); err != nil {
			return fmt.Errorf("mcp_read_call: %w", err)
		}
	}
	if want("mcp_http_load") {
		if err := mcpHTTPLoad(ctx, dbURL, o.load, emit); err != nil {
			return fmt.Errorf("mcp_http_load: %w", err)
		}
	}
	if want("rate_flush") {
		if err := rateFlush(ctx, runtime, emit); err != nil {
			return fmt.Errorf("rate_flush: %w", err)
		}
	}
	if want("upstream_call") {
		if err := upstreamCall(ctx, dbURL, appendDuration, emit); err != nil {
			return fmt.Errorf("upstream_call: %w", err)
		}
	}
	if want("policy_compile") {
		if err := policyCompile(emit); err != nil {
			return fmt.Errorf("policy_compile: %w", err)
		}
	}
	if want("token") {
		if err := tokenVerification(ctx, emit); err != nil {
			return fmt.Errorf("token verification: %w", err)
		}
	}
	if want("audit_verify") {
		return verifyBenchmarks(ctx, admin, runtime, chainRows, o.verifyRounds, o.profileVerify, emit)
	}
	return nil
}

// benchRounds is how many alternating rounds each governed/baseline pair
// runs; each round runs both for its share of the benchmark's duration.
const benchRounds = 10

// appendBenchmarks measures audit appends against plain INSERTs, in
// alternating rounds. A chained round lasts until every record it
// appended is sealed (sealRest): the sealer runs throughout, as on a
// server, and its work counts against the appends it serves.
func appendBenchmarks(ctx context.Context, admin, runtime *pgxpool.Pool, appendDuration time.Duration, emit func(result)) error {
	const writers = 8
	sealer := engine.StartSealer(runtime, periodic.Config{})
	defer func() { _ = sealer.Stop(context.WithoutCancel(ctx)) }()
	d := appendDuration / benchRounds
	for _, tc := range []struct {
		name    string
		tenants int
		target  float64
	}{{"audit_append_8_tenants", 8, 0.8}, {"audit_append_1_tenant", 1, 0.6}} {
		chained := func() (float64, error) {
			start := time.Now()
			n, err := opsCount(ctx, writers, d, func(ctx context.Context, w, i int) error {
				tenant := fmt.Sprintf("%s-%d", tc.name, w%tc.tenants)
				return database.InTenant(ctx, runtime, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
					return engine.AppendAudit(ctx, tx, benchRecord(tenant, w, i))
				})
			})
			if err != nil {
				return 0, err
			}
			if err := sealRest(ctx, admin, runtime); err != nil {
				return 0, err
			}
			return float64(n) / time.Since(start).Seconds(), nil
		}
		// The baseline runs each INSERT the way the server runs each append:
		// in its own transaction scoped to the tenant. What differs is the
		// chain: the entry parsed into columns, and the seal.
		plain := func() (float64, error) {
			start := time.Now()
			n, err := opsCount(ctx, writers, d, func(ctx context.Context, w, i int) error {
				tenant := fmt.Sprintf("%s-%d", tc.name, w%tc.tenants)
				return database.InTenant(ctx, admin, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
					return plainAudit(ctx, tx, benchRecord(tenant, w, i))
				})
			})
			return float64(n) / time.Since(start).Seconds(), err
		}
		g, b, err := alternate(benchRounds, chained, plain)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.name, err)
		}
		emit(roundsResult(tc.name, "appends/s", g, b, fmt.Sprintf("ratio >= %g", tc.target),
			func(_, ratio float64) bool { return ratio >= tc.target }))
	}
	return nil
}

// plainSeq numbers the baseline's rows, which have no chain to number them.
var plainSeq atomic.Int64

// plainAudit inserts rec into plain_audit as a row of the audit table is
// shaped, with no chain: the baseline of an append.
func plainAudit(ctx context.Context, tx pgx.Tx, rec *engine.Record) error {
	entry, err := rec.Entry()
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO plain_audit (tenant_id, seq, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		rec.Tenant, plainSeq.Add(1), entry, rec.At, rec.CorrelationID, string(rec.Phase), rec.Action, rec.Actor.Subject, string(rec.Actor.Kind), false,
		rec.ApprovalID, []byte(engine.Genesis()), []byte(engine.Genesis()))
	return err
}

// sealRest seals, on conn, what the round's writers left unsealed, as
// the sealer would at its next tick, and returns once no record awaits its
// seal (a tenant the sealer holds meanwhile is left to it). The round pays
// for the sealing, not for the sealer's interval: in a steady run the
// sealer's timer costs no throughput, and with short rounds waiting for
// its next tick would count up to an interval of idle time in each.
func sealRest(ctx context.Context, admin *pgxpool.Pool, conn database.TxBeginner) error {
	if _, err := engine.Seal(ctx, conn); err != nil {
		return err
	}
	return waitSealed(ctx, admin)
}

// waitSealed returns once no record awaits its seal.
func waitSealed(ctx context.Context, admin *pgxpool.Pool) error {
	for {
		var pending bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM orangerail.audit WHERE seq IS NULL)").Scan(&pending); err != nil || !pending {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// opsCount runs op from writers goroutines for d and returns how many ops
// completed.
func opsCount(ctx context.Context, writers int, d time.Duration, op func(ctx context.Context, w, i int) error) (int, error) {
	deadline := time.Now().Add(d)
	counts := make([]int, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				if err := op(ctx, w, i); err != nil {
					errs[w] = err
					return
				}
				counts[w]++
			}
		})
	}
	wg.Wait()
	total := 0
	for w := range writers {
		if errs[w] != nil {
			return 0, errs[w]
		}
		total += counts[w]
	}
	return total, nil
}

// opsRate runs op from writers goroutines for d and returns ops/s.
func opsRate(ctx context.Context, writers int, d time.Duration, op func(ctx context.Context, w, i int) error) (float64, error) {
	start := time.Now()
	n, err := opsCount(ctx, writers, d, op)
	return float64(n) / time.Since(start).Seconds(), err
}

// lifecycleBenchmarks measures whole governed cycles: an agent stages an
// update, a person reviews and approves it, the agent polls and it
// executes against the example's tables.
func lifecycleBenchmarks(ctx context.Context, admin *pgxpool.Pool, dbURL string, d time.Duration, functionStats bool, emit func(result)) error {
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		return err
	}
	const agents = 8
	for i := range agents {
		if _, err := admin.Exec(ctx, `INSERT INTO orders (org_id, id, status, total_cents, customer_id, shipping_address)
			VALUES ('acme', $1, 'paid', 100, 'c-1', 'somewhere')`, fmt.Sprintf("bench-%d", i)); err != nil {
			return err
		}
	}
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		return err
	}
	// The cycles measure governing, budget spending included, not the
	// example's budget (a write's 20 a minute, 2 at once): it is lifted.
	cfg.Actions["update_shipping_address"].Budget = &benchBudget
	if functionStats {
		if err := trackFunctions(ctx, admin); err != nil {
			return err
		}
	}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: dbURL})
	if err != nil {
		return err
	}
	defer rt.Close()
	e := rt.Engine
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	cycle := func(ctx context.Context, w, i int) error {
		agent := &engine.Caller{Subject: fmt.Sprintf("agent-%d", w), Tenant: "acme", Roles: []string{"support"}, Kind: engine.ActorAgent}
		args := json.RawMessage(fmt.Sprintf(`{"order_id": "bench-%d", "address": "%d Bench Street"}`, w, i))
		staged := e.Call(ctx, agent, "update_shipping_address", args)
		if staged.Status != engine.StatusApprovalPending {
			return fmt.Errorf("stage: %s %w", staged.Status, staged.Err)
		}
		view, err := e.ShowApproval(ctx, "acme", staged.ApprovalID.String())
		if err != nil {
			return err
		}
		if out := e.Decide(ctx, person, engine.Decision{ApprovalID: view.ID.String(), Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
			return fmt.Errorf("decide: %s %s", out.Status, out.Code)
		}
		if out := e.Check(ctx, agent, view.ID.String()); out.Status != engine.StatusOK {
			return fmt.Errorf("check: %s %w", out.Status, out.Err)
		}
		return nil
	}
	// Warm up, then analyze, as autovacuum does once a table has grown: a
	// plan Postgres cached while the tables were empty (a generic plan
	// chosen on no statistics) would otherwise measure the database's
	// first minute, not its steady state. The baseline reads through
	// primary keys only, which no statistics change.
	if _, err := opsCount(ctx, agents, lifecycleWarmup, cycle); err != nil {
		return fmt.Errorf("lifecycle warm-up: %w", err)
	}
	if _, err := admin.Exec(ctx, "ANALYZE"); err != nil {
		return err
	}
	sequential, err := opsRate(ctx, 1, d, cycle)
	if err != nil {
		return fmt.Errorf("lifecycle_sequential: %w", err)
	}
	emit(result{Name: "lifecycle_sequential", Value: round(sequential), Unit: "cycles/s"})

	// Eight agents of one tenant, against the bare baseline, in
	// alternating rounds; a governed round lasts until its records are
	// sealed (sealRest).
	if _, err := admin.Exec(ctx, "CREATE TABLE plain_approvals (LIKE orangerail.approvals INCLUDING ALL)"); err != nil {
		return err
	}
	perRound := d / benchRounds
	since := time.Now()
	var governedCPU, bareCPU cycleCPU
	governed := func() (float64, error) {
		start := time.Now()
		mark := governedCPU.start(ctx, admin)
		n, err := opsCount(ctx, agents, perRound, cycle)
		if err != nil {
			return 0, err
		}
		if err := sealRest(ctx, admin, rt.Store); err != nil {
			return 0, err
		}
		governedCPU.stop(ctx, admin, mark, n)
		return float64(n) / time.Since(start).Seconds(), nil
	}
	bare := func() (float64, error) {
		start := time.Now()
		mark := bareCPU.start(ctx, admin)
		n, err := opsCount(ctx, agents, perRound, func(ctx context.Context, w, i int) error { return bareCycle(ctx, admin, w, i) })
		bareCPU.stop(ctx, admin, mark, n)
		return float64(n) / time.Since(start).Seconds(), err
	}
	var before map[string]functionStat
	if functionStats {
		if before, err = readFunctionStats(ctx, admin, rt.Store); err != nil {
			return err
		}
	}
	g, b, err := alternate(benchRounds, governed, bare)
	if err != nil {
		return fmt.Errorf("lifecycle_8_agents: %w", err)
	}
	emit(roundsResult("lifecycle_8_agents", "cycles/s", g, b, "ratio >= 0.7", func(_, ratio float64) bool { return ratio >= 0.7 }))
	if functionStats {
		after, err := readFunctionStats(ctx, admin, rt.Store)
		if err != nil {
			return err
		}
		emitFunctionStats(before, after, governedCPU.cycles, emit)
	}
	// Where a cycle's CPU goes, on each side of the comparison: this
	// process (the engine, in the governed rounds; pgx alone in the bare
	// ones) and the database's backends. On a box whose cores both serve,
	// cycles/s is bounded by the two together.
	for _, side := range []struct {
		name string
		cpu  func(*cycleCPU) float64
	}{{"lifecycle_cpu_process", (*cycleCPU).process}, {"lifecycle_cpu_postgres", (*cycleCPU).postgres}} {
		if gv, bv := side.cpu(&governedCPU), side.cpu(&bareCPU); gv > 0 && bv > 0 {
			emit(result{Name: side.name, Value: round2(gv), Unit: "ms/cycle", Baseline: ptr(round2(bv)), Ratio: ptr(round2(gv / bv))})
		}
	}

	// How long the eight agents' records waited for their seal: from the
	// record's time (before its transaction committed) to its seal, so an
	// upper bound on the wait after commit.
	var p50, p99, worst float64
	if err := admin.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), max(lag)
		FROM (SELECT extract(epoch FROM sealed_at - at) * 1000 AS lag FROM orangerail.audit WHERE tenant_id = 'acme' AND at >= $1) l`,
		since).Scan(&p50, &p99, &worst); err != nil {
		return fmt.Errorf("sealing lag: %w", err)
	}
	met := p99 <= 100
	emit(result{Name: "sealing_lag_p50", Value: round2(p50), Unit: "ms"})
	emit(result{Name: "sealing_lag_p99", Value: round2(p99), Unit: "ms", Target: "<= 100 ms under lifecycle_8_agents", Met: &met})
	emit(result{Name: "sealing_lag_max", Value: round2(worst), Unit: "ms"})
	return nil
}

// cycleCPU adds up the CPU time cycles took, in this process and in the
// bench database's backends, over the rounds of one side of a comparison.
// The backends' time is read from /proc: when Postgres runs elsewhere, or
// its processes cannot be read, only this process's is kept.
type cycleCPU struct {
	cycles          int
	self, backends  time.Duration
	backendsUnknown bool
}

// cpuMark is what cycleCPU.start read.
type cpuMark struct {
	self     time.Duration
	backends map[string]time.Duration
}

func (c *cycleCPU) start(ctx context.Context, admin *pgxpool.Pool) cpuMark {
	self, _ := cpuTime("self")
	return cpuMark{self: self, backends: c.backendTimes(ctx, admin)}
}

func (c *cycleCPU) stop(ctx context.Context, admin *pgxpool.Pool, m cpuMark, cycles int) {
	self, _ := cpuTime("self")
	c.cycles += cycles
	c.self += self - m.self
	for pid, after := range c.backendTimes(ctx, admin) {
		// A backend that began during the round counts from zero: its
		// whole time is the round's.
		c.backends += after - m.backends[pid]
	}
}

// backendTimes reads the CPU time of every backend of the bench database.
func (c *cycleCPU) backendTimes(ctx context.Context, admin *pgxpool.Pool) map[string]time.Duration {
	if c.backendsUnknown {
		return nil
	}
	// Every backend, this query's own too: the pool runs it on any of its
	// connections, and one left out of a round's start but not of its end
	// would count its whole life's time as the round's.
	rows, err := admin.Query(ctx, "SELECT pid::text FROM pg_stat_activity WHERE datname = current_database()")
	if err == nil {
		var pids []string
		if pids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			times := make(map[string]time.Duration, len(pids))
			for _, pid := range pids {
				t, err := cpuTime(pid)
				if err != nil {
					continue // ended meanwhile, or not ours to read
				}
				times[pid] = t
			}
			if len(times) > 0 {
				return times
			}
		}
	}
	c.backendsUnknown = true
	return nil
}

func (c *cycleCPU) process() float64 {
	if c.cycles == 0 {
		return 0
	}
	return float64(c.self) / float64(time.Millisecond) / float64(c.cycles)
}

func (c *cycleCPU) postgres() float64 {
	if c.cycles == 0 || c.backendsUnknown {
		return 0
	}
	return float64(c.backends) / float64(time.Millisecond) / float64(c.cycles)
}

// lifecycleWarmup is how long the lifecycle benchmarks run before they
// measure.
const lifecycleWarmup = 2 * time.Second

// bareCycle makes a governed cycle's state changes with no governing: an
// approval inserted with its staged record, decided with its approved
// record, and consumed with the effect and its two execution records,
// each in a plain transaction, the records plain INSERTs with no chain.
func bareCycle(ctx context.Context, admin *pgxpool.Pool, w, i int) error {
	id := uuid.New()
	order, address := fmt.Sprintf("bench-%d", w), fmt.Sprintf("%d Bench Street", i)
	args := fmt.Sprintf(`{"order_id": %q, "address": %q}`, order, address)
	agent := engine.Actor{Subject: fmt.Sprintf("agent-%d", w), Kind: engine.ActorAgent}
	rec := func(phase engine.Phase, actor engine.Actor) *engine.Record {
		return &engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: id.String(), Phase: phase, Action: "update_shipping_address",
			Actor: actor, ApprovalID: &id, Input: json.RawMessage(args)}
	}
	digest := sha256.Sum256([]byte(args))
	steps := []func(tx pgx.Tx) error{
		func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO plain_approvals (id, tenant_id, action, requested_by, input, input_digest, definition_hash, status, created_at, expires_at)
				VALUES ($1, 'acme', 'update_shipping_address', $2, $3, $4, $4, 'pending', now(), now() + interval '1 day')`, id, agent.Subject, args, digest[:]); err != nil {
				return err
			}
			return plainAudit(ctx, tx, rec(engine.PhaseStaged, agent))
		},
		func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE plain_approvals SET status = 'approved', decided_by = 'alice', decided_at = now() WHERE id = $1 AND status = 'pending'`, id); err != nil {
				return err
			}
			return plainAudit(ctx, tx, rec(engine.PhaseApproved, engine.Actor{Subject: "alice", Kind: engine.ActorHuman}))
		},
		func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE plain_approvals SET status = 'consumed', consumed_at = now() WHERE id = $1 AND status = 'approved'`, id); err != nil {
				return err
			}
			if err := plainAudit(ctx, tx, rec(engine.PhaseExecutionStarted, agent)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE orders SET shipping_address = $1 WHERE id = $2 AND org_id = 'acme'`, address, order); err != nil {
				return err
			}
			return plainAudit(ctx, tx, rec(engine.PhaseExecutionSucceeded, agent))
		},
	}
	for _, step := range steps {
		if err := database.InTenant(ctx, admin, "acme", pgx.TxOptions{}, step); err != nil {
			return err
		}
	}
	return nil
}

// mcpReadCall runs internal/mcp's BenchmarkReadCall (only that package may
// speak MCP) once — its alternating rounds are the measurement — and
// reports its governed and door figures beside its baseline's. A ratio is
// the median of the per-round p50 ratios, with its spread.
func mcpReadCall(ctx context.Context, server string, emit func(result)) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkReadCall$", "-benchtime", "1x", "./internal/mcp")
	cmd.Env = append(os.Environ(), "TEST_DATABASE_URL="+server) // the same server as the rest of the run
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	metrics := map[string]float64{}
	line := regexp.MustCompile(`^BenchmarkReadCall-\d+\s+\d+\s+(.*)$`)
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[1])
		for i := 0; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				metrics[fields[i+1]] = v
			}
		}
	}
	if _, ok := metrics["door-ratio-median"]; !ok {
		return fmt.Errorf("no figures in the benchmark's output:\n%s", out)
	}
	// The targets for the p50 ratios.
	targets := map[string]float64{"governed": 1.15, "door": 1.25}
	for _, m := range []struct{ name, unit, metric string }{
		{"mcp_read_call", "calls/s", "calls/s"},
		{"mcp_read_call_p50", "µs", "p50-µs"},
		{"mcp_read_call_p99", "µs", "p99-µs"},
	} {
		for _, v := range []struct{ suffix, variant string }{{"", "governed"}, {"_door", "door"}} {
			g, b := metrics[v.variant+"-"+m.metric], metrics["baseline-"+m.metric]
			r := result{Name: strings.Replace(m.name, "mcp_read_call", "mcp_read_call"+v.suffix, 1), Value: round(g), Unit: m.unit,
				Baseline: ptr(round(b)), Ratio: ptr(round2(g / b))}
			if m.metric == "p50-µs" {
				median := metrics[v.variant+"-ratio-median"]
				r.Ratio, r.RatioMin, r.RatioMax = ptr(round2(median)), ptr(round2(metrics[v.variant+"-ratio-min"])), ptr(round2(metrics[v.variant+"-ratio-max"]))
				r.Rounds = int(metrics["rounds"])
				met := median <= targets[v.variant]
				r.Target, r.Met = fmt.Sprintf("ratio <= %.2f", targets[v.variant]), &met
			}
			emit(r)
		}
	}
	return nil
}

// tokenVerification measures what the front spends on a token, since it
// verifies every token it is sent: a refused one (a forged signature under
// the issuer's key id, and an id the issuer does not publish, neither of
// which fetches keys) against the baseline of a valid token verified
// before, which the resolver reuses.
func tokenVerification(ctx context.Context, emit func(result)) error {
	iss, err := devissuer.New()
	if err != nil {
		return err
	}
	srv := httptest.NewServer(iss.Handler())
	defer srv.Close()
	resolver, err := identity.NewResolver(ontology.OIDC{Issuer: srv.URL, Audience: "orangerail", TenantClaim: "org_id"}, identity.ResolverOptions{})
	if err != nil {
		return err
	}
	claims := devissuer.Claims{Issuer: srv.URL, Subject: "bench", Audience: "orangerail", Expiry: time.Now().Add(time.Hour),
		Extra: map[string]any{"org_id": "acme"}}
	valid, err := iss.Token(claims)
	if err != nil {
		return err
	}
	forger, err := devissuer.NewKey()
	if err != nil {
		return err
	}
	unknownID, err := devissuer.SignWith(forger, claims)
	if err != nil {
		return err
	}
	forger.ID = iss.KeyID()
	badSignature, err := devissuer.SignWith(forger, claims)
	if err != nil {
		return err
	}
	const n = 5000
	perToken := func(token string, wantValid bool) (float64, error) {
		if _, err := resolver.Resolve(ctx, token); (err == nil) != wantValid {
			return 0, fmt.Errorf("a bench token verified as %v: %w", !wantValid, err)
		}
		start := time.Now()
		for range n {
			_, _ = resolver.Resolve(ctx, token)
		}
		return float64(time.Since(start).Microseconds()) / n, nil
	}
	cached, err := perToken(valid, true)
	if err != nil {
		return err
	}
	for _, tc := range []struct{ name, token string }{
		{"token_refused_bad_signature", badSignature},
		{"token_refused_unknown_key_id", unknownID},
	} {
		us, err := perToken(tc.token, false)
		if err != nil {
			return err
		}
		emit(result{Name: tc.name, Value: round2(us), Unit: "µs/token", Baseline: ptr(round2(cached)), Ratio: ptr(round2(us / cached))})
	}
	return nil
}

func benchRecord(tenant string, w, i int) *engine.Record {
	return &engine.Record{
		Tenant:        tenant,
		At:            time.Now(),
		CorrelationID: fmt.Sprintf("bench-%d-%d", w, i),
		Phase:         engine.PhaseStaged,
		Action:        "cancel_order",
		Actor:         engine.Actor{Subject: "agent-bench", Kind: engine.ActorAgent},
		Input:         json.RawMessage(`{"order_id":"o-12345","reason":"the customer asked to cancel before shipping"}`),
	}
}

// buildChain writes a valid chain of n records straight into the audit
// table with COPY: the hashes are computed in Go with the same formula, so
// building a long chain takes seconds, not the minutes n appends would.
func buildChain(ctx context.Context, admin *pgxpool.Pool, tenant string, n int) error {
	if _, err := admin.Exec(ctx, "INSERT INTO orangerail.tenants (id) VALUES ($1)", tenant); err != nil {
		return err
	}
	prev := engine.Genesis()
	seq := int64(0)
	at := time.Now().Add(-time.Hour)
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if seq == int64(n) {
			return nil, nil
		}
		seq++
		rec := benchRecord(tenant, 0, int(seq))
		rec.At = at.Add(time.Duration(seq) * time.Microsecond)
		entry, err := rec.Entry()
		if err != nil {
			return nil, err
		}
		hash := engine.ChainHash(prev, seq, entry)
		row := []any{tenant, seq, entry, rec.At.Truncate(time.Microsecond), rec.CorrelationID, string(rec.Phase), rec.Action,
			rec.Actor.Subject, string(rec.Actor.Kind), false, []byte(prev), []byte(hash)}
		prev = hash
		return row, nil
	})
	if _, err := admin.CopyFrom(ctx, pgx.Identifier{"orangerail", "audit"},
		[]string{"tenant_id", "seq", "entry", "at", "correlation_id", "phase", "action", "actor", "actor_kind", "dev_mode", "prev_hash", "hash"}, src); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "INSERT INTO orangerail.audit_heads (tenant_id, seq, hash) VALUES ($1, $2, $3)", tenant, seq, []byte(prev)); err != nil {
		return err
	}
	_, err := admin.Exec(ctx, "VACUUM ANALYZE orangerail.audit")
	return err
}

func adminExec(ctx context.Context, server, sql string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ptr(f float64) *float64 { return &f }

func round(f float64) float64 { return float64(int64(f + 0.5)) }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
