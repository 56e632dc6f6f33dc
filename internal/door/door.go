// Package door is orangerail's HTTP front: it serves the MCP endpoint only
// to callers with a verified bearer token, within the body, protocol,
// origin and rate limits, and serves OAuth protected-resource metadata
// (RFC 9728) and health.
package door

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/ontology"
)

// Path is where MCP is served.
const Path = "/mcp"

// Class is what a request bills: reads, or writes.
type Class string

// The classes.
const (
	ClassRead  Class = "read"
	ClassWrite Class = "write"
)

// Resolver verifies a bearer token. A refusal of the token itself wraps
// identity.ErrInvalidToken; any other error means the token could not be
// checked.
type Resolver interface {
	Resolve(ctx context.Context, token string) (*identity.Caller, error)
}

// Config configures the door.
type Config struct {
	Ontology *ontology.Config
	Resolver Resolver
	Limiter  Limiter
	// MCP serves the endpoint for the caller CallerFrom finds in the
	// request's context.
	MCP http.Handler
	// ToolClass tells a tool's class by name; an unknown tool is a write.
	ToolClass func(tool string) Class
	// ReadyFunc reports whether the server can serve (database, schema,
	// OIDC discovery).
	ReadyFunc func(ctx context.Context) error
	Logger    *slog.Logger
}

type callerKey struct{}

// CallerFrom returns the verified caller the door put in a request's
// context.
func CallerFrom(ctx context.Context) *identity.Caller {
	c, _ := ctx.Value(callerKey{}).(*identity.Caller)
	return c
}

