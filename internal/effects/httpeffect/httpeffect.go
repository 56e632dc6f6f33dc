// Package httpeffect is the effect of an action declared execute: {http: …}:
// a call of an upstream's HTTP API, its path, query, headers and body bound
// from the call's input by name. It is not transactional: the engine
// commits execution_started before it runs and records its end after, and
// each attempt it makes is an effect_attempt record in between.
//
// Retries follow RFC 9110: only 429, 502, 503, 504 and a transport failure
// are attempted again, never 500; only under retry: safe (an idempotent
// method) or retry: with_idempotency_key (one key per invocation, the same
// on each of its attempts); Retry-After is honoured over the backoff, and
// nothing waits past the deadline. An outcome that cannot be known — a
// request written in full and then unanswered, or answered 500, 502 or 504,
// by a method that is not read-only — is engine.OutcomeUnknown unless a
// later attempt succeeded.
package httpeffect

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/net/http/httpguts"

	"github.com/orangerail/orangerail/internal/contentcoding"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/opfile"
)

// Backoff bounds: the wait before attempt n+1 is drawn from
// [d/2, d], d = backoffBase·2^(n-1) capped at backoffMax, unless the
// upstream's Retry-After names its own.
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 5 * time.Second
)

// excerptBytes caps the text of a failing answer an audit record's error
// keeps for operators; an agent is never given any of it.
const excerptBytes = 512

// Effect calls one action's upstream. It is safe for concurrent use.
type Effect struct {
	action string
	spec   *ontology.HTTPExecute
	base   *url.URL
	path   []ontology.PathPart
	caller *Caller
	plan   *Plan
}

// New makes the effect of an action declared execute: {http: …}; it is an
// engine.EffectFactory.
func New(name string, a *ontology.Action) (engine.Effect, error) {
	spec := a.Execute.HTTP
	if a.Execute.Kind() != ontology.ExecuteHTTP || spec == nil {
		return nil, fmt.Errorf("httpeffect: the action's execute is of kind %q, not http", a.Execute.Kind())
	}
	base := spec.BaseURL()
	if base == nil {
		return nil, errors.New("httpeffect: the upstream has no base URL (load the config with ontology.Parse)")
	}
	path, err := ontology.ParsePath(spec.Path)
	if err != nil {
		return nil, err
	}
	caller, err := NewCaller(spec.Upstream, spec.UpstreamDecl(), spec.Presented(), spec.TokenScopes())
	if err != nil {
		return nil, err
	}
	readOnly := ontology.SafeMethod(spec.Method)
	plan := &Plan{
		Describe:  fmt.Sprintf("%s %s %s", spec.Method, spec.Upstream, spec.Path),
		Method:    spec.Method,
		Limits:    spec.Limits(),
		ReadOnly:  readOnly,
		Retry:     spec.Retry != ontology.RetryNever,
		RetrySent: spec.Retry != ontology.RetryNever,
		Succeeded: spec.Succeeded,
		Read: func(status int, header http.Header, body []byte) Answer {
			return Answer{Result: result(status, header.Get("Content-Type"), body)}
		},
	}
	return &Effect{action: name, spec: spec, base: base, path: path, caller: caller, plan: plan}, nil
}

// Caller sends one call's requests to its upstream: its client, which
// follows no redirect, and the credentials of the schemes the call
// presents, placed per scheme; every credential of the upstream is
// scrubbed from every answer. Every kind of upstream call (http, soap,
// a target read) sends through one.
type Caller struct {
	client *http.Client
	// unpooled sends a request net/http's Transport would send again by
	// itself, on a connection of its own (see attempt).
	unpooled *http.Client
	// reads sends a bodyless GET, HEAD, OPTIONS or DELETE: pooled, over
	// HTTP/1.1 only (see attempt).
	reads   *http.Client
	creds   *credentials
	present []string
}

