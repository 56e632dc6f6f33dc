// Package front is orangerail's HTTP front. Each route is mounted by its
// owner with a Policy — who may call it, the origins, body and rate limits
// it is served within — and the front enforces the policy before the
// route's handler runs: the 401 challenge naming the RFC 9728 metadata,
// the failed-authentication throttle, the body cap, the refusal of
// JSON-RPC batches, the per-caller allowances. Every refusal carries a
// stable code and its fix, and is an event on engine.Hooks; a panic in a
// route is contained and answered X_INTERNAL_ERROR.
package front

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/contentcoding"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/rpcerror"
)

// Class is what a request bills of its caller's allowance.
type Class string

// The classes.
const (
	// ClassNone bills nothing.
	ClassNone  Class = ""
	ClassRead  Class = "read"
	ClassWrite Class = "write"
)

// Auth is what a route requires of its caller.
type Auth int

// The kinds of auth.
const (
	// AuthNone serves anyone: discovery documents, health.
	AuthNone Auth = iota
	// AuthBearer serves only a request whose bearer token verifies, an
	// agent's or a person's. A request without one, or with a refused one,
	// is answered 401 with a challenge naming the route's protected-resource
	// metadata; past http.rate_limits.failed_auth_per_minute from one
	// address it is answered 429. A valid token is never throttled.
	AuthBearer
)

// RateFunc tells what a request bills, from the request and its body.
type RateFunc func(r *http.Request, body []byte) Class

// Policy is what the front enforces on a route before its handler runs,
// in this order: origin, auth, body, batch, rate.
type Policy struct {
	Auth Auth
	// Resource is the path of the protected resource a bearer route
	// serves (RFC 9728): its challenge names the metadata at
	// MetadataPath(Resource). Required with AuthBearer.
	Resource string
	// CheckOrigin refuses a request whose Origin header is not one of
	// http.allowed_origins (DNS-rebinding and cross-site protection) —
	// nor, when http.listen is a loopback address, a loopback origin —
	// and one that came over loopback naming another Host
	// (hostAndOriginAllowed). A request without an Origin is not a
	// browser's and passes the Origin check.
	CheckOrigin bool
	// MaxBodyBytes caps the body, which the front reads whole before the
	// handler runs. Zero leaves the body to the handler, unread.
	MaxBodyBytes int64
	// OneMessage refuses a body that is a JSON-RPC batch, whatever the
	// protocol version. Needs MaxBodyBytes.
	OneMessage bool
	// PlainErrors answers the front's refusals as {"error": {"code",
	// "message", "fix"}} (WriteError) instead of a JSON-RPC error: for a
	// route that is a JSON API, not MCP.
	PlainErrors bool
	// Refuse, when set, answers the front's refusals instead (over
	// PlainErrors): for a route whose answers are a person's pages, which
	// a refusal should be too, under the route's own headers.
	Refuse RefuseFunc
	// Rate bills each request to its caller's allowance of that class
	// (http.rate_limits); nil bills nothing. Needs AuthBearer, whose
	// caller the allowance is, and MaxBodyBytes.
	Rate RateFunc
}

// Refusal is what the front refuses a request with, as a route's own
// refusal answers it (Policy.Refuse).
type Refusal struct {
	Status  int
	Code    errcode.Code
	Message string
	// CorrelationID names the refusal's cause in the host log (a handler's
	// panic), when it has one there.
	CorrelationID string
}

// RefuseFunc answers a refusal.
type RefuseFunc func(w http.ResponseWriter, r *http.Request, x Refusal)

// Authenticator verifies a request's bearer token. Authenticate verifies
// it exactly once and, on success, returns the caller and the request the
// route's handler is to serve: one carrying the verified caller as that
// handler reads it (mcp.Authenticator's carries go-sdk's TokenInfo). It
// writes nothing. A refusal of the token itself wraps
// identity.ErrInvalidToken; any other error means the token could not be
// checked.
type Authenticator interface {
	Authenticate(r *http.Request) (*identity.Caller, *http.Request, error)
}

