package soapeffect_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/effects/effecttest"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestMain fails the package's tests if any goroutine they started is
// still running when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	ns11 = "http://schemas.xmlsoap.org/soap/envelope/"
	ns12 = "http://www.w3.org/2003/05/soap-envelope"
	opNS = "urn:carrier:labels"
)

func agent(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: []string{"support"}, Kind: engine.ActorAgent}
}

func approver(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "alice@example.com", Tenant: tenant, Roles: []string{"approver"}, Kind: engine.ActorHuman}
}

// seen is one request the upstream received.
type seen struct {
	method, path string
	header       http.Header
	body         string
}

// upstream is a real SOAP server answering each request by its number
// (from 1) with answer.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seen
	answer func(n int, w http.ResponseWriter)
}

func newUpstream(t *testing.T, answer func(n int, w http.ResponseWriter)) *upstream {
	t.Helper()
	u := &upstream{answer: answer}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seen{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
		n := len(u.seen)
		u.mu.Unlock()
		u.answer(n, w)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// envelope answers status with an envelope of ns holding body.
func envelope(status int, ns, body string) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `<?xml version="1.0"?><env:Envelope xmlns:env=%q><env:Header/><env:Body>%s</env:Body></env:Envelope>`, ns, body)
	}
}

// script answers the nth request with the nth answer, repeating the last.
func script(answers ...func(int, http.ResponseWriter)) func(int, http.ResponseWriter) {
	return func(n int, w http.ResponseWriter) { answers[min(n, len(answers))-1](n, w) }
}

func status(code int, retryAfter string) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}
}

const response = `<r:CreateLabelResponse xmlns:r="urn:carrier:labels" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <r:LabelId>L-1</r:LabelId>
  <r:Cost currency="EUR">12.50</r:Cost>
  <r:Line>a</r:Line><r:Line>b</r:Line>
  <r:Note xsi:nil="true"/>
  <r:Empty/>
</r:CreateLabelResponse>`

const wantResult = `{"body":{"CreateLabelResponse":{"Cost":{"#text":"12.50","@currency":"EUR"},"Empty":"","LabelId":"L-1","Line":["a","b"],"Note":null}},"status":200}`

func fault11(code, text string) string {
	return fmt.Sprintf(`<env:Fault><faultcode>env:%s</faultcode><faultstring>%s</faultstring></env:Fault>`, code, text)
}

func fault12(code, text string) string {
	return fmt.Sprintf(`<env:Fault><env:Code><env:Value>env:%s</env:Value></env:Code><env:Reason><env:Text xml:lang="en">%s</env:Text></env:Reason></env:Fault>`, code, text)
}

// soapExecute is the soap action's execute, in version.
func soapExecute(version string) string {
	return fmt.Sprintf(`upstream: carrier
path: /LabelService.svc
version: %q
action: "urn:carrier/CreateLabel"
operation: {namespace: %q, name: CreateLabel}
headers: {X-Order: ":order_id"}
deadline: 8s
timeout: 1s
body:
  - OrderId: ":order_id"
  - Parcel:
      - Weight: ":weight"
      - Kind: return
  - Note: ":note"
  - Line: ":lines"
`, version, opNS)
}

// harness is an engine on its own database serving one soap action,
// create_label, against base.
type harness struct {
	e       *engine.Engine
	admin   *pgxpool.Pool
	runtime *pgxpool.Pool
	logs    *logbuf.Buffer
}

func newHarness(t *testing.T, base, auth, execute, policy string) *harness {
	t.Helper()
	return newHarnessOf(t, base, auth, execute, policy,
		`{order_id: {type: string}, weight: {type: number}, note: {type: string}, lines: {type: array, items: {type: string}}}`)
}

// newHarnessOf is newHarness whose action's input has properties.
func newHarnessOf(t *testing.T, base, auth, execute, policy, properties string) *harness {
	t.Helper()
	var ind strings.Builder
	for line := range strings.Lines(execute) {
		ind.WriteString("        " + line)
	}
	src := fmt.Sprintf(`service: shop
upstreams:
  carrier:
    base_url: %q
%s
actions:
  create_label:
    description: Create a return label.
    input:
      type: object
      properties: %s
      required: [order_id]
      additionalProperties: false
    policy: %s
    execute:
      soap:
%s`, base, auth, properties, policy, ind.String())
	cfg, err := ontology.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	url := testdb.New(t)
	h := &harness{admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url), logs: &logbuf.Buffer{}}
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.e, err = engine.New(engine.Config{Ontology: cfg, Store: h.runtime, Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: logger})
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

