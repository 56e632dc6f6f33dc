package ontology

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// This file holds the upstreams section and the http member of the execute
// union: an action that calls an HTTP API an upstream serves.

// Upstream is an HTTP API that actions call (execute: {http: …}).
type Upstream struct {
	// BaseURL is where the API is served: https, or http on loopback.
	// Set it, or BaseURLs, not both.
	BaseURL string `yaml:"base_url"`
	// BaseURLs maps each environment (the config's environment) to where
	// the API is served in it.
	BaseURLs map[string]string `yaml:"base_urls"`
	// IdempotencyHeader names the request header an idempotency key is
	// sent in. Defaults to IdempotencyHeaderDefault.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// CAFile, when set, is a PEM file of the certificate authorities the
	// upstream's server certificate must chain to, instead of the
	// system's roots: an internal API behind a private CA, which mutual
	// TLS often is. Read when the engine is made, as the credentials are.
	CAFile string `yaml:"ca_file"`
	// Auth lists the upstream's credential schemes, by name; each one's
	// value comes from the environment (CredentialEnv), never from this
	// file. A call presents every one of them unless its own auth names
	// the few it needs (HTTPExecute.Auth).
	Auth map[string]*UpstreamAuth `yaml:"auth"`
}

// AuthType is how a credential is placed on a request.
type AuthType string

// The auth types.
const (
	AuthAPIKey AuthType = "api_key" // in a header, query parameter or cookie named Name
	AuthBasic  AuthType = "basic"   // Authorization: Basic, from user:password
	AuthBearer AuthType = "bearer"  // Authorization: Bearer
	// AuthOAuth2ClientCredentials fetches a token at TokenURL with
	// client_id:client_secret and presents it as a bearer token, cached
	// until it expires.
	AuthOAuth2ClientCredentials AuthType = "oauth2_client_credentials" //nolint:gosec // G101: the scheme's name, not a credential
	// AuthMTLS presents a client certificate: the credential is PEM, the
	// certificate and its key.
	AuthMTLS AuthType = "mtls"
)

// AuthTypes returns every auth type. The config schema's enum is this
// list; a test holds them equal.
func AuthTypes() []AuthType {
	return []AuthType{AuthAPIKey, AuthBasic, AuthBearer, AuthOAuth2ClientCredentials, AuthMTLS}
}

// API key placements.
const (
	InHeader = "header"
	InQuery  = "query"
	InCookie = "cookie"
)

// UpstreamAuth is one credential scheme of an upstream.
type UpstreamAuth struct {
	Type AuthType `yaml:"type"`
	// In and Name place an api_key: header, query or cookie, and its name.
	In   string `yaml:"in"`
	Name string `yaml:"name"`
	// TokenURL and Scopes are an oauth2_client_credentials token request's.
	TokenURL string   `yaml:"token_url"`
	Scopes   []string `yaml:"scopes"`
}

// CredentialEnv is the environment variable holding the credential of an
// upstream's scheme: <UPSTREAM>_<SCHEME>_CREDENTIAL, upper case, every
// character but a letter or digit an underscore. <that>_FILE, when set
// instead, names a file holding it.
func CredentialEnv(upstream, scheme string) string {
	envName := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z':
				return r - 'a' + 'A'
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
				return r
			}
			return '_'
		}, s)
	}
	return envName(upstream) + "_" + envName(scheme) + "_CREDENTIAL"
}

// CredentialSlot is where one scheme's credential is read from.
type CredentialSlot struct {
	// Path is the scheme's field path: upstreams.U.auth.S.
	Path     string
	Upstream string
	Scheme   string
	Type     AuthType
	// Env is the variable holding it; Env+"_FILE" may name a file instead.
	Env string
	// PresentedBy lists the field paths of the calls that present the
	// scheme (actions.X.execute.http, actions.X.target.get …), sorted: a
	// call presents only the schemes its auth names.
	PresentedBy []string
}

// CredentialSlots lists every upstream scheme's credential slot, sorted
// by path: what config check and serve report as set or omitted.
func (c *Config) CredentialSlots() []CredentialSlot {
	var slots []CredentialSlot
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		u := c.Upstreams[name]
		for _, scheme := range slices.Sorted(maps.Keys(u.Auth)) {
			slots = append(slots, CredentialSlot{Path: "upstreams." + name + ".auth." + scheme, Upstream: name, Scheme: scheme,
				Type: u.Auth[scheme].Type, Env: CredentialEnv(name, scheme), PresentedBy: c.presenters(name, scheme)})
		}
	}
	return slots
}