// NewCaller makes the caller of the upstream declared as u under name, for
// a call that presents the schemes named in present (its Presented) and
// requests its oauth2_client_credentials token with scopes (its
// TokenScopes; nil: the scheme's, empty: no scope); u nil is an upstream
// without credentials.
func NewCaller(name string, u *ontology.Upstream, present, scopes []string) (*Caller, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	c := &Caller{client: &http.Client{
		Transport: transport,
		// A redirect is an answer, never followed: following one would
		// send the request, its key and its credentials somewhere the
		// config never named.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if u != nil {
		var err error
		if c.creds, err = newCredentials(name, u, present, scopes, c.client); err != nil {
			return nil, err
		}
		roots, err := trusted(name, u.CAFile)
		if err != nil {
			return nil, err
		}
		c.present = slices.Clone(present)
		// A client certificate belongs to the connection: a call that does
		// not present the scheme goes out on a client without it, so that
		// no connection it opens can carry it.
		var certs []tls.Certificate
		for _, scheme := range present {
			if cert, ok := c.creds.tls[scheme]; ok {
				certs = append(certs, cert)
			}
		}
		if len(certs) > 0 || roots != nil {
			transport.TLSClientConfig = &tls.Config{Certificates: certs, RootCAs: roots, MinVersion: tls.VersionTLS12}
		}
	}
	// The Transport repeats a request only on a connection it reused
	// (persistConn.shouldRetryRequest): one never reused, kept for no
	// other request, is never the cause of a repeat (see attempt).
	unpooled := transport.Clone()
	unpooled.DisableKeepAlives = true
	c.unpooled = &http.Client{Transport: unpooled, CheckRedirect: c.client.CheckRedirect}
	// The empty body that keeps a read from being repeated (see attempt)
	// is probed and dropped by HTTP/1.1 alone: HTTP/2 sends the headers
	// without END_STREAM and a body of unknown length after them, which a
	// proxy writing HTTP/1.1 sends on chunked.
	reads := transport.Clone()
	reads.Protocols = new(http.Protocols)
	reads.Protocols.SetHTTP1(true)
	if reads.TLSClientConfig != nil {
		// Clone left the source's ALPN offer of h2, which a server would
		// take and then be spoken HTTP/1.1 to.
		reads.TLSClientConfig.NextProtos = slices.DeleteFunc(slices.Clone(reads.TLSClientConfig.NextProtos), func(p string) bool { return p == "h2" })
	}
	c.reads = &http.Client{Transport: reads, CheckRedirect: c.client.CheckRedirect}
	return c, nil
}

// maxCABytes bounds a ca_file: a system's whole bundle is some 200 KiB.
const maxCABytes = 4 << 20

// trusted reads an upstream's ca_file: the authorities its server
// certificate must chain to, or nil (the system's roots) when none is
// named.
func trusted(name, file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := opfile.Read(file, maxCABytes, "CA bundle")
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.ca_file: %w", name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("upstreams.%s.ca_file: %s holds no PEM certificate", name, file)
	}
	return pool, nil
}

// Plan is how one kind of call is attempted: its bounds, when it is
// attempted again, and how an answer is read.
type Plan struct {
	// Describe names the call for an operator without its URL or values.
	Describe string
	Method   string
	Limits   ontology.UpstreamLimits
	// ReadOnly: the call cannot have acted, whatever became of it — no
	// outcome is in doubt, and a success counts no rows.
	ReadOnly bool
	// Retry: a failed attempt may be made again at all (429, 503, a
	// request never sent, and a read's 502 and 504); RetrySent: also one
	// that was sent and never answered, or answered 502 or 504 by a
	// gateway that may have passed it on, which only a read, an idempotent
	// call or a keyed one makes harmless to repeat.
	Retry, RetrySent bool
	// Succeeded reports whether a status is success.
	Succeeded func(status int) bool
	// Read makes an answer read whole (and within max_bytes) the call's
	// result — or, given an answer whose body states its own failure,
	// that failure. For a status that is not success it is called only
	// when ReadFailures; an Answer without Diagnostic then leaves the
	// status to classify the failure.
	Read         func(status int, header http.Header, body []byte) Answer
	ReadFailures bool
}

