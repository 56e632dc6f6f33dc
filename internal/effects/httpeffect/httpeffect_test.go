package httpeffect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/effects/effecttest"
	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

var quiet = slog.New(slog.DiscardHandler)

func agent(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: []string{"support"}, Kind: engine.ActorAgent}
}

func approver(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "alice@example.com", Tenant: tenant, Roles: []string{"approver"}, Kind: engine.ActorHuman}
}

// seen is one request the upstream received.
type seen struct {
	method, rawPath, query string
	header                 http.Header
	body                   string
}

// upstream is a real HTTP server answering each request by its number
// (from 1) with answer.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seen
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newUpstream(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{answer: answer}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seen{method: r.Method, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)})
		n := len(u.seen)
		u.mu.Unlock()
		u.answer(n, w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// statuses answers the nth request with the nth status, repeating the
// last, and a JSON body.
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		code := codes[min(n, len(codes))-1]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"attempt": %d, "secret_detail": "upstream-internal-%d"}`, n, code)
	}
}

const defaultExecute = `upstream: carrier
method: POST
path: /orders/{order_id}/labels
query: {express: ":express", source: agent}
headers: {X-Weight: ":weight"}
body: {order: ":order_id", weight: ":weight", note: ":note", kind: return}
deadline: 8s
timeout: 1s
`

// harness is an engine on its own database serving one http action,
// create_label, against base.
type harness struct {
	e       *engine.Engine
	admin   *pgxpool.Pool
	runtime *pgxpool.Pool
	cfg     *ontology.Config
}

func newHarness(t *testing.T, base, execute, policy string) *harness {
	t.Helper()
	var ind strings.Builder
	for line := range strings.Lines(execute) {
		ind.WriteString("        " + line)
	}
	src := fmt.Sprintf(`service: shop
upstreams:
  carrier:
    base_url: %q
limits: {max_input_bytes: 8388608}
actions:
  create_label:
    description: Create a return label.
    input:
      type: object
      properties: {order_id: {type: string}, weight: {type: number}, express: {type: boolean}, note: {type: string}}
      required: [order_id]
      additionalProperties: false
    policy: %s
    execute:
      http:
%s`, base, policy, ind.String())
	cfg, err := ontology.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	url := testdb.New(t)
	h := &harness{admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url), cfg: cfg}
	h.e, err = engine.New(engine.Config{Ontology: cfg, Store: h.runtime, Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// attemptRecord is an effect_attempt record's attempt.
type attemptRecord = effecttest.Attempt

// audit returns the phases of correlation's records, its attempts, and
// every record's text.
func (h *harness) audit(t *testing.T, tenant, correlation string) ([]string, []attemptRecord, string) {
	t.Helper()
	return effecttest.Audit(t, h.admin, tenant, correlation)
}

// verify runs both verifiers: the chain holds, and the only open
// execution is unfinished (when given).
func (h *harness) verify(t *testing.T, tenant, unfinished string) {
	t.Helper()
	effecttest.Verify(t, h.runtime, h.admin, tenant, unfinished)
}

func statusesOf(attempts []attemptRecord) []int {
	out := make([]int, len(attempts))
	for i, a := range attempts {
		out[i] = a.Status
	}
	return out
}

func failuresOf(attempts []attemptRecord) []string {
	out := make([]string, len(attempts))
	for i, a := range attempts {
		out[i] = a.Failure
	}
	return out
}

// TestGovernedCall: an http action is staged, decided by a person and
// executed once by the poll that finds it approved; the request binds the
// input by name — the path segment escaped, the query and header as the
// values' text, the body as JSON — and carries an idempotency key.
func TestGovernedCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"label_id": "L-1", "cost": 12345678901234567890}`)
	})
	h := newHarness(t, up.URL+"/api/", defaultExecute, "{roles: [support], approval: required}")
	args := json.RawMessage(`{"order_id": "o/1 ..?x", "weight": 2.5, "express": true, "note": "it's \"fragile\""}`)
	out := h.e.Call(ctx, agent("acme"), "create_label", args)
	if out.Status != engine.StatusApprovalPending {
		t.Fatalf("status %s (%v)", out.Status, out.Err)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream was called %d times before a decision", n)
	}
	id := out.ApprovalID.String()
	v, err := h.e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if d := h.e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest}); d.Status != engine.StatusOK {
		t.Fatalf("decide: %s %v", d.Status, d.Err)
	}
	out = h.e.Check(ctx, agent("acme"), id)
	if out.Status != engine.StatusOK {
		t.Fatalf("check: %s %v", out.Status, out.Err)
	}
	if string(out.Data) != `{"body":{"label_id":"L-1","cost":12345678901234567890},"status":201}` {
		t.Fatalf("data %s", out.Data)
	}
	if again := h.e.Check(ctx, agent("acme"), id); again.Status != engine.StatusConsumed {
		t.Fatalf("second check: %s", again.Status)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.method != "POST" || r.rawPath != "/api/orders/o%2F1%20..%3Fx/labels" || r.query != "express=true&source=agent" ||
		r.header.Get("X-Weight") != "2.5" || r.header.Get("Content-Type") != "application/json" || len(r.header.Get("Idempotency-Key")) != 36 {
		t.Fatalf("request %+v", r)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body["order"] != "o/1 ..?x" || body["weight"] != 2.5 ||
		body["note"] != `it's "fragile"` || body["kind"] != "return" {
		t.Fatalf("body %s (%v)", r.body, err)
	}
	phases, attempts, _ := h.audit(t, "acme", id)
	if want := []string{"staged", "approved", "execution_started", "effect_attempt", "execution_succeeded"}; !slices.Equal(phases, want) {
		t.Fatalf("phases %v", phases)
	}
	if len(attempts) != 1 || attempts[0].Number != 1 || attempts[0].Status != 201 || attempts[0].Failure != "" || !attempts[0].Sent {
		t.Fatalf("attempts %+v", attempts)
	}
	h.verify(t, "acme", "")
}

// TestBodiesTheRecordCannotHold: a success whose body the audit record
// could not carry as it is — JSON Postgres' jsonb refuses (\u0000, a lone
// surrogate), text with a NUL — is answered and recorded as its text, or
// in base64 where even that cannot be held, never left an execution
// without its end (outcome_unknown) by a record Postgres refuses.
func TestBodiesTheRecordCannotHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bodies := []struct {
		contentType, body string
		asText            bool
	}{
		{"application/json", `{"a":"x\u0000y"}`, true},
		{"application/json", `{"a":"\ud800"}`, true},
		{"text/plain", "a\x00b", false},
		{"application/json", "{\"a\":\"\x00\"}", false},
		// JSON jsonb takes and the record's canonical form (RFC 8785)
		// does not: a member named twice, nesting past its depth, a number
		// past its length. Kept as text, the record made.
		{"application/json", `{"id":"L-1","id":"L-2"}`, true},
		{"application/json", `{"a":{"b":1,"b":2}}`, true},
		{"application/json", strings.Repeat("[", 600) + strings.Repeat("]", 600), true},
		{"application/json", `{"n":1` + strings.Repeat("0", 600) + `}`, true},
	}
	// Two calls an upstream: the action's default budget is two a minute.
	for i := 0; i < len(bodies); i += 2 {
		pair := bodies[i : i+2]
		up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			b := pair[(n-1)%len(pair)]
			w.Header().Set("Content-Type", b.contentType)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, b.body)
		})
		h := newHarness(t, up.URL, defaultExecute, "{roles: [support]}")
		for j, b := range pair {
			out := h.e.Call(ctx, agent("acme"), "create_label", fmt.Appendf(nil, `{"order_id": "o-%d"}`, j))
			var data struct {
				Status int     `json:"status"`
				Body   *string `json:"body"`
				Base64 []byte  `json:"body_base64"`
			}
			ok := out.Status == engine.StatusOK && json.Unmarshal(out.Data, &data) == nil && data.Status == 201
			if b.asText {
				ok = ok && data.Body != nil && *data.Body == b.body
			} else {
				ok = ok && string(data.Base64) == b.body
			}
			shown := b.body[:min(len(b.body), 40)]
			if !ok {
				t.Errorf("%q: %s %.200s (%v)", shown, out.Status, out.Data, out.Err)
				continue
			}
			phases, _, _ := h.audit(t, "acme", out.CorrelationID)
			if want := []string{"execution_started", "effect_attempt", "execution_succeeded"}; !slices.Equal(phases, want) {
				t.Errorf("%q: phases %v", shown, phases)
			}
		}
		h.verify(t, "acme", "")
	}
}