// presenters lists the field paths of the calls of upstream that present
// scheme, sorted.
func (c *Config) presenters(upstream, scheme string) []string {
	by := []string{}
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		a, path := c.Actions[name], "actions."+name
		for _, call := range []struct {
			path      string
			upstream  string
			presented []string
		}{
			{path + ".target.get", targetGet(a).Upstream, targetGet(a).presented},
			{path + ".execute.http", httpOf(a).Upstream, httpOf(a).presented},
			{path + ".execute.soap", soapOf(a).Upstream, soapOf(a).presented},
		} {
			if call.upstream == upstream && slices.Contains(call.presented, scheme) {
				by = append(by, call.path)
			}
		}
	}
	slices.Sort(by)
	return by
}

// targetGet, httpOf and soapOf return an action's upstream calls, or an
// empty call for one it does not make.
func targetGet(a *Action) *HTTPExecute {
	if a != nil && a.Target.Read() && a.Target.Get != nil {
		return a.Target.Get
	}
	return &HTTPExecute{}
}

func httpOf(a *Action) *HTTPExecute {
	if a != nil && a.Execute.HTTP != nil {
		return a.Execute.HTTP
	}
	return &HTTPExecute{}
}

func soapOf(a *Action) *SOAPExecute {
	if a != nil && a.Execute.SOAP != nil {
		return a.Execute.SOAP
	}
	return &SOAPExecute{}
}

// IdempotencyHeaderDefault is the default Upstream.IdempotencyHeader.
const IdempotencyHeaderDefault = "Idempotency-Key"

// URL returns the upstream's base URL in environment, and false when it
// has none there.
func (u *Upstream) URL(environment string) (string, bool) {
	if u.BaseURL != "" {
		return u.BaseURL, true
	}
	s, ok := u.BaseURLs[environment]
	return s, ok
}

