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
// /healthz and /readyz.
func New(c Config) http.Handler {
	d := &door{c: c, http: c.Ontology.HTTP, log: c.Logger}
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

	// failures remembers each address's failed authentications for
	// failureMemo, so a good request does not wait on the store to learn
	// that its address is not flooding.
	mu       sync.Mutex
	failures map[string]failureCount
}

type failureCount struct {
	hits int
	end  time.Time // the window's end
	at   time.Time // when this was read
}

// failureMemo is how long a read of an address's failures is reused. A
// flood seen by another replica reaches this one within it.
const failureMemo = time.Second

// failuresOf returns an address's failed authentications this window.
func (d *door) failuresOf(ctx context.Context, bucket string) (int, time.Time, error) {
	now := time.Now()
	d.mu.Lock()
	f, ok := d.failures[bucket]
	d.mu.Unlock()
	if ok && now.Sub(f.at) < failureMemo && now.Before(f.end) {
		return f.hits, f.end, nil
	}
	hits, end, err := d.c.Limiter.Count(ctx, bucket)
	if err == nil {
		d.remember(bucket, hits, end)
	}
	return hits, end, err
}

func (d *door) remember(bucket string, hits int, end time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failures == nil || len(d.failures) > 100_000 {
		d.failures = map[string]failureCount{}
	}
	d.failures[bucket] = failureCount{hits: hits, end: end, at: time.Now()}
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	facts := d.facts(r)

	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(d.http.AllowedOrigins, origin) {
		d.refuse(w, r, http.StatusForbidden, errcode.MCPOriginRefused, "this origin may not call the server", 0)
		return
	}

	// Failed authentications are counted per address; past the limit the
	// address is refused before any token is verified.
	authBucket := "auth:" + facts.Address
	if failures, end, err := d.failuresOf(ctx, authBucket); err != nil {
		if d.storeDown(w, r, err) {
			return
		}
	} else if failures >= d.http.RateLimits.FailedAuthPerMinute {
		d.refuse(w, r, http.StatusTooManyRequests, errcode.MCPAuthThrottled, "too many failed authentications from this address", time.Until(end))
		return
	}
	caller, err := d.authenticate(r)
	if err != nil {
		if !errors.Is(err, identity.ErrInvalidToken) && !errors.Is(err, errNoToken) {
			// The issuer could not be asked: not the client's fault.
			d.log.ErrorContext(ctx, "token verification unavailable", "error", err, "address", facts.Address)
			d.refuse(w, r, http.StatusServiceUnavailable, errcode.MCPUnauthorized, "tokens cannot be verified right now; retry shortly", 0)
			return
		}
		if hits, end, herr := d.c.Limiter.Hit(ctx, authBucket); herr != nil {
			d.log.ErrorContext(ctx, "rate-limit store unavailable", "error", herr)
		} else {
			d.remember(authBucket, hits, end)
		}
		d.log.InfoContext(ctx, "authentication refused", "address", facts.Address, "reason", err.Error())
		d.challenge(w, r, !errors.Is(err, errNoToken))
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
		hits, end, err := d.c.Limiter.Hit(ctx, fmt.Sprintf("call:%s:%s:%s", caller.Tenant, caller.Subject, class))
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

var errNoToken = errors.New("no bearer token")

func (d *door) authenticate(r *http.Request) (*identity.Caller, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, errNoToken
	}
	return d.c.Resolver.Resolve(r.Context(), strings.TrimSpace(token))
}

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

// origin is the server's own origin as the client reached it.
func (d *door) origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || (d.http.TrustedProxyHops > 0 && r.Header.Get("X-Forwarded-Proto") == "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// challenge answers 401 with where to learn how to get a token.
func (d *door) challenge(w http.ResponseWriter, r *http.Request, tokenSent bool) {
	value := fmt.Sprintf(`Bearer realm="orangerail", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, d.origin(r), Path)
	if tokenSent {
		value += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", value)
	d.refuse(w, r, http.StatusUnauthorized, errcode.MCPUnauthorized, "a valid bearer token is required", 0)
}

// metadata serves the RFC 9728 protected-resource document.
func (d *door) metadata(w http.ResponseWriter, r *http.Request) {
	cfg := d.c.Ontology
	doc := map[string]any{
		"resource":                 d.origin(r) + Path,
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
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
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