// TestRetries: what is attempted again, how often, with which key, and
// how each invocation ends — against a real server answering by script.
func TestRetries(t *testing.T) {
	t.Parallel()
	retryAfterOnce := func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		statuses(200)(n, w, r)
	}
	retryAfterDate := func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		statuses(200)(n, w, r)
	}
	retryAfterPastDeadline := func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	tests := []struct {
		name     string
		execute  string // replaces lines of defaultExecute: "key: value" lines appended
		answer   func(int, http.ResponseWriter, *http.Request)
		status   engine.Status
		diag     engine.Diagnostic
		statuses []int
		minWait  time.Duration
	}{
		{"gateways then success", "", statuses(503, 502, 201), engine.StatusOK, "", []int{503, 502, 201}, 0},
		{"429 with Retry-After seconds", "", retryAfterOnce, engine.StatusOK, "", []int{429, 200}, time.Second},
		{"503 with Retry-After date", "", retryAfterDate, engine.StatusOK, "", []int{503, 200}, time.Second},
		{"Retry-After past the deadline", "", retryAfterPastDeadline, engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{429}, 0},
		{"503 throughout", "", statuses(503), engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{503, 503, 503}, 0},
		{"a gateway that may have passed it on", "", statuses(504), engine.StatusOutcomeUnknown, "", []int{504, 504, 504}, 0},
		{"500 is never retried, and may have acted", "", statuses(500, 201), engine.StatusOutcomeUnknown, "", []int{500}, 0},
		{"500 on a read is a failure", "method: GET\n", statuses(500, 200), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{500}, 0},
		{"404 is refused, once", "", statuses(404, 201), engine.StatusFailed, engine.DiagnosticUpstreamRejected, []int{404}, 0},
		{"409 after a 502: in doubt", "", statuses(502, 409), engine.StatusOutcomeUnknown, "", []int{502, 409}, 0},
		{"retry never", "retry: never\n", statuses(503, 201), engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{503}, 0},
		{"max_attempts 2", "max_attempts: 2\n", statuses(503), engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{503, 503}, 0},
		{"a declared success status", "success: [202]\n", statuses(200), engine.StatusFailed, engine.DiagnosticUpstreamRejected, []int{200}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			up := newUpstream(t, tt.answer)
			execute := defaultExecute
			if strings.HasPrefix(tt.execute, "method: GET") {
				execute = strings.Replace(strings.Replace(execute, "method: POST\n", "", 1), "body: {order: \":order_id\", weight: \":weight\", note: \":note\", kind: return}\n", "", 1)
			}
			h := newHarness(t, up.URL, execute+tt.execute, "{roles: [support]}")
			start := time.Now()
			out := h.e.Call(ctx, agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1", "weight": 1}`))
			elapsed := time.Since(start)
			if out.Status != tt.status || out.Diagnostic != tt.diag {
				t.Fatalf("status %s diagnostic %q, want %s %q (%v)", out.Status, out.Diagnostic, tt.status, tt.diag, out.Err)
			}
			if elapsed < tt.minWait {
				t.Fatalf("done in %s: Retry-After asked for %s", elapsed, tt.minWait)
			}
			reqs := up.requests()
			if len(reqs) != len(tt.statuses) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tt.statuses))
			}
			keys := map[string]bool{}
			for _, r := range reqs {
				keys[r.header.Get("Idempotency-Key")] = true
			}
			if get := strings.Contains(tt.execute, "GET") || strings.Contains(tt.execute, "retry: never"); get && !keys[""] || !get && (len(keys) != 1 || keys[""]) {
				t.Fatalf("keys %v: want one key on every attempt of a keyed call, none otherwise", keys)
			}
			phases, attempts, entries := h.audit(t, "acme", out.CorrelationID)
			if got := statusesOf(attempts); !slices.Equal(got, tt.statuses) {
				t.Fatalf("recorded statuses %v, want %v", got, tt.statuses)
			}
			for i, a := range attempts {
				if a.Number != i+1 || !a.Sent {
					t.Fatalf("attempt %d recorded as %+v", i+1, a)
				}
			}
			end := phases[len(phases)-1]
			switch tt.status {
			case engine.StatusOutcomeUnknown:
				if end != "effect_attempt" {
					t.Fatalf("an unknown outcome ended with %s", end)
				}
				h.verify(t, "acme", out.CorrelationID)
			default:
				if want := map[engine.Status]string{engine.StatusOK: "execution_succeeded", engine.StatusFailed: "execution_failed"}[tt.status]; end != want {
					t.Fatalf("phases %v", phases)
				}
				h.verify(t, "acme", "")
			}
			if tt.status == engine.StatusFailed && len(reqs) > 0 && tt.statuses[0] != 429 {
				// The upstream's words are the operators', never the agent's.
				if !strings.Contains(entries, "upstream-internal-") {
					t.Fatalf("the failure's record does not keep the upstream's answer for operators: %s", entries)
				}
			}
		})
	}
}