// CheckUpstreamURL refuses a base URL that is not https (plain http is
// allowed on loopback only), or that holds a user, a query or a fragment:
// a password in a URL ends up in logs, and an action's path and query are
// its own.
func CheckUpstreamURL(base string) error {
	u, err := url.Parse(base)
	switch {
	case err != nil || u.Hostname() == "" || u.Opaque != "":
		return fmt.Errorf("%s is not an absolute URL", ShownURL(base))
	case u.User != nil:
		return fmt.Errorf("%s holds a user: credentials never go in a URL", ShownURL(base))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(base, "#"):
		return fmt.Errorf("%s has a query or fragment: name the API's root only", ShownURL(base))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && LoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s must be https (plain http is allowed on loopback only)", ShownURL(base))
}

// LoopbackHost reports whether host is localhost or a loopback address:
// the only hosts plain http may reach.
func LoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// PlainOffLoopback reports whether u is plain http to a host that is not
// a loopback one: what it carries crosses the network in the clear.
func PlainOffLoopback(u *url.URL) bool { return u.Scheme == "http" && !LoopbackHost(u.Hostname()) }

// HTTPRetry is when an upstream call is attempted again.
type HTTPRetry string

// The retry policies (RFC 9110 §9.2.2).
const (
	// RetrySafe retries: the method is idempotent, so repeating the
	// request changes nothing a first success did not. The default of
	// GET, HEAD, OPTIONS, PUT and DELETE.
	RetrySafe HTTPRetry = "safe"
	// RetryWithIdempotencyKey retries with one key, generated per
	// invocation and sent on every attempt in the upstream's idempotency
	// header, so the upstream can tell a retry from a new request. The
	// default of POST and PATCH.
	RetryWithIdempotencyKey HTTPRetry = "with_idempotency_key"
	// RetryNever makes one attempt.
	RetryNever HTTPRetry = "never"
)

// HTTPRetries returns every retry policy. The config schema's enum is
// this list; a test holds them equal.
func HTTPRetries() []HTTPRetry { return []HTTPRetry{RetrySafe, RetryWithIdempotencyKey, RetryNever} }

// HTTPMethods returns the methods an http execute may use. (The
// ontology spells them itself: the engine above it is kept clear of
// net/http.)
func HTTPMethods() []string {
	return []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH"}
}

// IdempotentMethod reports whether RFC 9110 §9.2.2 makes method
// idempotent; SafeMethod whether §9.2.1 makes it safe (read-only).
func IdempotentMethod(method string) bool {
	return SafeMethod(method) || method == "PUT" || method == "DELETE"
}

// SafeMethod reports whether method is read-only by RFC 9110 §9.2.1: a
// request of it can have had no effect, whatever became of it.
func SafeMethod(method string) bool {
	return method == "GET" || method == "HEAD" || method == "OPTIONS"
}

// Defaults and bounds of an http execute.
const (
	HTTPMaxBytesDefault    = 1 << 20
	HTTPMaxBytesMax        = 64 << 20
	HTTPTimeoutDefault     = 10 * time.Second
	HTTPMaxAttemptsDefault = 3
	HTTPMaxAttemptsMax     = 3
)

// HTTPExecute is an action's call of an upstream's HTTP API (kind http).
// Its json names are its definition hash's (internal/engine).
type HTTPExecute struct {
	// Upstream names one of the config's upstreams.
	Upstream string `yaml:"upstream" json:"upstream"`
	// Method is the request's method, upper case.
	Method string `yaml:"method" json:"method"`
	// Path is appended to the upstream's base URL; each {name} in it is
	// the input property name's value, path-escaped.
	Path string `yaml:"path" json:"path"`
	// Query and Headers map each parameter or header to its value: a
	// :name reference to an input property, or a literal. A reference to
	// an absent or null property leaves the parameter out.
	Query   map[string]string `yaml:"query" json:"query,omitempty"`
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// Body is a JSON template: every string ":name" in it is the input
	// property name's JSON value. It is sent as application/json.
	Body any `yaml:"body" json:"body,omitempty"`
	// Success lists the statuses that mean the call succeeded. Defaults
	// to any 2xx.
	Success []int `yaml:"success" json:"success,omitempty"`
	// MaxBytes caps the response body read. Defaults to
	// HTTPMaxBytesDefault.
	MaxBytes int64 `yaml:"max_bytes" json:"max_bytes"`
	// Timeout bounds one attempt, from sending to the whole response.
	// Defaults to HTTPTimeoutDefault, or the deadline if shorter.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Deadline bounds every attempt together, waits between them
	// included. Defaults to limits.statement_timeout, which it may not
	// exceed: the engine gives an effect that long (and a grace).
	Deadline Duration `yaml:"deadline" json:"deadline"`
	// Retry is when a failed attempt is made again. Defaults by method:
	// RetrySafe for an idempotent one, RetryWithIdempotencyKey otherwise.
	Retry HTTPRetry `yaml:"retry" json:"retry"`
	// MaxAttempts bounds the attempts. Defaults to, and may not exceed,
	// HTTPMaxAttemptsMax.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// Auth names the upstream's schemes the call presents: nil (absent)
	// presents every one, a list exactly those, an empty list none (a
	// public operation). Least privilege: a call sends only the
	// credentials its operation needs. Hashed only when written, so the
	// definition of a call written before it existed is unchanged.
	Auth *[]string `yaml:"auth" json:"auth,omitempty"`
	// Scopes, when set, are the scopes the token of the call's
	// oauth2_client_credentials scheme is requested with, in place of the
	// scheme's own: a subset of them (upstreams.U.auth.S.scopes), so that
	// a read's token does not carry a write's scopes. Absent, the call's
	// token carries every scope of the scheme; [] (empty, not nil), it is
	// requested with no scope parameter, so the authorization server
	// grants its default (RFC 6749 §3.3): an operation that needs the
	// scheme but no scope of it. Hashed only when written, and [] apart
	// from absent (omitzero, not omitempty): a call changed from [] to
	// absent asks for a wider token, and voids the approvals open.
	Scopes []string `yaml:"scopes" json:"scopes,omitzero"`

	// baseURL, idempotencyHeader and upstream are the upstream's,
	// presented the schemes the call presents, and tokenScopes its Scopes
	// sorted and each once, resolved at load.
	baseURL           *url.URL
	idempotencyHeader string
	upstream          *Upstream
	presented         []string
	tokenScopes       []string
}

// Presented returns the names of the upstream's schemes the call
// presents, resolved at load (Auth).
func (h *HTTPExecute) Presented() []string { return slices.Clone(h.presented) }

// TokenScopes returns the scopes the call's token is requested with,
// sorted and each once, resolved at load (Scopes); nil when the call
// requests its scheme's, empty (not nil) when it requests no scope.
func (h *HTTPExecute) TokenScopes() []string { return slices.Clone(h.tokenScopes) }

// UpstreamDecl returns the declaration of the upstream the call names,
// resolved at load.
func (h *HTTPExecute) UpstreamDecl() *Upstream { return h.upstream }

// BaseURL returns the upstream's base URL in the config's environment,
// resolved at load.
func (h *HTTPExecute) BaseURL() *url.URL {
	if h.baseURL == nil {
		return nil
	}
	u := *h.baseURL
	return &u
}

// IdempotencyHeader returns the header the upstream takes an idempotency
// key in.
func (h *HTTPExecute) IdempotencyHeader() string { return h.idempotencyHeader }

// Succeeded reports whether status means the call succeeded.
func (h *HTTPExecute) Succeeded(status int) bool { return succeeded(h.Success, status) }

// succeeded reports whether status is one of success, or any 2xx when
// success is empty.
func succeeded(success []int, status int) bool {
	if len(success) == 0 {
		return status >= 200 && status <= 299
	}
	return slices.Contains(success, status)
}

// UpstreamLimits bound every kind of upstream call (http, soap).
type UpstreamLimits struct {
	MaxBytes    int64
	Timeout     Duration
	Deadline    Duration
	MaxAttempts int
}

// Limits returns the call's bounds.
func (h *HTTPExecute) Limits() UpstreamLimits {
	return UpstreamLimits{MaxBytes: h.MaxBytes, Timeout: h.Timeout, Deadline: h.Deadline, MaxAttempts: h.MaxAttempts}
}

// withDefaults fills limits' defaults from statement, the engine's
// deadline for an effect.
func (l *UpstreamLimits) withDefaults(statement time.Duration) {
	l.MaxBytes = cmp.Or(l.MaxBytes, HTTPMaxBytesDefault)
	l.Deadline = cmp.Or(l.Deadline, Duration(statement))
	l.Timeout = cmp.Or(l.Timeout, min(Duration(HTTPTimeoutDefault), l.Deadline))
	l.MaxAttempts = cmp.Or(l.MaxAttempts, HTTPMaxAttemptsDefault)
}

// setLimits sets the call's bounds.
func (h *HTTPExecute) setLimits(l UpstreamLimits) {
	h.MaxBytes, h.Timeout, h.Deadline, h.MaxAttempts = l.MaxBytes, l.Timeout, l.Deadline, l.MaxAttempts
}

// InputRef returns the input property a query or header value names, as
// :name, and true; false for a literal.
func InputRef(value string) (string, bool) {
	if !inputRefPattern.MatchString(value) {
		return "", false
	}
	return value[1:], true
}

var inputRefPattern = regexp.MustCompile(`^:[A-Za-z_][A-Za-z0-9_]*$`)

// PathPart is one piece of a path template: literal text, or the input
// property whose value fills a {name} segment.
type PathPart struct {
	Literal string
	Param   string
}

// ParsePath splits a path template into its parts. The template begins
// with /, holds no query or fragment, and names each {param} in braces.
func ParsePath(path string) ([]PathPart, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("the path %q must begin with /", path)
	}
	var parts []PathPart
	rest := path
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			parts = append(parts, PathPart{Literal: rest})
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("the path %q has a } without its {", path)
		}
		if open > 0 {
			parts = append(parts, PathPart{Literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("the path %q has a { without its }", path)
		}
		name := rest[open+1 : open+end]
		if !inputRefPattern.MatchString(":" + name) {
			return nil, fmt.Errorf("the path %q names {%s}, which is not an input property's name", path, name)
		}
		parts = append(parts, PathPart{Param: name})
		rest = rest[open+end+1:]
	}
	for _, p := range parts {
		if p.Literal == "" {
			continue
		}
		if strings.ContainsAny(p.Literal, "?#") {
			return nil, fmt.Errorf("the path %q holds a query or fragment: declare query parameters under query", path)
		}
		if _, err := url.PathUnescape(p.Literal); err != nil || strings.ContainsFunc(p.Literal, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return nil, fmt.Errorf("the path %q has characters a URL path cannot hold as they are: write them escaped", path)
		}
	}
	return parts, nil
}

