package faults_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/faults"
)

// The soak runs from `make soak` (and, for two minutes with a fixed seed,
// from `make test`); go test ./... passes over it.
var (
	soakDuration = flag.Duration("soak.duration", 0, "how long TestSoak loads the replicas and injects faults; zero: TestSoak is not run (make soak)")
	soakSeed     = flag.Uint64("soak.seed", 1, "the seed of TestSoak's fault schedule and workload")
)

// The kinds of fault the soak injects.
const (
	faultKillBackend   = "kill_backend"
	faultReplicaKill   = "replica_kill"
	faultProxyLatency  = "proxy_latency"
	faultProxyReset    = "proxy_reset"
	faultProxyHalfOpen = "proxy_half_open"
)

// soakLabelAgents is how many of the soak's agents run return labels
// (upstream calls) besides its six; soakCarrierWait, how long the carrier
// holds each answer.
const (
	soakLabelAgents = 2
	soakCarrierWait = 150 * time.Millisecond
)

// soakSealPatience is how long the replicas' sealers (audit.seal_interval
// 1s) may take, after the load drained, to seal every record it committed.
const soakSealPatience = 15 * time.Second

var soakFaults = []string{faultKillBackend, faultReplicaKill, faultProxyLatency, faultProxyReset, faultProxyHalfOpen}

// soakLandedBy says how each kind of fault is seen to land.
var soakLandedBy = map[string]string{
	faultKillBackend:   "a terminate that ended a backend of its replica",
	faultReplicaKill:   "a kill of a replica that was up and had answered since it started",
	faultProxyLatency:  "a probe through the proxy whose every round trip took the toxic's least delay",
	faultProxyReset:    "a probe through the proxy failed before its time ran out",
	faultProxyHalfOpen: "a probe through the proxy got no answer while the toxic stayed",
}

// soakProbePatience bounds a proxy_latency probe's connection and its
// statements.
const soakProbePatience = 10 * time.Second

// probing probes the proxy (probeProxy) within patience, in the
// background, and sends whether the probe saw a fault of kind take
// effect.
func probing(proxyURL, kind string, patience time.Duration) <-chan bool {
	landed := make(chan bool, 1)
	go func() {
		landed <- proxyLanded(kind, probeProxy(proxyURL, patience))
	}()
	return landed
}

