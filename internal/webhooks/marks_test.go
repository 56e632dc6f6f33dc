package webhooks_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// TestReceiverCertificateWithNULStillFails: a receiver whose TLS
// certificate names a DNS SAN holding U+0000 makes the client's error
// ("x509: certificate is valid for …") carry that byte unquoted. Postgres
// refuses text holding it: were it kept in last_error, the mark would fail
// and the message, never marked failed, stay leased, claimed again at
// every lease's end for good.
func TestReceiverCertificateWithNULStillFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "receiver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"evil\x00.example.com"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hook"

	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, url, false)}, MaxAttempts: 1})
	b.stage(t, "nul")
	_, runErr := w.RunOnce(context.Background())
	failed, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookFailed, 10)
	if err != nil {
		t.Fatal(err)
	}
	if runErr != nil || len(failed) != 1 {
		// It is claimed again once its lease ends, past MaxAttempts, and
		// refused again: a retry that never stops.
		for range 3 {
			b.clock.Advance(time.Hour)
			_, runErr = w.RunOnce(context.Background())
		}
		queued, _ := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookQueued, 10)
		attempts := -1
		if len(queued) == 1 {
			attempts = queued[0].Attempts
		}
		t.Fatalf("after its only attempt the message is not failed (%d failed); still queued after %d attempts (MaxAttempts 1); RunOnce: %v",
			len(failed), attempts, runErr)
	}
	if strings.ContainsRune(*failed[0].LastError, 0) {
		t.Fatalf("last_error holds U+0000: %q", *failed[0].LastError)
	}
}

// TestConfigErrorsDoNotQuoteTheURLsSecret: the config's refusal of a
// webhook URL — printed by `config check` and by serve's failed start —
// names it by scheme and host, never its password, path or query.
func TestConfigErrorsDoNotQuoteTheURLsSecret(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://bot:PASSWORDSECRET@hooks.example.com/h",
		"http://hooks.example.com/services/T0/B0/PATHSECRET",
	} {
		_, err := ontology.Parse(ontologytest.Apply(t, orders.Config,
			ontologytest.SetYAML("webhooks", "[{url: '"+u+"', secret_env: ORANGERAIL_TEST_WEBHOOK_SECRET}]")))
		if err == nil {
			t.Fatalf("%s was accepted", u)
		}
		if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "hooks.example.com/…") {
			t.Errorf("the config's refusal quotes the URL's secret, or does not name its host: %v", err)
		}
	}
}

// TestFailedMessageKeptAfterItsLastAttempt: a failed message is kept the
// retention after its last attempt, for `webhooks redeliver` — not after
// when that attempt was due: attempted late (the workers down, or the
// queue behind), it was deleted at the next prune, a minute after.
func TestFailedMessageKeptAfterItsLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, 500)
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, r.URL, false)}, MaxAttempts: 1})
	b.stage(t, "queued through an outage")
	b.clock.Advance(webhooks.RetentionDefault + time.Hour) // no worker ran meanwhile
	if n := b.runOnce(t, w); n != 1 {
		t.Fatalf("handled %d", n)
	}
	if failed, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookFailed, 10); err != nil || len(failed) != 1 {
		t.Fatalf("failed %v %v", failed, err)
	}
	b.clock.Advance(time.Minute)
	if n, err := w.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("Prune deleted %d messages (%v) a minute after their last attempt", n, err)
	}
}

// TestStopMidDeliveryRecordsWhatWasDelivered: a worker stopped (a
// deploy) while it posts a message's second endpoint records the first's
// 2xx and releases the message due now: the next worker sends it to the
// second alone, without waiting out the lease. It returned before
// recording anything, and the first endpoint was sent the message again.
func TestStopMidDeliveryRecordsWhatWasDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := newReceiver(t)
	var calls atomic.Int32
	inFlight := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // so the server notices the client going
		if calls.Add(1) == 1 {
			close(inFlight)
			select { // the worker stops meanwhile
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	t.Cleanup(slow.Close)
	// Each endpoint has a sender of its own: the stop comes once the
	// worker holds the first endpoint's reply, as it did when the second
	// was sent only after the first.
	firstAnswered := make(chan struct{})
	answered := sync.OnceFunc(func() { close(firstAnswered) })
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if strings.HasPrefix(req.URL.String(), first.URL) {
			answered()
		}
		return resp, err
	})}
	w := b.worker(t, webhooks.Config{Endpoints: []webhooks.Endpoint{endpoint(t, first.URL, false), endpoint(t, slow.URL, false)}, Client: client})
	b.stage(t, "deploy")

	ctx, stop := context.WithCancel(context.Background())
	go func() { <-inFlight; <-firstAnswered; stop() }()
	_, _ = w.RunOnce(ctx)
	if n := len(first.deliveries()); n != 1 {
		t.Fatalf("the first endpoint saw %d requests before the stop", n)
	}
	// The next round, at once (the clock has not moved: no lease ran out).
	b.runOnce(t, w)
	if n := len(first.deliveries()); n != 1 {
		t.Fatalf("the endpoint that answered 200 before the stop was sent the message %d times", n)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the endpoint the stop cut was sent the message %d times, want once more at the next round", n)
	}
	if delivered, err := webhooks.List(context.Background(), b.runtime, "acme", store.WebhookDelivered, 10); err != nil || len(delivered) != 1 {
		t.Fatalf("delivered %v %v", delivered, err)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestStopWhileMarkingRecordsWhatWasDelivered: a stop (a deploy) that
// comes as a message's mark begins its transaction, after every endpoint
// was sent it, does not lose the mark. The mark ran on the round's
// context: the stop failed it, so what the endpoint answered was never
// recorded and the message stayed leased, to be sent to that endpoint
// again once the lease ran out. The pool stops the round at the first
// transaction begun after the endpoint answered: the mark's.
func TestStopWhileMarkingRecordsWhatWasDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t)
	var answered atomic.Bool
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		answered.Store(err == nil)
		return resp, err
	})}
	eps := []webhooks.Endpoint{endpoint(t, r.URL, false)}
	b.worker(t, webhooks.Config{Endpoints: eps}) // opens the engine that queues for eps
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w, err := webhooks.New(webhooks.Config{
		Pool: &stopAtBegin{Pool: b.runtime, armed: answered.Load, stop: stop}, Now: b.clock.Now,
		Endpoints: eps, Client: client, Backoff: func(int) time.Duration { return time.Minute },
	})
	if err != nil {
		t.Fatal(err)
	}
	b.stage(t, "deploy")

	_, _ = w.RunOnce(ctx)
	if ctx.Err() == nil {
		t.Fatal("the round was not stopped")
	}
	if n := len(r.deliveries()); n != 1 {
		t.Fatalf("the endpoint was sent %d requests, want 1", n)
	}
	msgs, err := webhooks.List(context.Background(), b.runtime, "acme", "", 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("messages: %d %v", len(msgs), err)
	}
	if m := msgs[0]; m.State != store.WebhookDelivered || len(m.DeliveredTo) != 1 {
		t.Fatalf("the message, answered 200 before the stop, is %s (delivered to %v, leased until %v), want delivered",
			m.State, m.DeliveredTo, m.LockedUntil)
	}
}

// stopAtBegin is a pool that calls stop before it begins a transaction
// once armed reports true.
type stopAtBegin struct {
	*pgxpool.Pool
	armed func() bool
	stop  func()
}

func (p *stopAtBegin) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if p.armed() {
		p.stop()
	}
	return p.Pool.BeginTx(ctx, opts)
}
