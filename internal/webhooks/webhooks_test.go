package webhooks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/testdb"
	"github.com/orangerail/orangerail/internal/webhooks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// secret is the Standard Webhooks documentation's example secret.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// tolerance is how far a receiver lets webhook-timestamp stray from its
// clock: the convention's libraries use five minutes.
const tolerance = 5 * time.Minute

// verify is an independent Standard Webhooks check, as a receiver writes
// it from the convention: the timestamp within tolerance of now, and one
// of the space-separated v1 signatures equal to the base64 HMAC-SHA256 of
// id.timestamp.body under the base64-decoded secret.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %s is %s from now", ts, d)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// TestSignMatchesTheConventionsExample signs the example message of the
// Standard Webhooks documentation and gets its signature.
func TestSignMatchesTheConventionsExample(t *testing.T) {
	t.Parallel()
	s, err := webhooks.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	got := webhooks.Sign(s, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,bm9wZQ== "+got)
	if err := verify(secret, h, []byte(`{"test": 2432232314}`), time.Unix(1614265330+60, 0)); err != nil {
		t.Fatalf("the verifier refuses the example: %v", err)
	}
	if err := verify(secret, h, []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0).Add(tolerance+time.Second)); err == nil {
		t.Fatal("the verifier accepts a stale timestamp")
	}
	if err := verify(secret, h, []byte(`{"test": 2432232315}`), time.Unix(1614265330, 0)); err == nil {
		t.Fatal("the verifier accepts another body")
	}
}

// TestSecretsAreCheckedAndNeverShown: a secret without its prefix, not
// base64 or too short is refused without its value in the error; a read
// secret prints as [secret] however it is formatted.
func TestSecretsAreCheckedAndNeverShown(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not*base64", "whsec_c2hvcnQ="} {
		_, err := webhooks.Endpoints([]ontology.Webhook{{URL: "https://h.example.com", SecretEnv: "HOOK"}}, func(string) string { return bad })
		var coded *errcode.Error
		if !errors.As(err, &coded) || coded.Code != errcode.ConfigInvalid || !strings.Contains(err.Error(), "webhooks.0.secret_env") ||
			strings.Contains(err.Error(), strings.TrimPrefix(bad, "whsec_")) {
			t.Errorf("secret %q: %v", bad, err)
		}
	}
	if _, err := webhooks.Endpoints([]ontology.Webhook{{URL: "https://h.example.com", SecretEnv: "HOOK"}}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "HOOK is not set") {
		t.Errorf("unset: %v", err)
	}
	eps, err := webhooks.Endpoints([]ontology.Webhook{{URL: "https://h.example.com", SecretEnv: "HOOK"}}, func(string) string { return secret })
	if err != nil {
		t.Fatal(err)
	}
	// The key in each form a format prints bytes in: as text (%s), as
	// decimals ([]byte's %v), as Go hex literals (%#v), as hex (%x).
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	head := key[:6]
	goHex := fmt.Sprintf("%#v", head)
	shown := []string{"MfKQ9r8", string(head), strings.Trim(fmt.Sprintf("%d", head), "[]"), goHex[strings.Index(goHex, "{")+1 : len(goHex)-1],
		fmt.Sprintf("%x", head)}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%x"} {
		s := fmt.Sprintf(format, eps)
		for _, form := range shown {
			if strings.Contains(s, form) {
				t.Errorf("%s shows the secret (%q): %s", format, form, s)
			}
		}
	}
	if b, _ := json.Marshal(eps); bytes.Contains(b, []byte("MfKQ9r8")) {
		t.Errorf("JSON shows the secret: %s", b)
	}
}

// TestBackoffGrowsWithJitterToItsCap: the delay after n failures lies in
// the upper half of BackoffBase doubled n-1 times, and never past
// BackoffMax however many failures.
func TestBackoffGrowsWithJitterToItsCap(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 40; n++ {
		full := webhooks.BackoffMax
		if n < 20 {
			full = min(webhooks.BackoffBase<<(n-1), webhooks.BackoffMax)
		}
		for range 50 {
			if d := webhooks.Backoff(n); d < full/2 || d > full {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", n, d, full/2, full)
			}
		}
	}
	if _, err := webhooks.New(webhooks.Config{Pool: &pgxpool.Pool{}, Endpoints: []webhooks.Endpoint{{URL: "https://h.example.com"}}}); err == nil {
		t.Fatal("an endpoint without a secret was accepted")
	}
}

