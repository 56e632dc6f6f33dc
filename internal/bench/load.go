package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// mcp_http_load (issue 16, item 5): the orders example served by the real
// binary (`orangerail serve`, a process of its own so that its memory is
// its own) over Streamable HTTP through the front — each request's token
// verified against the development issuer, its caller's allowance counted
// in Postgres — while many go-sdk client sessions, each with a token of its
// own, loop a mixed workload for a fixed time.

// loadOptions say how hard and how long mcp_http_load pushes.
type loadOptions struct {
	// sessions is how many MCP client sessions call at once.
	sessions int
	// warmup runs the load unmeasured first; duration is then measured.
	warmup, duration time.Duration
	// keep leaves the server's config and host log on disk (their paths
	// go to stderr).
	keep bool
}

// callKind is one kind of call in the workload.
type callKind string

// The call kinds of the workload.
const (
	kindOrderGet      callKind = "order_get"
	kindOrderList     callKind = "order_list"
	kindProductList   callKind = "product_list"
	kindDescribe      callKind = "describe_object"
	kindListPolicies  callKind = "list_policies"
	kindCancel        callKind = "cancel_order"
	kindUpdateAddress callKind = "update_shipping_address"
	kindAddNote       callKind = "add_order_note"
	kindCheck         callKind = "check_approval"
)

// callKinds returns every call kind: what a run must have made at least
// once each.
func callKinds() []callKind {
	return []callKind{kindOrderGet, kindOrderList, kindProductList, kindDescribe, kindListPolicies,
		kindCancel, kindUpdateAddress, kindAddNote, kindCheck}
}

// weighted is one kind's share of a role's calls, in percent.
type weighted struct {
	kind   callKind
	weight int
}

// supportMix is a support agent's workload: two thirds reads, a tenth
// describing, 15% writes (two staged for a person's approval, one executed
// at once) and a tenth polling what it staged.
var supportMix = []weighted{
	{kindOrderGet, 30}, {kindOrderList, 20}, {kindProductList, 15},
	{kindDescribe, 5}, {kindListPolicies, 5},
	{kindCancel, 5}, {kindUpdateAddress, 5}, {kindAddNote, 5},
	{kindCheck, 10},
}

// auditorMix is an auditor's workload: the example lets an auditor read
// orders and products and call no action, so it reads and describes.
var auditorMix = []weighted{
	{kindOrderGet, 45}, {kindOrderList, 30}, {kindProductList, 15},
	{kindDescribe, 5}, {kindListPolicies, 5},
}

// loadOrders is how many orders of the load's own each tenant gets, so that
// staged writes spread over many targets as a desk's would.
const loadOrders = 200

// loadReport is what one load run measured.
type loadReport struct {
	// measured are the latencies of the calls started in the measured
	// window, sorted; elapsed is that window.
	measured []time.Duration
	// byKind are the same latencies by kind of call, sorted.
	byKind  map[callKind][]time.Duration
	elapsed time.Duration
	// kinds counts every call made, warm-up included, by kind.
	kinds map[callKind]int
	// errors counts calls that failed: a transport error, an HTTP or
	// JSON-RPC error, an isError answer, or an answer the workload does
	// not expect (a staged write that did not stage). samples holds the
	// first few.
	errors  int
	samples []string
	// idleKB and peakKB are the server's VmHWM once ready and after the
	// load.
	idleKB, peakKB int64
	// serverCPU and clientCPU are the CPU time (user and system) the
	// server's process and this one spent in the measured window: on a
	// shared box, what each call costs even when the throughput says
	// more about the neighbours than about the server.
	serverCPU, clientCPU time.Duration
}