// BodyRefs lists the input properties a body template names, as ":name"
// strings, each once, sorted.
func BodyRefs(body any) []string {
	set := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if name, ok := InputRef(v); ok {
				set[name] = true
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(body)
	return slices.Sorted(maps.Keys(set))
}

// reservedHeaders are headers an action may not set: the transport owns
// them, the body's encoding sets Content-Type, and credentials are placed
// per scheme, never written in a file.
var reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Authorization", "Cookie", "Proxy-Authorization", "Te", "Upgrade", "Trailer"}

// ReservedHeader reports whether name is a header orangerail sets itself,
// which an action may not (what the policy compiler leaves out of the
// actions it writes).
func ReservedHeader(name string) bool {
	return slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(name))
}

// withHTTPDefaults fills an http execute's defaults from the upstream and
// the limits. It runs before validation reads them.
func (c *Config) withHTTPDefaults() {
	_, statement := c.Limits.Timeouts()
	for _, a := range c.Actions {
		if a.Target.Read() && a.Target.Get != nil {
			// A target read is a GET, retried as safe; validateTargetRead
			// refuses another method or retry written in the file.
			g := a.Target.Get
			g.Upstream, g.Method, g.Retry = cmp.Or(g.Upstream, a.Target.Upstream), cmp.Or(g.Method, "GET"), cmp.Or(g.Retry, RetrySafe)
			l := g.Limits()
			l.withDefaults(statement)
			g.setLimits(l)
		}
		h := a.Execute.HTTP
		if h == nil {
			continue
		}
		l := h.Limits()
		l.withDefaults(statement)
		h.setLimits(l)
		if h.Retry == "" {
			h.Retry = RetryWithIdempotencyKey
			if IdempotentMethod(h.Method) {
				h.Retry = RetrySafe
			}
		}
	}
	for _, u := range c.Upstreams {
		if u != nil {
			u.IdempotencyHeader = cmp.Or(u.IdempotencyHeader, IdempotencyHeaderDefault)
		}
	}
}