// TestKeysPerInvocation: each invocation has a key of its own, held
// across its attempts.
func TestKeysPerInvocation(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { statuses(503, 201, 503, 201)(n, w, r) })
	h := newHarness(t, up.URL, defaultExecute, "{roles: [support]}")
	args := json.RawMessage(`{"order_id": "o-1"}`)
	for range 2 {
		if out := h.e.Call(context.Background(), agent("acme"), "create_label", args); out.Status != engine.StatusOK {
			t.Fatalf("status %s (%v)", out.Status, out.Err)
		}
	}
	reqs := up.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	k := func(i int) string { return reqs[i].header.Get("Idempotency-Key") }
	if k(0) == "" || k(0) != k(1) || k(2) != k(3) || k(1) == k(2) {
		t.Fatalf("keys %q %q %q %q: want one per invocation, the same across its attempts", k(0), k(1), k(2), k(3))
	}
	h.verify(t, "acme", "")
}

// TestSlowAndLarge: an attempt's timeout covers the headers and the body;
// a body over max_bytes is never returned; a success whose answer could
// not be read whole is still a success for a write.
func TestSlowAndLarge(t *testing.T) {
	t.Parallel()
	slowHeaders := func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}
	slowBody := func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"label`)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	}
	large := func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, strings.Repeat("x", 2048))
	}
	get := strings.Replace(strings.Replace(defaultExecute, "method: POST\n", "", 1), "body: {order: \":order_id\", weight: \":weight\", note: \":note\", kind: return}\n", "", 1) + "method: GET\n"
	tests := []struct {
		name     string
		execute  string
		answer   func(int, http.ResponseWriter, *http.Request)
		status   engine.Status
		diag     engine.Diagnostic
		failures []string
		data     string
	}{
		{"slow headers on a keyed write: retried, then in doubt", defaultExecute, slowHeaders, engine.StatusOutcomeUnknown, "", []string{"timeout", "timeout", "timeout"}, ""},
		{"slow headers, retry never: in doubt at once", defaultExecute + "retry: never\n", slowHeaders, engine.StatusOutcomeUnknown, "", []string{"timeout"}, ""},
		{"slow headers on a read: a timeout", get, slowHeaders, engine.StatusFailed, engine.DiagnosticUpstreamTimeout, []string{"timeout", "timeout", "timeout"}, ""},
		{"slow body on a write: done, its answer withheld", defaultExecute, slowBody, engine.StatusOK, "", []string{"timeout"}, `{"body_withheld":"timeout","status":201}`},
		{"slow body on a read: a timeout", get, slowBody, engine.StatusFailed, engine.DiagnosticUpstreamTimeout, []string{"timeout", "timeout", "timeout"}, ""},
		{"a large body on a read", get + "max_bytes: 1024\n", large, engine.StatusFailed, engine.DiagnosticUpstreamTooLarge, []string{"body_too_large"}, ""},
		{"a large body on a write", defaultExecute + "max_bytes: 1024\n", large, engine.StatusOK, "", []string{"body_too_large"}, `{"body_withheld":"body_too_large","status":200}`},
		{"a body at the cap", get + "max_bytes: 2048\n", large, engine.StatusOK, "", []string{""}, `{"body":"` + strings.Repeat("x", 2048) + `","status":200}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, tt.answer)
			h := newHarness(t, up.URL, strings.Replace(tt.execute, "deadline: 8s\ntimeout: 1s\n", "deadline: 5s\ntimeout: 300ms\n", 1), "{roles: [support]}")
			out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
			if out.Status != tt.status || out.Diagnostic != tt.diag {
				t.Fatalf("status %s diagnostic %q, want %s %q (%v)", out.Status, out.Diagnostic, tt.status, tt.diag, out.Err)
			}
			if tt.data != "" && string(out.Data) != tt.data {
				t.Fatalf("data %s", out.Data)
			}
			_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
			if got := failuresOf(attempts); !slices.Equal(got, tt.failures) {
				t.Fatalf("attempt failures %v, want %v", got, tt.failures)
			}
			if n := len(up.requests()); n != len(tt.failures) {
				t.Fatalf("%d requests for %d attempts", n, len(tt.failures))
			}
			unfinished := ""
			if tt.status == engine.StatusOutcomeUnknown {
				unfinished = out.CorrelationID
			}
			h.verify(t, "acme", unfinished)
		})
	}
}

// rawUpstream is a TCP listener that reads each request's head and then
// does what drop says: the failures an httptest server cannot make.
func rawUpstream(t *testing.T, drop func(c *net.TCPConn, r *bufio.Reader)) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var count atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			count.Add(1)
			go drop(c.(*net.TCPConn), bufio.NewReader(c))
		}
	}()
	return "http://" + l.Addr().String(), &count
}

// readHead reads a request's head; it returns the Content-Length.
func readHead(r *bufio.Reader) int {
	length := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return length
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &length)
		}
	}
}

// reset closes c with a TCP RST.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// TestDroppedConnections: a request never sent in full is repeated and,
// when nothing answers, a failure; a request sent in full and then cut
// off is repeated only under a policy that makes it harmless, and is in
// doubt unless it was a read.
func TestDroppedConnections(t *testing.T) {
	t.Parallel()
	afterWritten := func(c *net.TCPConn, r *bufio.Reader) {
		n := readHead(r)
		_, _ = io.CopyN(io.Discard, r, int64(n))
		reset(c)
	}
	beforeWritten := func(c *net.TCPConn, r *bufio.Reader) {
		readHead(r) // the body, megabytes of it, is never read
		reset(c)
	}
	get := strings.Replace(strings.Replace(defaultExecute, "method: POST\n", "", 1), "body: {order: \":order_id\", weight: \":weight\", note: \":note\", kind: return}\n", "", 1) + "method: GET\n"
	big := strings.Repeat("n", 6<<20)
	tests := []struct {
		name     string
		drop     func(*net.TCPConn, *bufio.Reader)
		execute  string
		note     string
		status   engine.Status
		diag     engine.Diagnostic
		failures []string
		sent     bool
	}{
		{"reset after a keyed write was sent", afterWritten, defaultExecute, "", engine.StatusOutcomeUnknown, "", []string{"connection_dropped", "connection_dropped", "connection_dropped"}, true},
		{"reset after a write sent, retry never", afterWritten, defaultExecute + "retry: never\n", "", engine.StatusOutcomeUnknown, "", []string{"connection_dropped"}, true},
		{"reset after a read was sent", afterWritten, get, "", engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []string{"connection_dropped", "connection_dropped", "connection_dropped"}, true},
		{"reset before the write was sent", beforeWritten, defaultExecute, big, engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []string{"connect_failed", "connect_failed", "connect_failed"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, count := rawUpstream(t, tt.drop)
			h := newHarness(t, base, tt.execute, "{roles: [support]}")
			args, _ := json.Marshal(map[string]string{"order_id": "o-1", "note": tt.note})
			out := h.e.Call(context.Background(), agent("acme"), "create_label", args)
			if out.Status != tt.status || out.Diagnostic != tt.diag {
				t.Fatalf("status %s diagnostic %q, want %s %q (%v)", out.Status, out.Diagnostic, tt.status, tt.diag, out.Err)
			}
			_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
			if got := failuresOf(attempts); !slices.Equal(got, tt.failures) {
				t.Fatalf("attempt failures %v, want %v", got, tt.failures)
			}
			for _, a := range attempts {
				if a.Sent != tt.sent || a.Status != 0 {
					t.Fatalf("attempt %+v, want sent %v", a, tt.sent)
				}
			}
			if n := int(count.Load()); n != len(tt.failures) {
				t.Fatalf("%d connections for %d attempts", n, len(tt.failures))
			}
			unfinished := ""
			if tt.status == engine.StatusOutcomeUnknown {
				unfinished = out.CorrelationID
				if !engine.IsOutcomeUnknown(out.Err) {
					t.Fatalf("err %v", out.Err)
				}
			}
			h.verify(t, "acme", unfinished)
		})
	}

	// Nothing listening: refused, attempted again, a failure.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	h := newHarness(t, closed, defaultExecute, "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
	if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamUnavailable || errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("refused: %s %q %v", out.Status, out.Diagnostic, out.Err)
	}
	if strings.Contains(out.Err.Error(), closed) {
		t.Fatalf("the error names the URL: %v", out.Err)
	}
	_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
	if got := failuresOf(attempts); !slices.Equal(got, []string{"connect_failed", "connect_failed", "connect_failed"}) {
		t.Fatalf("attempts %v", got)
	}
	h.verify(t, "acme", "")
}

// TestUnrecordedAttemptStops: when an attempt cannot be recorded, no
// other is made — the audit log holds every attempt made.
func TestUnrecordedAttemptStops(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, statuses(503, 201))
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: s
upstreams:
  carrier: {base_url: %q}
actions:
  create_label:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: POST, path: "/orders/{order_id}"}}
`, up.URL))
	if err != nil {
		t.Fatal(err)
	}
	effect, err := httpeffect.New("create_label", cfg.Actions["create_label"])
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("the audit log is unavailable")
	var recorded []engine.EffectAttempt
	_, err = effect.Run(context.Background(), &engine.EffectCall{Input: json.RawMessage(`{"order_id":"o-1"}`),
		RecordAttempt: func(_ context.Context, a engine.EffectAttempt) error {
			recorded = append(recorded, a)
			return full
		}})
	if !errors.Is(err, full) || engine.IsOutcomeUnknown(err) || len(up.requests()) != 1 || len(recorded) != 1 || recorded[0].Status != 503 {
		t.Fatalf("err %v, %d requests, recorded %+v", err, len(up.requests()), recorded)
	}
}