// mcpHTTPLoad runs mcp_http_load against a database of its own (dbURL,
// migrated) and emits its figures.
func mcpHTTPLoad(ctx context.Context, dbURL string, o loadOptions, emit func(result)) error {
	r, err := runLoad(ctx, dbURL, o)
	if err != nil {
		return err
	}
	// Which calls wait tells where a bottleneck is: to stderr, beside the
	// figures.
	for _, k := range callKinds() {
		if took := r.byKind[k]; len(took) > 0 {
			fmt.Fprintf(os.Stderr, "mcp_http_load %-24s %6d calls  p50 %8.1f ms  p99 %8.1f ms\n", k, len(took),
				float64(took[len(took)/2].Microseconds())/1000, float64(took[len(took)*99/100].Microseconds())/1000)
		}
	}
	for _, s := range r.samples {
		fmt.Fprintln(os.Stderr, "mcp_http_load error:", s)
	}
	if len(r.measured) == 0 {
		return fmt.Errorf("no call completed in %s", o.duration)
	}
	ms := func(d time.Duration) float64 { return round2(float64(d.Microseconds()) / 1000) }
	emit(result{Name: "mcp_http_load_throughput", Value: round(float64(len(r.measured)) / r.elapsed.Seconds()), Unit: "calls/s"})
	emit(result{Name: "mcp_http_load_p50", Value: ms(r.measured[len(r.measured)/2]), Unit: "ms"})
	emit(result{Name: "mcp_http_load_p99", Value: ms(r.measured[len(r.measured)*99/100]), Unit: "ms"})
	emit(result{Name: "mcp_http_load_errors", Value: float64(r.errors), Unit: "count"})
	perCall := func(cpu time.Duration) float64 {
		return round2(float64(cpu.Microseconds()) / 1000 / float64(len(r.measured)))
	}
	emit(result{Name: "mcp_http_load_server_cpu", Value: perCall(r.serverCPU), Unit: "ms/call"})
	emit(result{Name: "mcp_http_load_client_cpu", Value: perCall(r.clientCPU), Unit: "ms/call"})
	// The baseline is the same server's high-water mark once ready, before
	// any session connected.
	emit(result{Name: "mcp_http_load_peak_rss", Value: round(float64(r.peakKB) / 1024), Unit: "MB",
		Baseline: ptr(round(float64(r.idleKB) / 1024)), Ratio: ptr(round2(float64(r.peakKB) / float64(r.idleKB)))})
	if r.errors > 0 {
		return fmt.Errorf("%d calls failed (the first are above)", r.errors)
	}
	return nil
}