// Config configures the front.
type Config struct {
	// Ontology holds the http settings and what the protected-resource
	// metadata names. Its HTTP.PublicURL must be set, as ontology.Parse
	// sets or requires it.
	Ontology *ontology.Config
	// Authenticator verifies the tokens of bearer routes.
	Authenticator Authenticator
	// Limiter counts allowances and failed authentications.
	Limiter Limiter
	// Hooks receives a RequestRefused event per refusal (the host log's
	// "request refused" lines are one subscriber of them) and a RateRefused
	// event per spent allowance. Nil: none.
	Hooks *engine.Hooks
	// Logger receives the host log. Defaults to slog.Default().
	Logger *slog.Logger
}

type callerKey struct{}

// CallerFrom returns the verified caller the front put in a bearer
// route's request context.
func CallerFrom(ctx context.Context) *identity.Caller {
	c, _ := ctx.Value(callerKey{}).(*identity.Caller)
	return c
}

// Front is the HTTP front: an http.Handler serving the routes mounted on
// it. Mount every route before serving.
type Front struct {
	c    Config
	http ontology.HTTP
	log  *slog.Logger
	mux  *http.ServeMux
	// origin is the configured public URL, without a trailing slash: the
	// one name of this server the challenge and the metadata give. A
	// request's Host is never echoed.
	origin string
	// loopback is whether http.listen is a loopback address, where a
	// loopback Origin may call (hostAndOriginAllowed).
	loopback bool
	// translators are http.translation_prefixes, longest first.
	translators []netip.Prefix
	// proxies are http.trusted_proxies: X-Forwarded-For is read only
	// from a peer within one, when any is set.
	proxies []netip.Prefix
	// subtrees are the routes mounted for a path and everything under it
	// ("/api/v1/"), which answer a path not written clean there.
	subtrees []subtree
	// root refuses what no route serves (unknownRoute).
	root *route

	// over remembers, until its window ends, each failed-authentication
	// bucket known to be past the limit: counts only grow within a window,
	// so a flood is refused without a write to the store per request.
	mu   sync.Mutex
	over map[string]time.Time
}

// New returns a front with no routes. It panics if c.Ontology has no
// http.public_url or holds a translation prefix that is none: ontology's
// validation refuses both.
func New(c Config) *Front {
	if c.Ontology.HTTP.PublicURL == "" {
		panic("front: the config has no http.public_url")
	}
	f := &Front{c: c, http: c.Ontology.HTTP, log: c.Logger, mux: http.NewServeMux(),
		origin: strings.TrimSuffix(c.Ontology.HTTP.PublicURL, "/")}
	for i, t := range c.Ontology.HTTP.TranslationPrefixes {
		p, err := ontology.ParseTranslationPrefix(t)
		if err != nil {
			panic(fmt.Sprintf("front: http.translation_prefixes.%d: %v", i, err))
		}
		f.translators = append(f.translators, p)
	}
	for i, n := range c.Ontology.HTTP.TrustedProxies {
		p, err := ontology.ParseNetwork(n)
		if err != nil {
			panic(fmt.Sprintf("front: http.trusted_proxies.%d: %v", i, err))
		}
		f.proxies = append(f.proxies, p)
	}
	// The most specific prefix names the translator of an address in two.
	slices.SortFunc(f.translators, func(a, b netip.Prefix) int { return b.Bits() - a.Bits() })
	if f.log == nil {
		f.log = slog.Default()
	}
	_, f.loopback = ontology.LoopbackURL(c.Ontology.HTTP.Listen)
	// Every path no other route serves, and every path not written clean
	// outside the subtrees mounted later, is refused here.
	f.root = &route{f: f, next: http.HandlerFunc(f.unknownRoute)}
	f.mux.Handle("/", f.root)
	return f
}

// unknownRoute answers a request no route serves in JSON with a code, as
// every other refusal is answered — not ServeMux's plain text: 405 naming
// in Allow the methods its path takes, else 404. A path not written clean
// is refused as written.
func (f *Front) unknownRoute(w http.ResponseWriter, r *http.Request) {
	if Unclean(r) {
		WriteError(w, http.StatusNotFound, errcode.RouteUnknown,
			fmt.Sprintf("the server has no path %q: paths are served as written, never cleaned", display.Echo(r.URL.Path)))
		return
	}
	if allow := f.allowedMethods(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteError(w, http.StatusMethodNotAllowed, errcode.RouteUnknown,
			fmt.Sprintf("%s takes %s, not %s", display.Echo(r.URL.Path), strings.Join(allow, " or "), display.Echo(r.Method)))
		return
	}
	WriteError(w, http.StatusNotFound, errcode.RouteUnknown, fmt.Sprintf("the server has no path %q", display.Echo(r.URL.Path)))
}