// clock is a test clock the worker reads; nothing sleeps.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// delivery is one request a receiver saw.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a local endpoint that records each request and answers the
// next status of its script (200 once the script is spent).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []delivery
	script []int
	// arrived gets a value per request, for a test waiting on the
	// background loop.
	arrived chan struct{}
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{script: script, arrived: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, delivery{req.Header.Clone(), body})
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		select {
		case r.arrived <- struct{}{}:
		default:
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type bundle struct {
	url     string
	admin   *pgxpool.Pool
	runtime *pgxpool.Pool
	// engine stages and decides: opened by the first worker, its config
	// naming that worker's endpoints, so the messages it queues are owed
	// to them.
	engine *engine.Engine
	clock  *clock
}

// setup seeds the example on a database of its own, with a clock an hour
// ahead of the database's, so every message is due at once.
func setup(t *testing.T) *bundle {
	t.Helper()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatal(err)
	}
	return &bundle{url: url, admin: admin, runtime: testdb.RuntimePool(t, url), clock: &clock{now: time.Now().Add(time.Hour)}}
}

// open returns an engine serving the example on b's database with eps
// configured as its webhooks (not serving: it starts no worker).
func (b *bundle) open(t *testing.T, eps ...webhooks.Endpoint) *engine.Engine {
	t.Helper()
	rt, err := app.Open(context.Background(), app.Settings{Config: ontologytest.Parse(t, orders.Config, hooks(eps...)), DatabaseURL: b.url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt.Engine
}

// hooks names eps, their URLs and events, as a config's webhooks.
func hooks(eps ...webhooks.Endpoint) ontologytest.Edit {
	var list []map[string]any
	for _, e := range eps {
		hook := map[string]any{"url": e.URL, "secret_env": "ORANGERAIL_TEST_WEBHOOK_SECRET"}
		if len(e.Events) > 0 {
			hook["events"] = e.Events
		}
		if len(e.Tenants) > 0 {
			hook["tenants"] = e.Tenants
		}
		list = append(list, hook)
	}
	return ontologytest.Set("webhooks", list)
}

// aWebhook names a webhook in a config: its instance's engine queues
// messages, owed to that endpoint. Not serving, it opens no worker and
// reads no secret.
var aWebhook = ontologytest.SetYAML("webhooks", "[{url: 'https://hooks.example.com/h', secret_env: ORANGERAIL_TEST_WEBHOOK_SECRET}]")

// withWebhook is the example's config naming aWebhook.
func withWebhook(t *testing.T) *ontology.Config {
	t.Helper()
	return ontologytest.Parse(t, orders.Config, aWebhook)
}

// worker returns a worker for c's endpoints on b's clock, each retry a
// minute per failed attempt later. The first opens b's engine, configured
// with those endpoints.
func (b *bundle) worker(t *testing.T, c webhooks.Config) *webhooks.Worker {
	t.Helper()
	if b.engine == nil {
		b.engine = b.open(t, c.Endpoints...)
	}
	c.Pool, c.Now, c.PublicURL = b.runtime, b.clock.Now, "https://desk.example.com"
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Minute }
	}
	w, err := webhooks.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func endpoint(t *testing.T, url string, includeInput bool, events ...ontology.WebhookEvent) webhooks.Endpoint {
	t.Helper()
	eps, err := webhooks.Endpoints([]ontology.Webhook{{URL: url, SecretEnv: "HOOK", Events: events, IncludeInput: includeInput}}, func(string) string { return secret })
	if err != nil {
		t.Fatal(err)
	}
	return eps[0]
}

func support(tenant string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
}

// stage asks to cancel o-1001 for reason; it waits for a person.
func (b *bundle) stage(t *testing.T, reason string) string {
	t.Helper()
	out := b.engine.Call(context.Background(), support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": `+strconv.Quote(reason)+`}`))
	if out.Status != engine.StatusApprovalPending || out.ApprovalID == nil {
		t.Fatalf("stage: %s %v", out.Status, out.Err)
	}
	return out.ApprovalID.String()
}

func (b *bundle) runOnce(t *testing.T, w *webhooks.Worker) int {
	t.Helper()
	n, err := w.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeliversSignedEvents: a staging and a rejection each reach the
// endpoint, signed so an independent verifier accepts them, with the
// documented payload and without the input; an endpoint configured with
// include_input gets the input, and only the events it subscribes to.
func TestDeliversSignedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain, withInput := newReceiver(t), newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{
		endpoint(t, plain.URL+"/hooks/T0SECRET?token=s3cr3t", false), // a chat hook's URL is its secret
		endpoint(t, withInput.URL, true, ontology.WebhookApprovalPending),
	}})
	id := b.stage(t, "customer asked: card 4111")
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("handled %d messages, want 1", n)
	}
	view, err := b.engine.ShowApproval(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	out := b.engine.Decide(context.Background(), &engine.Caller{Subject: "alice@example.com", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman},
		engine.Decision{ApprovalID: id, Approve: false, Digest: view.Digest, Note: "no"})
	if out.Status != engine.StatusOK {
		t.Fatalf("reject: %s %v", out.Status, out.Err)
	}
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("handled %d messages, want 1", n)
	}

	got := plain.deliveries()
	if len(got) != 2 {
		t.Fatalf("the endpoint saw %d requests, want 2", len(got))
	}
	for i, want := range []struct {
		typ, status string
		decidedBy   any
	}{{"approval.pending", "pending", nil}, {"approval.rejected", "rejected", "alice@example.com"}} {
		d := got[i]
		if err := verify(secret, d.header, d.body, b.clock.Now()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if ct := d.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var p map[string]any
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		data := p["data"].(map[string]any)
		if p["type"] != want.typ || data["status"] != want.status || data["id"] != id || data["tenant"] != "acme" ||
			data["action"] != "cancel_order" || data["requested_by"] != "agent-7" || data["decided_by"] != want.decidedBy ||
			data["url"] != "https://desk.example.com/approvals/"+id || data["expires_at"] == nil {
			t.Errorf("request %d: payload %s", i, d.body)
		}
		if _, err := time.Parse(time.RFC3339Nano, p["timestamp"].(string)); err != nil {
			t.Errorf("timestamp %v", p["timestamp"])
		}
		if _, ok := data["input"]; ok || bytes.Contains(d.body, []byte("card 4111")) {
			t.Errorf("request %d carries the input: %s", i, d.body)
		}
	}
	if got[0].header.Get("webhook-id") == got[1].header.Get("webhook-id") {
		t.Error("two events share a webhook-id")
	}
	withIn := withInput.deliveries()
	if len(withIn) != 1 || !bytes.Contains(withIn[0].body, []byte(`"input":{"order_id":"o-1001","reason":"customer asked: card 4111"}`)) {
		t.Fatalf("the include_input endpoint saw %d requests: %s", len(withIn), withIn)
	}
	if err := verify(secret, withIn[0].header, withIn[0].body, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	msgs, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookDelivered, 10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("delivered messages %v %v", msgs, err)
	}
	// The listing names the endpoints as the log does: scheme and host.
	for _, m := range msgs {
		for _, to := range m.DeliveredTo {
			if to != plain.URL+"/…" && to != withInput.URL+"/…" {
				t.Errorf("message %s lists delivered_to %q", m.ID, to)
			}
		}
	}
}

