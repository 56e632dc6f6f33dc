// Package webhooks tells a team's endpoints of approval events: a staging
// (approval.pending), a decision (approval.approved, approval.rejected) and
// an expiry (approval.expired), signed per the Standard Webhooks convention
// (https://www.standardwebhooks.com/).
//
// The events are not sent by the engine. A trigger on orangerail.approvals
// (migrations/00009) writes each to an outbox in the same transaction as
// the change, so a change that rolls back announces nothing and no code
// path can forget one. A Worker, started by the composition root, claims
// due messages (FOR UPDATE SKIP LOCKED, with a lease, so replicas share the
// work and a message is claimed once), POSTs them outside any transaction
// with bounded timeouts, and retries failures with exponential backoff and
// jitter until MaxAttempts, then marks them failed. Delivery is
// at-least-once: a receiver deduplicates on webhook-id, which a message
// keeps across retries and redeliveries.
package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/store"
)

// Endpoint is one configured receiver, its secret read.
type Endpoint struct {
	URL string
	// Secrets sign each message, one signature each: while a secret is
	// rotated the variable holds the new and the old, space-separated,
	// and a receiver holding either verifies.
	Secrets      []Secret
	Events       []store.WebhookEvent
	IncludeInput bool
	// Tenants are the tenants whose messages it is sent; none: every
	// tenant's.
	Tenants []string

	key string // ontology.WebhookKey(URL), set by New
}

// shown names the endpoint where logs, last_error and a listing's
// delivered_to do (shownURL).
func (e *Endpoint) shown() string { return shownURL(e.URL) }

// shownURL is an endpoint URL as it is shown (ontology.ShownWebhookURL).
func shownURL(raw string) string { return ontology.ShownWebhookURL(raw) }

// subscribes reports whether e is sent ev, by the config's rule
// (ontology.Webhook.Subscribes), which also routes each event's messages.
func (e *Endpoint) subscribes(ev store.WebhookEvent) bool {
	return ontology.Webhook{Events: e.Events}.Subscribes(ev)
}

// owed reports whether m is owed to e: e serves its tenant and subscribes
// to its event and, where m records the endpoints it was queued for
// (owed_to), is one of them. A message without that record (queued before
// migration 00048, by SQL of an operator's own, or redelivered) is owed to
// every endpoint subscribed that serves its tenant. The tenant is checked
// here whatever owed_to says: a tenant's events, and its inputs, never
// reach an endpoint scoped to other tenants.
func (e *Endpoint) owed(m *store.WebhookMessage) bool {
	return ontology.Webhook{Tenants: e.Tenants}.Serves(m.TenantID) && e.subscribes(m.Event) &&
		(m.OwedTo == nil || slices.Contains(m.OwedTo, e.key))
}

// Endpoints reads the config's webhooks, each secret from the environment
// variable it names (getenv). A variable unset or not a whsec_ secret is
// X_CONFIG_INVALID at its field path; the message never holds the value.
func Endpoints(hooks []ontology.Webhook, getenv func(string) string) ([]Endpoint, error) {
	var out []Endpoint
	for i, h := range hooks {
		path := fmt.Sprintf("webhooks.%d.secret_env", i)
		raw := getenv(h.SecretEnv)
		if strings.TrimSpace(raw) == "" {
			return nil, errcode.New(errcode.ConfigInvalid, fmt.Sprintf("%s: the environment variable %s is not set; set it to the endpoint's signing secret (whsec_ and base64)", path, h.SecretEnv), nil)
		}
		e := Endpoint{URL: h.URL, IncludeInput: h.IncludeInput}
		for _, field := range strings.Fields(raw) {
			secret, err := ParseSecret(field)
			if err != nil {
				return nil, errcode.New(errcode.ConfigInvalid, fmt.Sprintf("%s: the value of %s is refused: %v", path, h.SecretEnv, err), nil)
			}
			e.Secrets = append(e.Secrets, secret)
		}
		e.Events = append(e.Events, h.Events...)
		e.Tenants = slices.Clone(h.Tenants)
		out = append(out, e)
	}
	return out, nil
}