// validateUpstreams checks each upstream's URLs and header name.
func (c *Config) validateUpstreams(add func(path, format string, args ...any)) {
	// A credential variable names one scheme of one upstream: names that
	// spell it alike (pay_prod's key and pay's prod_key, AdminKey and
	// adminkey) would send one upstream's credential to another's host,
	// or place a header's key in a query.
	taken := map[string]string{}
	for _, slot := range c.CredentialSlots() {
		if other, ok := taken[slot.Env]; ok {
			add(slot.Path, "its credential is read from %s, as %s's is: rename one of them, so that each credential variable names one scheme of one upstream", slot.Env, other)
			continue
		}
		taken[slot.Env] = slot.Path
	}
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		u, path := c.Upstreams[name], "upstreams."+name
		switch {
		case u.BaseURL != "" && len(u.BaseURLs) > 0:
			add(path, "sets both base_url and base_urls: set base_url for every environment, or base_urls for each")
		case u.BaseURL == "" && len(u.BaseURLs) == 0:
			add(path, "sets no base URL: set base_url, or base_urls by environment")
		}
		if u.BaseURL != "" {
			if err := CheckUpstreamURL(u.BaseURL); err != nil {
				add(path+".base_url", "%v", err)
			}
		}
		for _, env := range slices.Sorted(maps.Keys(u.BaseURLs)) {
			if err := CheckUpstreamURL(u.BaseURLs[env]); err != nil {
				add(path+".base_urls."+env, "%v", err)
			}
		}
		if !httpguts.ValidHeaderFieldName(u.IdempotencyHeader) || slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(u.IdempotencyHeader)) {
			add(path+".idempotency_header", "%q is not a header name an idempotency key can be sent in", u.IdempotencyHeader)
		}
		validateAuth(u, path+".auth", add)
		if c.presentsAllSchemes(name) {
			schemes := slices.Sorted(maps.Keys(u.Auth))
			checkPresented(u, schemes, func(i int) string { return path + ".auth." + schemes[i] }, add)
		}
	}
}

// presentsAllSchemes reports whether some request to the upstream name
// presents every one of its schemes: a call that names none of its own
// (auth absent), or — so that a file is judged as before calls could
// name theirs — no call at all.
func (c *Config) presentsAllSchemes(name string) bool {
	calls, all := 0, false
	count := func(upstream string, auth *[]string) {
		if upstream == name {
			calls++
			all = all || auth == nil
		}
	}
	for _, a := range c.Actions {
		if a == nil {
			continue
		}
		if h := a.Execute.HTTP; h != nil {
			count(h.Upstream, h.Auth)
		}
		if s := a.Execute.SOAP; s != nil {
			count(s.Upstream, s.Auth)
		}
		if a.Target.Read() && a.Target.Get != nil {
			count(a.Target.Get.Upstream, a.Target.Get.Auth)
		}
	}
	return all || calls == 0
}

// SetsAuthorization reports whether the scheme is placed in the
// Authorization header, of which a request carries one.
func (a *UpstreamAuth) SetsAuthorization() bool {
	switch a.Type {
	case AuthBasic, AuthBearer, AuthOAuth2ClientCredentials:
		return true
	case AuthAPIKey:
		return a.In == InHeader && textproto.CanonicalMIMEHeaderKey(a.Name) == authorizationHeader
	}
	return false
}

// authorizationHeader is the header a request carries one of.
const authorizationHeader = "Authorization"

// checkPresented checks the schemes one request presents together: at
// most one sets Authorization, and at most one presents a client
// certificate, which belongs to the connection. at names where the i-th
// scheme is declared or chosen.
func checkPresented(u *Upstream, schemes []string, at func(i int) string, add func(path, format string, args ...any)) {
	authorization, mtls := "", ""
	for i, scheme := range schemes {
		a := u.Auth[scheme]
		switch {
		case a == nil:
		case a.SetsAuthorization():
			if authorization != "" {
				add(at(i), "%s sets Authorization too: a request carries one", authorization)
			}
			authorization = at(i)
		case a.Type == AuthMTLS:
			if mtls != "" {
				add(at(i), "%s presents a client certificate too: a connection presents one", mtls)
			}
			mtls = at(i)
		}
	}
}