// TestDeliversInTheOrderEventsHappened: a batch of one tenant's messages
// reaches an endpoint in the order their events happened — an approval's
// pending before its decision — however Postgres returned the claim's rows
// (UPDATE … RETURNING keeps no order; it returned them newest first).
func TestDeliversInTheOrderEventsHappened(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}})
	approver := &engine.Caller{Subject: "alice@example.com", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	var want []string
	for i := range 4 {
		id := b.stage(t, "reason "+strconv.Itoa(i))
		view, err := b.engine.ShowApproval(context.Background(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if out := b.engine.Decide(context.Background(), approver, engine.Decision{ApprovalID: id, Approve: false, Digest: view.Digest, Note: "no"}); out.Status != engine.StatusOK {
			t.Fatalf("reject: %s %v", out.Status, out.Err)
		}
		want = append(want, "approval.pending "+id, "approval.rejected "+id)
	}
	if n := b.runOnce(t, w); n != len(want) {
		t.Fatalf("handled %d messages in one run, want %d", n, len(want))
	}
	var got []string
	for _, d := range r.deliveries() {
		var p struct {
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Type+" "+p.Data.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRetriesWithBackoffThenFails: an endpoint answering 500 is retried,
// not before its backoff, with the same webhook-id, until the attempts run
// out; the message is then failed, and redelivering it sends it again.
// The log names each failure and never the secret.
func TestRetriesWithBackoffThenFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, 500, 503, 500, 500)
	var log bytes.Buffer
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, MaxAttempts: 3,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	b.stage(t, "late")

	for attempt := 1; attempt <= 3; attempt++ {
		if n := b.runOnce(t, w); n != 1 {
			t.Fatalf("attempt %d: handled %d", attempt, n)
		}
		seen := r.deliveries()
		if err := verify(secret, seen[len(seen)-1].header, seen[len(seen)-1].body, b.clock.Now()); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if n := b.runOnce(t, w); n != 0 {
			t.Fatalf("attempt %d: retried before its backoff", attempt)
		}
		b.clock.Advance(time.Duration(attempt) * time.Minute)
	}
	if n := b.runOnce(t, w); n != 0 {
		t.Fatal("a failed message was tried again")
	}
	seen := r.deliveries()
	if len(seen) != 3 {
		t.Fatalf("the endpoint saw %d attempts, want 3", len(seen))
	}
	for _, d := range seen {
		if d.header.Get("webhook-id") != seen[0].header.Get("webhook-id") {
			t.Fatal("a retry changed the webhook-id")
		}
	}
	failed, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookFailed, 10)
	if err != nil || len(failed) != 1 || failed[0].Attempts != 3 || failed[0].LastError == nil || !strings.Contains(*failed[0].LastError, "500") {
		t.Fatalf("failed messages %+v %v", failed, err)
	}
	if !strings.Contains(log.String(), "webhook delivery failed") || strings.Contains(log.String(), "MfKQ9r8") {
		t.Fatalf("log: %s", log.String())
	}

	// Redeliver: the script's next 500, then a 200.
	if _, err := webhooks.Redeliver(context.Background(), b.runtime, "acme", failed[0].ID.String(), b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.runOnce(t, w)
	b.clock.Advance(time.Minute)
	b.runOnce(t, w)
	seen = r.deliveries()
	if len(seen) != 5 || seen[4].header.Get("webhook-id") != seen[0].header.Get("webhook-id") {
		t.Fatalf("after redelivery the endpoint saw %d requests", len(seen))
	}
	if done, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookDelivered, 10); err != nil || len(done) != 1 {
		t.Fatalf("delivered after redelivery: %v %v", done, err)
	}

	var coded *errcode.Error
	if _, err := webhooks.Redeliver(context.Background(), b.runtime, "globex", failed[0].ID.String(), b.clock.Now()); !errors.As(err, &coded) || coded.Code != errcode.WebhookNotFound {
		t.Fatalf("another tenant redelivers: %v", err)
	}
	if _, err := webhooks.List(context.Background(), b.runtime, "acme", "lost", 10); !errors.As(err, &coded) || coded.Code != errcode.WebhookStateInvalid {
		t.Fatalf("list of an unknown state: %v", err)
	}
}

// TestRotatingSecretsSignWithEach: a variable holding two secrets
// (rotation) signs with both, so a receiver holding either verifies.
func TestRotatingSecretsSignWithEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t)
	const next = "whsec_QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
	eps, err := webhooks.Endpoints([]ontology.Webhook{{URL: r.URL, SecretEnv: "HOOK"}}, func(string) string { return next + "  " + secret })
	if err != nil {
		t.Fatal(err)
	}
	w := b.worker(t, webhooks.Config{Endpoints: eps})
	b.stage(t, "rotate")
	b.runOnce(t, w)
	d := r.deliveries()
	if len(d) != 1 || len(strings.Fields(d[0].header.Get("webhook-signature"))) != 2 {
		t.Fatalf("deliveries %v", d)
	}
	for _, s := range []string{secret, next} {
		if err := verify(s, d[0].header, d[0].body, b.clock.Now()); err != nil {
			t.Errorf("a receiver holding %s…: %v", s[:10], err)
		}
	}
}