// Defaults of Config.
const (
	MaxAttemptsDefault = 12
	TimeoutDefault     = 10 * time.Second
	PollDefault        = 2 * time.Second
	BatchDefault       = 20
	// BackoffBase is the first retry's delay; each later one doubles, to
	// BackoffMax.
	BackoffBase = 5 * time.Second
	BackoffMax  = time.Hour
	// RetentionDefault is how long a finished message is kept after its
	// last attempt.
	RetentionDefault = 30 * 24 * time.Hour
	// pruneEvery is how often the background loop deletes the finished
	// messages past their retention; pruneBatch how many one transaction
	// deletes, and pruneBatches how many batches one prune runs at most
	// (the rest wait for the next).
	pruneEvery   = time.Hour
	pruneBatch   = 1000
	pruneBatches = 10
	// stopMarkTimeout bounds the mark a stopping worker still makes of
	// each message it had claimed (deliver): what it delivered, and the
	// message released.
	stopMarkTimeout = 2 * time.Second
	// tenantsAtOnce bounds how many tenants' batches a round delivers at
	// once (RunOnce), and the background loop's rounds together
	// (startDue). Each runs a sender per endpoint, and takes a
	// connection from the pool the engine shares for its claim, each
	// input it reads and each mark: a few at once are enough that a
	// tenant whose endpoint is slow (answering only at its timeout) holds
	// no other, while a round over many tenants neither opens tenants ×
	// endpoints POSTs at once nor takes the engine's connections.
	tenantsAtOnce = 4
	// leaseMargin is what a message's lease holds beyond its round's
	// POSTs (New); leaseSkew, of it, is how far apart the clocks of
	// replicas sharing the database may be: a sender starts no POST that
	// could still be in flight leaseSkew before the lease ends (sendOne),
	// when another replica, its clock that far ahead, may claim the
	// message. The rest is for the round's database work.
	leaseMargin = time.Minute
	leaseSkew   = 30 * time.Second
	// maxRedirects bounds same-host redirects followed.
	maxRedirects = 3
	// maxErrorText bounds the last_error kept per message.
	maxErrorText = 300
	// leaseShort is the failure of an endpoint not sent a message whose
	// lease had too little left for a POST to end within it.
	leaseShort = "not sent: the round took so long that the message's lease would have ended during the POST"
	// notOwedHere is the last_error of a message none of whose endpoints
	// is configured where it was last taken.
	notOwedHere = "not sent: none of the endpoints configured when its event happened is configured now; `webhooks redeliver` sends it to those configured now"
	// noneSubscribes is the last_error of a message owed to every
	// endpoint subscribed to its event (redelivered) where none is.
	noneSubscribes = "not sent: no endpoint configured here subscribes to its event"
	// notServed is the last_error of a message owed to endpoints
	// configured here that no longer serve its tenant (their tenants).
	notServed = "not sent: the endpoints configured here that it is owed to serve other tenants (webhooks.N.tenants does not name its tenant)"
	// owedElsewhere is the last_error of a message sent to the endpoints a
	// replica names, and owed to one it does not.
	owedElsewhere = "sent to the endpoints configured here; owed to one this replica's config does not name, it waits for a replica whose config does"
)

// Config is what a Worker needs. Zero values take the defaults above.
type Config struct {
	// Pool is orangerail's database, as orangerail_runtime. Required.
	Pool interface {
		database.TxBeginner
		store.DBTX
	}
	Endpoints []Endpoint
	// PublicURL is the origin the desk is served at (http.public_url);
	// empty when no desk is served, and payloads then link to none.
	PublicURL string
	// Client sends the POSTs. Nil: a client with Timeout that follows
	// redirects to the same scheme and host only.
	Client *http.Client
	// Timeout bounds each POST.
	Timeout time.Duration
	// MaxAttempts is how many attempts a message gets before it is marked
	// failed.
	MaxAttempts int
	// Backoff is the delay before attempt n+1 after n failed. Nil:
	// exponential from BackoffBase to BackoffMax, with jitter.
	Backoff func(n int) time.Duration
	// Now is the clock; nil: time.Now. Due times and leases are compared
	// with it, never with the database's clock, so a test can move it.
	Now func() time.Time
	// Poll is how often the background loop looks for due messages.
	Poll time.Duration
	// Batch is how many messages one claim leases.
	Batch int32
	// Retention is how long a finished message (delivered, or failed) is
	// kept after its last attempt, for `webhooks list` and redelivery;
	// the background loop deletes older ones (Prune).
	Retention time.Duration
	// Logger receives one line per failed attempt: message, event,
	// endpoint URL, attempt and what failed; never a secret or a payload.
	Logger *slog.Logger
}