// resolvePresented checks a call's auth against its upstream and returns
// the schemes the call presents: every one of the upstream's when auth is
// nil (validateUpstreams checks them together), else those it names, each
// of which must be one of the upstream's, and which must go on one
// request together.
func resolvePresented(u *Upstream, upstream string, auth *[]string, path string, add func(path, format string, args ...any)) []string {
	if auth == nil {
		return slices.Sorted(maps.Keys(u.Auth))
	}
	presented := []string{}
	var where []string
	for i, scheme := range *auth {
		at := fmt.Sprintf("%s.auth.%d", path, i)
		if _, ok := u.Auth[scheme]; !ok {
			add(at, "names %q, which is not a scheme of upstreams.%s.auth (%v)", scheme, upstream, slices.Sorted(maps.Keys(u.Auth)))
			continue
		}
		presented, where = append(presented, scheme), append(where, at)
	}
	checkPresented(u, presented, func(i int) string { return where[i] }, add)
	slices.Sort(presented)
	return presented
}

// ScopeSet returns scopes sorted and each once: the scope parameter of
// a token request (RFC 6749 §3.3: space-delimited, order-independent),
// written the same way for the same set.
func ScopeSet(scopes []string) []string {
	if scopes == nil {
		return nil
	}
	out := slices.Clone(scopes)
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckScope says why s cannot be a scope of a token request, or nil: RFC
// 6749 §3.3's scope-token, 1*( %x21 / %x23-5B / %x5D-7E ) — no space,
// which delimits scopes in the request, no control character, quote,
// backslash or non-ASCII character.
func CheckScope(s string) error {
	if s == "" {
		return errors.New("is empty; a scope is one or more printable ASCII characters")
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || r == '"' || r == '\\' {
			return fmt.Errorf("%q holds %q, which a scope cannot (RFC 6749 §3.3: printable ASCII but space, quote and backslash; a space separates scopes)", s, r)
		}
	}
	return nil
}

// resolveScopes checks a call's scopes against the oauth2_client_credentials
// scheme it presents and returns them sorted and each once; nil when the
// call has none (its token asks for the scheme's), empty when it lists
// none (its token asks for no scope: the server's default). A call narrows its scheme's scopes, never widens them:
// the scheme's list is the most any of its tokens is asked for, declared
// once where the platform team reviews it, and a name outside it is a
// typo found at load rather than an invalid_scope at the token endpoint.
func resolveScopes(u *Upstream, upstream string, presented, scopes []string, path string, add func(path, format string, args ...any)) []string {
	if scopes == nil {
		return nil
	}
	at := path + ".scopes"
	scheme := ""
	for _, p := range presented {
		if a := u.Auth[p]; a != nil && a.Type == AuthOAuth2ClientCredentials {
			scheme = p // checkPresented allows one: it sets Authorization
		}
	}
	if scheme == "" {
		add(at, "scopes are those an oauth2_client_credentials token is requested with, and the call presents no such scheme of upstreams.%s (it presents %v): remove them", upstream, presented)
		return nil
	}
	if len(scopes) == 0 {
		return []string{}
	}
	offered := u.Auth[scheme].Scopes
	for i, s := range scopes {
		if err := CheckScope(s); err != nil {
			add(fmt.Sprintf("%s.%d", at, i), "%v", err)
		} else if !slices.Contains(offered, s) {
			add(fmt.Sprintf("%s.%d", at, i), "%q is not one of upstreams.%s.auth.%s.scopes (%v): a call narrows its scheme's scopes, never widens them; add it there first", s, upstream, scheme, offered)
		}
	}
	return ScopeSet(scopes)
}

// CheckAPIKeyName says why an api_key cannot be sent in the header, query
// parameter or cookie named name, or nil: the one rule of the loader
// (validateAuth) and of the policy compiler, which lists such a scheme as
// unplaceable rather than write what the loader refuses.
func CheckAPIKeyName(in, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("name the %s the key is sent in", in)
	case in == InHeader && (!httpguts.ValidHeaderFieldName(name) ||
		// Authorization is the one reserved header a key may take, its
		// value sent verbatim (Discord's "Bot <token>"): it is then the
		// request's one Authorization setter (SetsAuthorization).
		textproto.CanonicalMIMEHeaderKey(name) != authorizationHeader && slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(name))):
		return fmt.Errorf("%q is not a header a key can be sent in", name)
	}
	return nil
}