// TestOneEndpointFailingRetriesOnlyIt: a retry goes to the endpoints that
// have not answered 2xx, never again to one that has.
func TestOneEndpointFailingRetriesOnlyIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good, flaky := newReceiver(t), newReceiver(t, 500)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, good.URL, false), endpoint(t, flaky.URL, false)}})
	b.stage(t, "two")
	b.runOnce(t, w)
	b.clock.Advance(time.Minute)
	b.runOnce(t, w)
	if g, f := len(good.deliveries()), len(flaky.deliveries()); g != 1 || f != 2 {
		t.Fatalf("good saw %d, flaky %d; want 1 and 2", g, f)
	}
}

// TestRolledBackChangeSendsNothing: an approval whose audit record cannot
// be appended is never staged (audit_blocked), and no endpoint hears of
// it: the outbox row rolled back with it. The append fails inside the
// SECURITY DEFINER staging function, by a trigger refusing every audit
// row.
func TestRolledBackChangeSendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, true)}})
	if _, err := b.admin.Exec(ctx, `CREATE FUNCTION public.refuse_audit() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'audit append refused' USING ERRCODE = 'ORA01'; END$$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON orangerail.audit FOR EACH ROW EXECUTE FUNCTION public.refuse_audit()`); err != nil {
		t.Fatal(err)
	}
	out := b.engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "blocked"}`))
	if out.Status != engine.StatusAuditBlocked {
		t.Fatalf("staging with the audit blocked: %s", out.Status)
	}
	var rows int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.webhook_outbox").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d outbox rows (%v)", rows, err)
	}
	if n := b.runOnce(t, w); n != 0 || len(r.deliveries()) != 0 {
		t.Fatalf("handled %d, the endpoint saw %d", n, len(r.deliveries()))
	}
}

// TestNoWebhookConfiguredQueuesNothing: an instance whose config names no
// webhook queues no message for its stagings, decisions (a person's, and
// the owner's break glass) or expiries, where nothing would ever take
// them; one naming a webhook, on the same database, queues its own.
func TestNoWebhookConfiguredQueuesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	admin := testdb.Pool(t, url)
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	queued := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.webhook_outbox").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	approver := &engine.Caller{Subject: "alice@example.com", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	open := func(edits ...ontologytest.Edit) *engine.Engine {
		t.Helper()
		rt, err := app.Open(ctx, app.Settings{Config: ontologytest.Parse(t, orders.Config, edits...), DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rt.Close)
		return rt.Engine
	}
	stage := func(e *engine.Engine, reason string) *engine.Outcome {
		t.Helper()
		out := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "reason": %q}`, reason)))
		if out.Status != engine.StatusApprovalPending {
			t.Fatalf("stage: %s %v", out.Status, out.Err)
		}
		return out
	}
	// stageAndDecide stages three cancellations on an instance of edits:
	// one to lapse (on a replica whose approvals last a second), one a
	// person approves, one the owner rejects breaking glass.
	stageAndDecide := func(name string, edits ...ontologytest.Edit) {
		t.Helper()
		e, short := open(edits...), open(append(edits, ontologytest.Set("approvals.ttl", "1s"))...)
		lapsing := stage(short, name+" lapses")
		approved := stage(e, name+" approved").ApprovalID.String()
		view, err := e.ShowApproval(ctx, "acme", approved)
		if err != nil {
			t.Fatal(err)
		}
		if out := e.Decide(ctx, approver, engine.Decision{ApprovalID: approved, Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
			t.Fatalf("decide: %s %s", out.Status, out.Code)
		}
		rejected := stage(e, name+" rejected").ApprovalID.String()
		if out, _ := e.DecideBreakGlassApproval(ctx, e.BoundAsStore(admin), "acme", "the desk is down", engine.Decision{ApprovalID: rejected}); out.Status != engine.StatusOK {
			t.Fatalf("break glass: %s %s %v", out.Status, out.Code, out.Err)
		}
		time.Sleep(time.Until(*lapsing.ExpiresAt) + 100*time.Millisecond) // let it lapse: expiry is a semantic, not a speed
		if n, err := e.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("the sweep expired %d (%v), want 1", n, err)
		}
	}

	stageAndDecide("quiet")
	if n := queued(); n != 0 {
		t.Fatalf("an instance with no webhook queued %d messages", n)
	}
	stageAndDecide("announced", aWebhook)
	rows, err := admin.Query(ctx, "SELECT event FROM orangerail.webhook_outbox ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"approval.pending", "approval.pending", "approval.approved", "approval.pending", "approval.rejected", "approval.expired"}
	if !slices.Equal(events, want) {
		t.Fatalf("an instance with a webhook queued %v, want %v", events, want)
	}
}