// Worker delivers the outbox. RunOnce does one round; Start runs rounds in
// the background until Stop. It is safe for concurrent use, and several
// Workers (replicas) may share a database.
type Worker struct {
	c     Config
	lease time.Duration

	mu   sync.Mutex
	loop *periodic.Loop // nil until Start
	// pruned is when the background loop last pruned: zero, before its
	// first round.
	pruned time.Time
	// The background loop's tenants' batches outlive the round that
	// started them (startDue), so a tenant whose endpoint is slow holds
	// no other tenant's later events: places bounds them (tenantsAtOnce),
	// busy names their tenants, which a round does not claim for again
	// (a second batch would be sent beside the first, out of order), and
	// Stop waits for flights, the running loop's (one a Start, so a Start
	// racing a Stop adds to no group being waited on). failed holds their
	// errors, which the next round returns.
	places  chan struct{}
	busy    map[string]bool // under mu
	failed  []error         // under mu
	flights *sync.WaitGroup // under mu; nil until Start
}

// New returns a Worker for c.
func New(c Config) (*Worker, error) {
	if c.Pool == nil {
		return nil, errors.New("webhooks: Config.Pool is required")
	}
	c.Endpoints = slices.Clone(c.Endpoints)
	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		// An unsigned message would be one no receiver can trust.
		if len(e.Secrets) == 0 {
			return nil, fmt.Errorf("webhooks: the endpoint %s has no secret", e.shown())
		}
		e.key = ontology.WebhookKey(e.URL)
	}
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.Poll = cmp.Or(c.Poll, PollDefault)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	if c.Backoff == nil {
		c.Backoff = Backoff
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Client == nil {
		c.Client = newClient(c.Timeout)
	}
	// The lease covers one claim's round: the endpoints' senders run side
	// by side, each sending at most the batch, each POST bounded by
	// Timeout, so no sender needs more than Batch × Timeout, whatever the
	// number of endpoints; leaseMargin is for the round's database work
	// (the claim, the inputs, the marks) and the clocks of replicas. A
	// sender whose round took longer than that (a database stalled) does
	// not start a POST the lease could end during (sendOne): a message is
	// never sent by two workers at once, however long a round takes.
	lease := time.Duration(c.Batch)*c.Timeout + leaseMargin
	return &Worker{c: c, lease: lease, places: make(chan struct{}, tenantsAtOnce), busy: map[string]bool{}}, nil
}

// newClient returns a client bounded by timeout that follows a redirect
// only to the same scheme and host: a receiver cannot send the signed
// payload elsewhere.
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			if len(via) > maxRedirects || req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
				return http.ErrUseLastResponse
			}
			// 301, 302 and 303 turn the POST into a GET without its body: a
			// 2xx to that would count a message as delivered unsent. Only
			// 307 and 308 keep the method and the body.
			if code := req.Response.StatusCode; code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// Backoff is the default delay after n failed attempts: BackoffBase
// doubled n-1 times, at most BackoffMax, with half of it random so
// replicas and endpoints recovering together do not retry in step.
func Backoff(n int) time.Duration {
	d := BackoffMax
	if n >= 1 && n < 20 {
		d = min(BackoffBase<<(n-1), BackoffMax)
	}
	return d/2 + rand.N(d/2+1) //nolint:gosec // G404: jitter needs no secrecy
}