// TestAHeaderNetHTTPCannotSendIsUnplaceable: an input bound to a header
// that holds a control character net/http refuses to send — not only CR,
// LF or NUL: \x01, DEL — is upstream_request_unplaceable, nothing sent or
// attempted. It was let through to the round trip, which refused it: the
// call was recorded as connect_failed attempts, retried with backoff, and
// reported upstream_unavailable, blaming the upstream and spending the
// budget.
func TestAHeaderNetHTTPCannotSendIsUnplaceable(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, statuses(201))
	execute := strings.Replace(defaultExecute, `headers: {X-Weight: ":weight"}`, `headers: {X-Note: ":note"}`, 1)
	h := newHarness(t, up.URL, execute, "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1", "note": "a\u0001b"}`))
	if out.Diagnostic != engine.DiagnosticUpstreamUnplaceable {
		t.Errorf("%s %s (%v), want %s", out.Status, out.Diagnostic, out.Err, engine.DiagnosticUpstreamUnplaceable)
	}
	_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
	if len(attempts) != 0 {
		t.Errorf("attempts recorded for a request that could never be sent: %+v", attempts)
	}
}

// TestAssembledDotSegmentsAreUnplaceable: no segment the template
// assembles from values and their neighbours — another parameter, a
// literal dot — is a dot segment a server would resolve to another path:
// a dot segment is all dots, so each value in it would be "." or "..",
// which build refuses whatever stands beside it.
func TestAssembledDotSegmentsAreUnplaceable(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, statuses(201))
	tests := []struct {
		path, input string
		ok          bool
	}{
		{"/things/{a}{b}/x", `{"a": ".", "b": "."}`, false},
		{"/things/{a}{b}", `{"a": ".", "b": "."}`, false},
		{"/things/{a}./x", `{"a": "."}`, false},
		{"/things/.{a}", `{"a": "."}`, false},
		{"/things/{a}{b}/x", `{"a": "..", "b": "."}`, false},
		{"/things/{a}{b}/x", `{"a": "x", "b": "y"}`, true},
	}
	for _, tt := range tests {
		cfg, err := ontology.Parse(fmt.Appendf(nil, `service: s