// Answer is what a kind of call makes of an answer.
type Answer struct {
	// Result is a success's data.
	Result json.RawMessage
	// Diagnostic and Err are a failure the answer states (a SOAP fault):
	// Err is for operators, never for an agent. An Err that cuts what it
	// quotes is Scrubbable.
	Diagnostic engine.Diagnostic
	Err        error
	// Unreadable: a success status, and a body the kind cannot read.
	Unreadable error
}

// Scrubbable is an error that quotes an answer's text and cuts it as it
// is written: it returns itself with what it quotes scrubbed, whole, so
// that a credential the cut would fall inside is found before the cut,
// not its beginning kept after it.
type Scrubbable interface {
	error
	Scrubbed(scrub func(string) string) error
}

// Request is one invocation's request, built once and sent on each attempt.
type Request struct {
	URL    string
	Header http.Header
	Body   []byte // nil: no body
	// IdempotencyKey is the key Header carries, recorded with each
	// attempt; "" for none.
	IdempotencyKey string
}

// Transactional reports false: the call is outside every transaction.
func (*Effect) Transactional() bool { return false }

// Run calls the upstream, attempting again where that is safe, and returns
// {"status": n, "body": …}: the body parsed when it is JSON, a string when
// it is text, and base64 under body_base64 otherwise.
func (x *Effect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	req, err := Place(call, x.plan, x.build)
	if err != nil {
		return engine.EffectResult{}, err
	}
	if x.spec.Retry == ontology.RetryWithIdempotencyKey {
		// One key per invocation, random: a key derived from the input
		// would make two deliberate identical calls one.
		req.IdempotencyKey = uuid.NewString()
		req.Header.Set(x.spec.IdempotencyHeader(), req.IdempotencyKey)
	}
	return x.caller.Do(ctx, call, x.plan, req)
}

// Place builds a call's request from its input with build, each kind's
// binding: an input it cannot place is upstream_request_unplaceable, and
// nothing is sent.
func Place(call *engine.EffectCall, plan *Plan, build func(input map[string]json.RawMessage) (*Request, error)) (*Request, error) {
	var input map[string]json.RawMessage
	if err := json.Unmarshal(call.Input, &input); err != nil {
		return nil, err
	}
	req, err := build(input)
	if err != nil {
		return nil, engine.Classified(engine.DiagnosticUpstreamUnplaceable, fmt.Errorf("%s: the input cannot be placed in the request: %w", plan.Describe, err))
	}
	return req, nil
}

// Do sends req under plan, attempting again where plan makes that safe,
// and returns the result of the attempt that succeeded.
func (c *Caller) Do(ctx context.Context, call *engine.EffectCall, plan *Plan, req *Request) (engine.EffectResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(plan.Limits.Deadline))
	defer cancel()
	// inDoubt: an attempt may have taken effect, and none succeeded since.
	inDoubt := false
	for n := 1; ; n++ {
		a := c.attempt(ctx, plan, req, n)
		recordErr := error(nil)
		if call.RecordAttempt != nil {
			recordErr = call.RecordAttempt(ctx, a.record)
		}
		if a.result != nil {
			var rows int64 = 1 // one call's effect
			if plan.ReadOnly {
				rows = 0
			}
			return engine.EffectResult{Data: a.result, RowsAffected: rows}, nil
		}
		inDoubt = inDoubt || a.mayHaveActed(plan.ReadOnly)
		wait, again := again(ctx, plan, a, n)
		if recordErr != nil {
			again = false
			a.err = fmt.Errorf("%w; recording the attempt failed, so no other was made: %w", a.err, recordErr)
		}
		if !again {
			err := engine.Classified(a.diagnostic, fmt.Errorf("%s: attempt %d of %d: %w", plan.Describe, n, plan.Limits.MaxAttempts, a.err))
			if inDoubt {
				return engine.EffectResult{}, engine.OutcomeUnknown(err)
			}
			return engine.EffectResult{}, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			err := engine.Classified(engine.DiagnosticUpstreamTimeout, fmt.Errorf("%s: the deadline passed waiting to attempt again after %w", plan.Describe, a.err))
			if inDoubt {
				return engine.EffectResult{}, engine.OutcomeUnknown(err)
			}
			return engine.EffectResult{}, err
		case <-timer.C:
		}
	}
}