// Start runs rounds in the background, every Poll, until Stop. A second
// Start while running does nothing.
func (w *Worker) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loop != nil {
		return
	}
	flights := &sync.WaitGroup{}
	w.flights = flights
	w.loop = periodic.Start(periodic.Config{Interval: w.c.Poll, Immediately: true, Log: w.c.Logger, What: "webhook delivery"}, func(ctx context.Context) error {
		err := w.startDue(ctx, flights)
		if now := w.c.Now(); now.Sub(w.pruned) >= pruneEvery {
			// Only this loop reads and sets pruned.
			w.pruned = now
			n, perr := w.Prune(ctx)
			if perr == nil && n >= pruneBatch*pruneBatches {
				// More may be waiting (a backlog): prune again next
				// round, not an hour from now, or a replica deletes at
				// most pruneBatch*pruneBatches an hour.
				w.pruned = time.Time{}
			}
			err = errors.Join(err, perr)
		}
		return err
	})
}

// Stop ends the background rounds and waits for the current one, and for
// every tenant's batch they started. It is safe to call without Start,
// and more than once. A message whose round was cut short is retried
// once its lease ends.
func (w *Worker) Stop() {
	w.mu.Lock()
	loop, flights := w.loop, w.flights
	w.loop, w.flights = nil, nil
	w.mu.Unlock()
	if loop != nil {
		loop.Stop()
		// The batches' ctx was the loop's, ended: they mark what they
		// claimed and end.
		flights.Wait()
	}
}

// startDue is the background loop's round: it starts the batch of each
// tenant with messages due now and none in flight, up to tenantsAtOnce
// at once across rounds, and returns without waiting for them, so a
// tenant whose endpoint is slow holds no other tenant's later events
// until its batch ends; flights waits for them (Stop). It returns what
// failed since the last round.
func (w *Worker) startDue(ctx context.Context, flights *sync.WaitGroup) error {
	tenants, err := w.dueTenants(ctx, w.c.Now())
	if err != nil {
		return errors.Join(err, w.takeFailed())
	}
	down := &downSet{why: map[string]string{}}
	for _, tenant := range tenants {
		w.mu.Lock()
		busy := w.busy[tenant]
		w.mu.Unlock()
		if busy {
			continue
		}
		select {
		case w.places <- struct{}{}:
		case <-ctx.Done():
			return w.takeFailed()
		}
		w.mu.Lock()
		w.busy[tenant] = true
		w.mu.Unlock()
		flights.Go(func() {
			_, err := w.deliverTenant(ctx, tenant, down)
			w.mu.Lock()
			delete(w.busy, tenant)
			if err != nil {
				w.failed = append(w.failed, err)
			}
			w.mu.Unlock()
			<-w.places
		})
	}
	return w.takeFailed()
}

// takeFailed returns, and forgets, the errors of the background batches
// that ended since it was last called.
func (w *Worker) takeFailed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := errors.Join(w.failed...)
	w.failed = nil
	return err
}

// dueTenants lists the tenants with messages due at now.
func (w *Worker) dueTenants(ctx context.Context, now time.Time) ([]string, error) {
	var tenants []string
	err := database.Tenantless(ctx, w.c.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		tenants, err = store.New(tx).WebhookDueTenants(ctx, now, 100)
		return err
	})
	return tenants, err
}

// RunOnce claims the messages due now, tenant by tenant, delivers each and
// records how it went, up to tenantsAtOnce tenants at once. It returns how
// many messages it handled.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	tenants, err := w.dueTenants(ctx, w.c.Now())
	if err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		handled int
		errs    []error
		wg      sync.WaitGroup
	)
	// An endpoint that did not answer at all (a timeout, a connection
	// refused) is not waited on again this round: each message would
	// spend its sender another timeout. The tenants' batches share it.
	down := &downSet{why: map[string]string{}}
	// The tenants' batches run side by side, at most tenantsAtOnce, so a
	// tenant whose endpoint is slow holds its own batch alone. Each claims
	// once it has a place, so its lease runs from when it starts.
	places := make(chan struct{}, tenantsAtOnce)
	for _, tenant := range tenants {
		places <- struct{}{}
		wg.Go(func() {
			defer func() { <-places }()
			n, err := w.deliverTenant(ctx, tenant, down)
			mu.Lock()
			defer mu.Unlock()
			handled += n
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return handled, errors.Join(errs...)
}

// deliverTenant claims a tenant's due messages and delivers them
// (deliver). It returns how many it claimed.
func (w *Worker) deliverTenant(ctx context.Context, tenant string, down *downSet) (int, error) {
	var claimed []*store.WebhookMessage
	// The lease runs from this claim, not from the round's start: the
	// claim may have waited for a place (tenantsAtOnce).
	claimedAt := w.c.Now()
	err := database.InTenant(ctx, w.c.Pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		claimed, err = store.New(tx).WebhookClaim(ctx, &store.WebhookClaimParams{TenantID: tenant, Now: claimedAt, Until: claimedAt.Add(w.lease), Limit: w.c.Batch})
		return err
	})
	if err != nil {
		return 0, err
	}
	// In the claim's order, as the events happened: UPDATE … RETURNING
	// returns its rows in no set order (newest first, seen).
	slices.SortFunc(claimed, func(a, b *store.WebhookMessage) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), cmp.Compare(a.Seq, b.Seq))
	})
	return len(claimed), w.deliver(ctx, claimed, down)
}