// element is a parsed XML element, as the upstream reads what it was sent.
type element struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []element  `xml:",any"`
}

// TestGovernedSOAPCall: a soap action, in each version, is staged, decided
// by a person and executed once; the envelope it sends is the version's,
// with the version's media type and action, the operation in its
// namespace and every value escaped as text — a value holding markup
// arrives as that text — and no idempotency key; the answer's Body is
// returned as JSON.
func TestGovernedSOAPCall(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"1.1", "1.2"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			envNS := map[string]string{"1.1": ns11, "1.2": ns12}[version]
			up := newUpstream(t, envelope(http.StatusOK, envNS, response))
			h := newHarness(t, up.URL+"/api/", "", soapExecute(version), "{roles: [support], approval: required}")
			const evil = `</x><evil/>&amp; "q" 'a' ]]>`
			args := json.RawMessage(fmt.Sprintf(`{"order_id": "o-1", "weight": 2.5, "note": %q, "lines": ["a", "b"]}`, evil))
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
			if string(out.Data) != wantResult {
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
			if r.method != http.MethodPost || r.path != "/api/LabelService.svc" || r.header.Get("X-Order") != "o-1" || r.header.Get("Idempotency-Key") != "" {
				t.Fatalf("request %s %s %v", r.method, r.path, r.header)
			}
			switch version {
			case "1.1":
				if r.header.Get("Content-Type") != "text/xml; charset=utf-8" || r.header.Get("SOAPAction") != `"urn:carrier/CreateLabel"` {
					t.Fatalf("1.1 headers %v", r.header)
				}
			case "1.2":
				if r.header.Get("Content-Type") != `application/soap+xml; charset=utf-8; action="urn:carrier/CreateLabel"` || r.header.Get("SOAPAction") != "" {
					t.Fatalf("1.2 headers %v", r.header)
				}
			}
			var env element
			if err := xml.Unmarshal([]byte(r.body), &env); err != nil {
				t.Fatalf("the envelope sent does not parse: %v\n%s", err, r.body)
			}
			if env.XMLName != (xml.Name{Space: envNS, Local: "Envelope"}) || len(env.Children) != 1 || env.Children[0].XMLName != (xml.Name{Space: envNS, Local: "Body"}) {
				t.Fatalf("envelope %+v", env)
			}
			op := env.Children[0].Children
			if len(op) != 1 || op[0].XMLName != (xml.Name{Space: opNS, Local: "CreateLabel"}) {
				t.Fatalf("operation %+v", op)
			}
			var got []string
			for _, c := range op[0].Children {
				if c.XMLName.Space != opNS {
					t.Fatalf("child %v is not in the operation's namespace", c.XMLName)
				}
				s := c.XMLName.Local + "=" + c.Text
				for _, g := range c.Children {
					s += " " + g.XMLName.Local + "=" + g.Text
				}
				got = append(got, s)
			}
			want := []string{"OrderId=o-1", "Parcel= Weight=2.5 Kind=return", "Note=" + evil, "Line=a", "Line=b"}
			if !slices.Equal(got, want) {
				t.Fatalf("children %q, want %q\n%s", got, want, r.body)
			}
			phases, attempts, _ := h.audit(t, "acme", id)
			if want := []string{"staged", "approved", "execution_started", "effect_attempt", "execution_succeeded"}; !slices.Equal(phases, want) {
				t.Fatalf("phases %v", phases)
			}
			if len(attempts) != 1 || attempts[0].Number != 1 || attempts[0].Status != 200 || attempts[0].Failure != "" || !attempts[0].Sent {
				t.Fatalf("attempts %+v", attempts)
			}
			h.verify(t, "acme", "")
		})
	}
}

