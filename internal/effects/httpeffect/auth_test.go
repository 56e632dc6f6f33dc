package httpeffect_test

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

const authConfig = `service: shop
upstreams:
  carrierx:
    base_url: %[1]q
    auth:
      hkey: {type: api_key, in: header, name: X-Api-Key}
      qkey: {type: api_key, in: query, name: api_key}
      ckey: {type: api_key, in: cookie, name: session}
      spare: {type: api_key, in: header, name: X-Spare}
      login: {type: basic}
  ledger:
    base_url: %[1]q
    auth:
      app: {type: oauth2_client_credentials, token_url: "%[1]s/token", scopes: [pay]}
actions:
  label:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrierx, method: POST, path: "/labels/{order_id}", body: {order: ":order_id"}}}
  pay:
    description: d
    input: {type: object, properties: {order_id: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 10}  # called three times: the default of an action not declared destructive: false allows two a minute
    execute: {http: {upstream: ledger, method: POST, path: "/pay/{order_id}"}}
`

// TestCredentials: each scheme's credential is placed where it is
// declared — a header, a query parameter, a cookie, HTTP Basic, an OAuth2
// client-credentials token fetched once and cached — an unset one is
// omitted, and none of them reaches an audit record, a log line, a result
// or an error, though the upstream echoes every one of them back.
func TestCredentials(t *testing.T) {
	secrets := []string{"hkey-SECRET-1", "qkey-SECRET-2", "ckey-SECRET-3", "user-4:pass-SECRET-4", "client-5:secret-SECRET-5", "tok-SECRET-6"}
	var mu sync.Mutex
	tokens := 0
	type got struct{ header, query, cookie, user, password, authorization, spare string }
	var seenLabel, seenPay []got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/token" {
			id, secret, _ := r.BasicAuth()
			if id+":"+secret != secrets[4] {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			tokens++
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token": %q, "token_type": "bearer", "expires_in": 3600}`, secrets[5])
			return
		}
		g := got{header: r.Header.Get("X-Api-Key"), query: r.URL.Query().Get("api_key"), authorization: r.Header.Get("Authorization"), spare: strings.Join(r.Header.Values("X-Spare"), ",")}
		if c, err := r.Cookie("session"); err == nil {
			g.cookie = c.Value
		}
		g.user, g.password, _ = r.BasicAuth()
		if strings.HasPrefix(r.URL.Path, "/pay/") {
			seenPay = append(seenPay, g)
		} else {
			seenLabel = append(seenLabel, g)
		}
		echo, _ := json.Marshal(map[string]string{"header": g.header, "query": g.query, "cookie": g.cookie, "user": g.user, "password": g.password,
			"authorization": g.authorization, "basic": base64.StdEncoding.EncodeToString([]byte(g.user + ":" + g.password))})
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusUnauthorized)
		}
		_, _ = w.Write(echo)
	}))
	t.Cleanup(srv.Close)

	t.Setenv("CARRIERX_HKEY_CREDENTIAL", secrets[0])
	file := filepath.Join(t.TempDir(), "qkey")
	if err := os.WriteFile(file, []byte(secrets[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARRIERX_QKEY_CREDENTIAL_FILE", file)
	t.Setenv("CARRIERX_CKEY_CREDENTIAL", secrets[2])
	t.Setenv("CARRIERX_LOGIN_CREDENTIAL", secrets[3])
	t.Setenv("LEDGER_APP_CREDENTIAL", secrets[4])

	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ctx := context.Background()
	var sinks []string
	for _, c := range []struct {
		action, order string
		status        engine.Status
	}{{"label", "o-1", engine.StatusOK}, {"label", "fail", engine.StatusFailed}, {"pay", "o-2", engine.StatusOK}, {"pay", "o-3", engine.StatusOK}, {"pay", "fail", engine.StatusFailed}} {
		out := e.Call(ctx, agent("acme"), c.action, fmt.Appendf(nil, `{"order_id": %q}`, c.order))
		if out.Status != c.status {
			t.Fatalf("%s %s: %s (%v)", c.action, c.order, out.Status, out.Err)
		}
		sinks = append(sinks, string(out.Data))
		if out.Err != nil {
			sinks = append(sinks, out.Err.Error())
		}
	}
	user, password, _ := strings.Cut(secrets[3], ":")
	for _, g := range seenLabel {
		if g.header != secrets[0] || g.query != secrets[1] || g.cookie != secrets[2] || g.user != user || g.password != password || g.spare != "" {
			t.Fatalf("label saw %+v", g)
		}
	}
	for _, g := range seenPay {
		if g.authorization != "Bearer "+secrets[5] || g.header != "" {
			t.Fatalf("pay saw %+v", g)
		}
	}
	if len(seenLabel) != 2 || len(seenPay) != 3 || tokens != 1 {
		t.Fatalf("%d label calls, %d pay calls, %d token requests: want the token fetched once and cached", len(seenLabel), len(seenPay), tokens)
	}

	sinks = append(sinks, auditEntries(t, admin)...)
	states, _ := json.Marshal(app.CredentialStates(cfg))
	sinks = append(sinks, logs.String(), string(states))
	forbidden := append([]string{password, "secret-SECRET-5", base64.StdEncoding.EncodeToString([]byte(secrets[3]))}, secrets...)
	all := strings.Join(sinks, "\n")
	for _, s := range forbidden {
		if strings.Contains(all, s) {
			t.Errorf("the credential %q reached a sink", s)
		}
	}
	if !strings.Contains(all, "[redacted]") {
		t.Errorf("the echoed credentials were not redacted: %s", all)
	}
	if !strings.Contains(string(states), `"env":"CARRIERX_SPARE_CREDENTIAL","set":false`) {
		t.Errorf("credential states %s", states)
	}
}

// TestCredentialRefused: a credential that cannot be placed is refused
// when the engine is built, named by its variable and never quoted.
func TestCredentialRefused(t *testing.T) {
	t.Setenv("CARRIERX_LOGIN_CREDENTIAL", "no-colon-SECRET")
	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, "http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, testdb.New(t)), Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "CARRIERX_LOGIN_CREDENTIAL") || strings.Contains(err.Error(), "no-colon-SECRET") {
		t.Fatalf("New = %v", err)
	}
	states := app.CredentialStates(cfg)
	found := false
	for _, s := range states {
		if s.Env == "CARRIERX_LOGIN_CREDENTIAL" {
			found = s.Set && strings.Contains(s.Problem, "no colon") && !strings.Contains(s.Problem, "SECRET")
		}
	}
	if !found {
		t.Fatalf("states %+v", states)
	}
}

// TestCheckCredentialRefusesWhatCannotBePlaced: config check and serve
// call a credential set and usable only when it can be placed where it is
// declared. A line break (an env file's trailing newline, a token pasted
// with one) in a header's or a bearer's value failed every call at the
// transport; a byte a cookie may not hold was dropped by net/http, which
// sent another credential and logged the byte (a space and a comma it
// keeps, quoting the value: those pass). Each refusal names the
// variable, never the value; a credential file that is not a regular
// file (a device, a FIFO) is refused before it is read.
func TestCheckCredentialRefusesWhatCannotBePlaced(t *testing.T) {
	header := ontology.UpstreamAuth{Type: ontology.AuthAPIKey, In: ontology.InHeader, Name: "X-Api-Key"}
	cookie := ontology.UpstreamAuth{Type: ontology.AuthAPIKey, In: ontology.InCookie, Name: "sid"}
	query := ontology.UpstreamAuth{Type: ontology.AuthAPIKey, In: ontology.InQuery, Name: "key"}
	bearer := ontology.UpstreamAuth{Type: ontology.AuthBearer}
	env := ontology.CredentialEnv("up", "key")
	for _, c := range []struct {
		auth  ontology.UpstreamAuth
		value string
		ok    bool
	}{
		{header, "k3y-SECRET\n", false}, {header, "k3y-SECRET\x01", false}, {header, "k3y SECRET\twith tab", true},
		{bearer, "tok-SECRET\r\nX-Evil: 1", false}, {bearer, "tok-SECRET.part_2~", true},
		{cookie, `ab;c-SECRET`, false}, {cookie, `ab"c-SECRET`, false}, {cookie, `ab\c-SECRET`, false}, {cookie, "abc-SECRET\u00e9", false},
		{cookie, "a b,c-SECRET", true}, {cookie, "abc-SECRET!#$%&'()*+-./:<=>?@[]^_`{|}~", true}, // a space and a comma are sent, the value quoted
		{query, "a b;c\"-SECRET", true},
	} {
		t.Setenv(env, c.value)
		set, err := httpeffect.CheckCredential("up", "key", &c.auth)
		if !set || (err == nil) != c.ok {
			t.Errorf("%s %q: set %v, %v", c.auth.In, c.value, set, err)
		}
		if err != nil && (!strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "SECRET")) {
			t.Errorf("%q: the refusal %q names the value or not the variable", c.value, err)
		}
	}
	t.Setenv(env, "")
	t.Setenv(env+"_FILE", "/dev/zero")
	if set, err := httpeffect.CheckCredential("up", "key", &header); set || err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a credential file that is a device: set %v, %v", set, err)
	}
}