// validateAuth checks that each scheme can be placed: a scheme that
// cannot is refused at load, never guessed at when a request is sent.
func validateAuth(u *Upstream, path string, add func(path, format string, args ...any)) {
	for _, scheme := range slices.Sorted(maps.Keys(u.Auth)) {
		a, at := u.Auth[scheme], path+"."+scheme
		switch a.Type {
		case AuthAPIKey:
			if a.In != InHeader && a.In != InQuery && a.In != InCookie {
				add(at+".in", "is %q; an api_key is placed in a header, query or cookie", a.In)
			} else if err := CheckAPIKeyName(a.In, a.Name); err != nil {
				add(at+".name", "%v", err)
			}
		case AuthBasic, AuthBearer, AuthOAuth2ClientCredentials, AuthMTLS:
			// Which of them one request may present together is a call's
			// question (checkPresented).
		default:
			add(at+".type", "is %q; it must be one of %v", a.Type, AuthTypes())
		}
		if a.Type == AuthOAuth2ClientCredentials {
			if err := CheckUpstreamURL(a.TokenURL); err != nil {
				add(at+".token_url", "%v", err)
			}
			for i, s := range a.Scopes {
				if err := CheckScope(s); err != nil {
					add(fmt.Sprintf("%s.scopes.%d", at, i), "%v", err)
				}
			}
		} else if a.TokenURL != "" || len(a.Scopes) > 0 {
			add(at, "token_url and scopes are an oauth2_client_credentials scheme's")
		}
		if a.Type != AuthAPIKey && (a.In != "" || a.Name != "") {
			add(at, "in and name place an api_key")
		}
	}
}

// validateHTTPExecute checks an http execute: its upstream has a URL in
// this environment, every name it binds is an input property, and its
// timeouts fit inside the engine's deadline for an effect.
func (c *Config) validateHTTPExecute(h *HTTPExecute, path string, envs []string, properties []string, add func(path, format string, args ...any)) {
	ref := func(at, name string) {
		if !slices.Contains(properties, name) {
			add(at, "names %q, which is not a property of the action's input", name)
		}
	}
	if u, base := c.resolveUpstream(h.Upstream, path, envs, add); u != nil {
		h.baseURL, h.idempotencyHeader, h.upstream = base, u.IdempotencyHeader, u
		h.presented = resolvePresented(u, h.Upstream, h.Auth, path, add)
		h.tokenScopes = resolveScopes(u, h.Upstream, h.presented, h.Scopes, path, add)
	}
	if !slices.Contains(HTTPMethods(), h.Method) {
		add(path+".method", "is %q; it must be one of %v", h.Method, HTTPMethods())
	}
	if parts, err := ParsePath(h.Path); err != nil {
		add(path+".path", "%v", err)
	} else {
		for _, p := range parts {
			if p.Param != "" {
				ref(path+".path", p.Param)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(h.Query)) {
		if name, ok := InputRef(h.Query[k]); ok {
			ref(path+".query."+k, name)
		}
	}
	validateHeaders(h.Headers, path+".headers", ref, add, cmp.Or(h.idempotencyHeader, IdempotencyHeaderDefault))
	if h.upstream != nil {
		h.upstream.refuseCredentialPlaces(h.Upstream, h.Headers, path+".headers", InHeader, add)
		h.upstream.refuseCredentialPlaces(h.Upstream, h.Query, path+".query", InQuery, add)
	}
	if h.Body != nil {
		if SafeMethod(h.Method) {
			add(path+".body", "a %s request carries no body", h.Method)
		}
		for _, name := range BodyRefs(h.Body) {
			ref(path+".body", name)
		}
	}
	for i, s := range h.Success {
		if s < 100 || s > 599 {
			add(fmt.Sprintf("%s.success.%d", path, i), "%d is not an HTTP status", s)
		}
	}
	c.validateLimits(h.Limits(), path, add)
	if !slices.Contains(HTTPRetries(), h.Retry) {
		add(path+".retry", "is %q; it must be one of %v", h.Retry, HTTPRetries())
	}
}

// resolveUpstream finds the upstream a call names and its base URL in
// each of envs, the environments the call is made in (the config's, or,
// for an action not served in it, those it is served in); nil, with a
// problem added, when there is none. It returns the URL of the first.
func (c *Config) resolveUpstream(name, path string, envs []string, add func(path, format string, args ...any)) (*Upstream, *url.URL) {
	u, ok := c.Upstreams[name]
	if !ok {
		add(path+".upstream", "names the upstream %q, which is not declared under upstreams", name)
		return nil, nil
	}
	var base string
	for i, env := range envs {
		s, ok := u.URL(env)
		if !ok {
			add(path+".upstream", "the upstream %q has no URL for the environment %q: its base_urls name %v; set environment, or add it",
				name, env, slices.Sorted(maps.Keys(u.BaseURLs)))
			return nil, nil
		}
		if i == 0 {
			base = s
		}
	}
	parsed, err := url.Parse(base)
	if err != nil || CheckUpstreamURL(base) != nil {
		return nil, nil // validateUpstreams reports it
	}
	return u, parsed
}

// refuseCredentialPlaces refuses a header (in: header; its name in any
// case) or query parameter (in: query) of a call on u, named upstream, that
// is where one of u's api_key schemes places its credential: the scheme's
// credential would overwrite the action's value where it is set, and where
// it is unset (the scheme omitted) the action's value — an agent's input,
// perhaps — would go out in the credential's place.
func (u *Upstream) refuseCredentialPlaces(upstream string, fields map[string]string, path, in string, add func(path, format string, args ...any)) {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		for _, scheme := range slices.Sorted(maps.Keys(u.Auth)) {
			a := u.Auth[scheme]
			if a.Type != AuthAPIKey || a.In != in {
				continue
			}
			if in == InHeader && strings.EqualFold(k, a.Name) || in == InQuery && k == a.Name {
				add(path+"."+k, "is where upstreams.%s.auth.%s places its credential; an action may not set it", upstream, scheme)
			}
		}
	}
}

// validateHeaders checks a call's headers: each a header name an action
// may set (not one of reservedHeaders, nor one of also), its value a :name
// reference or a literal a header can carry.
func validateHeaders(headers map[string]string, path string, ref func(at, name string), add func(path, format string, args ...any), also ...string) {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		at := path + "." + k
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			add(at, "%q is not a header name", k)
		case slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(k)) ||
			slices.ContainsFunc(also, func(h string) bool { return strings.EqualFold(k, h) }):
			add(at, "%s is set by orangerail, never by an action", textproto.CanonicalMIMEHeaderKey(k))
		}
		if name, ok := InputRef(headers[k]); ok {
			ref(at, name)
		} else if !httpguts.ValidHeaderFieldValue(headers[k]) {
			add(at, "the value holds characters a header cannot carry")
		}
	}
}

