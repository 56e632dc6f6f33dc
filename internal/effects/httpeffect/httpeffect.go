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
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
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
	client *http.Client
	creds  *credentials
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
	transport := http.DefaultTransport.(*http.Transport).Clone()
	x := &Effect{action: name, spec: spec, base: base, path: path, client: &http.Client{
		Transport: transport,
		// A redirect is an answer, never followed: following one would
		// send the request, its key and its credentials somewhere the
		// config never named.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if u := spec.UpstreamDecl(); u != nil {
		if x.creds, err = newCredentials(spec.Upstream, u, x.client); err != nil {
			return nil, err
		}
		if len(x.creds.tls) > 0 {
			transport.TLSClientConfig = &tls.Config{Certificates: x.creds.tls, MinVersion: tls.VersionTLS12}
		}
	}
	return x, nil
}

// Transactional reports false: the call is outside every transaction.
func (*Effect) Transactional() bool { return false }

// request is one invocation's request, built once and sent on each attempt.
type request struct {
	url    string
	header http.Header
	body   []byte // nil: no body
}

// Run calls the upstream, attempting again where that is safe, and returns
// {"status": n, "body": …}: the body parsed when it is JSON, a string when
// it is text, and base64 under body_base64 otherwise.
func (x *Effect) Run(ctx context.Context, call *engine.EffectCall) (engine.EffectResult, error) {
	var input map[string]json.RawMessage
	if err := json.Unmarshal(call.Input, &input); err != nil {
		return engine.EffectResult{}, err
	}
	req, err := x.build(input)
	if err != nil {
		return engine.EffectResult{}, fmt.Errorf("%s: the input cannot be placed in the request: %w", x.describe(), err)
	}
	if x.spec.Retry == ontology.RetryWithIdempotencyKey {
		// One key per invocation, random: a key derived from the input
		// would make two deliberate identical calls one.
		req.header.Set(x.spec.IdempotencyHeader(), uuid.NewString())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(x.spec.Deadline))
	defer cancel()
	// inDoubt: an attempt may have taken effect, and none succeeded since.
	inDoubt := false
	for n := 1; ; n++ {
		a := x.attempt(ctx, req, n)
		recordErr := error(nil)
		if call.RecordAttempt != nil {
			recordErr = call.RecordAttempt(ctx, a.record)
		}
		if a.result != nil {
			return engine.EffectResult{Data: a.result, RowsAffected: x.rowsAffected()}, nil
		}
		inDoubt = inDoubt || a.mayHaveActed(x.spec.Method)
		wait, again := x.again(ctx, a, n)
		if recordErr != nil {
			again = false
			a.err = fmt.Errorf("%w; recording the attempt failed, so no other was made: %w", a.err, recordErr)
		}
		if !again {
			err := engine.Classified(a.diagnostic, fmt.Errorf("%s: attempt %d of %d: %w", x.describe(), n, x.spec.MaxAttempts, a.err))
			if inDoubt {
				return engine.EffectResult{}, engine.OutcomeUnknown(err)
			}
			return engine.EffectResult{}, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			err := engine.Classified(engine.DiagnosticUpstreamTimeout, fmt.Errorf("%s: the deadline passed waiting to attempt again after %w", x.describe(), a.err))
			if inDoubt {
				return engine.EffectResult{}, engine.OutcomeUnknown(err)
			}
			return engine.EffectResult{}, err
		case <-timer.C:
		}
	}
}

// describe names the call for an operator without its URL or values: the
// method, the upstream and the path template.
func (x *Effect) describe() string {
	return fmt.Sprintf("%s %s %s", x.spec.Method, x.spec.Upstream, x.spec.Path)
}

// rowsAffected is what a success counts: nothing for a read, one call's
// effect otherwise.
func (x *Effect) rowsAffected() int64 {
	if ontology.SafeMethod(x.spec.Method) {
		return 0
	}
	return 1
}