// allowedMethods returns the methods of which a route serves r's path.
func (f *Front) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if h, _ := f.mux.Handler(&http.Request{Method: m, Host: r.Host, URL: r.URL}); isRoute(h) && h != f.root {
			allow = append(allow, m)
		}
	}
	return allow
}

// Mount serves handler at pattern (as http.ServeMux reads patterns) within
// policy p. It panics on a policy that cannot be enforced, as ServeMux
// panics on a pattern that conflicts.
func (f *Front) Mount(pattern string, handler http.Handler, p Policy) {
	switch {
	case p.Auth == AuthBearer && (p.Resource == "" || f.c.Authenticator == nil):
		panic("front: " + pattern + ": a bearer route needs a Resource and the front an Authenticator")
	case p.Rate != nil && (p.Auth != AuthBearer || p.MaxBodyBytes <= 0 || f.c.Limiter == nil):
		panic("front: " + pattern + ": a rate needs a bearer route, a body cap and a Limiter")
	case p.OneMessage && p.MaxBodyBytes <= 0:
		panic("front: " + pattern + ": refusing batches needs a body cap")
	}
	rt := &route{f: f, p: p, next: handler}
	f.mux.Handle(pattern, rt)
	if _, path, _ := strings.Cut(" "+pattern, " /"); strings.HasSuffix(path, "/") {
		f.subtrees = append(f.subtrees, subtree{prefix: "/" + path, route: rt})
	}
}

// subtree is a route mounted for a path and everything under it.
type subtree struct {
	prefix string
	route  *route
}

// ServeHTTP implements http.Handler. A path not written clean ("//", "."
// or ".." in it) is answered by the subtree it is written under, the
// server's root (unknownRoute) if no other, which refuses it (Unclean):
// ServeMux would redirect it to its clean form, which names another
// resource, and a 307 has a client send a POST's body there again, with
// no code to say why. Nor is any other path redirected.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if Unclean(r) && r.Method != http.MethodConnect {
		under := subtree{route: f.root}
		for _, t := range f.subtrees {
			if strings.HasPrefix(r.URL.Path, t.prefix) && len(t.prefix) > len(under.prefix) {
				under = t
			}
		}
		under.route.ServeHTTP(w, r)
		return
	}
	if h, _ := f.mux.Handler(r); !isRoute(h) {
		// ServeMux's own answer, with the root serving every path: its
		// redirect of a subtree's path written without its slash (/api/v1
		// to /api/v1/), refused as written too.
		f.root.ServeHTTP(w, r)
		return
	}
	f.mux.ServeHTTP(w, r)
}

// isRoute reports whether h is a route mounted on the front.
func isRoute(h http.Handler) bool {
	_, ok := h.(*route)
	return ok
}