// runLoad seeds the example, starts the issuer and the server, runs the
// sessions and stops the server.
func runLoad(ctx context.Context, dbURL string, o loadOptions) (*loadReport, error) {
	if err := seedLoad(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	iss, err := devissuer.New()
	if err != nil {
		return nil, err
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	defer issuerSrv.Close()

	dir, err := os.MkdirTemp("", "orangerail-load-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "mcp_http_load files:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	addr, err := freeLoopbackAddr(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(issuerSrv.URL, addr)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	srv, err := startServer(ctx, dir, cfg, dbURL)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if err := srv.waitReady(ctx, "http://"+addr); err != nil {
		return nil, err
	}
	idle, err := vmHWM(srv.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	// The CPU both processes spend is read when the measured window opens
	// and when it closes.
	var (
		cpu    sync.WaitGroup
		cpuAt  [2][2]time.Duration // [from, until][server, client]
		cpuErr error
	)
	window := func(from, until time.Time) {
		cpu.Go(func() {
			for i, at := range []time.Time{from, until} {
				time.Sleep(time.Until(at))
				server, err1 := cpuTime(strconv.Itoa(srv.cmd.Process.Pid))
				client, err2 := cpuTime("self")
				cpuAt[i] = [2]time.Duration{server, client}
				cpuErr = cmp.Or(cpuErr, err1, err2)
			}
		})
	}
	r, err := drive(ctx, iss, issuerSrv.URL, "http://"+addr+app.MCPPath, o, window)
	cpu.Wait()
	if err != nil {
		return nil, err
	}
	if cpuErr != nil {
		return nil, cpuErr
	}
	r.serverCPU, r.clientCPU = cpuAt[1][0]-cpuAt[0][0], cpuAt[1][1]-cpuAt[0][1]
	if !srv.running() {
		return nil, fmt.Errorf("the server exited during the load:\n%s", srv.logTail())
	}
	r.idleKB = idle
	if r.peakKB, err = vmHWM(srv.cmd.Process.Pid); err != nil {
		return nil, err
	}
	return r, nil
}

// loadBudget is every action's call budget under the load: more calls at
// once than there are sessions, and more a minute than they can make.
var loadBudget = ontology.Budget{PerMinute: 1_000_000, MaxConcurrent: 10_000, PerDay: 100_000_000}

// seedLoad creates the example's tables and adds loadOrders open orders to
// each tenant.
func seedLoad(ctx context.Context, dbURL string) error {
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		return err
	}
	_, err = admin.Exec(ctx, `INSERT INTO orders (org_id, id, status, total_cents, customer_id, shipping_address)
		SELECT t, 'load-' || g, CASE WHEN g % 2 = 0 THEN 'paid' ELSE 'pending' END, 1000 + g, 'c-1', g || ' Load Street'
		FROM unnest(ARRAY['acme', 'globex']) t, generate_series(1, $1::int) g
		ON CONFLICT DO NOTHING`, loadOrders)
	return err
}

// loadConfig is the example's config as the load serves it: verified by
// the issuer at issuerURL, listening at addr, and — the load measures
// throughput, not the limits — with rate limits and every action's call
// budget set so high that the load never meets them. Counting still runs
// on every call, in Postgres, as in production. Nothing else differs from
// the example.
func loadConfig(issuerURL, addr string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(orders.Config, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	setYAML(root, []string{"identity", "oidc"}, map[string]any{"issuer": issuerURL, "audience": "orangerail", "tenant_claim": "org_id"})
	setYAML(root, []string{"http", "listen"}, addr)
	setYAML(root, []string{"http", "rate_limits"}, map[string]any{"reads_per_minute": 1 << 30, "writes_per_minute": 1 << 30})
	actions := ontology.MappingValue(root, "actions")
	if actions == nil {
		return nil, errors.New("the example has no actions")
	}
	for i := 0; i < len(actions.Content); i += 2 {
		setYAML(actions.Content[i+1], []string{"budget"}, loadBudget)
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	// Refused here, with every problem named, rather than by the server.
	if _, err := ontology.Parse(b); err != nil {
		return nil, err
	}
	return b, nil
}

// setYAML sets the value at path under the mapping m, making the mappings
// on the way.
func setYAML(m *yaml.Node, path []string, value any) {
	for _, key := range path[:len(path)-1] {
		next := ontology.MappingValue(m, key)
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, next)
		}
		m = next
	}
	var v yaml.Node
	if err := v.Encode(value); err != nil {
		panic(err) // only the values above are encoded: a programmer's error
	}
	key := path[len(path)-1]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = &v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &v)
}

// freeLoopbackAddr returns a loopback address that was free a moment ago:
// the server binds it itself.
func freeLoopbackAddr(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// server is `orangerail serve` running as a child process.
type server struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startServer builds the binary into dir and starts it serving cfg over
// HTTP on dbURL, its host log in dir.
func startServer(ctx context.Context, dir string, cfg []byte, dbURL string) (*server, error) {
	bin := filepath.Join(dir, "orangerail")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/orangerail/orangerail/cmd/orangerail") //nolint:gosec // G204: the path is our temporary directory
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the server: %w\n%s", err, out)
	}
	config := filepath.Join(dir, "orangerail.yaml")
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		return nil, err
	}
	s := &server{log: filepath.Join(dir, "server.log"), done: make(chan struct{})}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()                                                                       // the child holds its own descriptor
	s.cmd = exec.CommandContext(ctx, bin, "serve", "--config", config, "--database-url", dbURL) //nolint:gosec // G204: the binary just built
	// Ending ctx stops the server as stop does: interrupted, so that it
	// shuts down gracefully, and killed if it has not after 15s.
	s.cmd.Cancel = func() error { return s.cmd.Process.Signal(os.Interrupt) }
	s.cmd.WaitDelay = 15 * time.Second
	s.cmd.Env = append(os.Environ(), app.SecretKeyEnv+"="+randomHex(engine.KeySize))
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// running reports whether the server has not exited.
func (s *server) running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// waitReady waits until base/readyz answers 200.
func (s *server) waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !s.running() {
			return fmt.Errorf("the server exited before it was ready:\n%s", s.logTail())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the server was not ready in 30s:\n%s", s.logTail())
}

// stop interrupts the server and waits for it to shut down, killing it
// after 15s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// logTail is the end of the server's host log, for an error message.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// clockTicks is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// architecture Linux runs Go on.
const clockTicks = 100

// cpuTime reads the user and system CPU time a process (a pid, or "self")
// has spent.
func cpuTime(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat") //nolint:gosec // G304: the stat of our own process or of the server we started
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %q", pid, b)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// vmHWM reads a process's peak resident set size in kB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// sessionRole is a load session's identity, as the demo issues them.
type sessionRole string

// The roles of the load's sessions.
const (
	roleSupport sessionRole = "support"
	roleAuditor sessionRole = "auditor"
)

// loadSession is one MCP client session and its workload's state.
type loadSession struct {
	cs     *sdk.ClientSession
	role   sessionRole
	tenant string
	rng    *rand.Rand
	// staged are the approvals this session staged, which it polls.
	staged []string

	took    map[callKind][]time.Duration // calls started in the measured window
	kinds   map[callKind]int
	errors  int
	samples []string
}

// drive connects o.sessions sessions — three in four support agents, one
// in four auditors, alternating tenants — runs them through the warm-up and
// the measured window, and collects what they saw.
func drive(ctx context.Context, iss *devissuer.Issuer, issuerURL, endpoint string, o loadOptions, window func(from, until time.Time)) (*loadReport, error) {
	// One pool of connections for every session, as large as the sessions,
	// so that no call waits for a connection the client closed (the
	// default keeps two idle per host).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = o.sessions, o.sessions
	defer transport.CloseIdleConnections()
	sessions := make([]*loadSession, o.sessions)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				_ = s.cs.Close()
			}
		}
	}()
	for i := range sessions {
		s := &loadSession{role: roleSupport, tenant: []string{"acme", "globex"}[i%2], kinds: map[callKind]int{},
			took: map[callKind][]time.Duration{}, rng: rand.New(rand.NewPCG(uint64(i), 16))} //nolint:gosec // G404: a workload's mix, not a secret
		extra := map[string]any{"org_id": s.tenant, "roles": []string{"support"}, "scope": "orders:write"}
		if i%4 == 3 {
			s.role = roleAuditor
			extra = map[string]any{"org_id": s.tenant, "roles": []string{"auditor"}}
		}
		token, err := iss.Token(devissuer.Claims{Issuer: issuerURL, Subject: fmt.Sprintf("load-%s-%d@%s", s.role, i, s.tenant),
			Audience: "orangerail", Expiry: time.Now().Add(time.Hour), Extra: extra})
		if err != nil {
			return nil, err
		}
		// The server is stateless: it sends nothing unasked, so no session
		// holds a standalone SSE stream open.
		s.cs, err = sdk.NewClient(&sdk.Implementation{Name: "orangerail-load", Version: "1"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token, transport}},
				MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return nil, fmt.Errorf("session %d: connect: %w", i, err)
		}
		sessions[i] = s
	}
	from := time.Now().Add(o.warmup)
	until := from.Add(o.duration)
	window(from, until)
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.loop(ctx, from, until) })
	}
	wg.Wait()
	r := &loadReport{elapsed: until.Sub(from), kinds: map[callKind]int{}, byKind: map[callKind][]time.Duration{}}
	for _, s := range sessions {
		for k, took := range s.took {
			r.measured = append(r.measured, took...)
			r.byKind[k] = append(r.byKind[k], took...)
		}
		for k, n := range s.kinds {
			r.kinds[k] += n
		}
		r.errors += s.errors
		r.samples = append(r.samples, s.samples...)
	}
	r.samples = r.samples[:min(len(r.samples), 10)]
	slices.Sort(r.measured)
	for _, took := range r.byKind {
		slices.Sort(took)
	}
	return r, nil
}