// TestAuthorizationKey: an api_key declared in the Authorization header
// is sent there verbatim ("Bot <token>", as Discord takes it), and neither
// the value nor its token reaches a result, an error, an audit record or
// a log line, though the upstream echoes both back, in a success and in a
// failure.
func TestAuthorizationKey(t *testing.T) {
	const value, token = "Bot tok-SECRET-7.abc", "tok-SECRET-7.abc"
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization := r.Header.Get("Authorization")
		mu.Lock()
		seen = append(seen, authorization)
		mu.Unlock()
		_, tok, _ := strings.Cut(authorization, " ")
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/fail/") {
			w.WriteHeader(http.StatusForbidden)
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"authorization": authorization, "token": tok})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("DISCORD_BOT_CREDENTIAL", value)
	cfg, err := ontology.Parse(fmt.Appendf(nil, `service: shop
upstreams:
  discord:
    base_url: %q
    auth:
      bot: {type: api_key, in: header, name: Authorization}
actions:
  post:
    description: d
    input: {type: object, properties: {channel: {type: string}}}
    policy: {roles: [support]}
    destructive: false
    execute: {http: {upstream: discord, method: POST, path: "/channels/{channel}/messages", retry: never}}
`, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ctx := context.Background()
	var sinks []string
	for _, c := range []struct {
		channel string
		status  engine.Status
	}{{"c-1", engine.StatusOK}, {"fail", engine.StatusFailed}} {
		out := e.Call(ctx, agent("acme"), "post", fmt.Appendf(nil, `{"channel": %q}`, c.channel))
		if out.Status != c.status {
			t.Fatalf("%s: %s (%v)", c.channel, out.Status, out.Err)
		}
		sinks = append(sinks, string(out.Data))
		if out.Err != nil {
			sinks = append(sinks, out.Err.Error())
		}
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != value || seen[1] != value {
		t.Fatalf("the upstream saw Authorization %q", seen)
	}
	mu.Unlock()
	sinks = append(sinks, auditEntries(t, admin)...)
	all := strings.Join(append(sinks, logs.String()), "\n")
	if strings.Contains(all, token) || !strings.Contains(all, "[redacted]") || !strings.Contains(all, "execution_failed") {
		t.Fatalf("the key, or its token, reached a sink, or nothing was redacted:\n%s", all)
	}
}

const echoConfig = `service: shop
upstreams:
  echo:
    base_url: %[1]q
    auth:
      hkey: {type: api_key, in: header, name: X-Api-Key}
actions:
  echo:
    description: d
    input: {type: object, properties: {mode: {type: string}}}
    policy: {roles: [support]}
    budget: {per_minute: 500, per_day: 500}
    execute: {http: {upstream: echo, method: GET, path: "/echo/{mode}"}}
`

// TestEscapedEchoesAreRedacted: an upstream that echoes a credential in a
// form a byte search does not find — JSON's escapes ("\/", "\u0066",
// HTML's "\u0026"), markup's entities ("&amp;", "&#x66;"),
// percent-encoding in either case, a failing answer
// whose excerpt is cut inside the credential — passes none of it to the
// result, the audit record or the log, as any reader decodes them.
func TestEscapedEchoesAreRedacted(t *testing.T) {
	const secret = "hk/SECRET+1=&<x>"
	unicodeEscaped := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	slashEscaped := strings.ReplaceAll(secret, "/", `\/`)
	htmlEscaped, _ := json.Marshal(secret) // Go's encoder: \u0026 \u003c \u003e
	namedEscaped := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(secret)
	numbered := func(s string) string { // markup's character references
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, "&#x%x;", r)
		}
		return b.String()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mode := strings.TrimPrefix(r.URL.Path, "/echo/")
		switch {
		case mode == "json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"slash": "%s", "unicode": "%s", "html": %s, "query": %q, "path": %q, "lower": %q, "inner": "key=%s;"}`,
				slashEscaped, unicodeEscaped(secret), htmlEscaped, url.QueryEscape(secret), url.PathEscape(secret),
				strings.ToLower(url.QueryEscape(secret)), unicodeEscaped(secret))
		case strings.HasPrefix(mode, "cut-"), strings.HasPrefix(mode, "markup-cut-"):
			// The credential straddles the excerpt's end, at every offset;
			// after it has appeared n times, each replaced by a shorter
			// word, where it straddles the end of what was read — as it
			// is, or in markup's escapes.
			n, pad := 0, 0
			_, _ = fmt.Sscanf(strings.TrimPrefix(mode, "markup-"), "cut-%d-%d", &n, &pad)
			echoed := secret
			if strings.HasPrefix(mode, "markup-") {
				echoed = html.EscapeString(secret)
			}
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, strings.Repeat(echoed, n)+strings.Repeat("a", pad)+echoed+strings.Repeat("b", 100))
		case mode == "escaped-failure":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = fmt.Fprintf(w, `{"error": "bad key %s"}`, slashEscaped)
		case mode == "go-failure": // Go's encoder: \u0026 \u003c \u003e
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad key " + secret})
		case mode == "markup-failure":
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = fmt.Fprintf(w, "<p>bad key %s</p><p>%s</p>", html.EscapeString(secret), namedEscaped)
		case mode == "html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprintf(w, "<p>Signed in with key %s</p><p>%s</p>", html.EscapeString(secret), namedEscaped)
		case mode == "references":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = fmt.Fprintf(w, "key: %s", numbered(secret))
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("ECHO_HKEY_CREDENTIAL", secret)
	cfg, err := ontology.Parse(fmt.Appendf(nil, echoConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ctx := context.Background()
	var sinks []string
	out := e.Call(ctx, agent("acme"), "echo", json.RawMessage(`{"mode": "json"}`))
	if out.Status != engine.StatusOK {
		t.Fatalf("json: %s (%v)", out.Status, out.Err)
	}
	var body struct {
		Body map[string]string `json:"body"`
	}
	if err := json.Unmarshal(out.Data, &body); err != nil || len(body.Body) != 7 || body.Body["inner"] != "key=[redacted];" {
		t.Fatalf("the result %s (%v): want every member kept, the credential in each redacted", out.Data, err)
	}
	sinks = append(sinks, string(out.Data))
	for _, mode := range []string{"html", "references"} {
		out := e.Call(ctx, agent("acme"), "echo", fmt.Appendf(nil, `{"mode": %q}`, mode))
		if out.Status != engine.StatusOK || !strings.Contains(string(out.Data), "[redacted]") {
			t.Fatalf("%s: %s %s (%v): want the text, the credential redacted", mode, out.Status, out.Data, out.Err)
		}
		sinks = append(sinks, string(out.Data))
	}
	modes := []string{"escaped-failure", "go-failure", "markup-failure"}
	for prefix, echoed := range map[string]string{"cut": secret, "markup-cut": html.EscapeString(secret)} {
		for _, n := range []int{0, 10} {
			for pad := excerptEnd - n*len(echoed) - len(echoed) - 2; pad <= excerptEnd-n*len(echoed)+40; pad++ {
				modes = append(modes, fmt.Sprintf("%s-%d-%d", prefix, n, pad))
			}
		}
	}
	for _, mode := range modes {
		out := e.Call(ctx, agent("acme"), "echo", fmt.Appendf(nil, `{"mode": %q}`, mode))
		if out.Status != engine.StatusFailed {
			t.Fatalf("%s: %s (%v)", mode, out.Status, out.Err)
		}
	}
	sinks = append(sinks, auditEntries(t, admin)...)
	sinks = append(sinks, logs.String())
	// Each sink as a reader sees it: every JSON string decoded, and each
	// percent-decoded; no part of the credential past its first 3 bytes.
	for _, sink := range sinks {
		for _, text := range decodedStrings(t, sink) {
			for _, form := range []string{text, unescaped(text), strings.ReplaceAll(text, `\`, ""), html.UnescapeString(text)} {
				if strings.Contains(form, secret[:4]) {
					t.Errorf("a sink holds the credential, or a part of it: %q", form)
				}
			}
		}
	}
	if !strings.Contains(strings.Join(sinks, "\n"), "[redacted]") {
		t.Error("nothing was redacted")
	}
}

// excerptEnd is where an error's excerpt of a failing answer ends: after
// 512 bytes of the body.
const excerptEnd = 512

// decodedStrings returns every string of the JSON lines in text, decoded;
// a line that is not JSON is itself.
func decodedStrings(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
			var inner any // a string that holds JSON: an excerpt of a body
			if json.Unmarshal([]byte(v), &inner) == nil {
				walk(inner)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for k, x := range v {
				out = append(out, k)
				walk(x)
			}
		}
	}
	for _, line := range strings.Split(text, "\n") {
		var v any
		if json.Unmarshal([]byte(line), &v) != nil {
			out = append(out, line)
			continue
		}
		walk(v)
	}
	return out
}

// unescaped is s percent-decoded, or s when it does not decode.
func unescaped(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

const unplaceableConfig = `service: shop
upstreams:
  things:
    base_url: %[1]q
actions:
  touch:
    description: d
    input: {type: object, properties: {id: {type: string}}, required: [id]}
    policy: {roles: [support]}
    budget: {per_minute: 1, per_day: 1}
    execute: {http: {upstream: things, method: POST, path: "/things/{id}"}}
`

// TestUnplaceableCallsSpendNoBudget: a call whose input cannot be placed
// in its request (a path segment of "..") sends nothing, so it spends none
// of the action's budget: a budget of one call a day still allows the next
// call that reaches the upstream.
func TestUnplaceableCallsSpendNoBudget(t *testing.T) {
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	cfg, err := ontology.Parse(fmt.Appendf(nil, unplaceableConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := credentialEngine(t, cfg)
	ctx := context.Background()
	for range 2 {
		if out := e.Call(ctx, agent("acme"), "touch", json.RawMessage(`{"id": ".."}`)); out.Diagnostic != engine.DiagnosticUpstreamUnplaceable {
			t.Fatalf("an id of ..: %s %q (%v)", out.Status, out.Diagnostic, out.Err)
		}
	}
	if out := e.Call(ctx, agent("acme"), "touch", json.RawMessage(`{"id": "t-1"}`)); out.Status != engine.StatusOK || sent.Load() != 1 {
		t.Fatalf("the first call that reached the upstream: %s (%v), %d sent", out.Status, out.Err, sent.Load())
	}
	if out := e.Call(ctx, agent("acme"), "touch", json.RawMessage(`{"id": "t-2"}`)); out.Status != engine.StatusRateLimited {
		t.Fatalf("the second: %s, want rate_limited: the budget is one a day", out.Status)
	}
}

// credentialEngine serves cfg on a database of its own, logging at debug
// into the buffer it returns, so that a test can read every sink a
// credential could reach: the engine's answers, its audit records
// (admin's) and its log.
func credentialEngine(t *testing.T, cfg *ontology.Config) (e *engine.Engine, admin *pgxpool.Pool, logs *bytes.Buffer) {
	t.Helper()
	logs = &bytes.Buffer{}
	url := testdb.New(t)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: testdb.RuntimePool(t, url), Effects: effects.Factories(), Catalog: &ontology.Catalog{},
		Key: make([]byte, engine.KeySize), Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return e, testdb.Pool(t, url), logs
}

// auditEntries returns the entry of every audit record admin sees, as
// text.
func auditEntries(t *testing.T, admin *pgxpool.Pool) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), "SELECT convert_from(entry, 'UTF8') FROM orangerail.audit ORDER BY tenant_id, id")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestTokenRequests: an oauth2_client_credentials token request is held
// to what the call's own requests are — a redirect is an answer, never
// followed (followed, a 307 would send the client's secret to the host it
// names), and the call's timeout and deadline bound the fetch, a call
// waiting on another's fetch included.
func TestTokenRequests(t *testing.T) {
	var stolen atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	t.Cleanup(elsewhere.Close)
	var paid, tokenAsks atomic.Int32
	hang := make(chan struct{})
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/token" {
			paid.Add(1)
			return
		}
		tokenAsks.Add(1)
		switch mode.Load() {
		case "redirect":
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
		case "hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	t.Setenv("LEDGER_APP_CREDENTIAL", "client-5:secret-SECRET-5")
	config := strings.Replace(strings.Replace(authConfig, `execute: {http: {upstream: ledger, method: POST, path: "/pay/{order_id}"}}`,
		`execute: {http: {upstream: ledger, method: POST, path: "/pay/{order_id}", timeout: 200ms, deadline: 600ms}}`, 1),
		"budget: {per_minute: 10}", "budget: {per_minute: 10, max_concurrent: 3}", 1)
	cfg, err := ontology.Parse(fmt.Appendf(nil, config, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, _, logs := credentialEngine(t, cfg)
	ctx := context.Background()

	mode.Store("redirect")
	if out := e.Call(ctx, agent("acme"), "pay", []byte(`{"order_id": "o-1"}`)); out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamRejected {
		t.Fatalf("a token endpoint redirecting: %s %s (%v)", out.Status, out.Diagnostic, out.Err)
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times: the client's secret went to another host", n)
	}
	// A refusal of the client is not asked again, attempt after attempt:
	// x/oauth2 asks twice (the secret in a header, then in the form).
	if n := tokenAsks.Load(); n > 2 {
		t.Fatalf("the token endpoint was asked %d times after refusing the client", n)
	}

	// Three calls at once against a token endpoint that never answers:
	// each ends within its own deadline (600ms), not the token request's
	// ten seconds each, nor queued behind one another's.
	mode.Store("hang")
	start := time.Now()
	var wg sync.WaitGroup
	outs := make([]*engine.Outcome, 3)
	for i := range outs {
		wg.Go(func() { outs[i] = e.Call(ctx, agent("acme"), "pay", fmt.Appendf(nil, `{"order_id": "o-%d"}`, i+2)) })
	}
	wg.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the calls took %s: the token fetch outlived their deadline", took)
	}
	for i, out := range outs {
		if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamTimeout {
			t.Errorf("call %d: %s %s (%v), want failed, %s", i, out.Status, out.Diagnostic, out.Err, engine.DiagnosticUpstreamTimeout)
		}
	}
	if n := paid.Load(); n != 0 {
		t.Fatalf("%d calls reached the upstream without a token", n)
	}
	if strings.Contains(logs.String(), "secret-SECRET-5") {
		t.Fatal("the client's secret reached the log")
	}
}

// TestEncodedAnswersAreWithheld: an answer whose body the upstream sent
// encoded without being asked (deflate) — where an echoed credential
// passes every scrub, compressed — is never returned nor quoted: a
// success is body_unreadable, a failure's error names the encoding only.
func TestEncodedAnswersAreWithheld(t *testing.T) {
	const secret = "hkey-SECRET-abcabcabcabcabcabcabc" // compressible: no literal run of it survives deflate
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		zw, _ := flate.NewWriter(&b, flate.BestCompression)
		_, _ = io.WriteString(zw, "key="+r.Header.Get("X-Api-Key"))
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "deflate")
		w.Header().Set("Content-Type", "text/plain")
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusBadRequest)
		} else {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(b.Bytes())
	}))
	t.Cleanup(srv.Close)
	t.Setenv("CARRIERX_HKEY_CREDENTIAL", secret)
	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ok := e.Call(context.Background(), agent("acme"), "label", []byte(`{"order_id": "o-1"}`))
	if ok.Status != engine.StatusOK || string(ok.Data) != `{"body_withheld":"body_unreadable","status":201}` {
		t.Fatalf("an encoded success: %s %s (%v)", ok.Status, ok.Data, ok.Err)
	}
	failed := e.Call(context.Background(), agent("acme"), "label", []byte(`{"order_id": "fail"}`))
	if failed.Status != engine.StatusFailed || failed.Err == nil || !strings.Contains(failed.Err.Error(), `Content-Encoding "deflate"`) {
		t.Fatalf("an encoded failure: %s (%v)", failed.Status, failed.Err)
	}
	// What a compressed echo would carry: the deflated bytes, in any form.
	var b bytes.Buffer
	zw, _ := flate.NewWriter(&b, flate.BestCompression)
	_, _ = io.WriteString(zw, "key="+secret)
	_ = zw.Close()
	all := strings.Join(append(auditEntries(t, admin), logs.String(), string(ok.Data), failed.Err.Error()), "\n")
	for _, form := range []string{secret, base64.StdEncoding.EncodeToString(b.Bytes()), fmt.Sprintf("%q", b.String())} {
		if strings.Contains(all, form) {
			t.Errorf("the encoded echo reached a sink as %q", form)
		}
	}
}

// TestAnswerHeadIsScrubbed: an upstream that echoes the credential it was
// sent in the answer's head — its status line's reason phrase, or a
// Content-Encoding it names — has it quoted in no answer, audit record or
// log line: a status is named by its code and standard text, a coding
// only when it is a registered one.
func TestAnswerHeadIsScrubbed(t *testing.T) {
	const secret = "hkey-SECRET-head-0123456789"
	base, _ := rawUpstream(t, func(c *net.TCPConn, r *bufio.Reader) {
		defer func() { _ = c.Close() }()
		line, _ := r.ReadString('\n')
		key, length := "", 0
		for {
			h, err := r.ReadString('\n')
			if err != nil || h == "\r\n" {
				break
			}
			k, v, _ := strings.Cut(h, ":")
			switch strings.ToLower(k) {
			case "x-api-key":
				key = strings.TrimSpace(v)
			case "content-length":
				_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &length)
			}
		}
		_, _ = r.Discard(length)
		if strings.Contains(line, "/labels/reason") {
			_, _ = fmt.Fprintf(c, "HTTP/1.1 401 Bad key %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", key)
			return
		}
		_, _ = fmt.Fprintf(c, "HTTP/1.1 401 Unauthorized\r\nContent-Encoding: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", key)
	})
	t.Setenv("CARRIERX_HKEY_CREDENTIAL", secret)
	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, base))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ctx := context.Background()
	var sinks []string
	for _, order := range []string{"reason", "coding"} {
		out := e.Call(ctx, agent("acme"), "label", fmt.Appendf(nil, `{"order_id": %q}`, order))
		sinks = append(sinks, string(out.Data))
		if out.Err != nil {
			sinks = append(sinks, out.Err.Error())
		}
	}
	sinks = append(sinks, auditEntries(t, admin)...)
	sinks = append(sinks, logs.String())
	for _, s := range sinks {
		if strings.Contains(s, secret) {
			t.Errorf("the credential reached a sink: %.300s", s[strings.Index(s, secret)-min(strings.Index(s, secret), 120):])
		}
	}
}

// TestRefusedTokenIsFetchedAgain: an oauth2_client_credentials token the
// upstream refuses (401) is dropped from the cache, so that the next call
// fetches another. A token endpoint that answers without expires_in (RFC
// 6749 makes it optional) gave a token x/oauth2 counts valid forever: once
// the upstream expired or revoked it, every call of the action failed 401
// until the replica restarted.
func TestRefusedTokenIsFetchedAgain(t *testing.T) {
	var issued, revoked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			n := issued.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token": "tok-SECRET-%d", "token_type": "bearer"}`, n) // no expires_in
			return
		}
		// Tokens up to the revoked one's number are no longer honoured.
		var n int32
		if _, err := fmt.Sscanf(r.Header.Get("Authorization"), "Bearer tok-SECRET-%d", &n); err != nil || n <= revoked.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("LEDGER_APP_CREDENTIAL", "client-5:secret-SECRET-5")
	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := credentialEngine(t, cfg)
	ctx := context.Background()
	if out := e.Call(ctx, agent("acme"), "pay", []byte(`{"order_id": "o-1"}`)); out.Status != engine.StatusOK {
		t.Fatalf("first call: %s (%v)", out.Status, out.Err)
	}
	revoked.Store(1) // the upstream expires the first token
	if out := e.Call(ctx, agent("acme"), "pay", []byte(`{"order_id": "o-2"}`)); out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamRejected {
		t.Fatalf("a call with the expired token: %s %s (%v)", out.Status, out.Diagnostic, out.Err)
	}
	if out := e.Call(ctx, agent("acme"), "pay", []byte(`{"order_id": "o-3"}`)); out.Status != engine.StatusOK {
		t.Fatalf("the call after a 401: %s %s (%v) after %d token requests: the refused token is still cached", out.Status, out.Diagnostic, out.Err, issued.Load())
	}
	if n := issued.Load(); n != 2 {
		t.Fatalf("%d token requests, want 2", n)
	}
}

// TestTokenOfAnotherTypeIsRefused: a token endpoint's token_type names
// how the token is presented (RFC 6749 §7.1); one other than bearer (mac,
// DPoP, which bind each request to a key) is not sent as a bearer token:
// the call is refused, nothing reaches the upstream, and the token is in
// no answer, record or log. It was sent as "Bearer <token>". A bearer
// token in any case, or one whose token_type is absent, is sent.
func TestTokenOfAnotherTypeIsRefused(t *testing.T) {
	var paid atomic.Int32
	var tokenType atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			member := ""
			if tt := tokenType.Load().(string); tt != "-" {
				member = fmt.Sprintf(`, "token_type": %q`, tt)
			}
			_, _ = fmt.Fprintf(w, `{"access_token": "tok-SECRET-9", "expires_in": 1%s}`, member)
			return
		}
		paid.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("LEDGER_APP_CREDENTIAL", "client-5:secret-SECRET-5")
	cfg, err := ontology.Parse(fmt.Appendf(nil, authConfig, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	e, admin, logs := credentialEngine(t, cfg)
	ctx := context.Background()
	for i, tt := range []string{"mac", "DPoP", "N_A"} {
		tokenType.Store(tt)
		out := e.Call(ctx, agent("acme"), "pay", fmt.Appendf(nil, `{"order_id": "o-%d"}`, i))
		if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamRejected {
			t.Errorf("token_type %s: %s %s (%v), want failed, %s", tt, out.Status, out.Diagnostic, out.Err, engine.DiagnosticUpstreamRejected)
		}
		if out.Err != nil && strings.Contains(out.Err.Error(), "SECRET") {
			t.Errorf("token_type %s: the error quotes the token: %v", tt, out.Err)
		}
	}
	if n := paid.Load(); n != 0 {
		t.Fatalf("%d calls reached the upstream with a token that is not a bearer token", n)
	}
	for _, entry := range auditEntries(t, admin) {
		if strings.Contains(entry, "SECRET") {
			t.Fatalf("an audit record holds the token: %s", entry)
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatal("the token reached the log")
	}
	for i, tt := range []string{"Bearer", "bearer", "BEARER", "-"} {
		tokenType.Store(tt)
		if out := e.Call(ctx, agent("acme"), "pay", fmt.Appendf(nil, `{"order_id": "b-%d"}`, i)); out.Status != engine.StatusOK {
			t.Errorf("token_type %s: %s %s (%v)", tt, out.Status, out.Diagnostic, out.Err)
		}
	}
}