// build binds the input into the request: path segments escaped, query
// and header values as their JSON scalars, the body as JSON.
func (x *Effect) build(input map[string]json.RawMessage) (*Request, error) {
	var path strings.Builder
	path.WriteString(strings.TrimSuffix(x.base.EscapedPath(), "/"))
	for _, p := range x.path {
		if p.Param == "" {
			path.WriteString(p.Literal)
			continue
		}
		v, ok, err := scalar(input[p.Param])
		switch {
		case err != nil:
			return nil, fmt.Errorf("{%s}: %w", p.Param, err)
		case !ok || v == "":
			return nil, fmt.Errorf("{%s} has no value", p.Param)
		case v == "." || v == "..":
			// Escaping leaves dots alone, and a server would resolve them.
			return nil, fmt.Errorf("{%s} is %q, which names another path", p.Param, v)
		}
		path.WriteString(url.PathEscape(v))
	}
	u := *x.base
	u.RawPath = path.String()
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, err
	}
	query := url.Values{}
	for k, tmpl := range x.spec.Query {
		vs, err := Values(tmpl, input)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", k, err)
		}
		for _, v := range vs {
			query.Add(k, v)
		}
	}
	u.RawQuery = query.Encode()
	header := http.Header{}
	for k, tmpl := range x.spec.Headers {
		if err := AddHeader(header, k, tmpl, input); err != nil {
			return nil, err
		}
	}
	r := &Request{URL: u.String(), Header: header}
	if x.spec.Body != nil && !absentBody(x.spec.Body, input) {
		if r.Body, err = json.Marshal(fill(x.spec.Body, input)); err != nil {
			return nil, err
		}
		header.Set("Content-Type", "application/json")
	}
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json, */*;q=0.5")
	}
	return r, nil
}

// AddHeader adds header k's values to header: its template's values
// (Values), none of which may break the line.
func AddHeader(header http.Header, k, tmpl string, input map[string]json.RawMessage) error {
	vs, err := Values(tmpl, input)
	if err != nil {
		return fmt.Errorf("header %s: %w", k, err)
	}
	for _, v := range vs {
		if !httpguts.ValidHeaderFieldValue(v) {
			// net/http refuses it at the round trip: nothing could be sent.
			return fmt.Errorf("header %s: the value holds a line break or another control character", k)
		}
		header.Add(k, v)
	}
	return nil
}

// Values are a query, header or element template's values: a literal as
// itself, a :name reference as the input value's scalars (an array
// repeats the parameter; absent or null gives none).
func Values(tmpl string, input map[string]json.RawMessage) ([]string, error) {
	name, ok := ontology.InputRef(tmpl)
	if !ok {
		return []string{tmpl}, nil
	}
	raw := bytes.TrimSpace(input[name])
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		var out []string
		for _, item := range items {
			v, ok, err := scalar(item)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, v)
			}
		}
		return out, nil
	}
	v, ok, err := scalar(raw)
	if err != nil || !ok {
		return nil, err
	}
	return []string{v}, nil
}

// scalar spells a JSON scalar as text: a string as itself, a number or a
// boolean as its literal. ok is false for absent or null; an object or
// array is an error.
func scalar(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false, nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil, err
	case raw[0] == '{' || raw[0] == '[':
		return "", false, errors.New("an object or array has no single text form")
	}
	return string(raw), true, nil
}

// absentBody reports whether the body template is one :name reference
// the input leaves out: an optional body not given, sent as no body (the
// JSON null, which the operation's schema refuses, was sent).
func absentBody(tmpl any, input map[string]json.RawMessage) bool {
	s, ok := tmpl.(string)
	if !ok {
		return false
	}
	name, ok := ontology.InputRef(s)
	if !ok {
		return false
	}
	_, given := input[name]
	return !given
}

// fill is the body template with each ":name" string replaced by the
// input's JSON value (null when absent): the body is built as JSON, never
// by substituting text.
func fill(tmpl any, input map[string]json.RawMessage) any {
	switch v := tmpl.(type) {
	case string:
		if name, ok := ontology.InputRef(v); ok {
			if raw, ok := input[name]; ok {
				return raw
			}
			return nil
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fill(e, input)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = fill(e, input)
		}
		return out
	}
	return tmpl
}

// attempted is how one attempt went.
type attempted struct {
	record engine.EffectAttempt
	// result is the effect's result when the attempt succeeded.
	result json.RawMessage
	// retryAfter is the wait the upstream asked for; 0 for none.
	retryAfter time.Duration
	// stated: the answer stated the call's failure itself (a SOAP
	// fault), so the upstream answered about the call, not lost it.
	stated bool
	// refused: nothing was sent, and sending it again is refused alike
	// (the token endpoint refused the client's credentials).
	refused    bool
	diagnostic engine.Diagnostic
	err        error
}

// mayHaveActed reports whether the attempt may have taken effect at the
// upstream: a request of a call that is not read-only, written in
// full, and then unanswered or answered with an error of the server's
// own (500) or of a gateway that may have passed it on (502, 504) — and
// not with an answer that states the call's failure (a SOAP fault).
func (a *attempted) mayHaveActed(readOnly bool) bool {
	if readOnly || !a.record.Sent || a.stated {
		return false
	}
	switch a.record.Status {
	case 0, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableStatus is a status RFC 9110 and RFC 6585 let a client repeat:
// too many requests, and the gateway answers. Never 500: the server may
// have acted and lost its answer.
func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// again reports whether to attempt again after a, and after how long.
func again(ctx context.Context, plan *Plan, a *attempted, n int) (time.Duration, bool) {
	if n >= plan.Limits.MaxAttempts || !plan.Retry || ctx.Err() != nil || a.refused {
		return 0, false
	}
	switch a.record.Failure {
	case engine.AttemptStatus:
		if !retryableStatus(a.record.Status) {
			return 0, false
		}
		// A gateway's 502 or 504 may follow a request it passed on, as an
		// unanswered one may: repeated only where a repeat is harmless.
		if a.mayHaveActed(plan.ReadOnly) && !plan.RetrySent {
			return 0, false
		}
	case engine.AttemptConnect:
		// Nothing was received: repeating it is safe.
	case engine.AttemptDropped, engine.AttemptTimeout:
		// Sent, perhaps acted on: repeated only where the plan makes the
		// repeat harmless (a read, an idempotent method, or the same key).
		// A timeout before the request was written in full (a dial, a
		// token fetch, a body the upstream stopped reading) sent nothing
		// the upstream could act on: it is repeated as a refused one is.
		if a.record.Sent && !plan.RetrySent {
			return 0, false
		}
	default:
		return 0, false
	}
	wait := a.retryAfter
	if wait == 0 {
		d := min(backoffBase<<(n-1), backoffMax)
		wait = d/2 + rand.N(d/2+1) //nolint:gosec // jitter spreads retries; it guards nothing
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
		// The upstream's window, or the curve's, ends past the deadline:
		// report now rather than wait for a deadline that ends it anyway.
		return 0, false
	}
	return wait, true
}

// probesEmptyBody reports whether net/http sends no body for a request of
// method whose body is empty but of unknown length: the methods it
// expects none of (transferWriter.probeRequestBody), where any other is
// sent an empty chunked body.
func probesEmptyBody(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// attempt sends the request once and reads the answer.
func (c *Caller) attempt(ctx context.Context, plan *Plan, r *Request, n int) *attempted {
	a := &attempted{record: engine.EffectAttempt{Number: n, IdempotencyKey: r.IdempotencyKey}}
	start := time.Now()
	// sent: written in full; from then on an unanswered request may have
	// been acted on. A write that failed part way leaves a request no
	// server can take as whole. The transport's writer sets it, on a
	// goroutine of its own.
	var sent atomic.Bool
	defer func() { a.record.Duration, a.record.Sent = time.Since(start), sent.Load() }()
	ctx, span := startAttemptSpan(ctx, plan.Method, r.URL, n)
	defer func() { endAttemptSpan(span, a) }()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(plan.Limits.Timeout))
	defer cancel()
	// A token the attempt fetches first is bound by its timeout, but is
	// none of the request's sending, which the trace below tells.
	authCtx := ctx
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { sent.Store(info.Err == nil) },
	})
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, plan.Method, r.URL, body)
	if err != nil {
		a.record.Failure, a.diagnostic, a.err = engine.AttemptConnect, engine.DiagnosticUpstreamUnavailable, err
		return a
	}
	// Without GetBody, net/http never re-sends a written body by itself:
	// every repeat is an attempt of ours, and recorded.
	req.GetBody = nil
	req.Header = r.Header.Clone()
	// A traced call's attempt carries its span as the upstream's parent
	// (W3C traceparent); an untraced one carries nothing.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if err := c.authorize(authCtx, req); err != nil {
		a.record.Failure, a.diagnostic, a.err = engine.AttemptConnect, engine.DiagnosticUpstreamUnavailable, err
		var refused *tokenRefused
		switch {
		case authCtx.Err() != nil:
			a.record.Failure, a.diagnostic = engine.AttemptTimeout, engine.DiagnosticUpstreamTimeout
		case errors.As(err, &refused) && refused.status >= 300 && refused.status < 500 && !retryableStatus(refused.status):
			// The token endpoint refused the client (400 invalid_client,
			// 401, a redirect): asking again is refused alike.
			a.diagnostic, a.refused = engine.DiagnosticUpstreamRejected, true
		case errors.As(err, new(*tokenTypeRefused)):
			// A token of a type this client cannot present (mac, DPoP):
			// asking again issues another of the same type.
			a.diagnostic, a.refused = engine.DiagnosticUpstreamRejected, true
		}
		return a
	}
	// net/http's Transport sends a request again by itself when the
	// connection it reused ends before an answer and the request is one it
	// counts replayable (Request.isReplayable): one whose body is nil or
	// NoBody (GetBody is nil here, so no other body is rewound) that is a
	// GET, HEAD, OPTIONS or TRACE or carries an Idempotency-Key or
	// X-Idempotency-Key header. Such a repeat is an attempt the upstream
	// receives and no record shows, outside max_attempts and the backoff.
	client := c.client
	if req.Body == nil || req.Body == http.NoBody {
		if probesEmptyBody(req.Method) {
			// An empty body that is neither makes the request one the
			// Transport never repeats, on a pooled connection; the
			// Transport reads it, finds it empty, and sends no body — over
			// HTTP/1.1, which c.reads alone speaks.
			req.Body = io.NopCloser(strings.NewReader(""))
			client = c.reads
		} else {
			// A bodyless POST, PUT or PATCH would be sent an empty chunked
			// body: it goes on a connection of its own, never reused, on
			// which nothing is repeated.
			client = c.unpooled
		}
	}
	resp, err := client.Do(req)
	// A failed round trip waits for the transport's writer to finish, so
	// sent is settled here when it matters.
	a.record.Sent = sent.Load()
	if err != nil {
		transportFailure(ctx, plan, a, err)
		return a
	}
	defer func() { _ = resp.Body.Close() }()
	a.record.Status = resp.StatusCode
	if resp.StatusCode == http.StatusUnauthorized {
		// The token it carried is not honoured, whatever its expiry says:
		// the next call fetches another.
		c.creds.refusedToken(req.Header.Get("Authorization"))
	}
	if !plan.Succeeded(resp.StatusCode) {
		c.failed(plan, a, resp)
		return a
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, plan.Limits.MaxBytes+1))
	var withheld engine.AttemptFailure
	switch {
	case err != nil:
		transportFailure(ctx, plan, a, err)
		withheld = a.record.Failure
	case int64(len(data)) > plan.Limits.MaxBytes:
		withheld = engine.AttemptTooLarge
		a.record.Failure, a.diagnostic = withheld, engine.DiagnosticUpstreamTooLarge
		a.err = fmt.Errorf("answered %s with a body over max_bytes (%d); it was not read", statusText(resp.StatusCode), plan.Limits.MaxBytes)
	}
	if withheld != "" {
		if plan.ReadOnly {
			return a // a read that failed: nothing changed
		}
		// The upstream said it succeeded: the effect took place, though
		// its answer could not be read whole. Reporting a failure would
		// invite a second one.
		a.result, _ = json.Marshal(map[string]any{"status": resp.StatusCode, "body_withheld": withheld})
		return a
	}
	answer := c.read(plan, resp, data)
	switch {
	case answer.Diagnostic != "":
		// The answer states its own failure: the upstream did not act.
		a.record.Failure, a.diagnostic, a.stated = engine.AttemptStatus, answer.Diagnostic, true
		a.err = fmt.Errorf("answered %s: %w", statusText(resp.StatusCode), answer.Err)
	case answer.Unreadable != nil && plan.ReadOnly:
		a.record.Failure, a.diagnostic = engine.AttemptUnreadable, engine.DiagnosticUpstreamError
		a.err = fmt.Errorf("answered %s with a body that cannot be read: %w", statusText(resp.StatusCode), answer.Unreadable)
	case answer.Unreadable != nil:
		// As for a body too large: the upstream said it acted.
		a.record.Failure = engine.AttemptUnreadable
		a.result, _ = json.Marshal(map[string]any{"status": resp.StatusCode, "body_withheld": engine.AttemptUnreadable})
	default:
		a.result = answer.Result
	}
	return a
}

// failed reads an answer whose status is not success: an excerpt for
// operators, or — when the plan reads failures — the body whole, so that
// one stating its own failure (a SOAP fault) is classified by it.
func (c *Caller) failed(plan *Plan, a *attempted, resp *http.Response) {
	a.record.Failure = engine.AttemptStatus
	a.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	a.diagnostic = statusDiagnostic(resp.StatusCode)
	if enc := bodyEncoding(resp); enc != "" {
		a.err = fmt.Errorf("answered %s, its body encoded (Content-Encoding %q), not quoted", statusText(resp.StatusCode), enc)
		return
	}
	if plan.ReadFailures && !retryableStatus(resp.StatusCode) {
		data, err := io.ReadAll(io.LimitReader(resp.Body, plan.Limits.MaxBytes+1))
		if err == nil && int64(len(data)) <= plan.Limits.MaxBytes {
			if answer := c.read(plan, resp, data); answer.Diagnostic != "" {
				a.diagnostic, a.stated, a.err = answer.Diagnostic, true, fmt.Errorf("answered %s: %w", statusText(resp.StatusCode), answer.Err)
				return
			}
		}
		a.err = fmt.Errorf("answered %s: %q", statusText(resp.StatusCode), c.creds.excerpt(data, err == nil && int64(len(data)) <= plan.Limits.MaxBytes))
		return
	}
	limit := excerptBytes + c.creds.longest()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)))
	a.err = fmt.Errorf("answered %s: %q", statusText(resp.StatusCode), c.creds.excerpt(data, err == nil && len(data) < limit))
}

// read is the plan's reading of an answer, with no credential in what it
// returns: the body scrubbed before it is read, and the result and the
// error scrubbed after, where what the body escaped (JSON's \u0066,
// XML's &#x66;) is decoded.
func (c *Caller) read(plan *Plan, resp *http.Response, data []byte) Answer {
	if enc := bodyEncoding(resp); enc != "" {
		return Answer{Unreadable: fmt.Errorf("the body is encoded (Content-Encoding %q), which is not decoded: no credential could be looked for in it", enc)}
	}
	answer := plan.Read(resp.StatusCode, resp.Header, c.creds.scrub(data))
	answer.Result = c.creds.scrubJSON(answer.Result)
	answer.Err, answer.Unreadable = c.creds.scrubError(answer.Err), c.creds.scrubError(answer.Unreadable)
	return answer
}

// bodyEncoding is the Content-Encoding of resp's body as read, or "" for
// none: net/http decodes a gzip body it asked for and says none, but an
// upstream may send another unasked (deflate, br), where an echoed
// credential would pass every scrub unseen. Such a body is never
// returned, nor quoted.
func bodyEncoding(resp *http.Response) string {
	enc := contentcoding.Of(resp.Header)
	if enc == "" {
		return ""
	}
	// Named only when it is a registered coding: the header is the
	// upstream's, and one that echoes what it was sent would have a
	// credential quoted.
	switch lower := strings.ToLower(enc); lower {
	case "gzip", "x-gzip", "deflate", "br", "compress", "x-compress", "zstd", "dcb", "dcz", "exi", "pack200-gzip", "aes128gcm":
		return lower
	}
	return "an unregistered coding"
}

// statusText is how an error names an answer's status: its code and the
// standard text, never the reason phrase the upstream wrote, which an
// upstream that echoes what it was sent may fill with a credential.
func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return strconv.Itoa(code)
}

// authorize places the credentials of the schemes the call presents on
// req, and no other; a token it fetches first is fetched within ctx.
func (c *Caller) authorize(ctx context.Context, req *http.Request) error {
	if c.creds == nil || len(c.present) == 0 {
		return nil
	}
	q := req.URL.Query()
	for _, scheme := range c.present {
		place, ok := c.creds.place[scheme]
		if !ok {
			continue // unset (omitted), or on the connection (mtls)
		}
		if err := place(ctx, req, q); err != nil {
			return err
		}
	}
	req.URL.RawQuery = q.Encode()
	return nil
}

// transportFailure classifies an attempt that got no whole answer.
func transportFailure(ctx context.Context, plan *Plan, a *attempted, err error) {
	// The URL in a *url.Error may carry the input's values; the plan's
	// description names the call instead.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		a.record.Failure, a.diagnostic = engine.AttemptTimeout, engine.DiagnosticUpstreamTimeout
		err = fmt.Errorf("no whole answer within the timeout (%s) or the deadline: %w", time.Duration(plan.Limits.Timeout), err)
	case a.record.Sent:
		a.record.Failure, a.diagnostic = engine.AttemptDropped, engine.DiagnosticUpstreamUnavailable
		err = fmt.Errorf("the connection ended after the request was sent: %w", err)
	default:
		a.record.Failure, a.diagnostic = engine.AttemptConnect, engine.DiagnosticUpstreamUnavailable
		err = fmt.Errorf("the request was not sent: %w", err)
	}
	a.err = err
}

// statusDiagnostic classifies a status that is not success.
func statusDiagnostic(status int) engine.Diagnostic {
	switch {
	case retryableStatus(status):
		return engine.DiagnosticUpstreamUnavailable
	case status >= 500:
		return engine.DiagnosticUpstreamError
	}
	return engine.DiagnosticUpstreamRejected
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): delay-seconds
// or an HTTP-date; 0 when absent, unreadable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// result is a success's data: the status, and the body as JSON when it is
// JSON, as a string when it is text, in base64 when it is neither — or
// when the audit record could not hold it as either (a NUL, escaped or
// raw, a lone surrogate): a body that stopped its record would leave an
// effect that ran unrecorded.
func result(status int, contentType string, body []byte) json.RawMessage {
	out := map[string]any{"status": status}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	switch {
	case len(body) == 0:
		out["body"] = nil
	case (mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")) && engine.StorableJSON(body):
		out["body"] = json.RawMessage(body)
	case utf8.Valid(body) && bytes.IndexByte(body, 0) < 0:
		out["body"] = string(body)
	default:
		out["body_base64"] = base64.StdEncoding.EncodeToString(body)
	}
	data, _ := json.Marshal(out)
	return data
}