// validateLimits checks a call's bounds: its timeouts fit inside the
// engine's deadline for an effect.
func (c *Config) validateLimits(l UpstreamLimits, path string, add func(path, format string, args ...any)) {
	if l.MaxBytes < 1 || l.MaxBytes > HTTPMaxBytesMax {
		add(path+".max_bytes", "%d is not between 1 and %d", l.MaxBytes, HTTPMaxBytesMax)
	}
	_, statement := c.Limits.Timeouts()
	switch deadline := time.Duration(l.Deadline); {
	case deadline < time.Millisecond || deadline > statement:
		add(path+".deadline", "%s is not between 1ms and limits.statement_timeout (%s): the engine gives an effect that long", deadline, statement)
	case time.Duration(l.Timeout) < time.Millisecond || l.Timeout > l.Deadline:
		add(path+".timeout", "%s is not between 1ms and the deadline (%s)", time.Duration(l.Timeout), deadline)
	}
	if l.MaxAttempts < 1 || l.MaxAttempts > HTTPMaxAttemptsMax {
		add(path+".max_attempts", "%d is not between 1 and %d", l.MaxAttempts, HTTPMaxAttemptsMax)
	}
}

// validateTargetRead checks a target read from an upstream: a GET on a
// declared upstream, retried as safe, carrying no body, bound from the
// input as an http execute is (validateHTTPExecute), its problems at
// target.get's paths.
func (c *Config) validateTargetRead(t *Target, path string, envs []string, properties []string, add func(path, format string, args ...any)) {
	if t.Object != "" || t.KeyFrom != "" {
		add(path, "object and key_from name a row; a target read from an upstream is found by get.path's {names}: remove them")
	}
	g := t.Get
	if g == nil {
		add(path+".get", "a target read from an upstream needs get: {path: ...}, the GET that reads it")
		return
	}
	if g.Upstream != t.Upstream {
		add(path+".get.upstream", "the target's upstream is target.upstream; remove it here")
	}
	if g.Method != "GET" {
		add(path+".get.method", "is %q; a target is read with GET, which cannot act", g.Method)
	}
	if g.Retry != RetrySafe {
		add(path+".get.retry", "is %q; a target read is a GET, retried as safe", g.Retry)
	}
	if len(g.Success) > 0 {
		add(path+".get.success", "a target read succeeds with 2xx and finds none with 404; success cannot be changed")
	}
	c.validateHTTPExecute(g, path+".get", envs, properties, func(at, format string, args ...any) {
		if at == path+".get.upstream" {
			at = path + ".upstream" // where the file names it
		}
		add(at, format, args...)
	})
}