// loop calls until until, timing the calls started from from on.
func (s *loadSession) loop(ctx context.Context, from, until time.Time) {
	mix := supportMix
	if s.role == roleAuditor {
		mix = auditorMix
	}
	for i := 0; ; i++ {
		start := time.Now()
		if !start.Before(until) || ctx.Err() != nil {
			return
		}
		kind := s.pick(mix, i)
		params := s.params(kind, i)
		res, err := s.cs.CallTool(ctx, params)
		took := time.Since(start)
		s.kinds[kind]++
		if problem := s.judge(kind, res, err); problem != "" {
			s.errors++
			if len(s.samples) < 3 {
				s.samples = append(s.samples, fmt.Sprintf("%s (%s %s): %s", kind, s.role, s.tenant, problem))
			}
		}
		if !start.Before(from) {
			s.took[kind] = append(s.took[kind], took)
		}
	}
}

// pick chooses the i-th call's kind: the first calls tour the mix once, as
// an agent exploring would, so that even a short run makes every kind of
// call; then each is drawn by its weight. A poll before anything was
// staged reads an order instead.
func (s *loadSession) pick(mix []weighted, i int) callKind {
	kind := kindOrderGet
	if i < len(mix) {
		kind = mix[i].kind
	} else {
		for n := s.rng.IntN(100); n >= 0 && len(mix) > 0; mix = mix[1:] {
			if n < mix[0].weight {
				kind = mix[0].kind
				break
			}
			n -= mix[0].weight
		}
	}
	if kind == kindCheck && len(s.staged) == 0 {
		return kindOrderGet
	}
	return kind
}