// New returns the door's handler: /mcp, the protected-resource metadata,
// /healthz and /readyz. c.Ontology.HTTP.PublicURL must be set, as
// ontology.Parse sets or requires it: it panics otherwise.
func New(c Config) http.Handler {
	if c.Ontology.HTTP.PublicURL == "" {
		panic("door: the config has no http.public_url")
	}
	d := &door{c: c, http: c.Ontology.HTTP, log: c.Logger, origin: strings.TrimSuffix(c.Ontology.HTTP.PublicURL, "/")}
	if d.log == nil {
		d.log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.Handle(Path, d)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource"+Path, d.metadata)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", d.metadata)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := c.ReadyFunc(r.Context()); err != nil {
			d.log.WarnContext(r.Context(), "not ready", "error", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

type door struct {
	c    Config
	http ontology.HTTP
	log  *slog.Logger
	// origin is the configured public URL, without a trailing slash: the
	// one name of this server the challenge and the metadata give. A
	// request's Host is never echoed.
	origin string

	// over remembers, until its window ends, each failed-authentication
	// bucket known to be past the limit: counts only grow within a window,
	// so a flood is refused without a write to the store per request.
	mu   sync.Mutex
	over map[string]time.Time
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(d.http.AllowedOrigins, origin) {
		d.refuse(w, r, http.StatusForbidden, errcode.MCPOriginRefused, "this origin may not call the server", 0)
		return
	}
	caller, ok := d.authenticate(w, r)
	if !ok {
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, d.http.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		d.refuse(w, r, http.StatusRequestEntityTooLarge, errcode.MCPBodyTooLarge,
			fmt.Sprintf("the body is larger than %d bytes", d.http.MaxBodyBytes), 0)
		return
	}
	if err != nil {
		d.refuse(w, r, http.StatusBadRequest, errcode.MCPProtocol, "the body could not be read", 0)
		return
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		d.refuse(w, r, http.StatusBadRequest, errcode.MCPProtocol, "JSON-RPC batches are not accepted", 0)
		return
	}

	if r.Method == http.MethodPost {
		class := d.classOf(body)
		limit := d.http.RateLimits.ReadsPerMinute
		if class == ClassWrite {
			limit = d.http.RateLimits.WritesPerMinute
		}
		hits, end, err := d.c.Limiter.Hit(ctx, bucket(bucketCalls, caller.Tenant, caller.Subject, string(class)))
		switch {
		case err != nil:
			if d.storeDown(w, r, err) {
				return
			}
		case hits > limit:
			d.refuse(w, r, http.StatusTooManyRequests, errcode.MCPRateLimited,
				fmt.Sprintf("more than %d %s calls this minute", limit, class), time.Until(end))
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.c.MCP.ServeHTTP(w, r.WithContext(context.WithValue(ctx, callerKey{}, caller)))
}

// authenticate returns the request's verified caller, or answers the
// request itself and reports false.
//
// A request with a token is always verified, and a valid token always
// passes: failed authentications are throttled per address, but a flood
// from one address (everyone behind one NAT) must never lock out a caller
// that holds a valid token. Verifying is cheap: the resolver reuses tokens
// it verified, and fetches keys again at most once per interval. Refused
// tokens, and requests without one, are counted in two buckets per address;
// past http.rate_limits.failed_auth_per_minute in a bucket, further such
// requests are answered 429 instead of 401.
func (d *door) authenticate(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	ctx := r.Context()
	address := d.facts(r).Address
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		if !d.throttled(w, r, bucket(bucketNoToken, address), "too many requests without a token from this address") {
			d.challenge(w, r, false)
		}
		return nil, false
	}
	caller, err := d.c.Resolver.Resolve(ctx, token)
	switch {
	case err == nil:
		return caller, true
	case !errors.Is(err, identity.ErrInvalidToken):
		// The issuer could not be asked: not the client's fault.
		d.log.ErrorContext(ctx, "token verification unavailable", "error", err, "address", address)
		d.refuse(w, r, http.StatusServiceUnavailable, errcode.MCPIdentityUnavailable, "tokens cannot be verified right now; retry shortly", 0)
		return nil, false
	}
	d.log.InfoContext(ctx, "authentication refused", "address", address, "reason", err.Error())
	if !d.throttled(w, r, bucket(bucketBadToken, address), "too many invalid tokens from this address") {
		d.challenge(w, r, true)
	}
	return nil, false
}

// throttled counts a failed authentication in the bucket key names and,
// past the limit this window, answers 429 and reports true. When the count
// cannot be kept, nothing is throttled: the request is refused all the
// same.
func (d *door) throttled(w http.ResponseWriter, r *http.Request, key, msg string) bool {
	ctx := r.Context()
	now := time.Now()
	d.mu.Lock()
	end, known := d.over[key]
	d.mu.Unlock()
	if !known || !now.Before(end) {
		hits, windowEnd, err := d.c.Limiter.Hit(ctx, key)
		if err != nil {
			d.log.ErrorContext(ctx, "rate-limit store unavailable", "error", err)
			return false
		}
		if hits <= d.http.RateLimits.FailedAuthPerMinute {
			return false
		}
		end = windowEnd
		d.mu.Lock()
		if d.over == nil || len(d.over) >= maxOverBuckets {
			d.over = map[string]time.Time{} // start over rather than track age
		}
		d.over[key] = end
		d.mu.Unlock()
	}
	d.refuse(w, r, http.StatusTooManyRequests, errcode.MCPAuthThrottled, msg, end.Sub(now))
	return true
}

// maxOverBuckets bounds the buckets a door remembers as over the limit.
const maxOverBuckets = 100_000

// storeDown handles an unreachable rate-limit store as the config says,
// and reports whether the request was refused.
func (d *door) storeDown(w http.ResponseWriter, r *http.Request, err error) bool {
	d.log.ErrorContext(r.Context(), "rate-limit store unavailable", "error", err)
	if d.http.RateLimits.OnStoreError == "open" {
		return false
	}
	d.refuse(w, r, http.StatusServiceUnavailable, errcode.MCPLimitsUnavailable, "the rate limits cannot be checked right now", 0)
	return true
}

// classOf tells a request's class: a tools/call by its tool; any other
// method reads; a body that cannot be read as one request bills writes. It
// reads the body as strictly as the MCP SDK does — member names match
// exactly and none may repeat — so that the tool billed is the tool run.
func (d *door) classOf(body []byte) Class {
	v, err := jcs.Parse(body)
	msg, ok := v.(map[string]any)
	if err != nil || !ok {
		return ClassWrite
	}
	switch method, isString := msg["method"].(string); {
	case !isString:
		return ClassWrite
	case method != "tools/call":
		return ClassRead
	}
	params, _ := msg["params"].(map[string]any)
	name, _ := params["name"].(string)
	return d.c.ToolClass(name)
}

// facts reads the request facts. The address is the socket's peer, or,
// behind trusted_proxy_hops proxies, the address the outermost trusted
// proxy saw; X-Forwarded-For is never read otherwise.
func (d *door) facts(r *http.Request) identity.RequestFacts {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	if hops := d.http.TrustedProxyHops; hops > 0 {
		var chain []string
		for _, h := range r.Header.Values("X-Forwarded-For") {
			for _, a := range strings.Split(h, ",") {
				chain = append(chain, strings.TrimSpace(a))
			}
		}
		// Each trusted proxy appended the address it saw; the client is
		// hops entries from the end.
		if i := len(chain) - hops; i >= 0 && net.ParseIP(chain[i]) != nil {
			addr = chain[i]
		}
	}
	return identity.RequestFacts{Address: addr}
}

// challenge answers 401 with where to learn how to get a token.
func (d *door) challenge(w http.ResponseWriter, r *http.Request, tokenSent bool) {
	value := fmt.Sprintf(`Bearer realm="orangerail", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, d.origin, Path)
	if tokenSent {
		value += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", value)
	d.refuse(w, r, http.StatusUnauthorized, errcode.MCPUnauthorized, "a valid bearer token is required", 0)
}

// metadata serves the RFC 9728 protected-resource document.
func (d *door) metadata(w http.ResponseWriter, _ *http.Request) {
	cfg := d.c.Ontology
	doc := map[string]any{
		"resource":                 d.origin + Path,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            cfg.Service,
		"scopes_supported":         scopes(cfg),
	}
	if o := cfg.Identity.OIDC; o != nil {
		servers := o.AuthorizationServers
		if len(servers) == 0 {
			servers = []string{o.Issuer}
		}
		doc["authorization_servers"] = servers
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*") // public discovery data (RFC 9728 section 3.1)
	_ = json.NewEncoder(w).Encode(doc)
}

// scopes lists every scope an action's policy names.
func scopes(cfg *ontology.Config) []string {
	set := map[string]bool{}
	for _, a := range cfg.Actions {
		if a.Policy.Scope != "" {
			set[a.Policy.Scope] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// refuse answers a JSON-RPC error carrying a code and its fix.
func (d *door) refuse(w http.ResponseWriter, r *http.Request, status int, code errcode.Code, msg string, retryAfter time.Duration) {
	entry, _ := errcode.Explain(string(code))
	if retryAfter > 0 || status == http.StatusTooManyRequests {
		// Every 429 says when to retry: within the one-minute window, and at
		// least a second even when clocks disagree on the window's end.
		secs := min(max(int(math.Ceil(retryAfter.Seconds())), 1), 60)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error": map[string]any{
			"code":    -32000,
			"message": fmt.Sprintf("%s: %s", code, msg),
			"data":    map[string]string{"code": string(code), "fix": entry.Fix},
		},
	})
	d.log.InfoContext(r.Context(), "request refused", "code", string(code), "status", status, "path", r.URL.Path)
}