// Prune deletes the finished messages (delivered, or failed) whose last
// attempt is older than the retention, the oldest first, a batch a
// transaction and at most pruneBatches batches, and returns how many it
// deleted. A queued message is never deleted. The background loop runs it
// every pruneEvery; any replica's may, at once.
func (w *Worker) Prune(ctx context.Context) (int, error) {
	before := w.c.Now().Add(-w.c.Retention)
	total := 0
	for range pruneBatches {
		var n int
		err := database.Tenantless(ctx, w.c.Pool, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
			n, err = store.New(tx).WebhookPrune(ctx, before, pruneBatch)
			return err
		})
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
	return total, nil
}

// downSet holds the endpoints (by URL) that did not answer in a round,
// each with its error: they are not sent the round's later messages,
// which are retried for them. The round's senders share it.
type downSet struct {
	mu  sync.Mutex
	why map[string]string
}

func (d *downSet) get(url string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	why, ok := d.why[url]
	return why, ok
}

func (d *downSet) add(url, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.why[url] = why
}

// sending is one claimed message's delivery in a round: what each
// endpoint (by its index in the config) made of it. Each endpoint's
// sender writes only its own elements.
type sending struct {
	m        *store.WebhookMessage
	input    []byte
	inputErr error
	// owes holds, by endpoint, whether its sender is to send the message
	// (owed it, not reached yet); set before the senders start.
	owes    []bool
	sent    []bool
	failure []string
	// late holds, by endpoint, whether its sender did not send the
	// message for its lease, too short for a POST (sendOne): the round
	// was slow, not the endpoint, so the message is never given up for
	// it, and is retried at once unless another endpoint failed (mark).
	late []bool
	// left counts the senders owing the message not yet past it: the one
	// that brings it to zero marks it, having read what the others wrote.
	// A sender not owed it is past it from the start, however long it
	// takes over its own earlier messages.
	left atomic.Int32
}