upstreams:
  carrier: {base_url: %q}
actions:
  touch:
    description: d
    input: {type: object, properties: {a: {type: string}, b: {type: string}}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: POST, path: %q}}
`, up.URL, tt.path))
		if err != nil {
			t.Fatal(err)
		}
		effect, err := httpeffect.New("touch", cfg.Actions["touch"])
		if err != nil {
			t.Fatal(err)
		}
		before := len(up.requests())
		_, err = effect.Run(context.Background(), &engine.EffectCall{Input: json.RawMessage(tt.input)})
		reached := len(up.requests()) > before
		if tt.ok {
			if err != nil || !reached {
				t.Errorf("%s %s: %v, reached %v", tt.path, tt.input, err, reached)
			}
			continue
		}
		if reached {
			t.Errorf("%s %s reached the upstream as %s", tt.path, tt.input, up.requests()[before].rawPath)
		}
		if err == nil || !strings.Contains(err.Error(), "cannot be placed") {
			t.Errorf("%s %s: %v, want the input unplaceable", tt.path, tt.input, err)
		}
	}
}

// TestTransportNeverRepeatsAnAttempt: every request the upstream receives
// is an attempt the engine chose and recorded. net/http's Transport sends
// a request again by itself when a reused connection ends before an
// answer and the request is one it counts replayable — a GET, or one
// without a body carrying an Idempotency-Key — so an upstream that read
// the request and then closed the connection received it twice, the
// audit log showing one attempt.
func TestTransportNeverRepeatsAnAttempt(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "POST", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			var received atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if received.Add(1) == 2 {
					// The second request, read whole, is never answered:
					// its connection, reused from the first, is closed.
					c, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						_ = c.Close()
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok": true}`)
			}))
			t.Cleanup(srv.Close)
			effect := touchOrder(t, fmt.Sprintf("{base_url: %q}", srv.URL), method)
			var recorded []engine.EffectAttempt
			for i := range 2 {
				_, err := effect.Run(context.Background(), &engine.EffectCall{Input: fmt.Appendf(nil, `{"order_id":"o-%d"}`, i),
					RecordAttempt: func(_ context.Context, a engine.EffectAttempt) error {
						recorded = append(recorded, a)
						return nil
					}})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if n := int(received.Load()); n != len(recorded) {
				t.Fatalf("the upstream received %d requests, and %d attempts were recorded: %+v", n, len(recorded), recorded)
			}
		})
	}
}