// TestSoak runs three replicas of the real binary on one database, behind
// a proxy (toxiproxy, in process), under a mixed load of six agents in two
// tenants — reads, staged writes (a share under an idempotencyKey, sent
// again under it after their lifecycle ended and once more after the
// load), a person's decisions (approve, or now and then reject), polls
// that execute — and two more whose writes are
// return labels, an upstream call to a carrier that holds each answer a
// moment, for -soak.duration, while faults
// drawn from a PRNG seeded with -soak.seed are injected one after another:
// every connection of a replica terminated (pg_terminate_backend), a
// replica killed with SIGKILL and started again, latency on the network
// toward Postgres, every connection reset, answers from Postgres dropped
// (half-open). The schedule — which fault, on which replica, for how
// long, after what pause — is the same for the same seed; a replica kill
// waits a moment (at most soakKeyedKillWait) for a keyed stage on its
// replica to cut, while a claim it leaves can run out before the end.
// Then the load
// drains, and it fails on any violation: an invariant the checker finds,
// a lifecycle whose data does not match what its agent was told, a call
// failed unclassified or past its deadline, a lifecycle that never ended,
// a replica that exited by itself, a label made twice for one approval, a
// label the audit log does not account for (see carrier.account), an
// execution reported unfinished whose label the carrier did not make, a
// key that answered another approval or outcome than its first, or staged
// or ran its call twice, an outcome_unknown for a key's claim that ran
// out that no replica's kill nor host log accounts for (keyProblems,
// keyedInData), a kind of fault injected and never seen to land. It
// prints one summary line, the upstream cycles, the keyed ones and the
// flagged executions among its counts.
func TestSoak(t *testing.T) {
	if *soakDuration == 0 {
		t.Skip("the soak runs from make soak: go test -run TestSoak -soak.duration=2m [-soak.seed=N]")
	}
	ctx := context.Background()
	seed, duration := *soakSeed, *soakDuration
	dbURL, proxyURL, proxy := proxiedDatabase(t)
	// The carrier answers each label request a moment after it made the
	// label, so that a fault may land while a replica waits on it.
	shipping := newCarrier(t)
	wait := func(r carrierRequest) {
		select {
		case <-time.After(soakCarrierWait):
		case <-r.gone:
		}
	}
	shipping.hold.Store(&wait)
	f := newFleet(t, fleetOptions{replicas: 3, dbURL: proxyURL, adminURL: dbURL, edits: append(labelEdits(shipping.URL), soakKeyed)})
	p := &proxied{proxy: proxy}
	stats := newFleetStats()
	end := time.Now().Add(duration)

	var (
		mu         sync.Mutex
		cycles     []*cycle
		unfinished []string
		// wrongReads are reads served whose rows are not what the
		// tenant's data holds (readProblem).
		wrongReads []string
		reads      int
		wg         sync.WaitGroup
		// keyAgents are the agents whose writes half carry a key, and
		// keyed each one's keyed cycles, retried once more after the
		// load.
		keyAgents []*fleetAgent
		keyed     = make([][]*cycle, 6)
	)
	for i := range 6 {
		tenant := []string{"acme", "globex"}[i%2]
		a := f.newAgent(fmt.Sprintf("soak-agent-%d", i), tenant, stats)
		keyAgents = append(keyAgents, a)
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1)) //nolint:gosec // G404: a reproducible workload, not a secret
		wg.Go(func() {
			defer a.close()
			for n := 0; time.Now().Before(end); n++ {
				switch r := rng.IntN(100); {
				case r < 60:
					tool, args := "order_get", map[string]any{"id": "o-1001"}
					if r%2 == 1 {
						tool, args = "order_list", map[string]any{"limit": 10}
					}
					if answer, err := a.tool(tool, args); err == nil {
						mu.Lock()
						reads++
						if p := readProblem(tenant, tool, answer); p != "" {
							wrongReads = append(wrongReads, p)
						}
						mu.Unlock()
					}
				default:
					note, reject := fmt.Sprintf("fault-soak-%d-%d", i, n), r >= 90
					drive := a.lifecycle
					if r%2 == 0 {
						drive = a.keyedLifecycle
					}
					c, err := drive(note, reject)
					mu.Lock()
					cycles = append(cycles, c)
					if c.key != "" {
						keyed[i] = append(keyed[i], c)
					}
					if err != nil {
						unfinished = append(unfinished, err.Error())
					}
					mu.Unlock()
				}
			}
		})
	}
	// The label agents: half reads, half return labels through the
	// carrier, an upstream call each.
	for i := 6; i < 6+soakLabelAgents; i++ {
		tenant := []string{"acme", "globex"}[i%2]
		a := f.newAgent(fmt.Sprintf("soak-agent-%d", i), tenant, stats)
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1)) //nolint:gosec // G404: a reproducible workload, not a secret
		wg.Go(func() {
			defer a.close()
			for n := 0; time.Now().Before(end); n++ {
				if rng.IntN(2) == 0 {
					if answer, err := a.tool("order_get", map[string]any{"id": "o-1001"}); err == nil {
						mu.Lock()
						reads++
						if p := readProblem(tenant, "order_get", answer); p != "" {
							wrongReads = append(wrongReads, p)
						}
						mu.Unlock()
					}
					continue
				}
				c, err := a.labelLifecycle(fmt.Sprintf("fault-soak-label-%d-%d", i, n))
				mu.Lock()
				cycles = append(cycles, c)
				if err != nil {
					unfinished = append(unfinished, err.Error())
				}
				mu.Unlock()
			}
		})
	}

	next := soakSchedule(seed, len(f.replicas))
	counts := map[string]int{}
	// landed counts each kind's faults seen to take effect: a fault that
	// lands nowhere (a terminate matching no backend, a kill of a replica
	// that was not running) tests nothing, and the run would pass as if
	// it had.
	landed := map[string]int{}
	// keyedKills counts the replica kills that cut a keyed stage.
	keyedKills := 0
	// events say what was injected; injectErrs, what failed to be.
	var events, injectErrs []string
	for {
		fault := next()
		kind, victim, lasting, latency := fault.kind, f.replicas[fault.replica], fault.lasting, fault.latency
		if !time.Now().Add(fault.pause).Before(end) {
			break
		}
		time.Sleep(fault.pause)
		counts[kind]++
		at := time.Since(end.Add(-duration)).Round(time.Millisecond)
		switch kind {
		case faultKillBackend:
			var n int
			if err := f.admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
				FROM pg_stat_activity WHERE application_name = $1`, replicaAppPrefix+victim.name).Scan(&n); err != nil {
				injectErrs = append(injectErrs, fmt.Sprintf("terminate the backends of replica %s: %v", victim.name, err))
			}
			if n > 0 {
				landed[kind]++
			}
			events = append(events, fmt.Sprintf("%s %s: %d backends of replica %s terminated", at, kind, n, victim.name))
		case faultReplicaKill:
			// While a claim it cuts can run out before the load ends, a
			// kill waits for a keyed stage on its replica: a kill lands
			// in one rarely otherwise.
			if time.Until(end) > soakClaimLease+5*time.Second && awaitKeyedStage(keyAgents, victim, time.Duration(lasting.Milliseconds()%20)*time.Millisecond) {
				keyedKills++
			}
			// A kill lands on a replica that runs and has served.
			if victim.up.Load() && victim.served.Load() > 0 {
				landed[kind]++
			}
			f.kill(victim)
			time.Sleep(lasting)
			if err := f.start(victim); err != nil {
				// The load goes on through the others.
				injectErrs = append(injectErrs, err.Error())
			}
			events = append(events, fmt.Sprintf("%s %s: replica %s killed, started again after %s", at, kind, victim.name, lasting))
		case faultProxyLatency:
			probe := openLatencyProbe(proxyURL)
			heal := p.poison(t, "latency", map[string]any{"latency": latency, "jitter": latency / 2})
			if probe != nil {
				probe.start()
			}
			time.Sleep(lasting)
			// Stopped before the heal: a round trip the heal cut short
			// is not timed.
			if probe.landed(latency) {
				landed[kind]++
			}
			heal()
			events = append(events, fmt.Sprintf("%s %s: %dms for %s", at, kind, latency, lasting))
		case faultProxyReset:
			heal := p.poison(t, "reset_peer", map[string]any{"timeout": 0})
			probe := probing(proxyURL, kind, lasting/4)
			time.Sleep(lasting / 4)
			if <-probe {
				landed[kind]++
			}
			heal()
			events = append(events, fmt.Sprintf("%s %s: every connection reset for %s", at, kind, lasting/4))
		case faultProxyHalfOpen:
			heal := p.poisonStream(t, "downstream", "timeout", map[string]any{"timeout": 0})
			// The probe's time ends before the heal: an answer it waits
			// for is one the toxic dropped.
			probe := probing(proxyURL, kind, lasting*3/4)
			time.Sleep(lasting)
			if <-probe {
				landed[kind]++
			}
			heal()
			events = append(events, fmt.Sprintf("%s %s: answers dropped for %s", at, kind, lasting))
		}
	}
	wg.Wait()
	// Every fault is over: each keyed cycle is retried under its key once
	// more, on whichever replica, the one that first answered it perhaps
	// killed since.
	for i, a := range keyAgents {
		wg.Go(func() {
			for _, c := range keyed[i] {
				if !c.done && !c.abandoned {
					continue // its lifecycle failed: unfinished says so
				}
				if err := a.retryKey(c); err != nil {
					mu.Lock()
					unfinished = append(unfinished, err.Error())
					mu.Unlock()
				}
			}
			a.close()
		})
	}
	wg.Wait()

	var violations []string
	// The replicas' sealers seal what the load committed: the checker
	// seals every tenant itself before it verifies, so a sealer that
	// stopped under a fault would go unseen by it.
	if _, last, err := unsealed(ctx, f.admin); err != nil {
		t.Fatal(err)
	} else if left, err := unsealedAfter(ctx, f.admin, last, soakSealPatience); err != nil {
		t.Fatal(err)
	} else if left > 0 {
		violations = append(violations, fmt.Sprintf("%d records committed by the end of the load are still unsealed %s later: the replicas' sealers stopped", left, soakSealPatience))
	}
	violations = append(violations, stats.problems...)
	violations = append(violations, unfinished...)
	violations = append(violations, f.crashes()...)
	violations = append(violations, injectErrs...)
	violations = append(violations, wrongReads...)
	// Every backend terminate may find a replica between connections, a
	// kill a replica not started again, a probe a moment the toxic
	// missed; none landing across the run is a fault never injected.
	for _, k := range soakFaults {
		if counts[k] > 0 && landed[k] == 0 {
			violations = append(violations, fmt.Sprintf("%d %s faults and none landed (%s): the fault never took effect", counts[k], k, soakLandedBy[k]))
		}
	}
	var keyedCycles, abandoned int
	for _, c := range cycles {
		if c.key != "" {
			keyedCycles++
		}
		if c.abandoned {
			abandoned++
		}
	}
	afterKill := keysRetriedAfterKill(cycles)
	if landed[faultReplicaKill] > 0 && keyedCycles > 0 && afterKill == 0 {
		violations = append(violations, fmt.Sprintf("%d replica kills landed, and no key of %d was retried after the replica that answered it was killed", landed[faultReplicaKill], keyedCycles))
	}
	violations = append(violations, keyProblems(cycles, f.keyWarnings())...)
	keyedData, err := keyedInData(ctx, f.admin, cycles)
	if err != nil {
		t.Fatal(err)
	}
	violations = append(violations, keyedData...)
	inData, err := executedOnceInData(ctx, f.admin, cycles)
	if err != nil {
		t.Fatal(err)
	}
	violations = append(violations, inData...)
	// The labels: one per approval, each accounted for in the audit log;
	// an execution may be reported unfinished only when the carrier made
	// its label (flagged: the database cannot see that effect), or when a
	// replica kill cut it before its request.
	approvals, _ := labelCycles(cycles)
	labelProblems, flagged, err := shipping.account(ctx, f.admin, approvals)
	if err != nil {
		t.Fatal(err)
	}
	excused := shipping.cutBeforeRequest(cycles)
	maps.Copy(excused, flagged)
	violations = append(violations, labelProblems...)
	// An execution is excused its missing end only when its agent was
	// never told it ended: a poll that answered executed or consumed
	// read an end recorded, and an end recorded is never unrecorded.
	violations = append(violations, toldEnded(cycles, excused)...)
	vs, err := faults.Check(ctx, f.admin, noteEffect)
	if err != nil {
		t.Fatalf("check invariants: %v", err)
	}
	for _, v := range vs {
		if v.Kind == faults.KindUnfinished && flaggedIn(v.Detail, excused) {
			continue
		}
		// A claim its replica's kill cut short holds no outcome until a
		// retry under its key finds it ran out.
		if v.Kind == faults.KindStuck && stuckKeyExcused(v.Detail, cycles) {
			continue
		}
		violations = append(violations, "invariant violated: "+v.String())
	}

	done, upstream, total := 0, 0, 0
	for _, c := range cycles {
		if c.done {
			done++
			if c.action == labelAction {
				upstream++
			}
		}
	}
	var byKind, landedBy []string
	for _, k := range soakFaults {
		byKind = append(byKind, fmt.Sprintf("%s=%d", k, counts[k]))
		landedBy = append(landedBy, fmt.Sprintf("%s=%d", k, landed[k]))
		total += counts[k]
	}
	failed, why := stats.failed()
	labels, _ := shipping.made()
	fmt.Printf("soak: seed=%d duration=%s cycles=%d upstream_cycles=%d keyed_cycles=%d keys_retried_after_kill=%d keyed_kills=%d keys_abandoned=%d labels=%d flagged=%d reads=%d faults=%d (%s) landed=(%s) failed_calls=%d violations=%d\n",
		seed, duration, done, upstream, keyedCycles, afterKill, keyedKills, abandoned, labels, len(flagged), reads, total, strings.Join(byKind, " "), strings.Join(landedBy, " "), failed, len(violations))
	if failed > 0 {
		fmt.Printf("soak: failed_calls by answer: %s\n", strings.Join(why, ", "))
	}
	if len(violations) > 0 || t.Failed() {
		for _, e := range events {
			t.Log(e)
		}
		stats.log(t)
		for _, v := range violations {
			t.Error(v)
		}
	}
}

// soakOrder is what the seed holds of o-1001 in each tenant, which no
// action of the soak changes: a read of another tenant's row, or of
// another row, shows here.
var soakOrder = map[string]float64{"acme": 4999, "globex": 99999999}

// readProblem says what is wrong with a read tool's answer to an agent
// of tenant, "" when nothing is: order_get's item must be o-1001 with
// the tenant's total, and each item of order_list that is o-1001 too.
func readProblem(tenant, tool string, answer map[string]any) string {
	var items []any
	switch tool {
	case "order_get":
		item, _ := answer["item"].(map[string]any)
		if item == nil || item["id"] != "o-1001" {
			return fmt.Sprintf("%s of %s o-1001 answered another row: %v", tool, tenant, answer)
		}
		items = []any{item}
	default:
		items, _ = answer["items"].([]any)
		if len(items) == 0 {
			return fmt.Sprintf("%s of %s answered no rows: %v", tool, tenant, answer)
		}
	}
	for _, it := range items {
		item, _ := it.(map[string]any)
		if item["id"] == "o-1001" && item["total_cents"] != soakOrder[tenant] {
			return fmt.Sprintf("%s of %s read o-1001 with total_cents %v, which its tenant's row does not hold (%v)", tool, tenant, item["total_cents"], soakOrder[tenant])
		}
	}
	return ""
}

// toldEnded drops from excused each approval whose agent a poll told
// that its execution ended (executed, or consumed), and returns each as a
// violation: the log holds no end for an execution its agent was told
// ended.
func toldEnded(cycles []*cycle, excused map[string]bool) []string {
	var problems []string
	for _, c := range cycles {
		if !excused[c.approval] {
			continue
		}
		if slices.Contains(c.polls, "executed") || slices.Contains(c.polls, string(engine.StatusConsumed)) {
			delete(excused, c.approval)
			problems = append(problems, fmt.Sprintf("%s (approval %s): its execution has no recorded end, and its agent was told it ended (polls %v)",
				c.note, c.approval, c.polls))
		}
	}
	return problems
}

// unsealedAfter waits until every record unsealed up to id last is sealed,
// by the replicas (nothing else seals before the checker), for at most
// patience, and returns how many are left unsealed.
func unsealedAfter(ctx context.Context, admin *pgxpool.Pool, last int64, patience time.Duration) (int64, error) {
	deadline := time.Now().Add(patience)
	for {
		var left int64
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.audit WHERE seq IS NULL AND id <= $1`, last).Scan(&left); err != nil {
			return 0, err
		}
		if left == 0 || time.Now().After(deadline) {
			return left, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// soakFault is one fault of the soak's schedule: after pause, kind, on
// replica (a kill or a restart's), lasting (a toxic's, or a killed
// replica's time down), with latency in milliseconds (proxy_latency's).
type soakFault struct {
	pause   time.Duration
	kind    string
	replica int
	lasting time.Duration
	latency int
}

// soakSchedule returns the soak's faults, one per call, for seed, on
// replicas replicas. Each draws every value a fault may use, whatever its
// kind then uses, so that the same seed gives the same faults in the same
// order.
func soakSchedule(seed uint64, replicas int) func() soakFault {
	rng := rand.New(rand.NewPCG(seed, 0)) //nolint:gosec // G404: a reproducible schedule, not a secret
	return func() soakFault {
		return soakFault{
			pause:   time.Duration(1000+rng.IntN(3000)) * time.Millisecond,
			kind:    soakFaults[rng.IntN(len(soakFaults))],
			replica: rng.IntN(replicas),
			lasting: time.Duration(200+rng.IntN(2800)) * time.Millisecond,
			latency: 10 + rng.IntN(90),
		}
	}
}

// TestSoakScheduleIsReproducible: a seed gives the same faults in the
// same order every time, another seed others, and a schedule as long as
// two minutes' holds every kind.
func TestSoakScheduleIsReproducible(t *testing.T) {
	t.Parallel()
	draw := func(seed uint64) []soakFault {
		next := soakSchedule(seed, 3)
		var fs []soakFault
		for range 40 {
			fs = append(fs, next())
		}
		return fs
	}
	one, again, other := draw(1), draw(1), draw(2)
	if !slices.Equal(one, again) {
		t.Fatal("seed 1 gave two schedules")
	}
	if slices.Equal(one, other) {
		t.Fatal("seeds 1 and 2 gave one schedule")
	}
	kinds := map[string]bool{}
	for _, f := range one {
		kinds[f.kind] = true
		if f.replica < 0 || f.replica >= 3 {
			t.Fatalf("replica %d of 3", f.replica)
		}
	}
	for _, k := range soakFaults {
		if !kinds[k] {
			t.Errorf("no %s in seed 1's first 40 faults", k)
		}
	}
}