// deliver POSTs each of a tenant's claimed messages to every endpoint it
// is owed to and has not reached, and marks each (mark) as soon as the
// sender of every endpoint owed it is past it: its lease is released, and
// what it reached recorded, while a slow endpoint is still sent later
// messages (its own, or others').
// Each endpoint has a sender of its own, which sends it the messages one
// after the other in the claim's order (the order the events happened),
// so an endpoint slow to answer holds only its own messages, never
// another endpoint's: one goroutine per endpoint the config names, no
// more.
func (w *Worker) deliver(ctx context.Context, claimed []*store.WebhookMessage, down *downSet) error {
	batch := make([]*sending, len(claimed))
	for k, m := range claimed {
		n := len(w.c.Endpoints)
		d := &sending{m: m, owes: make([]bool, n), sent: make([]bool, n), failure: make([]string, n), late: make([]bool, n)}
		withInput := false
		for i := range w.c.Endpoints {
			e := &w.c.Endpoints[i]
			d.owes[i] = e.owed(m) && !slices.Contains(m.DeliveredTo, e.URL)
			if d.owes[i] {
				d.left.Add(1)
				withInput = withInput || e.IncludeInput
			}
		}
		// Read once, before the senders start, for every endpoint
		// configured to receive it.
		if withInput {
			d.input, d.inputErr = w.input(ctx, m)
		}
		batch[k] = d
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	marked := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for i := range w.c.Endpoints {
		wg.Go(func() { w.send(ctx, i, batch, down, marked) })
	}
	// No sender owes these: none will mark them.
	for _, d := range batch {
		if !slices.Contains(d.owes, true) {
			marked(w.mark(ctx, d))
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send POSTs the batch's messages owed to the endpoint at index i, and not
// sent it yet, in order, recording in each how it went; the last sender
// past a message marks it, and tells marked how that went. Once ctx ends
// (the worker stopping) it sends nothing more, not the endpoint's
// failure, and only passes the rest, so each is marked (released) still.
func (w *Worker) send(ctx context.Context, i int, batch []*sending, down *downSet, marked func(error)) {
	for _, d := range batch {
		if !d.owes[i] {
			continue
		}
		w.sendOne(ctx, i, d, down)
		if d.left.Add(-1) == 0 {
			marked(w.mark(ctx, d))
		}
	}
}

// sendOne POSTs d's message to the endpoint at index i, which owes it
// (d.owes[i], its sender's test), unless the round is stopping or the
// message's lease could end before the POST does, and records in d how it
// went.
func (w *Worker) sendOne(ctx context.Context, i int, d *sending, down *downSet) {
	e, m := &w.c.Endpoints[i], d.m
	if ctx.Err() != nil {
		return
	}
	if why, ok := down.get(e.URL); ok {
		d.failure[i] = e.shown() + ": not sent: it did not answer earlier in this round (" + why + ")"
		return
	}
	if e.IncludeInput && d.inputErr != nil {
		d.failure[i] = "reading the input: " + d.inputErr.Error()
		return
	}
	// A POST that could outlast the lease is not started: once the lease
	// ends another worker may claim the message and send it too, while
	// this one is in flight.
	if m.LockedUntil.Sub(w.c.Now()) < w.c.Timeout+leaseSkew {
		d.failure[i], d.late[i] = e.shown()+": "+leaseShort, true
		return
	}
	var body []byte
	if e.IncludeInput {
		body, _ = json.Marshal(payloadOf(m, w.c.PublicURL, d.input))
	} else {
		body, _ = json.Marshal(payloadOf(m, w.c.PublicURL, nil))
	}
	if err := w.post(ctx, e, m.ID.String(), body); err != nil {
		if ctx.Err() != nil {
			return // stopping: not the endpoint's failure
		}
		d.failure[i] = e.shown() + ": " + err.Error()
		if !errors.As(err, new(errStatus)) {
			down.add(e.URL, err.Error())
		}
		w.c.Logger.Warn("webhook delivery failed", "message", m.ID.String(), "event", string(m.Event),
			"endpoint", e.shown(), "attempt", m.Attempts, "error", err.Error())
		return
	}
	d.sent[i] = true
}

// mark records how d's message went, and marks it delivered, to retry, or
// failed. One owed to an endpoint this replica's config does not name —
// removed, or added by a newer config another replica serves (a rolling
// deploy) — is left for a replica that names it, the endpoints reached
// here kept, until its attempts run out: then it is delivered where it
// could be, or, reaching none, failed.
func (w *Worker) mark(ctx context.Context, d *sending) error {
	m := d.m
	delivered := slices.Clone(m.DeliveredTo)
	var failures []string
	// late: an endpoint was not sent it for its lease (sendOne), so not
	// attempted: the round was slow (a database stalled), not the
	// endpoint. failed: another endpoint failed.
	owed, late, failed := false, false, false
	// In the config's order, whatever order the senders finished in.
	for i := range w.c.Endpoints {
		e := &w.c.Endpoints[i]
		owed = owed || e.owed(m)
		if d.sent[i] {
			delivered = append(delivered, e.URL)
		}
		if d.failure[i] != "" {
			failures = append(failures, d.failure[i])
			late, failed = late || d.late[i], failed || !d.late[i]
		}
	}
	elsewhere := m.OwedTo != nil && slices.ContainsFunc(m.OwedTo, func(k string) bool {
		return !slices.ContainsFunc(w.c.Endpoints, func(e Endpoint) bool { return e.key == k })
	})
	mark := &store.WebhookMarkParams{ID: m.ID, TenantID: m.TenantID, Lease: *m.LockedUntil, DeliveredTo: delivered, At: w.c.Now()}
	stopping := ctx.Err()
	// Stopping (a deploy) mid-message, or while this mark is written: the
	// endpoints that answered are recorded, so none is sent it again, and
	// the message is released (due now, if stopping), for the next
	// worker, rather than left to its lease. The mark outlives ctx by at
	// most stopMarkTimeout.
	round := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(round))
	defer cancel()
	defer context.AfterFunc(round, func() {
		t := time.NewTimer(stopMarkTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})()
	err := database.InTenant(ctx, w.c.Pool, m.TenantID, pgx.TxOptions{}, func(tx pgx.Tx) error {
		s := store.New(tx)
		exhausted := m.Attempts >= w.c.MaxAttempts
		// retry leaves the message for a later attempt, after its backoff.
		retry := func(why string) error {
			mark.LastError, mark.At = why, mark.At.Add(w.c.Backoff(m.Attempts))
			return s.WebhookMarkRetry(ctx, mark)
		}
		switch {
		case stopping != nil || late && !failed:
			// Late alone, like stopping: due now, the endpoint having
			// refused nothing.
			mark.LastError = "the worker stopped before every endpoint was sent the message"
			if len(failures) > 0 {
				mark.LastError = errorText(failures)
			}
			return s.WebhookMarkRetry(ctx, mark)
		case late:
			// Another endpoint failed too: after its backoff, but never
			// given up while an endpoint it is owed was not attempted:
			// its last attempt would be spent on no POST.
			return retry(errorText(failures))
		case !owed && exhausted:
			// The config changed since the event: no endpoint it was
			// queued for is left, and one configured since was not
			// there when it happened. Or, owed to every endpoint
			// subscribed (redelivered), none is: not sent, so not
			// delivered.
			mark.LastError = w.notSent(m)
			return s.WebhookMarkFailed(ctx, mark)
		case !owed:
			// None of its endpoints is configured here: removed, or
			// added by a newer config another replica serves (a rolling
			// deploy). Left for a replica that knows one, failed only
			// when its attempts run out.
			return retry(w.notSent(m))
		case len(failures) == 0 && elsewhere && !exhausted:
			return retry(owedElsewhere)
		case len(failures) == 0:
			return s.WebhookMarkDelivered(ctx, mark)
		case exhausted:
			mark.LastError = errorText(failures)
			return s.WebhookMarkFailed(ctx, mark)
		default:
			return retry(errorText(failures))
		}
	})
	if errors.Is(err, store.ErrNotFound) {
		// The lease had ended by the mark: another worker may hold the
		// message now, and send it again to the endpoints this round
		// reached. Not this worker's failure, but an operator reading
		// an endpoint's duplicate finds why here.
		w.c.Logger.Warn("webhook delivery not recorded: the message's lease ended before its round did, so the endpoints it reached may be sent it again",
			"message", m.ID.String(), "event", string(m.Event), "tenant", m.TenantID, "reached", reachedShown(w.c.Endpoints, d))
		err = nil
	}
	return errors.Join(stopping, err)
}

// reachedShown lists, as shown, the endpoints d's round sent its message.
func reachedShown(endpoints []Endpoint, d *sending) string {
	var shown []string
	for i := range endpoints {
		if d.sent[i] {
			shown = append(shown, endpoints[i].shown())
		}
	}
	return strings.Join(shown, " ")
}

// notSent is the last_error of m, sent to no endpoint here: one that
// would be owed it but for its tenants says so, not that no endpoint is
// configured or subscribed.
func (w *Worker) notSent(m *store.WebhookMessage) string {
	switch {
	case slices.ContainsFunc(w.c.Endpoints, func(e Endpoint) bool {
		return e.subscribes(m.Event) && (m.OwedTo == nil || slices.Contains(m.OwedTo, e.key))
	}):
		return notServed
	case m.OwedTo == nil:
		return noneSubscribes
	}
	return notOwedHere
}

// input reads the approval's verbatim input, for an endpoint configured to
// receive it.
func (w *Worker) input(ctx context.Context, m *store.WebhookMessage) ([]byte, error) {
	var input []byte
	err := database.InTenant(ctx, w.c.Pool, m.TenantID, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		a, err := store.New(tx).ApprovalGet(ctx, &store.ApprovalGetParams{ID: m.ApprovalID, TenantID: m.TenantID})
		if err != nil {
			return err
		}
		input = a.Input
		return nil
	})
	return input, err
}

// errStatus is a reply that is not 2xx.
type errStatus struct{ code int }

func (e errStatus) Error() string {
	return "answered " + strconv.Itoa(e.code) + " " + http.StatusText(e.code)
}

// post sends one signed POST and reports anything but a 2xx.
func (w *Worker) post(ctx context.Context, e *Endpoint, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	at := w.c.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orangerail-webhooks")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	sigs := make([]string, len(e.Secrets))
	for i, secret := range e.Secrets {
		sigs[i] = Sign(secret, id, at, body)
	}
	req.Header.Set(HeaderSignature, strings.Join(sigs, " "))
	resp, err := w.c.Client.Do(req)
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The client's error names the URL, whose path or query may be
		// the receiver's secret: only the operation and its cause.
		return fmt.Errorf("%s: %w", urlErr.Op, urlErr.Err)
	}
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	// Read a little of the reply so the connection can be reused; a
	// receiver's body is never kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errStatus{resp.StatusCode}
	}
	return nil
}

func errorText(failures []string) string {
	s := failures[0]
	if len(failures) > 1 {
		s = fmt.Sprintf("%s (and %d more)", s, len(failures)-1)
	}
	// Postgres refuses a NUL in text as it refuses text that is not UTF-8,
	// and a receiver puts what it likes in some errors (a certificate's
	// names, which the client quotes as they are).
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > maxErrorText {
		// Cut on a character's boundary: Postgres refuses text that is not
		// UTF-8, and a mark refused would leave the message leased forever.
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// List lists a tenant's messages, newest first; state "" lists every state.
// Each endpoint delivered to is named as logs name it (shownURL): its URL
// may carry its secret.
func List(ctx context.Context, pool database.TxBeginner, tenant string, state store.WebhookState, limit int32) ([]*store.WebhookMessage, error) {
	if state != "" && !slices.Contains(store.WebhookStates(), state) {
		return nil, errcode.New(errcode.WebhookStateInvalid, fmt.Sprintf("there is no webhook state %q; the states are %v", state, store.WebhookStates()), nil)
	}
	var out []*store.WebhookMessage
	err := database.InTenant(ctx, pool, tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		out, err = store.New(tx).WebhookList(ctx, &store.WebhookListParams{TenantID: tenant, State: state, Limit: limit})
		return err
	})
	for _, m := range out {
		for i, u := range m.DeliveredTo {
			m.DeliveredTo[i] = shownURL(u)
		}
	}
	return out, err
}

// Redeliver queues a tenant's message again, due now, for every endpoint
// subscribed to its event, with its attempts reset. It keeps its id, so a
// receiver that saw it already can tell. A message a worker is sending
// (its lease holds at now) is refused, X_WEBHOOK_IN_FLIGHT: clearing the
// lease would let a second worker send it while the first still is.
func Redeliver(ctx context.Context, pool database.TxBeginner, tenant, id string, now time.Time) (*store.WebhookMessage, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, errcode.New(errcode.WebhookNotFound, "the webhook message id is not a UUID", nil)
	}
	var m *store.WebhookMessage
	leased := false
	err = database.InTenant(ctx, pool, tenant, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		s := store.New(tx)
		m, err = s.WebhookRedeliver(ctx, tenant, uid, now)
		if errors.Is(err, store.ErrNotFound) {
			var lerr error
			if leased, lerr = s.WebhookLeased(ctx, tenant, uid, now); lerr != nil {
				return lerr
			}
		}
		return err
	})
	if leased {
		return nil, errcode.New(errcode.WebhookInFlight, "the webhook message "+uid.String()+" is being sent now; redeliver it once the attempt ends", nil)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, errcode.New(errcode.WebhookNotFound, "the tenant has no webhook message "+uid.String(), err)
	}
	return m, err
}