// TestTwoWorkersDeliverEachOnce: two workers (two replicas) running at
// once share the outbox; each message reaches the endpoint once.
func TestTwoWorkersDeliverEachOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t)
	const staged = 8
	workers := []*webhooks.Worker{
		b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, Batch: 3}),
		b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, Batch: 3}),
	}
	for i := range staged {
		b.stage(t, fmt.Sprintf("reason %d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*staged)
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range staged {
				if _, err := w.RunOnce(context.Background()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, d := range r.deliveries() {
		ids[d.header.Get("webhook-id")]++
	}
	if len(ids) != staged {
		t.Fatalf("%d messages delivered, want %d", len(ids), staged)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("message %s delivered %d times", id, n)
		}
	}
}

// TestRedirectsStayOnTheHost: a redirect to another host is not followed
// (the signed payload never leaves the endpoint's host) and counts as a
// failure; a redirect on the same host is followed.
func TestRedirectsStayOnTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	elsewhere := newReceiver(t)
	var sameHost []string
	var mu sync.Mutex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		sameHost = append(sameHost, req.URL.Path)
		mu.Unlock()
		switch req.URL.Path {
		case "/away":
			http.Redirect(w, req, elsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, req, "/here", http.StatusPermanentRedirect)
		case "/seeother":
			// Followed, this would turn the POST into a bodiless GET that
			// /here answers 200.
			http.Redirect(w, req, "/here", http.StatusSeeOther)
		}
	}))
	t.Cleanup(front.Close)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, front.URL+"/away", false), endpoint(t, front.URL+"/moved", false),
		endpoint(t, front.URL+"/seeother", false)}})
	b.stage(t, "redirect")
	b.runOnce(t, w)
	if n := len(elsewhere.deliveries()); n != 0 {
		t.Fatalf("another host received %d requests", n)
	}
	mu.Lock()
	defer mu.Unlock()
	// Each endpoint has a sender of its own, so the three are sent at once,
	// in no set order; /moved's redirect to /here follows it.
	seen := slices.Sorted(slices.Values(sameHost))
	if !slices.Equal(seen, []string{"/away", "/here", "/moved", "/seeother"}) || slices.Index(sameHost, "/here") < slices.Index(sameHost, "/moved") {
		t.Fatalf("the endpoint's host saw %v", sameHost)
	}
	queued, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookQueued, 10)
	if err != nil || len(queued) != 1 || !strings.Contains(*queued[0].LastError, "307") || len(queued[0].DeliveredTo) != 1 {
		t.Fatalf("after a cross-host redirect: %+v %v", queued, err)
	}
}