// Unclean reports whether r's path is not written as ServeMux serves it
// without a redirect: it holds an empty, "." or ".." element. A subtree's
// handler refuses such a path as one it does not serve.
func Unclean(r *http.Request) bool {
	p := r.URL.Path
	if p == "" || p[0] != '/' {
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}

// route is one mounted handler and its policy.
type route struct {
	f    *Front
	p    Policy
	next http.Handler
}

func (rt *route) ServeHTTP(raw http.ResponseWriter, r *http.Request) {
	f, p := rt.f, rt.p
	w := &responseWriter{ResponseWriter: raw, refuse: p.Refuse}
	if w.refuse == nil && p.PlainErrors {
		w.refuse = func(w http.ResponseWriter, _ *http.Request, x Refusal) {
			writeError(w, x.Status, ErrorDetail{Code: x.Code, Message: x.Message, CorrelationID: x.CorrelationID})
		}
	}
	defer f.contain(w, r)
	// Every route's handler, and the resolver it asks, sees the request's
	// facts as the front read them (the desk's sign-in admits by them).
	r = r.WithContext(identity.WithFacts(r.Context(), f.facts(r)))
	if p.CheckOrigin && !f.hostAndOriginAllowed(w, r) {
		return
	}
	if p.CheckOrigin && f.corsAnswered(w, r) {
		return
	}
	var caller *identity.Caller
	if p.Auth == AuthBearer {
		var ok bool
		if caller, r, ok = f.authenticate(w, r, p.Resource); !ok {
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
	}
	if p.MaxBodyBytes > 0 {
		body, ok := f.readBody(w, r, p)
		if !ok {
			return
		}
		if p.Rate != nil && !f.allowed(w, r, caller, p.Rate(r, body), body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rt.next.ServeHTTP(w, r)
}

// readBody reads the body within the policy's cap, refusing a batch when
// the policy says so, or answers the request itself and reports false.
func (f *Front) readBody(w http.ResponseWriter, r *http.Request, p Policy) ([]byte, bool) {
	raw := w
	if rw, ok := w.(*responseWriter); ok {
		raw = rw.ResponseWriter // which MaxBytesReader tells to close the connection after a body too large
	}
	// A body the client encoded (gzip) would be read as the bytes it is,
	// and refused as no JSON or no form, with no word of why.
	if enc := contentcoding.Of(r.Header); enc != "" {
		f.refuse(w, r, refusal{status: http.StatusUnsupportedMediaType, code: errcode.ContentEncodingUnsupported,
			msg: fmt.Sprintf("the body is sent with Content-Encoding %q, which the server does not decode: send it unencoded", display.Echo(enc)), rpcCode: rpcerror.CodeInvalidRequest})
		return nil, false
	}
	// What was read of a body too large is at most the cap: its id, when
	// the prefix holds it, names the request refused.
	body, err := io.ReadAll(http.MaxBytesReader(raw, r.Body, p.MaxBodyBytes))
	// A route answering in JSON-RPC says so in MCP's codes; one answering
	// plain errors (the approvals API) or refusing its own way (the
	// desk's pages) in the request codes they share.
	tooLargeCode, unreadableCode := errcode.MCPBodyTooLarge, errcode.MCPInvalidRequest
	if p.PlainErrors || p.Refuse != nil {
		tooLargeCode, unreadableCode = errcode.RequestTooLarge, errcode.RequestInvalid
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		f.refuse(w, r, refusal{status: http.StatusRequestEntityTooLarge, code: tooLargeCode,
			msg: fmt.Sprintf("the body is larger than %d bytes", p.MaxBodyBytes), id: rpcerror.ID(body), limit: p.MaxBodyBytes})
		return nil, false
	}
	if err != nil {
		// Shorter than its Content-Length, or cut off: no message at all,
		// let alone a batch.
		f.refuse(w, r, refusal{status: http.StatusBadRequest, code: unreadableCode, msg: "the body could not be read whole",
			rpcCode: rpcerror.CodeInvalidRequest})
		return nil, false
	}
	if p.OneMessage && rpcerror.IsBatch(body) {
		f.refuse(w, r, refusal{status: http.StatusBadRequest, code: rpcerror.ErrBatch.Code, msg: rpcerror.ErrBatch.Msg,
			rpcCode: rpcerror.ErrBatch.RPCCode})
		return nil, false
	}
	return body, true
}

// callsBucket is the bucket of a caller's calls of class: the caller is
// its tenant and its subject of its issuer — a same-named subject of
// another issuer spends an allowance of its own. The issuer is in the one
// form every spelling of it shares (ontology.IssuerKey): re-spelled in the
// config, it is the same issuer, whose caller the new spelling must not
// hand a fresh allowance.
func callsBucket(caller *identity.Caller, class Class) string {
	return bucket(bucketCalls, caller.Tenant, ontology.IssuerKey(caller.Issuer), caller.Subject, string(class))
}

// allowed bills a request of class to its caller's allowance, or answers
// the request, whose body is body, itself and reports false.
func (f *Front) allowed(w http.ResponseWriter, r *http.Request, caller *identity.Caller, class Class, body []byte) bool {
	if class == ClassNone {
		return true
	}
	limit := f.http.RateLimits.ReadsPerMinute
	if class == ClassWrite {
		limit = f.http.RateLimits.WritesPerMinute
	}
	hits, end, err := f.c.Limiter.Hit(r.Context(), callsBucket(caller, class), limit)
	switch {
	case err != nil:
		return !f.storeDown(w, r, err)
	case hits > limit:
		allowance := engine.AllowanceReads
		if class == ClassWrite {
			allowance = engine.AllowanceWrites
		}
		f.c.Hooks.Emit(engine.RateRefused{Allowance: allowance, Code: errcode.MCPRateLimited, Tenant: caller.Tenant, Actor: caller.Subject})
		f.refuse(w, r, refusal{status: http.StatusTooManyRequests, code: errcode.MCPRateLimited,
			msg: fmt.Sprintf("more than %d %s calls this minute", limit, class), retryAfter: time.Until(end), id: rpcerror.ID(body), limit: int64(limit)})
		return false
	}
	return true
}

// Bill bills a request its route's policy cannot bill — one a session,
// not a bearer token, authenticates: the desk's — to its caller's
// allowance of class, the one Policy.Rate bills the approvals API's and
// MCP's requests to, or answers the request as refused and reports false.
// w is the writer the front handed the route's handler: the refusal is
// answered as the route's are. A front without a Limiter bills nothing.
func (f *Front) Bill(w http.ResponseWriter, r *http.Request, caller *identity.Caller, class Class) bool {
	if f.c.Limiter == nil {
		return true
	}
	return f.allowed(w, r, caller, class, nil)
}

// authenticate returns the request's verified caller and the request to
// serve, or answers the request itself and reports false.
//
// A request with a token is always verified, and a valid token always
// passes: failed authentications are throttled per address, but a flood
// from one address (everyone behind one NAT) must never lock out a caller
// that holds a valid token. Verifying is cheap: the resolver reuses tokens
// it verified, and fetches keys again at most once per interval. Refused
// tokens, and requests without one, are counted in two buckets per address;
// past http.rate_limits.failed_auth_per_minute in a bucket, further such
// requests are answered 429 instead of 401.
func (f *Front) authenticate(w http.ResponseWriter, r *http.Request, resource string) (*identity.Caller, *http.Request, bool) {
	ctx := r.Context()
	// The resolver admits a valid token for the facts ServeHTTP put in ctx.
	facts, _ := identity.FactsFrom(ctx)
	address := facts.Address
	if len(r.Header.Values("Authorization")) > 1 {
		// Which of two credentials a request means is not ours to guess
		// (the first of an acme and a globex token was taken): refused as
		// an invalid token is.
		f.log.InfoContext(ctx, "authentication refused", "address", address, "reason", "more than one Authorization header")
		if !f.throttled(w, r, engine.AllowanceBadToken, address, "too many invalid tokens from this address") {
			f.challenge(w, r, resource, true)
		}
		return nil, nil, false
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		if !f.throttled(w, r, engine.AllowanceNoToken, address, "too many requests without a token from this address") {
			f.challenge(w, r, resource, false)
		}
		return nil, nil, false
	}
	caller, verified, err := f.c.Authenticator.Authenticate(r)
	switch {
	case err == nil:
		return caller, verified, true
	case errors.Is(err, identity.ErrRefused):
		// A valid token refused by policy for where it came from: no sign
		// of guessing, so it counts toward no throttle.
		code, msg := errcode.IdentityNetworkRefused, "this address may not call the server"
		if errors.Is(err, identity.ErrOriginRefused) {
			code, msg = errcode.IdentityOriginRefused, "browser-origin calls are refused"
		}
		f.log.InfoContext(ctx, "authentication refused by policy", "address", address, "code", string(code))
		f.refuse(w, r, refusal{status: http.StatusForbidden, code: code, msg: msg})
		return nil, nil, false
	case !errors.Is(err, identity.ErrInvalidToken):
		// The issuer could not be asked: not the client's fault.
		f.log.ErrorContext(ctx, "token verification unavailable", "error", err, "address", address)
		f.refuse(w, r, refusal{status: http.StatusServiceUnavailable, code: errcode.MCPIdentityUnavailable, msg: "tokens cannot be verified right now; retry shortly"})
		return nil, nil, false
	}
	f.log.InfoContext(ctx, "authentication refused", "address", address, "reason", err.Error())
	if !f.throttled(w, r, engine.AllowanceBadToken, address, "too many invalid tokens from this address") {
		f.challenge(w, r, resource, true)
	}
	return nil, nil, false
}

// throttled counts a failed authentication from address's client block
// in the allowance's bucket and, past the limit this window, answers 429
// and reports true. When the count cannot be kept, nothing is throttled:
// the request is refused all the same.
func (f *Front) throttled(w http.ResponseWriter, r *http.Request, allowance engine.Allowance, address, msg string) bool {
	ctx := r.Context()
	key := bucket(bucketBadToken, clientBlock(address, f.translators))
	if allowance == engine.AllowanceNoToken {
		key = bucket(bucketNoToken, clientBlock(address, f.translators))
	}
	now := time.Now()
	f.mu.Lock()
	end, known := f.over[key]
	f.mu.Unlock()
	if !known || !now.Before(end) {
		hits, windowEnd, err := f.c.Limiter.Hit(ctx, key, f.http.RateLimits.FailedAuthPerMinute)
		if err != nil {
			f.log.ErrorContext(ctx, "rate-limit store unavailable", "error", err)
			return false
		}
		if hits <= f.http.RateLimits.FailedAuthPerMinute {
			return false
		}
		end = windowEnd
		f.mu.Lock()
		if f.over == nil || len(f.over) >= maxOverBuckets {
			f.over = map[string]time.Time{} // start over rather than track age
		}
		f.over[key] = end
		f.mu.Unlock()
	}
	f.c.Hooks.Emit(engine.RateRefused{Allowance: allowance, Code: errcode.MCPAuthThrottled, Address: address})
	// The body is not read before the token verifies: the answer has no id.
	f.refuse(w, r, refusal{status: http.StatusTooManyRequests, code: errcode.MCPAuthThrottled, msg: msg, retryAfter: end.Sub(now),
		limit: int64(f.http.RateLimits.FailedAuthPerMinute)})
	return true
}

// maxOverBuckets bounds the buckets a front remembers as over the limit.
const maxOverBuckets = 100_000

// clientBlock is the block of addresses the failed-auth throttle takes one
// client to hold. An IPv4 address counts alone, and so does an IPv6
// address that stands for one — IPv4-mapped, IPv4-compatible or
// translated, a NAT64 well-known prefix's or one of translators (the
// operator's own, longest first), 6to4's site, Teredo's client — as that
// IPv4 address: a client reaching an IPv6-only door through a translator
// is each its own, not every IPv4 client in one /64. Another
// IPv6 address counts by its /64, the smallest block a host is given, in
// which it takes any address it likes (temporary addresses, SLAAC), so
// that a client could otherwise count each guess from an address of its
// own. A link-local address counts by its /64 and its zone: one block a
// link, since a host on the link takes any address of fe80::/64 too, but
// no two links' hosts in one. Loopback is one address. What is no address
// (unknownAddress) is its own block.
func clientBlock(address string, translators []netip.Prefix) string {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return address
	}
	for _, p := range translators {
		if p.Contains(a.WithZone("")) {
			return translatedIPv4(a.WithZone(""), p.Bits()).String()
		}
	}
	if v4, ok := embeddedIPv4(a.WithZone("")); ok {
		return v4.String()
	}
	if a.IsLoopback() || localNAT64.Contains(a.WithZone("")) {
		// A local-use NAT64 prefix's form is its operator's choice: the
		// address whole is one IPv4 client's, whichever it is.
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return address
	}
	if zone := a.Zone(); zone != "" && a.IsLinkLocalUnicast() {
		return p.String() + "%" + zone
	}
	return p.String()
}

// The IPv6 blocks whose addresses carry an IPv4 address.
var (
	ipv4Compatible  = netip.MustParsePrefix("::/96")           // RFC 4291, deprecated
	ipv4Translated  = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 (SIIT)
	wellKnownNAT64  = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	localNAT64      = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215: the form is the operator's
	sixToFour       = netip.MustParsePrefix("2002::/16")       // RFC 3056: 2002:V4ADDR::/48 a site
	teredo          = netip.MustParsePrefix("2001::/32")       // RFC 4380
	ipv4Unspecified = netip.MustParsePrefix("0.0.0.0/8")
)

// embeddedIPv4 is the IPv4 address a (zoneless) IPv6 address stands for,
// where its block says where it is.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4() || a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case wellKnownNAT64.Contains(a), ipv4Translated.Contains(a):
		return last, true
	case ipv4Compatible.Contains(a):
		// :: and ::1 are not IPv4 addresses; nothing in 0.0.0.0/8 is one.
		return last, !ipv4Unspecified.Contains(last)
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(a):
		// The client's public address, its bits inverted.
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// translatedIPv4 is the IPv4 address embedded in a after a network-specific
// prefix of bits bits (RFC 6052 §2.2): its 32 bits follow the prefix,
// skipping bits 64 to 71, which are zero.
func translatedIPv4(a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	var v4 [4]byte
	at := bits / 8
	for i := range v4 {
		if at == 8 {
			at++ // the u octet
		}
		v4[i] = b[at]
		at++
	}
	return netip.AddrFrom4(v4)
}

// storeDown handles an unreachable rate-limit store as the config says,
// and reports whether the request was refused.
func (f *Front) storeDown(w http.ResponseWriter, r *http.Request, err error) bool {
	f.log.ErrorContext(r.Context(), "rate-limit store unavailable", "error", err)
	if f.http.RateLimits.OnStoreError == "open" {
		return false
	}
	f.refuse(w, r, refusal{status: http.StatusServiceUnavailable, code: errcode.MCPLimitsUnavailable, msg: "the rate limits cannot be checked right now"})
	return true
}

// facts reads the request facts the resolver admits a caller by. The address is the socket's peer, or,
// behind trusted_proxy_hops proxies, the address the outermost trusted
// proxy saw; X-Forwarded-For is never read otherwise, nor from a peer
// outside http.trusted_proxies when they are listed.
//
// Behind proxies the socket's peer is a proxy, never the client, so it is
// never the answer there: an entry that is missing (a chain shorter than
// the hops) or that is no address (a proxy's obfuscated identifier,
// "unknown") leaves the address unknown, which allowed_networks refuses
// and the failed-auth throttle counts in a bucket of its own. Taking the
// peer instead would admit every client whenever the proxy sits inside an
// allowed network.
func (f *Front) facts(r *http.Request) identity.RequestFacts {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	if hops := f.http.TrustedProxyHops; hops > 0 && f.fromProxy(addr) {
		var chain []string
		for _, h := range r.Header.Values("X-Forwarded-For") {
			for _, a := range strings.Split(h, ",") {
				chain = append(chain, strings.TrimSpace(a))
			}
		}
		// Each trusted proxy appended the address it saw; the client is
		// hops entries from the end.
		addr = unknownAddress
		if i := len(chain) - hops; i >= 0 {
			if a, ok := forwardedAddress(chain[i]); ok {
				addr = a
			}
		}
	}
	return identity.RequestFacts{Address: addr, UserAgent: r.UserAgent(), Origin: r.Header.Get("Origin"), Path: r.URL.Path}
}

// fromProxy reports whether a peer is one of http.trusted_proxies, or
// whether none is listed. A peer outside them reached the server around
// its proxies: what it wrote in X-Forwarded-For is its own say.
func (f *Front) fromProxy(peer string) bool {
	if len(f.proxies) == 0 {
		return true
	}
	a, err := netip.ParseAddr(peer)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return slices.ContainsFunc(f.proxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// unknownAddress is the address of a request whose proxies did not say
// where it came from: no network holds it (identity.Admission.Admit).
const unknownAddress = "unknown"

// forwardedAddress reads an X-Forwarded-For entry as the address it names:
// a bare address, or one with a port as some proxies write it
// (203.0.113.7:4711, [2001:db8::7]:4711).
func forwardedAddress(entry string) (string, bool) {
	if a, err := netip.ParseAddr(entry); err == nil {
		return a.String(), true
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr().String(), true
	}
	return "", false
}

// challenge answers 401 with where to learn how to get a token for the
// resource.
func (f *Front) challenge(w http.ResponseWriter, r *http.Request, resource string, tokenSent bool) {
	value := fmt.Sprintf(`Bearer realm="orangerail", resource_metadata="%s%s"`, f.origin, MetadataPath(resource))
	msg := "a valid bearer token is required"
	if tokenSent {
		value += `, error="invalid_token"`
		// Which check failed is not said (a prober learns nothing), but
		// what to do is: a token kept from an earlier run of a
		// development issuer, or another deployment's, fails the same.
		msg = "the bearer token was refused: it is expired or malformed, or was not issued for this server by the issuer its protected-resource metadata names (resource_metadata, in WWW-Authenticate); get a fresh one there"
	}
	w.Header().Set("WWW-Authenticate", value)
	f.refuse(w, r, refusal{status: http.StatusUnauthorized, code: errcode.MCPUnauthorized, msg: msg})
}

// contain answers a request whose handler panicked: 500, internal_error
// under a correlation id of its own, the panic and its stack in the host
// log under that id, never in the answer. The connection serves on. An
// answer already begun is cut short; http.ErrAbortHandler, a handler's
// deliberate abort, goes on to the server.
func (f *Front) contain(w *responseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v)
	}
	correlation := uuid.NewString()
	f.log.ErrorContext(r.Context(), "handler panic", "path", r.URL.Path, "correlation_id", correlation,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if w.wrote {
		// Part of an answer went out: end the connection, so the client
		// sees a cut answer, not one that looks complete.
		panic(http.ErrAbortHandler)
	}
	clear(w.Header()) // nothing of the answer the handler began goes out
	f.refuse(w, r, refusal{status: http.StatusInternalServerError, code: errcode.InternalError,
		msg: "an unexpected internal error; the details are withheld", correlation: correlation})
}

// responseWriter notes whether the answer began.
type responseWriter struct {
	http.ResponseWriter
	wrote  bool
	refuse RefuseFunc // the route's own refusals; nil: JSON-RPC errors
}

func (w *responseWriter) WriteHeader(status int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, for a handler that streams.
func (w *responseWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the server's writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refusal is one answer of the front's refusing a request.
type refusal struct {
	status int
	code   errcode.Code
	msg    string
	// retryAfter, when set, is when the client may try again.
	retryAfter time.Duration
	// id is the request's JSON-RPC id, when its body was read and held
	// one: the body of a route that is refused before the body is read
	// (its origin, its token) is never read to find it.
	id json.RawMessage
	// limit is the bound the request hit, when it hit one.
	limit int64
	// correlation is the id an operator finds the refusal's cause under in
	// the host log, when it has one there.
	correlation string
	// rpcCode is the JSON-RPC error code; zero is rpcerror.CodeServerError.
	rpcCode int
}

// ErrorBody is the refusal of a JSON API route: the code, what went wrong
// and the code's fix.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the member of ErrorBody.
type ErrorDetail struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Fix     string       `json:"fix"`
	// CorrelationID names the error's cause in the host log (a contained
	// panic), when it has one there.
	CorrelationID string `json:"correlation_id,omitempty"`
}

// WriteError answers a JSON API request with status and an ErrorBody of
// code, whose fix is the code's.
func WriteError(w http.ResponseWriter, status int, code errcode.Code, msg string) {
	writeError(w, status, ErrorDetail{Code: code, Message: msg})
}

// writeError answers with d, its fix the code's. No cache keeps it: a
// refusal is of one request, by one caller (a 404 cached would hide the
// approval once it exists; a 401 is of a token).
func writeError(w http.ResponseWriter, status int, d ErrorDetail) {
	entry, _ := errcode.Explain(string(d.Code))
	d.Fix = entry.Fix
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: d})
}

// refuse answers a refusal: a JSON-RPC error carrying the request's id
// when it was read, and data with the code, its cause and fix, and the
// bound hit; or the route's own refusal (Policy.Refuse, PlainErrors).
func (f *Front) refuse(w http.ResponseWriter, r *http.Request, x refusal) {
	if x.retryAfter > 0 || x.status == http.StatusTooManyRequests {
		// Every 429 says when to retry: within the one-minute window, and at
		// least a second even when clocks disagree on the window's end.
		secs := min(max(int(math.Ceil(x.retryAfter.Seconds())), 1), 60)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	defer f.c.Hooks.Emit(engine.RequestRefused{Path: r.URL.Path, HTTPStatus: x.status, Code: x.code})
	if rw, ok := w.(*responseWriter); ok && rw.refuse != nil {
		rw.refuse(w, r, Refusal{Status: x.status, Code: x.code, Message: x.msg, CorrelationID: x.correlation})
		return
	}
	answer := rpcerror.New(x.id, cmp.Or(x.rpcCode, rpcerror.CodeServerError), x.code, x.msg, x.limit)
	answer.Error.Data.CorrelationID = x.correlation
	answer.Write(w, x.status)
}