// TestSOAPOutcomes: faults are classified by which side failed, their
// words kept for operators only; the transport codes are retried, Retry-After
// honoured, without a key on any attempt — but a write a gateway answered
// 502 or 504 is not, since the gateway may have passed it on; 500 is never retried; an answer
// too large or unreadable is reported truthfully.
func TestSOAPOutcomes(t *testing.T) {
	t.Parallel()
	const secretWords = "internal-db-host-17 refused"
	tests := []struct {
		name     string
		version  string
		extra    string
		answer   func(int, http.ResponseWriter)
		status   engine.Status
		diag     engine.Diagnostic
		statuses []int
		failures []string
		minWait  time.Duration
		words    bool // the upstream's words are kept for operators
		data     string
	}{
		{"1.1 client fault", "1.1", "", envelope(500, ns11, fault11("Client.Validation", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamRejected, []int{500}, []string{"status"}, 0, true, ""},
		{"1.1 server fault", "1.1", "", envelope(500, ns11, fault11("Server", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{500}, []string{"status"}, 0, true, ""},
		{"1.1 server fault on a safe operation", "1.1", "safe: true\n", envelope(500, ns11, fault11("Server", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{500}, []string{"status"}, 0, true, ""},
		{"1.2 sender fault", "1.2", "", envelope(400, ns12, fault12("Sender", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamRejected, []int{400}, []string{"status"}, 0, true, ""},
		{"1.2 receiver fault", "1.2", "safe: true\n", envelope(500, ns12, fault12("Receiver", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{500}, []string{"status"}, 0, true, ""},
		{"a fault in a 200", "1.1", "", envelope(200, ns11, fault11("Client", secretWords)), engine.StatusFailed, engine.DiagnosticUpstreamRejected, []int{200}, []string{"status"}, 0, true, ""},
		{"503 with Retry-After, then success", "1.1", "", script(status(503, "1"), envelope(200, ns11, response)), engine.StatusOK, "", []int{503, 200}, []string{"status", ""}, time.Second, false, wantResult},
		{"429, 502, then success on a safe operation", "1.2", "safe: true\n", script(status(429, ""), status(502, ""), envelope(200, ns12, response)), engine.StatusOK, "", []int{429, 502, 200}, []string{"status", "status", ""}, 0, false, wantResult},
		// A gateway may have passed the write on: no second one is sent.
		{"429, then 502 on a write", "1.2", "", script(status(429, ""), status(502, ""), envelope(200, ns12, response)), engine.StatusOutcomeUnknown, "", []int{429, 502}, []string{"status", "status"}, 0, false, ""},
		{"504 on a write", "1.1", "", script(status(504, ""), envelope(200, ns11, response)), engine.StatusOutcomeUnknown, "", []int{504}, []string{"status"}, 0, false, ""},
		{"503 throughout", "1.1", "", status(503, ""), engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{503, 503, 503}, []string{"status", "status", "status"}, 0, false, ""},
		{"max_attempts 1", "1.1", "max_attempts: 1\n", status(503, ""), engine.StatusFailed, engine.DiagnosticUpstreamUnavailable, []int{503}, []string{"status"}, 0, false, ""},
		{"500 without a fault is never retried", "1.1", "", script(status(500, ""), envelope(200, ns11, response)), engine.StatusOutcomeUnknown, "", []int{500}, []string{"status"}, 0, false, ""},
		{"oversized on a write: withheld", "1.1", "max_bytes: 64\n", envelope(200, ns11, response), engine.StatusOK, "", []int{200}, []string{"body_too_large"}, 0, false, `{"body_withheld":"body_too_large","status":200}`},
		{"oversized on a read: failed", "1.1", "max_bytes: 64\nsafe: true\n", envelope(200, ns11, response), engine.StatusFailed, engine.DiagnosticUpstreamTooLarge, []int{200}, []string{"body_too_large"}, 0, false, ""},
		{"malformed on a write: withheld", "1.1", "", envelope(200, ns11, "<r:Unclosed xmlns:r='urn:x'>"), engine.StatusOK, "", []int{200}, []string{"body_unreadable"}, 0, false, `{"body_withheld":"body_unreadable","status":200}`},
		{"malformed on a read: failed", "1.1", "safe: true\n", envelope(200, ns11, "<r:Unclosed xmlns:r='urn:x'>"), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
		{"a DTD is refused", "1.1", "safe: true\n", func(_ int, w http.ResponseWriter) {
			_, _ = io.WriteString(w, `<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x "boom">]><e:Envelope xmlns:e="`+ns11+`"><e:Body><r xmlns="urn:x">fine</r></e:Body></e:Envelope>`)
		}, engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
		{"nesting past the bound", "1.1", "safe: true\n", envelope(200, ns11, strings.Repeat("<a>", 100)+strings.Repeat("</a>", 100)),
			engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
		// Two attributes of one local name, of two namespaces: both kept.
		{"attributes of one name in two namespaces", "1.1", "safe: true\n", envelope(200, ns11, `<r:Label xmlns:r="urn:x" xmlns:p="urn:p" xmlns:q="urn:q" p:id="1" id="2" q:id="3">L</r:Label>`),
			engine.StatusOK, "", []int{200}, []string{""}, 0, false, `{"body":{"Label":{"#text":"L","@id":"2","@{urn:p}id":"1","@{urn:q}id":"3"}},"status":200}`},
		// XML forbids an attribute written twice; encoding/xml reads it.
		{"an attribute written twice", "1.1", "safe: true\n", envelope(200, ns11, `<r:Label xmlns:r="urn:x" id="1" id="2">L</r:Label>`),
			engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
		{"an attribute written twice under two prefixes", "1.1", "safe: true\n", envelope(200, ns11, `<r:Label xmlns:r="urn:x" xmlns:p="urn:p" xmlns:q="urn:p" p:id="1" q:id="2">L</r:Label>`),
			engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
		{"the other version's envelope", "1.2", "safe: true\n", envelope(200, ns11, response), engine.StatusFailed, engine.DiagnosticUpstreamError, []int{200}, []string{"body_unreadable"}, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			up := newUpstream(t, tt.answer)
			h := newHarness(t, up.URL, "", soapExecute(tt.version)+tt.extra, "{roles: [support]}")
			start := time.Now()
			out := h.e.Call(ctx, agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1", "weight": 1}`))
			elapsed := time.Since(start)
			if out.Status != tt.status || out.Diagnostic != tt.diag {
				t.Fatalf("status %s diagnostic %q, want %s %q (%v)", out.Status, out.Diagnostic, tt.status, tt.diag, out.Err)
			}
			if tt.data != "" && string(out.Data) != tt.data {
				t.Fatalf("data %s, want %s", out.Data, tt.data)
			}
			if elapsed < tt.minWait {
				t.Fatalf("done in %s: Retry-After asked for %s", elapsed, tt.minWait)
			}
			reqs := up.requests()
			if len(reqs) != len(tt.statuses) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tt.statuses))
			}
			for i, r := range reqs {
				for k := range r.header {
					if strings.Contains(strings.ToLower(k), "idempotency") {
						t.Fatalf("attempt %d sent %s: the SOAP path sends no idempotency key", i+1, k)
					}
				}
			}
			phases, attempts, entries := h.audit(t, "acme", out.CorrelationID)
			var statuses []int
			var failures []string
			for i, a := range attempts {
				if a.Number != i+1 || !a.Sent {
					t.Fatalf("attempt %d recorded as %+v", i+1, a)
				}
				statuses, failures = append(statuses, a.Status), append(failures, a.Failure)
			}
			if !slices.Equal(statuses, tt.statuses) || !slices.Equal(failures, tt.failures) {
				t.Fatalf("recorded %v %v, want %v %v", statuses, failures, tt.statuses, tt.failures)
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
			// The fault's words are the operators' — in the audit record
			// and the host log — and never the agent's.
			if strings.Contains(string(out.Data), secretWords) {
				t.Fatalf("the fault string reached the agent: %s", out.Data)
			}
			if tt.words && (!strings.Contains(entries, secretWords) || !strings.Contains(h.logs.String(), secretWords)) {
				t.Fatalf("the fault string is not kept for operators:\n%s\n%s", entries, h.logs.String())
			}
		})
	}
}

// TestFaultStringCapped: a fault's string is kept for operators up to a
// cap, not whole.
func TestFaultStringCapped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 4000)
	up := newUpstream(t, envelope(500, ns11, fault11("Client", long)))
	h := newHarness(t, up.URL, "", soapExecute("1.1"), "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1"}`))
	if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamRejected {
		t.Fatalf("status %s %s (%v)", out.Status, out.Diagnostic, out.Err)
	}
	_, _, entries := h.audit(t, "acme", out.CorrelationID)
	if !strings.Contains(entries, strings.Repeat("x", 512)) || strings.Contains(entries, strings.Repeat("x", 513)) {
		t.Fatalf("the fault string is not capped at 512 bytes: %d x's kept", strings.Count(entries, "x"))
	}
}

// TestSOAPInputRefused: a value XML cannot carry is refused before any
// request, rather than sent changed.
func TestSOAPInputRefused(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, envelope(200, ns11, response))
	h := newHarness(t, up.URL, "", soapExecute("1.1"), "{roles: [support]}")
	out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1", "note": "a\ufffeb"}`))
	if out.Status != engine.StatusFailed || len(up.requests()) != 0 {
		t.Fatalf("status %s, %d requests (%v)", out.Status, len(up.requests()), out.Err)
	}
	if err := out.Err; err == nil || !strings.Contains(err.Error(), "XML cannot carry") {
		t.Fatalf("err %v", err)
	}
}
