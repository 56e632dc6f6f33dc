package httpeffect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// labels is a carrier API holding labels by id: GET /api/labels/{id}
// answers a label's state (404 for none), POST /api/labels/{id}/void
// voids it. It counts each kind of request.
type labels struct {
	mu     sync.Mutex
	state  map[string]string // id -> JSON object
	fail   int               // a status every GET answers, when set
	gets   []string          // raw paths
	voids  int
	header []http.Header
}

func (l *labels) set(id, state string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state[id] = state
}

func (l *labels) counts() (gets []string, voids int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.gets), l.voids
}

func (l *labels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodGet:
		l.gets = append(l.gets, path)
		l.header = append(l.header, r.Header.Clone())
		if l.fail != 0 {
			w.WriteHeader(l.fail)
			_, _ = io.WriteString(w, `{"error": "upstream-internal-detail"}`)
			return
		}
		state, ok := l.state[strings.TrimPrefix(path, "/api/labels/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error": "no such label"}`)
			return
		}
		_, _ = io.WriteString(w, state)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/void"):
		l.voids++
		_, _ = io.WriteString(w, `{"voided": true}`)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// newTargetHarness serves void_label: an action whose target is the
// label as the carrier answers it, voided only while it is open.
func newTargetHarness(t *testing.T) (*harness, *labels) {
	t.Helper()
	l := &labels{state: map[string]string{}}
	up := newUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) { l.ServeHTTP(w, r) })
	cfg := targetConfig(t, up.URL+"/api/", "")
	url := testdb.New(t)
	h := &harness{admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url)}
	var err error
	h.e, err = engine.New(engine.Config{Ontology: cfg, Store: h.runtime, Effects: effects.Factories(), TargetReaders: effects.TargetReader,
		Catalog: &ontology.Catalog{}, Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return h, l
}

// targetConfig declares void_label against the carrier at base.
// auth, when not empty, is the upstream's auth: line.
func targetConfig(t *testing.T, base, auth string) *ontology.Config {
	t.Helper()
	src := fmt.Sprintf(`service: shop
upstreams:
  carrier:
    base_url: %q
%s
actions:
  void_label:
    description: Void a return label that is still open.
    input:
      type: object
      properties: {label_id: {type: string}}
      required: [label_id]
      additionalProperties: false
    target:
      upstream: carrier
      get: {path: "/labels/{label_id}", headers: {X-Reason: review}, timeout: 1s, deadline: 3s}
    where: target.status == "open"
    redact_prior: [/customer_email]
    policy: {roles: [support], approval: required}
    execute:
      http: {upstream: carrier, method: POST, path: "/labels/{label_id}/void"}
`, base, auth)
	cfg, err := ontology.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTargetNeedsReader: an engine is not built for an action whose
// target an upstream answers without a reader to read it.
func TestTargetNeedsReader(t *testing.T) {
	t.Parallel()
	cfg := targetConfig(t, "http://127.0.0.1:9/api/", "")
	_, err := engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, testdb.New(t)), Effects: effects.Factories(),
		Catalog: &ontology.Catalog{}, Key: make([]byte, engine.KeySize), Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "actions.void_label.target") {
		t.Fatalf("New = %v", err)
	}
}

const openLabel = `{"id": "L/1", "status": "open", "customer_email": "pat@example.com"}`

// approve stages void_label for label and approves it.
func (h *harness) approveVoid(t *testing.T, label string) string {
	t.Helper()
	ctx := context.Background()
	out := h.e.Call(ctx, agent("acme"), "void_label", json.RawMessage(`{"label_id": `+mustQuote(label)+`}`))
	if out.Status != engine.StatusApprovalPending {
		t.Fatalf("call: %s %v", out.Status, out.Err)
	}
	id := out.ApprovalID.String()
	v, err := h.e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	var shown struct{ Status string }
	if err := json.Unmarshal(v.Target, &shown); err != nil || shown.Status != "open" {
		t.Fatalf("the approver was shown the target %s", v.Target)
	}
	if d := h.e.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id, Approve: true, Digest: v.Digest}); d.Status != engine.StatusOK {
		t.Fatalf("decide: %s %v", d.Status, d.Err)
	}
	return id
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestTargetRead: the target an upstream answers is read with a GET bound
// from the input (the segment escaped, the action's header sent), where
// is evaluated on it before staging and again after the consume, and the
// execution's prior state is that answer, masked by redact_prior.
func TestTargetRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, l := newTargetHarness(t)
	l.set("L%2F1", openLabel)
	l.set("L-2", `{"id": "L-2", "status": "void"}`)

	// where does not hold on what the upstream answers: refused now.
	out := h.e.Call(ctx, agent("acme"), "void_label", json.RawMessage(`{"label_id": "L-2"}`))
	if out.Status != engine.StatusPreconditionFailed {
		t.Fatalf("a void label: %s %v", out.Status, out.Err)
	}

	// An agent is told the target is the carrier's, and no object.
	d, dout := h.e.DescribeAction(ctx, agent("acme"), "void_label")
	if dout != nil || d.Target == nil || d.Target.Upstream != "carrier" || d.Target.Object != "" || d.Target.KeyFrom != "" {
		t.Fatalf("described: %+v %+v", d, dout)
	}

	id := h.approveVoid(t, "L/1")
	out = h.e.Check(ctx, agent("acme"), id)
	if out.Status != engine.StatusOK || string(out.Data) != `{"body":{"voided":true},"status":200}` {
		t.Fatalf("check: %s %s %v", out.Status, out.Data, out.Err)
	}
	gets, voids := l.counts()
	// The refused call, the staging call, the approver's view, the re-read.
	if want := []string{"/api/labels/L-2", "/api/labels/L%2F1", "/api/labels/L%2F1", "/api/labels/L%2F1"}; !slices.Equal(gets, want) || voids != 1 {
		t.Fatalf("gets %v, voids %d", gets, voids)
	}
	for _, hd := range l.header {
		if hd.Get("X-Reason") != "review" {
			t.Fatalf("a target read without its header: %v", hd)
		}
	}
	phases, _, all := h.audit(t, "acme", id)
	if want := []string{"staged", "approved", "execution_started", "effect_attempt", "execution_succeeded"}; !slices.Equal(phases, want) {
		t.Fatalf("phases %v", phases)
	}
	if !strings.Contains(all, `"prior":{"customer_email":"[redacted]","id":"L/1","status":"open"}`) || strings.Contains(all, "pat@example.com") {
		t.Fatalf("the records %s", all)
	}
	h.verify(t, "acme", "")
}

// TestTargetChangedAfterApproval: the label is voided at the carrier
// between the approval and the poll; the re-read after the consume sees
// it, where no longer holds, and the call is refused as
// precondition_failed, recorded, and never sent.
func TestTargetChangedAfterApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, l := newTargetHarness(t)
	l.set("L-1", `{"id": "L-1", "status": "open"}`)
	id := h.approveVoid(t, "L-1")
	l.set("L-1", `{"id": "L-1", "status": "void"}`)
	out := h.e.Check(ctx, agent("acme"), id)
	if out.Status != engine.StatusPreconditionFailed || out.Code != "X_FORBIDDEN" {
		t.Fatalf("check: %s %s %v", out.Status, out.Code, out.Err)
	}
	if _, voids := l.counts(); voids != 0 {
		t.Fatalf("the effect was sent %d times", voids)
	}
	if again := h.e.Check(ctx, agent("acme"), id); again.Status != engine.StatusConsumed {
		t.Fatalf("second check: %s", again.Status)
	}
	phases, _, _ := h.audit(t, "acme", id)
	if want := []string{"staged", "approved", "precondition_failed"}; !slices.Equal(phases, want) {
		t.Fatalf("phases %v", phases)
	}
	h.verify(t, "acme", "")

	// Gone altogether: the same refusal.
	l.set("L-3", `{"id": "L-3", "status": "open"}`)
	id = h.approveVoid(t, "L-3")
	l.mu.Lock()
	delete(l.state, "L-3")
	l.mu.Unlock()
	if out := h.e.Check(ctx, agent("acme"), id); out.Status != engine.StatusPreconditionFailed {
		t.Fatalf("check of a deleted target: %s %v", out.Status, out.Err)
	}
	if _, voids := l.counts(); voids != 0 {
		t.Fatalf("the effect was sent %d times", voids)
	}
	h.verify(t, "acme", "")
}

// TestTargetReadFails: a 404 is not_found, as for a missing row; a failed
// read is resolve_error, classified, recorded, and nothing is staged or
// sent. The upstream's words reach neither the agent nor the outcome's
// diagnostic.
func TestTargetReadFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, l := newTargetHarness(t)
	out := h.e.Call(ctx, agent("acme"), "void_label", json.RawMessage(`{"label_id": "nope"}`))
	if out.Status != engine.StatusNotFound || out.ApprovalID != nil {
		t.Fatalf("a missing label: %s %v", out.Status, out.Err)
	}
	l.mu.Lock()
	l.fail = http.StatusInternalServerError
	l.mu.Unlock()
	out = h.e.Call(ctx, agent("acme"), "void_label", json.RawMessage(`{"label_id": "L-1"}`))
	if out.Status != engine.StatusResolveError || out.Diagnostic != engine.DiagnosticUpstreamError || out.ApprovalID != nil {
		t.Fatalf("a failing read: %s %s %v", out.Status, out.Diagnostic, out.Err)
	}
	phases, _, _ := h.audit(t, "acme", out.CorrelationID)
	if !slices.Equal(phases, []string{"resolve_error"}) {
		t.Fatalf("phases %v", phases)
	}
	gets, voids := l.counts()
	// A 500 is not attempted again, even for a GET.
	if len(gets) != 2 || voids != 0 {
		t.Fatalf("gets %v, voids %d", gets, voids)
	}
	// A label the records that would show it cannot hold — a member named
	// twice — is an unreadable answer, the read's failure, not the store's.
	l.mu.Lock()
	l.fail = 0
	l.mu.Unlock()
	l.set("L-2", `{"id": "L-2", "status": "open", "id": "L-3"}`)
	out = h.e.Call(ctx, agent("acme"), "void_label", json.RawMessage(`{"label_id": "L-2"}`))
	if out.Status != engine.StatusResolveError || out.Diagnostic != engine.DiagnosticUpstreamError || out.ApprovalID != nil {
		t.Fatalf("a label of a member named twice: %s %s %v", out.Status, out.Diagnostic, out.Err)
	}
	h.verify(t, "acme", "")
}

// TestTargetReadCredentials: a target read presents the upstream's
// credentials as its calls do, and an answer echoing one has it
// redacted before where, the approver or the audit record sees it.
func TestTargetReadCredentials(t *testing.T) {
	const secret = "tgt-cred-5b1f0c7e9a"
	t.Setenv("CARRIER_KEY_CREDENTIAL", secret)
	ctx := context.Background()
	var keys []string
	var mu sync.Mutex
	up := newUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"status": "open", "echo": %q}`, r.Header.Get("X-Api-Key"))
	})
	cfg := targetConfig(t, up.URL+"/api/", "    auth: {key: {type: api_key, in: header, name: X-Api-Key}}")
	url := testdb.New(t)
	h := &harness{admin: testdb.Pool(t, url), runtime: testdb.RuntimePool(t, url)}
	var err error
	h.e, err = engine.New(engine.Config{Ontology: cfg, Store: h.runtime, Effects: effects.Factories(), TargetReaders: effects.TargetReader,
		Catalog: &ontology.Catalog{}, Key: make([]byte, engine.KeySize), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id := h.approveVoid(t, "L-1")
	v, err := h.e.ShowApproval(ctx, "acme", id)
	if err != nil || strings.Contains(string(v.Target), secret) || !strings.Contains(string(v.Target), "[redacted]") {
		t.Fatalf("the approver was shown %s (%v)", v.Target, err)
	}
	if out := h.e.Check(ctx, agent("acme"), id); out.Status != engine.StatusOK {
		t.Fatalf("check: %s %v", out.Status, out.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Staging, the decision's view, this view, the re-read, the effect.
	if len(keys) != 5 || slices.ContainsFunc(keys, func(k string) bool { return k != secret }) {
		t.Fatalf("keys presented %q", keys)
	}
	_, _, all := h.audit(t, "acme", id)
	if strings.Contains(all, secret) || !strings.Contains(all, `"prior":{`) {
		t.Fatalf("the records %s", all)
	}
	h.verify(t, "acme", "")
}