// TestStartStop: the background loop delivers, and Stop ends it (twice,
// and without Start, safely); goleak checks nothing is left running.
func TestStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, Poll: time.Millisecond})
	w.Stop()
	b.stage(t, "loop")
	w.Start()
	w.Start()
	<-r.arrived
	w.Stop()
	w.Stop()
	if len(r.deliveries()) != 1 {
		t.Fatalf("the loop delivered %d", len(r.deliveries()))
	}
}

// TestFinishedMessagesArePruned: a delivered or failed message whose last
// attempt is past the retention is deleted, by Prune and by the
// background loop; a recent one, and a queued one however old, are kept.
func TestFinishedMessagesArePruned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := newReceiver(t)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}})
	var ids []string // one message each: the approvals' stagings
	for i := range 5 {
		b.stage(t, fmt.Sprintf("prune %d", i))
	}
	if n := b.runOnce(t, w); n != 5 {
		t.Fatalf("delivered %d, want 5", n)
	}
	rows, err := b.admin.Query(ctx, "SELECT id::text FROM orangerail.webhook_outbox ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(ids) != 5 {
		t.Fatalf("%d messages (%v)", len(ids), err)
	}
	old := b.clock.Now().Add(-webhooks.RetentionDefault - time.Hour)
	for _, change := range []struct {
		id, set string
	}{
		{ids[0], "delivered_at = $2"}, // delivered long ago: pruned
		{ids[1], "state = 'failed', delivered_at = NULL, next_attempt_at = $2, last_error = 'gone'"}, // failed long ago: pruned
		{ids[2], "state = 'queued', delivered_at = NULL, next_attempt_at = $2"},                      // owed still: kept
		// ids[3] delivered now: kept; ids[4] is the background loop's.
	} {
		if _, err := b.admin.Exec(ctx, "UPDATE orangerail.webhook_outbox SET "+change.set+" WHERE id = $1", change.id, old); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() []string {
		t.Helper()
		rows, err := b.admin.Query(ctx, "SELECT id::text FROM orangerail.webhook_outbox ORDER BY seq")
		if err != nil {
			t.Fatal(err)
		}
		left, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	if n, err := w.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("Prune deleted %d (%v), want 2", n, err)
	}
	if left := kept(); !slices.Equal(left, ids[2:]) {
		t.Fatalf("kept %v, want %v", left, ids[2:])
	}

	// The background loop prunes in its first round, and each hour.
	if _, err := b.admin.Exec(ctx, "UPDATE orangerail.webhook_outbox SET delivered_at = $2 WHERE id = $1", ids[4], old); err != nil {
		t.Fatal(err)
	}
	loop := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, Poll: time.Millisecond})
	loop.Start()
	defer loop.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if left := kept(); slices.Equal(left, ids[2:4]) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the loop left %v, want %v", left, ids[2:4])
		}
	}
}