// params are the arguments of the session's i-th call, of kind.
func (s *loadSession) params(kind callKind, i int) *sdk.CallToolParams {
	order := fmt.Sprintf("load-%d", 1+s.rng.IntN(loadOrders))
	var args map[string]any
	switch kind {
	case kindOrderGet:
		args = map[string]any{"id": order}
	case kindOrderList:
		switch i % 3 {
		case 0:
			args = map[string]any{"filters": map[string]any{"status": map[string]any{"in": []string{"pending", "paid"}}}, "sort": "-created_at", "limit": 20}
		case 1:
			args = map[string]any{"filters": map[string]any{"customer_id": map[string]any{"eq": "c-1"}}, "sort": "total_cents", "limit": 10}
		default:
			args = map[string]any{"filters": map[string]any{"status": map[string]any{"eq": "paid"}, "created_at": map[string]any{"gt": "2020-01-01T00:00:00Z"}}, "limit": 50}
		}
	case kindProductList:
		args = map[string]any{"sort": "name"}
	case kindDescribe:
		args = map[string]any{"object": "order"}
	case kindListPolicies:
		args = map[string]any{}
	case kindCancel:
		// A reason of its own: an identical open call would answer the
		// approval it staged before instead of staging one.
		args = map[string]any{"order_id": order, "reason": fmt.Sprintf("the customer asked (%d)", i)}
	case kindUpdateAddress:
		args = map[string]any{"order_id": order, "address": fmt.Sprintf("%d Load Avenue", i)}
	case kindAddNote:
		args = map[string]any{"order_id": order, "note": fmt.Sprintf("called the customer (%d)", i)}
	case kindCheck:
		args = map[string]any{"approvalId": s.staged[s.rng.IntN(len(s.staged))]}
	}
	return &sdk.CallToolParams{Name: string(kind), Arguments: args}
}

// judge says what is wrong with a call's answer, or "" when it is what
// the workload expects: a read's or describe's data, a staged write's
// approval_pending, a note's execution, a poll's pending.
func (s *loadSession) judge(kind callKind, res *sdk.CallToolResult, err error) string {
	if err != nil {
		return err.Error() // the transport's, HTTP's or JSON-RPC's
	}
	answer, _ := res.StructuredContent.(map[string]any)
	if res.IsError || answer == nil {
		return "isError: " + contentText(res)
	}
	status, _ := answer["status"].(string)
	switch kind {
	case kindCancel, kindUpdateAddress:
		id, _ := answer["approvalId"].(string)
		if status != string(engine.StatusApprovalPending) || id == "" {
			return "not staged: " + contentText(res)
		}
		s.staged = append(s.staged, id)
	case kindAddNote:
		if status != "executed" {
			return "not executed: " + contentText(res)
		}
	case kindCheck:
		if status != string(engine.StatusPending) {
			return "not pending: " + contentText(res)
		}
	}
	return ""
}

// contentText is an answer's text content, for an error message.
func contentText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// bearerTransport sends a token on every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
