package faults_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// A fleet is replicas of the real binary (`orangerail serve`, each a
// process of its own) serving one database over HTTP, verified against a
// development issuer, behind a balancer in the test's HTTP client that
// sends each request to a replica that is up, as a load balancer would.

// fleetStatementTimeout is the fleet's limits.statement_timeout.
const fleetStatementTimeout = 3 * time.Second

// fleetCallDeadline bounds one HTTP call to a replica: a call runs at
// most two bounded transactions (its own, and one recording its failure),
// each ending at database.Limits' client-side deadline, with slack for a
// shared machine. A call still waiting then hangs.
const fleetCallDeadline = 2*(time.Second+2*fleetStatementTimeout+5*time.Second) + 10*time.Second

// fleetPatience is how long an agent retries one step of a lifecycle
// before it gives up: longer than a replica's restart and a fault's
// length.
const fleetPatience = 2 * time.Minute

// fleetNoteSQL is add_order_note's statement in the fleet: it sleeps a
// moment, so that a replica can be killed while it runs.
const fleetNoteSQL = "INSERT INTO order_notes (org_id, order_id, note) SELECT current_setting('orangerail.tenant_id'), :order_id, :note FROM pg_sleep(0.2) RETURNING id"

// replicaAppPrefix starts the application_name of every replica's
// connections: the replica's name follows it.
const replicaAppPrefix = "orangerail-replica-"

type fleet struct {
	t         *testing.T
	bin       string
	key       string
	issuer    *devissuer.Issuer
	issuerURL string
	// admin reaches the database directly, as a superuser: the
	// checker's and the fault injector's.
	admin    *pgxpool.Pool
	replicas []*replica
	next     atomic.Uint64
	// transport is every client's, so that the balancer's connections
	// are pooled once.
	transport *http.Transport
	// env is added to every replica's environment.
	env []string

	mu sync.Mutex
	// exits are the replicas that exited without being killed, with the
	// end of their logs.
	exits []string
}

type replica struct {
	name, addr, config, log, dbURL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// killed is set before the test kills or stops the process.
	killed bool
	up     atomic.Bool
	// kills counts the SIGKILLs sent to it: a call routed to it that
	// sees the count move before its answer had its replica killed
	// under it. served counts the answers it gave since it last started.
	kills, served atomic.Int64
}

// fleetOptions say what to start.
type fleetOptions struct {
	replicas int
	// dbURL is the database the replicas reach (a proxy's URL, say);
	// adminURL reaches it directly. Empty: a new database, both.
	dbURL, adminURL string
	// edits change the config every replica serves.
	edits []ontologytest.Edit
	// env is added to every replica's environment (NAME=value).
	env []string
	// replicaEdits, when set, change the config of the replica named
	// name after edits: what differs between replicas (an upstream's
	// address that names the replica calling it, say).
	replicaEdits func(name string) []ontologytest.Edit
}