// TestMigrationRetiresTheUnsentBacklog: migration 00045 marks failed, not
// sent, the messages queued before 00044 by an instance naming no webhook
// (never attempted, their events over a day old) — as a superuser and as
// an owner that is none, whom row security binds — and leaves a recent
// message, and one being retried, queued.
func TestMigrationRetiresTheUnsentBacklog(t *testing.T) {
	t.Parallel()
	for _, owned := range []bool{false, true} {
		t.Run(map[bool]string{false: "superuser", true: "owner"}[owned], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var url string
			var admin *pgxpool.Pool // a superuser's
			if owned {
				url, admin = testdb.NewOwned(t)
			} else {
				url = testdb.New(t)
				admin = testdb.Pool(t, url)
			}
			if _, err := testdb.Pool(t, url).Exec(ctx, orders.Seed); err != nil {
				t.Fatal(err)
			}
			rt, err := app.Open(ctx, app.Settings{Config: withWebhook(t), DatabaseURL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rt.Close)
			b := &bundle{admin: admin, engine: rt.Engine}
			backlog, recent, retried := b.stage(t, "backlog"), b.stage(t, "recent"), b.stage(t, "retried")
			if _, err := admin.Exec(ctx, `UPDATE orangerail.webhook_outbox SET occurred_at = now() - interval '2 days',
				attempts = CASE WHEN approval_id = $2 THEN 1 ELSE 0 END WHERE approval_id IN ($1, $2)`, backlog, retried); err != nil {
				t.Fatal(err)
			}
			m, err := database.NewMigrator(ctx, testdb.Direct(url)) // migrations hold a session lock
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = m.Close() }()
			if _, err := m.DownTo(ctx, 44); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Up(ctx); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]string{backlog: "failed", recent: "queued", retried: "queued"} {
				var state string
				var lastError *string
				if err := admin.QueryRow(ctx, "SELECT state, last_error FROM orangerail.webhook_outbox WHERE approval_id = $1", id).Scan(&state, &lastError); err != nil {
					t.Fatal(err)
				}
				if state != want || (want == "failed") != (lastError != nil && strings.Contains(*lastError, "not sent")) {
					t.Errorf("approval %s's message: %s (%v), want %s", id, state, lastError, want)
				}
			}
		})
	}
}