// build binds the input into the request: path segments escaped, query
// and header values as their JSON scalars, the body as JSON.
func (x *Effect) build(input map[string]json.RawMessage) (*request, error) {
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
		vs, err := values(tmpl, input)
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
		vs, err := values(tmpl, input)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("header %s: the value holds a line break", k)
			}
			header.Add(k, v)
		}
	}
	r := &request{url: u.String(), header: header}
	if x.spec.Body != nil {
		if r.body, err = json.Marshal(fill(x.spec.Body, input)); err != nil {
			return nil, err
		}
		header.Set("Content-Type", "application/json")
	}
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json, */*;q=0.5")
	}
	return r, nil
}

// values are a query or header template's values: a literal as itself,
// a :name reference as the input value's scalars (an array repeats the
// parameter; absent or null gives none).
func values(tmpl string, input map[string]json.RawMessage) ([]string, error) {
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
	diagnostic engine.Diagnostic
	err        error
}

// mayHaveActed reports whether the attempt may have taken effect at the
// upstream: a request of a method that is not read-only, written in
// full, and then unanswered or answered with an error of the server's
// own (500) or of a gateway that may have passed it on (502, 504).
func (a *attempted) mayHaveActed(method string) bool {
	if ontology.SafeMethod(method) || !a.record.Sent {
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
func (x *Effect) again(ctx context.Context, a *attempted, n int) (time.Duration, bool) {
	if n >= x.spec.MaxAttempts || x.spec.Retry == ontology.RetryNever || ctx.Err() != nil {
		return 0, false
	}
	switch a.record.Failure {
	case engine.AttemptStatus:
		if !retryableStatus(a.record.Status) {
			return 0, false
		}
	case engine.AttemptConnect:
		// Nothing was received: repeating it is safe.
	case engine.AttemptDropped, engine.AttemptTimeout:
		// Sent, perhaps acted on: repeated only because the policy makes
		// the repeat harmless (an idempotent method, or the same key).
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

// attempt sends the request once and reads the answer.
func (x *Effect) attempt(ctx context.Context, r *request, n int) *attempted {
	a := &attempted{record: engine.EffectAttempt{Number: n}}
	start := time.Now()
	// sent: written in full; from then on an unanswered request may have
	// been acted on. A write that failed part way leaves a request no
	// server can take as whole. The transport's writer sets it, on a
	// goroutine of its own.
	var sent atomic.Bool
	defer func() { a.record.Duration, a.record.Sent = time.Since(start), sent.Load() }()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(x.spec.Timeout))
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { sent.Store(info.Err == nil) },
	})
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, x.spec.Method, r.url, body)
	if err != nil {
		a.record.Failure, a.diagnostic, a.err = engine.AttemptConnect, engine.DiagnosticUpstreamUnavailable, err
		return a
	}
	// Without GetBody, net/http never re-sends a written body by itself:
	// every repeat is an attempt of ours, and recorded.
	req.GetBody = nil
	req.Header = r.header.Clone()
	if err := x.authorize(req); err != nil {
		a.record.Failure, a.diagnostic, a.err = engine.AttemptConnect, engine.DiagnosticUpstreamUnavailable, err
		return a
	}
	resp, err := x.client.Do(req)
	// A failed round trip waits for the transport's writer to finish, so
	// sent is settled here when it matters.
	a.record.Sent = sent.Load()
	if err != nil {
		x.transportFailure(ctx, a, err)
		return a
	}
	defer func() { _ = resp.Body.Close() }()
	a.record.Status = resp.StatusCode
	if !x.spec.Succeeded(resp.StatusCode) {
		a.record.Failure = engine.AttemptStatus
		a.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
		excerpt = x.creds.scrub(excerpt)
		a.diagnostic = statusDiagnostic(resp.StatusCode)
		a.err = fmt.Errorf("answered %s: %q", resp.Status, strings.ToValidUTF8(string(excerpt), "\uFFFD"))
		return a
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, x.spec.MaxBytes+1))
	var withheld engine.AttemptFailure
	switch {
	case err != nil:
		x.transportFailure(ctx, a, err)
		withheld = a.record.Failure
	case int64(len(data)) > x.spec.MaxBytes:
		withheld = engine.AttemptTooLarge
		a.record.Failure, a.diagnostic = withheld, engine.DiagnosticUpstreamTooLarge
		a.err = fmt.Errorf("answered %s with a body over max_bytes (%d); it was not read", resp.Status, x.spec.MaxBytes)
	}
	if withheld != "" {
		if ontology.SafeMethod(x.spec.Method) {
			return a // a read that failed: nothing changed
		}
		// The upstream said it succeeded: the effect took place, though
		// its answer could not be read whole. Reporting a failure would
		// invite a second one.
		a.result, _ = json.Marshal(map[string]any{"status": resp.StatusCode, "body_withheld": withheld})
		return a
	}
	a.result = result(resp.StatusCode, resp.Header.Get("Content-Type"), x.creds.scrub(data))
	return a
}

// authorize places the upstream's credentials on req.
func (x *Effect) authorize(req *http.Request) error {
	if x.creds == nil || len(x.creds.place) == 0 {
		return nil
	}
	q := req.URL.Query()
	for _, place := range x.creds.place {
		if err := place(req, q); err != nil {
			return err
		}
	}
	req.URL.RawQuery = q.Encode()
	return nil
}

// transportFailure classifies an attempt that got no whole answer.
func (x *Effect) transportFailure(ctx context.Context, a *attempted, err error) {
	// The URL in a *url.Error may carry the input's values; the method,
	// upstream and path template name the call instead.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		a.record.Failure, a.diagnostic = engine.AttemptTimeout, engine.DiagnosticUpstreamTimeout
		err = fmt.Errorf("no whole answer within the timeout (%s) or the deadline: %w", time.Duration(x.spec.Timeout), err)
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
// JSON, as a string when it is text, in base64 when it is neither.
func result(status int, contentType string, body []byte) json.RawMessage {
	out := map[string]any{"status": status}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	switch {
	case len(body) == 0:
		out["body"] = nil
	case (mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")) && json.Valid(body):
		out["body"] = json.RawMessage(body)
	case utf8.Valid(body):
		out["body"] = string(body)
	default:
		out["body_base64"] = base64.StdEncoding.EncodeToString(body)
	}
	data, _ := json.Marshal(out)
	return data
}