// newFleet builds the binary, seeds the example, starts the issuer and
// the replicas, and waits until each is ready. Everything stops when the
// test ends.
func newFleet(t *testing.T, o fleetOptions) *fleet {
	t.Helper()
	if o.dbURL == "" {
		o.dbURL = testdb.New(t)
		o.adminURL = o.dbURL
		if _, err := testdb.Pool(t, o.adminURL).Exec(context.Background(), orders.Seed); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "orangerail")
	build := exec.Command("go", "build", "-o", bin, "github.com/orangerail/orangerail/cmd/orangerail") //nolint:gosec // G204: the path is the test's directory
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the binary: %v\n%s", err, out)
	}
	iss, err := devissuer.New()
	if err != nil {
		t.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	t.Cleanup(issuerSrv.Close)
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	t.Cleanup(transport.CloseIdleConnections)
	f := &fleet{t: t, bin: bin, key: hex.EncodeToString(key), issuer: iss, issuerURL: issuerSrv.URL,
		admin: testdb.Pool(t, o.adminURL), transport: transport, env: o.env}

	for i := range o.replicas {
		name := fmt.Sprint(i)
		r := &replica{name: name, addr: fmt.Sprintf("127.0.0.1:%d", testdb.FreePort(t)),
			config: filepath.Join(dir, "replica-"+name+".yaml"), log: filepath.Join(dir, "replica-"+name+".log")}
		u, err := url.Parse(o.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", replicaAppPrefix+name)
		q.Set("pool_max_conns", "8")
		u.RawQuery = q.Encode()
		r.dbURL = u.String()
		edits := o.edits
		if o.replicaEdits != nil {
			edits = append(slices.Clone(edits), o.replicaEdits(name)...)
		}
		cfg := ontologytest.Apply(t, orders.Config, append([]ontologytest.Edit{
			ontologytest.Set("identity.oidc", map[string]any{"issuer": f.issuerURL, "audience": "orangerail", "tenant_claim": "org_id",
				"human": map[string]any{"claim": "kind", "values": []string{"human"}}}),
			ontologytest.Set("http.listen", r.addr),
			ontologytest.Set("http.rate_limits", map[string]any{"reads_per_minute": 1 << 30, "writes_per_minute": 1 << 30}),
			ontologytest.Set("limits", map[string]string{"lock_timeout": "1s", "statement_timeout": fleetStatementTimeout.String()}),
			ontologytest.Set("audit.seal_interval", "1s"),
			ontologytest.Set("actions.add_order_note.policy.approval", "required"),
			ontologytest.Set("actions.add_order_note.execute.sql", fleetNoteSQL),
			ontologytest.Set("actions.add_order_note.budget", map[string]int{"per_minute": 1_000_000, "max_concurrent": 1000, "per_day": 100_000_000}),
		}, edits...)...)
		if err := os.WriteFile(r.config, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		f.replicas = append(f.replicas, r)
	}
	t.Cleanup(f.stopAll)
	var wg sync.WaitGroup
	errs := make(chan error, len(f.replicas))
	for _, r := range f.replicas {
		wg.Go(func() { errs <- f.start(r) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// start starts r and waits until it answers /readyz 200.
func (f *fleet) start(r *replica) error {
	logFile, err := os.OpenFile(r.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// The child holds its own descriptor.
	defer logFile.Close()
	cmd := exec.Command(f.bin, "serve", "--config", r.config, "--database-url", r.dbURL) //nolint:gosec // G204: the binary the test built
	cmd.Env = append(append(os.Environ(), app.SecretKeyEnv+"="+f.key), f.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.done, r.killed = cmd, done, false
	r.mu.Unlock()
	r.served.Store(0)
	go func() {
		_ = cmd.Wait()
		r.up.Store(false)
		r.mu.Lock()
		killed := r.killed
		r.mu.Unlock()
		if !killed {
			f.mu.Lock()
			f.exits = append(f.exits, fmt.Sprintf("replica %s exited by itself (%s):\n%s", r.name, cmd.ProcessState, logTail(r.log)))
			f.mu.Unlock()
		}
		close(done)
	}()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("replica %s exited before it was ready:\n%s", r.name, logTail(r.log))
		default:
		}
		if readyz(r.addr) == http.StatusOK {
			r.up.Store(true)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("replica %s was not ready in a minute:\n%s", r.name, logTail(r.log))
}

// readyz answers the status of addr's /readyz, 0 when none came.
func readyz(addr string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// kill sends r SIGKILL, as a node that dies or the OOM killer would, and
// waits for it to exit: nothing of it shuts down, its sealer's last round
// included.
func (f *fleet) kill(r *replica) {
	r.mu.Lock()
	r.killed = true
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	r.up.Store(false)
	r.kills.Add(1)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stopAll interrupts every running replica and waits for it, killing one
// that has not shut down after 15s; then it fails the test on a replica
// that exited by itself.
func (f *fleet) stopAll() {
	for _, r := range f.replicas {
		r.mu.Lock()
		cmd, done := r.cmd, r.done
		r.killed = true
		r.mu.Unlock()
		if cmd == nil {
			continue
		}
		r.up.Store(false)
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	for _, e := range f.crashes() {
		f.t.Error(e)
	}
}

// crashes are the replicas that exited without being killed.
func (f *fleet) crashes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.exits...)
}

// up returns the replicas up now.
func (f *fleet) up() []*replica {
	var rs []*replica
	for _, r := range f.replicas {
		if r.up.Load() {
			rs = append(rs, r)
		}
	}
	return rs
}

func logTail(path string) string {
	b, _ := os.ReadFile(path) //nolint:gosec // G304: the test's own log
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// fleetHost is the host every client names; the balancer puts a
// replica's address in its place.
const fleetHost = "orangerail.fleet"

// RoundTrip sends req to the next replica up, round robin, with token as
// its bearer, and notes in via (when set) the replica it chose.
func (f *fleet) roundTrip(req *http.Request, token string, via *route) (*http.Response, error) {
	up := f.up()
	if len(up) == 0 {
		return nil, errors.New("balancer: no replica is up")
	}
	r := up[f.next.Add(1)%uint64(len(up))]
	if via != nil {
		via.set(r)
	}
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = r.addr, r.addr
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.transport.RoundTrip(req)
	if err == nil {
		r.served.Add(1)
	}
	return resp, err
}

// route is the replica a client's last request went to, and how many
// kills that replica had then.
type route struct {
	mu    sync.Mutex
	r     *replica
	kills int64
	// staging is set while the client's agent stages under a key.
	staging atomic.Bool
}

// stagingOn reports whether the client stages under a key, its last
// request sent to r.
func (v *route) stagingOn(r *replica) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.staging.Load() && v.r == r
}

func (v *route) set(r *replica) {
	v.mu.Lock()
	v.r, v.kills = r, r.kills.Load()
	v.mu.Unlock()
}

// last returns the replica of the last request, and whether it was
// killed since that request was sent.
func (v *route) last() (r *replica, killedSince bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.r == nil {
		return nil, false
	}
	return v.r, v.r.kills.Load() != v.kills
}

// snapshot returns the replica of the last request, and its kills then.
func (v *route) snapshot() (*replica, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.r, v.kills
}

type balancer struct {
	f     *fleet
	token string
	via   *route
}

func (b balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	return b.f.roundTrip(req, b.token, b.via)
}

// token mints a token of subject in tenant with claims.
func (f *fleet) token(subject, tenant string, claims map[string]any) string {
	f.t.Helper()
	extra := map[string]any{"org_id": tenant}
	for k, v := range claims {
		extra[k] = v
	}
	tok, err := f.issuer.Token(devissuer.Claims{Issuer: f.issuerURL, Subject: subject, Audience: "orangerail",
		Expiry: time.Now().Add(3 * time.Hour), Extra: extra})
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// fleetStats counts what the agents saw.
type fleetStats struct {
	mu sync.Mutex
	// calls counts the calls made by kind (a tool's name, decide, show);
	// failures the failed ones by what failed them.
	calls    map[string]int
	failures map[string]int
	// problems are answers no fault excuses: an unclassified failure, a
	// call past its deadline, an approval executed twice. The test fails
	// on each.
	problems []string
}

func newFleetStats() *fleetStats {
	return &fleetStats{calls: map[string]int{}, failures: map[string]int{}}
}

func (s *fleetStats) call(kind string) {
	s.mu.Lock()
	s.calls[kind]++
	s.mu.Unlock()
}

func (s *fleetStats) fail(why string) {
	s.mu.Lock()
	s.failures[why]++
	s.mu.Unlock()
}

// failed returns how many calls failed, and "what: n" for each way they
// did, the commonest first.
func (s *fleetStats) failed() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	whys := slices.Collect(maps.Keys(s.failures))
	slices.SortFunc(whys, func(a, b string) int { return cmp.Or(s.failures[b]-s.failures[a], strings.Compare(a, b)) })
	lines := make([]string, len(whys))
	for i, why := range whys {
		total += s.failures[why]
		lines[i] = fmt.Sprintf("%s: %d", why, s.failures[why])
	}
	return total, lines
}

func (s *fleetStats) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// fleetAgent is an agent (a go-sdk MCP client through the balancer) and
// the person who decides what it stages (the approvals API, through the
// balancer too), in one tenant.
type fleetAgent struct {
	f        *fleet
	name     string
	tenant   string
	stats    *fleetStats
	agent    *http.Client
	approver *http.Client
	cs       *sdk.ClientSession
	// via is the replica the agent's last MCP request went to.
	via *route
}

func (f *fleet) newAgent(name, tenant string, stats *fleetStats) *fleetAgent {
	agentToken := f.token(name, tenant, map[string]any{"roles": []string{"support"}, "scope": "orders:write"})
	approverToken := f.token("approver-of-"+name, tenant, map[string]any{"roles": []string{"approver"}, "kind": "human"})
	via := &route{}
	return &fleetAgent{f: f, name: name, tenant: tenant, stats: stats, via: via,
		agent:    &http.Client{Transport: balancer{f, agentToken, via}},
		approver: &http.Client{Transport: balancer{f, approverToken, nil}, Timeout: fleetCallDeadline}}
}

func (a *fleetAgent) close() {
	if a.cs != nil {
		_ = a.cs.Close()
		a.cs = nil
	}
}

// errAnswered is a call that reached a replica and was answered as a
// failure (classified).
var errAnswered = errors.New("answered as a failure")

// tool calls an MCP tool and returns its structured answer. A failure is
// counted and returned: a transport error (a replica killed under the
// call, a connection reset), or an answer that failed, which must carry
// its status and correlation id. A call past fleetCallDeadline is a
// problem: it hung.
func (a *fleetAgent) tool(name string, args map[string]any) (map[string]any, error) {
	a.stats.call(name)
	ctx, cancel := context.WithTimeout(context.Background(), fleetCallDeadline)
	defer cancel()
	if a.cs == nil {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "orangerail-faults", Version: "1"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: "http://" + fleetHost + app.MCPPath, HTTPClient: a.agent,
				MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return nil, a.transportFailure(ctx, "connect", err)
		}
		a.cs = cs
	}
	res, err := a.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		// The session may be broken with the connection: the next call
		// connects again (the server keeps no session).
		a.close()
		return nil, a.transportFailure(ctx, name, err)
	}
	answer, _ := res.StructuredContent.(map[string]any)
	if !res.IsError {
		return answer, nil
	}
	if answer == nil {
		// A read's failure carries its body as text: its output schema
		// is the data's.
		for _, c := range res.Content {
			if text, ok := c.(*sdk.TextContent); ok && json.Unmarshal([]byte(text.Text), &answer) == nil {
				break
			}
		}
	}
	status, _ := answer["status"].(string)
	correlation, _ := answer["correlationId"].(string)
	if status == "" || correlation == "" {
		a.stats.problem("%s: an unclassified failure: %s", name, contentText(res))
	}
	a.stats.fail(name + ": " + status)
	return answer, fmt.Errorf("%s: %s: %w", name, status, errAnswered)
}

// transportFailure counts a call that got no answer; past its deadline
// it is a problem.
func (a *fleetAgent) transportFailure(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		a.stats.problem("%s: no answer within %s: %v", what, fleetCallDeadline, err)
	}
	a.stats.fail(what + ": no answer")
	return fmt.Errorf("%s: %w", what, err)
}

// api calls the approvals API as the agent's approver and decodes a 200's
// body into out; another status returns its error code.
func (a *fleetAgent) api(method, path, body string, out any) (status int, code string, err error) {
	a.stats.call(method + " " + strings.SplitN(path, "/", 3)[1])
	req, err := http.NewRequest(method, "http://"+fleetHost+"/api/v1"+path, strings.NewReader(body)) //nolint:noctx // the client's Timeout bounds it
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.approver.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			a.stats.problem("%s %s: no answer within %s: %v", method, path, fleetCallDeadline, err)
		}
		a.stats.fail("api: no answer")
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.stats.fail("api: body cut")
		return 0, "", err
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", json.Unmarshal(b, out)
	}
	var refusal struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &refusal) != nil || refusal.Error.Code == "" {
		a.stats.problem("%s %s: an unclassified failure %d: %.200s", method, path, resp.StatusCode, b)
	}
	a.stats.fail(fmt.Sprintf("api: %d %s", resp.StatusCode, refusal.Error.Code))
	return resp.StatusCode, refusal.Error.Code, fmt.Errorf("%s %s: %d %s: %w", method, path, resp.StatusCode, refusal.Error.Code, errAnswered)
}

// cycle is one lifecycle an agent drove.
type cycle struct {
	// action is the tool staged: add_order_note, whose note is note, or
	// create_return_label, whose reason is note.
	action                 string
	tenant, note, approval string
	// decision is "approve" or "reject".
	decision string
	// polls are the statuses check_approval answered, in order ("" for
	// a poll that got no answer).
	polls []string
	// key is the idempotencyKey its stage carried, "" for none; keyed,
	// what each call under it answered (see keyAnswer); abandoned: its
	// stage answered outcome_unknown for a claim that ran out, so it has
	// no approval to decide.
	key       string
	keyed     []keyAnswer
	abandoned bool
	// done: the agent saw its end (executed or consumed after an
	// approval; rejected after a rejection).
	done bool
}

// executions counts the polls that said the approval executed.
func (c *cycle) executions() int {
	n := 0
	for _, p := range c.polls {
		if p == "executed" {
			n++
		}
	}
	return n
}

// unknownPatience is how long an agent polls an approval answering
// outcome_unknown before it gives up on learning more.
const unknownPatience = 5 * time.Second

// retry calls step until it reports done, pausing between tries, for at
// most fleetPatience.
func retry(what string, step func() bool) error {
	deadline := time.Now().Add(fleetPatience)
	for !step() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not succeed in %s", what, fleetPatience)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// busyAgents starts agents agents on f, named name-i, in acme and globex
// in turn, each running lifecycles one after another (run, with notes
// note-i-n) until over is closed and it has run minCycles; a failed
// lifecycle fails the test and ends its agent. wait waits for them all
// and returns every cycle they ran.
func (f *fleet) busyAgents(t *testing.T, stats *fleetStats, name, note string, agents, minCycles int, over <-chan struct{},
	run func(a *fleetAgent, note string) (*cycle, error)) (wait func() []*cycle) {
	var (
		mu     sync.Mutex
		cycles []*cycle
		wg     sync.WaitGroup
	)
	for i := range agents {
		a := f.newAgent(fmt.Sprintf("%s-%d", name, i), []string{"acme", "globex"}[i%2], stats)
		wg.Go(func() {
			defer a.close()
			for n := 0; ; n++ {
				select {
				case <-over:
					if n >= minCycles {
						return
					}
				default:
				}
				c, err := run(a, fmt.Sprintf("%s-%d-%d", note, i, n))
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
	return func() []*cycle {
		wg.Wait()
		return cycles
	}
}

// lifecycle stages a note, decides it (approve, or reject when reject is
// set) and polls until its end, retrying every step as an agent and a
// person would, through whichever replica the balancer picks.
func (a *fleetAgent) lifecycle(note string, reject bool) (*cycle, error) {
	return a.lifecycleOf("add_order_note", map[string]any{"order_id": "o-1001", "note": note}, note, reject)
}

// labelLifecycle is lifecycle for a return label (an upstream call to the
// carrier) whose reason is reason: the carrier's key for its approval.
func (a *fleetAgent) labelLifecycle(reason string) (*cycle, error) {
	return a.lifecycleOf(labelAction, map[string]any{"order_id": "o-1003", "reason": reason, "weight_grams": 1200}, reason, false)
}

// lifecycleOf is lifecycle for action called with args, note naming the
// cycle.
func (a *fleetAgent) lifecycleOf(action string, args map[string]any, note string, reject bool) (*cycle, error) {
	return a.drive(&cycle{action: action, note: note}, args, reject)
}

// drive runs c's lifecycle: stages c.action with args (under c.key when
// set), decides it, polls it to its end.
func (a *fleetAgent) drive(c *cycle, args map[string]any, reject bool) (*cycle, error) {
	action, note := c.action, c.note
	c.tenant, c.decision = a.tenant, "approve"
	if reject {
		c.decision = "reject"
	}
	err := retry(note+": stage", func() bool {
		if c.key != "" {
			return a.stageKeyed(c, args)
		}
		answer, err := a.tool(action, args)
		if err == nil && answer["status"] == string(engine.StatusApprovalPending) {
			c.approval, _ = answer["approvalId"].(string)
		}
		return c.approval != ""
	})
	if err != nil || c.abandoned {
		return c, err
	}
	err = retry(note+": decide", func() bool {
		var detail struct {
			Status string `json:"status"`
			Digest string `json:"digest"`
		}
		if _, _, err := a.api(http.MethodGet, "/approvals/"+c.approval, "", &detail); err != nil {
			return false
		}
		switch detail.Status {
		case "approved", "consumed":
			return !reject
		case "rejected":
			return reject
		case "pending":
		default:
			a.stats.problem("%s: approval %s is %s before it was decided", note, c.approval, detail.Status)
			return true
		}
		body, _ := json.Marshal(map[string]string{"decision": c.decision, "digest": detail.Digest})
		var decided map[string]any
		_, _, err := a.api(http.MethodPost, "/approvals/"+c.approval+"/decision", string(body), &decided)
		return err == nil
	})
	if err != nil {
		return c, err
	}
	var unknownSince time.Time // when polls began answering outcome_unknown
	err = retry(note+": poll", func() bool {
		answer, err := a.tool("check_approval", map[string]any{"approvalId": c.approval})
		status, _ := answer["status"].(string)
		c.polls = append(c.polls, status)
		if status != string(engine.StatusOutcomeUnknown) {
			unknownSince = time.Time{}
			if err != nil {
				return false
			}
		}
		switch status {
		case "executed", string(engine.StatusConsumed):
			c.done = !reject
		case string(engine.StatusRejected):
			c.done = reject
		case string(engine.StatusOutcomeUnknown):
			// The effect may have run: no poll runs it again. One whose
			// end is recorded soon after (a COMMIT's answer lost, then
			// confirmed) answers consumed; one whose server died mid-call
			// stays unknown until an operator settles it, and the agent,
			// told not to call again, gives up: its execution is flagged.
			if unknownSince.IsZero() {
				unknownSince = time.Now()
			}
			if time.Since(unknownSince) < unknownPatience {
				return false
			}
			c.done = !reject
		case string(engine.StatusPending), string(engine.StatusExecuting):
			// Not decided yet; or it runs — or its replica died within
			// its budget slot's lease, after which it answers
			// outcome_unknown: poll again either way.
			return false
		}
		if !c.done {
			a.stats.problem("%s: a %s approval polled %s", note, c.decision, status)
		}
		return true
	})
	if c.executions() > 1 {
		a.stats.problem("%s: %d polls said approval %s executed", note, c.executions(), c.approval)
	}
	return c, err
}

// executedOnceInData holds each cycle an agent drove to its end to the
// database: an approved one consumed with one execution and its note
// written once, a rejected one rejected with no execution and no note. It
// returns what does not hold.
func executedOnceInData(ctx context.Context, admin *pgxpool.Pool, cycles []*cycle) ([]string, error) {
	var problems []string
	for _, c := range cycles {
		if !c.done || c.action == labelAction {
			// A label's effect is the carrier's: carrier.account holds
			// it.
			continue
		}
		var status string
		var executions, notes int
		err := admin.QueryRow(ctx, `
			SELECT a.status,
			       (SELECT count(*) FROM orangerail.audit x WHERE x.tenant_id = a.tenant_id AND x.approval_id = a.id AND x.phase = 'execution_started'),
			       (SELECT count(*) FROM order_notes n WHERE n.org_id = a.tenant_id AND n.note = $2)
			FROM orangerail.approvals a WHERE a.id = $1`, c.approval, c.note).Scan(&status, &executions, &notes)
		if err != nil {
			return nil, fmt.Errorf("read approval %s: %w", c.approval, err)
		}
		want, wantN := "consumed", 1
		if c.decision == "reject" {
			want, wantN = "rejected", 0
		}
		if status != want || executions != wantN || notes != wantN {
			problems = append(problems, fmt.Sprintf("%s (%s, polls %v): approval %s is %s with %d executions and %d notes, want %s with %d",
				c.note, c.decision, c.polls, c.approval, status, executions, notes, want, wantN))
		}
	}
	return problems, nil
}

// unsealed counts the records no sealer has sealed yet, and the last of
// their ids.
func unsealed(ctx context.Context, admin *pgxpool.Pool) (n, last int64, err error) {
	err = admin.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM orangerail.audit WHERE seq IS NULL`).Scan(&n, &last)
	return n, last, err
}

// sealedBySurvivors waits until every record that was unsealed up to id
// last is sealed, by the replicas up (the checker seals nothing before
// it), and fails after patience.
func sealedBySurvivors(ctx context.Context, admin *pgxpool.Pool, last int64) error {
	deadline := time.Now().Add(fleetPatience)
	for {
		var left int64
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.audit WHERE seq IS NULL AND id <= $1`, last).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d records committed before the kill are still unsealed after %s", left, fleetPatience)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// contentText is an answer's text content, for a message.
func contentText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