// TestReadmeDocumentsThePayload holds the README's payload table to the
// fields Payload and Data marshal.
func TestReadmeDocumentsThePayload(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Notifications")
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_.]+)`(?:, `([a-z_.]+)`)?(?:, `([a-z_.]+)`)? \\|").FindAllStringSubmatch(section, -1) {
		for _, f := range m[1:] {
			if f != "" {
				documented = append(documented, f)
			}
		}
	}
	var fields []string
	for f := range reflect.TypeFor[webhooks.Payload]().Fields() {
		if name := strings.Split(f.Tag.Get("json"), ",")[0]; name != "data" {
			fields = append(fields, name)
		}
	}
	for f := range reflect.TypeFor[webhooks.Data]().Fields() {
		fields = append(fields, "data."+strings.Split(f.Tag.Get("json"), ",")[0])
	}
	slices.Sort(documented)
	slices.Sort(fields)
	if !slices.Equal(documented, fields) {
		t.Fatalf("README documents %v; the payload has %v", documented, fields)
	}
}

// TestServingRuntimeDelivers: app.Open, serving with webhooks configured,
// starts the worker with the secret from the environment and Close stops
// it; a secret variable unset refuses to open, naming the field.
func TestServingRuntimeDelivers(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	if _, err := testdb.Pool(t, url).Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t)
	cfg := ontologytest.Parse(t, orders.Config, ontologytest.SetYAML("webhooks", fmt.Sprintf("[{url: %q, secret_env: ORANGERAIL_TEST_WEBHOOK_SECRET}]", r.URL)))

	t.Setenv("ORANGERAIL_TEST_WEBHOOK_SECRET", "")
	_, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: url, Serve: true})
	var coded *errcode.Error
	if !errors.As(err, &coded) || coded.Code != errcode.ConfigInvalid || !strings.Contains(err.Error(), "webhooks.0.secret_env") {
		t.Fatalf("open without the secret: %v", err)
	}

	t.Setenv("ORANGERAIL_TEST_WEBHOOK_SECRET", secret)
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: url, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	out := rt.Engine.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "served"}`))
	if out.Status != engine.StatusApprovalPending {
		rt.Close()
		t.Fatalf("stage: %s", out.Status)
	}
	<-r.arrived
	rt.Close()
	d := r.deliveries()
	if len(d) != 1 || !bytes.Contains(d[0].body, []byte(`"type":"approval.pending"`)) {
		t.Fatalf("the endpoint saw %d requests", len(d))
	}
	if err := verify(secret, d[0].header, d[0].body, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerWithoutSuperuser migrates as an owner that is no superuser, so
// Row Level Security (FORCE) binds the trigger and the due-tenants and
// prune functions acting as it: staging still writes its message, the
// worker still finds and delivers it, and prunes it once finished.
func TestOwnerWithoutSuperuser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL, admin := testdb.NewOwned(t)
	ownerPool := testdb.Pool(t, ownerURL)
	if _, err := ownerPool.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t)
	ep := endpoint(t, r.URL, false)
	rt, err := app.Open(ctx, app.Settings{Config: ontologytest.Parse(t, orders.Config, hooks(ep)), DatabaseURL: ownerURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	b := &bundle{admin: admin, runtime: rt.Store, engine: rt.Engine, clock: &clock{now: time.Now().Add(time.Hour)}}
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	b.stage(t, "owner")
	if n := b.runOnce(t, w); n != 1 || len(r.deliveries()) != 1 {
		t.Fatalf("handled %d, delivered %d", n, len(r.deliveries()))
	}
	// Pruning, as the owner, deletes the finished message past its
	// retention.
	if _, err := admin.Exec(ctx, "UPDATE orangerail.webhook_outbox SET delivered_at = $1", b.clock.Now().Add(-webhooks.RetentionDefault-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune deleted %d (%v), want 1", n, err)
	}
}

// TestDeliveryFailuresNameNoPath: a receiver's URL may carry its secret in
// its path or query (a chat service's hook): a failure's log line and
// last_error name the endpoint by scheme and host, and the HTTP client's
// error without the URL it quotes.
func TestDeliveryFailuresNameNoPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, 500)
	var log bytes.Buffer
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{
		endpoint(t, "http://127.0.0.1:1/hooks/T0/XOXSECRET?token=XOXSECRET", false), endpoint(t, r.URL+"/hooks/T1/XOXSECRET", false)},
		MaxAttempts: 1, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	b.stage(t, "late")
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("handled %d", n)
	}
	failed, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookFailed, 10)
	if err != nil || len(failed) != 1 || failed[0].LastError == nil {
		t.Fatalf("failed messages %+v %v", failed, err)
	}
	if text := *failed[0].LastError; strings.Contains(text, "XOXSECRET") || !strings.HasPrefix(text, "http://127.0.0.1:1/…: Post: dial tcp") ||
		!strings.HasSuffix(text, "(and 1 more)") {
		t.Fatalf("last_error: %s", text)
	}
	if strings.Contains(log.String(), "XOXSECRET") || !strings.Contains(log.String(), `"endpoint":"http://127.0.0.1:1/…"`) ||
		!strings.Contains(log.String(), "/…\",\"attempt\"") {
		t.Fatalf("log: %s", log.String())
	}
}