// touchOrder is an action's effect sending method to the upstream's
// /orders/{order_id}; upstream is its YAML flow mapping (its base_url, a
// ca_file where it has one).
func touchOrder(t *testing.T, upstream, method string) engine.Effect {
	t.Helper()
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: s
upstreams:
  carrier: %s
actions:
  touch:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: %s, path: "/orders/{order_id}"}}
`, upstream, method))
	if err != nil {
		t.Fatal(err)
	}
	effect, err := httpeffect.New("touch", cfg.Actions["touch"])
	if err != nil {
		t.Fatal(err)
	}
	return effect
}

// TestBodylessReadsKeepTheirConnection: a GET, HEAD or DELETE is made one
// net/http never repeats without leaving the pool — its calls share one
// connection — and is still sent without a body, chunked or not.
func TestBodylessReadsKeepTheirConnection(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "HEAD", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			var conns atomic.Int32
			var bodied []string
			var mu sync.Mutex
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.ContentLength != 0 || len(r.TransferEncoding) > 0 || r.Header.Get("Content-Length") != "" {
					mu.Lock()
					bodied = append(bodied, fmt.Sprintf("%s length %d %v", r.URL.Path, r.ContentLength, r.TransferEncoding))
					mu.Unlock()
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok": true}`)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			effect := touchOrder(t, fmt.Sprintf("{base_url: %q}", srv.URL), method)
			for i := range 3 {
				if _, err := effect.Run(context.Background(), &engine.EffectCall{Input: fmt.Appendf(nil, `{"order_id":"o-%d"}`, i),
					RecordAttempt: func(context.Context, engine.EffectAttempt) error { return nil }}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("3 calls opened %d connections, want 1", n)
			}
			if len(bodied) > 0 {
				t.Errorf("requests sent with a body: %v", bodied)
			}
		})
	}
}

// TestAttemptsRecordTheirKey: each effect_attempt record holds the
// idempotency key its request carried, so that an operator can find the
// attempt in the upstream's own log; an attempt that sent none records
// none. The key was sent and recorded nowhere.
func TestAttemptsRecordTheirKey(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, statuses(503, 201, 201))
	h := newHarness(t, up.URL, defaultExecute, "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
	if out.Status != engine.StatusOK {
		t.Fatalf("status %s (%v)", out.Status, out.Err)
	}
	reqs := up.requests()
	_, attempts, _ := h.audit(t, "acme", out.CorrelationID)
	if len(attempts) != 2 || len(reqs) != 2 {
		t.Fatalf("%d attempts, %d requests", len(attempts), len(reqs))
	}
	for i, a := range attempts {
		if sent := reqs[i].header.Get("Idempotency-Key"); sent == "" || a.IdempotencyKey != sent {
			t.Errorf("attempt %d records the key %q; it sent %q", a.Number, a.IdempotencyKey, sent)
		}
	}
	h.verify(t, "acme", "")

	never := newHarness(t, up.URL, defaultExecute+"retry: never\n", "{roles: [support]}")
	out = never.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-2"}`))
	_, attempts, entries := never.audit(t, "acme", out.CorrelationID)
	if out.Status != engine.StatusOK || len(attempts) != 1 || strings.Contains(entries, "idempotency_key") {
		t.Fatalf("a call sending no key: %s, attempts %+v", out.Status, attempts)
	}
	never.verify(t, "acme", "")
}
