// Package identity establishes who calls orangerail: a Caller from a
// verified OIDC bearer token (or the local development identity over
// stdio), with the facts of the request it came in.
package identity

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// RequestFacts are what orangerail knows of the request a caller sent.
type RequestFacts struct {
	// Address is the client's IP: the socket's peer, or, behind declared
	// proxies, the address the outermost trusted proxy saw.
	Address string
	// UserAgent is the request's User-Agent header, as the client chose it.
	UserAgent string
	// Origin is the request's Origin header: set by a browser, so a
	// request with one came from a web page.
	Origin string
	// Path is the request's URL path.
	Path string
}

type factsKey struct{}

// WithFacts returns ctx carrying the facts of the request it serves, for
// the Resolver to admit the caller by.
func WithFacts(ctx context.Context, f RequestFacts) context.Context {
	return context.WithValue(ctx, factsKey{}, f)
}

// FactsFrom returns the request facts ctx carries, and whether it carries
// any.
func FactsFrom(ctx context.Context) (RequestFacts, bool) {
	f, ok := ctx.Value(factsKey{}).(RequestFacts)
	return f, ok
}

// ErrRefused is wrapped by every refusal of a valid token for the request
// it came in: the deployment's policy, not the token, refuses it, so it is
// no sign of a guessed or forged token. ErrOriginRefused and
// ErrNetworkRefused tell which policy.
var ErrRefused = errors.New("refused by the identity policy")

// The policies' refusals; each wraps ErrRefused.
var (
	ErrOriginRefused  = fmt.Errorf("%w: a browser origin (identity.refuse_browser_origins)", ErrRefused)
	ErrNetworkRefused = fmt.Errorf("%w: an address outside identity.allowed_networks", ErrRefused)
)

// Admission is what a request's facts must satisfy for a valid token to be
// accepted. The zero value admits every request.
type Admission struct {
	// RefuseBrowserOrigins refuses a request with an Origin header.
	RefuseBrowserOrigins bool
	// Networks, when not empty, are the only networks a caller may call
	// from.
	Networks []netip.Prefix
}

// AdmissionOf reads the admission policy of the identity config, which
// ontology's validation has checked.
func AdmissionOf(c ontology.Identity) (Admission, error) {
	a := Admission{RefuseBrowserOrigins: c.RefuseBrowserOrigins}
	for i, n := range c.AllowedNetworks {
		p, err := ontology.ParseNetwork(n)
		if err != nil {
			return Admission{}, fmt.Errorf("identity.allowed_networks.%d: %w", i, err)
		}
		a.Networks = append(a.Networks, p)
	}
	return a, nil
}

// Admit reports whether a request with these facts may be served, or which
// policy refuses it. An address that cannot be read is in no network:
// when networks are set, a request whose address is unknown is refused.
func (a Admission) Admit(f RequestFacts) error {
	if a.RefuseBrowserOrigins && f.Origin != "" {
		return ErrOriginRefused
	}
	if len(a.Networks) == 0 {
		return nil
	}
	addr, err := netip.ParseAddr(f.Address)
	if err != nil {
		return ErrNetworkRefused
	}
	addr = addr.Unmap() // ::ffff:10.1.2.3 is 10.1.2.3, as a dual-stack socket reports it
	for _, n := range a.Networks {
		if n.Contains(addr) {
			return nil
		}
	}
	return ErrNetworkRefused
}

// Caller is a verified caller and the request it sent.
type Caller struct {
	engine.Caller
	// Expires is when the caller's token stops being valid.
	Expires time.Time
}

// ErrInvalidToken is wrapped by every refusal of a token. Its reason is for
// the host log; a client is told only that the token is invalid.
var ErrInvalidToken = errors.New("invalid token")

// ErrUnreadableClaims is a token whose roles or scopes hold a character
// no role or scope may: a control, format or invisible one (display.Unsafe;
// a NUL, which Postgres refuses in text, made a person's desk session
// unstorable). It is an ErrInvalidToken, which a sign-in may tell apart:
// the issuer, not the person, has to correct it.
var ErrUnreadableClaims = fmt.Errorf("%w: its roles or scopes hold a control, format or invisible character", ErrInvalidToken)

// TenantError is a token that names no tenant: its tenant claim is missing
// or no tenant id. It is an ErrInvalidToken, which a sign-in may tell
// apart (the account is not one a tenant's person signs in with).
type TenantError struct {
	Claim   string
	Missing bool // the claim is absent or empty; else not a tenant id
}

func (e *TenantError) Error() string {
	if e.Missing {
		return fmt.Sprintf("%v: no %q claim names the tenant", ErrInvalidToken, e.Claim)
	}
	return fmt.Sprintf("%v: the %q claim is not a valid tenant id", ErrInvalidToken, e.Claim)
}

func (e *TenantError) Unwrap() error { return ErrInvalidToken }

// SigningAlgorithms returns the only algorithms a token may be signed with:
// asymmetric ones. `none` and HMAC are refused.
func SigningAlgorithms() []string { return []string{oidc.RS256, oidc.ES256, oidc.EdDSA} }

// Defaults of the OIDC settings.
const (
	// ClockSkewDefault is the tolerance on a token's exp and nbf.
	ClockSkewDefault   = 30 * time.Second
	RolesClaimDefault  = "roles"
	ScopesClaimDefault = "scope"
)

// Resolver verifies OIDC bearer tokens. Discovery and the first fetch of
// the issuer's signing keys happen on first use and are retried until they
// succeed: one attempt at a time, which every caller meanwhile waits for,
// and after a failure none before a backoff (1s, doubling, at most 15s or
// MinRefetchInterval) — until then a caller gets the failure at once. The
// keys are cached, and fetched again when a token names a key the cache
// does not hold, at most once per MinRefetchInterval, and before a token
// is verified with keys older than their maximum age (KeyMaxAgeDefault,
// or less where the issuer's Cache-Control says), so an issuer's key
// rotation needs no restart, a key it withdraws stops verifying, and a
// flood of forged tokens cannot make orangerail flood the issuer, up or
// down. A Resolver is safe for concurrent use.
type Resolver struct {
	cfg     ontology.OIDC
	admit   Admission
	skew    time.Duration
	now     func() time.Time
	client  *http.Client
	refetch time.Duration

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	keys     *keySet
	// discovery is the attempt under way, or the last one, failed; retry
	// is when the next may begin.
	discovery *attempt
	retry     backoff

	cacheMu sync.Mutex
	cache   map[[sha256.Size]byte]cached
}

// cached is a verified token's caller, reused until until.
type cached struct {
	caller *Caller
	until  time.Time
}

// Token cache bounds: a verified token is reused for at most CacheTTL (and
// never past its expiry), and at most CacheSize tokens are held.
const (
	CacheTTL  = time.Minute
	CacheSize = 10_000
)

// ResolverOptions tunes a Resolver. The zero value is ready to use.
type ResolverOptions struct {
	// HTTPClient fetches discovery and keys. Defaults to a client with a
	// 10-second timeout.
	HTTPClient *http.Client
	// NowFunc returns the current time. Defaults to time.Now.
	NowFunc func() time.Time
	// MinRefetchInterval is the least time between two fetches of the
	// issuer's keys once they are loaded. Defaults to
	// MinRefetchIntervalDefault.
	MinRefetchInterval time.Duration
	// Admission is what the facts of a request (WithFacts) must satisfy
	// for its valid token to be accepted. A request whose context carries
	// no facts is judged by empty ones. The zero value admits all.
	Admission Admission
}

// NewResolver returns a Resolver for cfg. The issuer must be https, except
// on a loopback address.
func NewResolver(cfg ontology.OIDC, opts ResolverOptions) (*Resolver, error) {
	if err := ontology.CheckIssuer(cfg.Issuer); err != nil {
		return nil, err
	}
	r := &Resolver{cfg: cfg, admit: opts.Admission, skew: time.Duration(cfg.ClockSkew), now: opts.NowFunc,
		refetch: cmp.Or(opts.MinRefetchInterval, MinRefetchIntervalDefault)}
	if r.skew == 0 {
		r.skew = ClockSkewDefault
	}
	if r.now == nil {
		r.now = time.Now
	}
	client := http.Client{Timeout: 10 * time.Second}
	if opts.HTTPClient != nil {
		client = *opts.HTTPClient
	}
	// The keys are fetched as the issuer is: over https, or http on
	// loopback. A redirect elsewhere (https to http off loopback) would
	// let anyone on the path serve keys that sign tokens for any tenant.
	client.CheckRedirect = IssuerRedirects("a redirect on the way to the issuer's keys", client.CheckRedirect)
	r.client = &client
	return r, nil
}

// Ready loads the issuer's discovery document and signing keys if they are
// not loaded yet.
func (r *Resolver) Ready(ctx context.Context) error {
	_, keys, err := r.load(ctx)
	if err != nil {
		return err
	}
	return keys.ready(ctx)
}

// Provider returns the issuer as its discovery document describes it
// (its endpoints, for the desk's sign-in), discovering it first if it is
// not yet: with the Resolver's one attempt at a time and its backoff.
func (r *Resolver) Provider(ctx context.Context) (*oidc.Provider, error) {
	if _, _, err := r.load(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.provider, nil
}

// load reads the issuer's discovery document, once it succeeds: the
// verifier it returns checks tokens against the keys at its jwks_uri. One
// attempt runs at a time, the callers meanwhile waiting for its outcome;
// after it fails, callers get its error until the backoff has passed.
func (r *Resolver) load(ctx context.Context) (*oidc.IDTokenVerifier, *keySet, error) {
	for {
		r.mu.Lock()
		if v, keys := r.verifier, r.keys; v != nil {
			r.mu.Unlock()
			return v, keys, nil
		}
		if a := r.discovery; a != nil {
			if !a.ended() {
				r.mu.Unlock()
				if err := a.wait(ctx); err != nil {
					return nil, nil, err
				}
				continue // its outcome is read above, or below
			}
			if !r.retry.due(r.now()) {
				r.mu.Unlock()
				return nil, nil, a.err
			}
		}
		a := newAttempt()
		r.discovery = a
		r.mu.Unlock()

		// The attempt is shared: it does not end with this caller's
		// context (the HTTP client's timeout bounds it).
		provider, keys, err := r.discover(context.WithoutCancel(ctx))
		r.mu.Lock()
		if err == nil {
			r.provider, r.keys = provider, keys
			r.verifier = oidc.NewVerifier(r.cfg.Issuer, keys, &oidc.Config{
				ClientID:             r.cfg.Audience,
				SupportedSigningAlgs: SigningAlgorithms(),
				SkipExpiryCheck:      true, // checked below, with this resolver's skew
			})
			r.retry.succeeded()
		} else {
			r.retry.failed(r.now(), r.refetch)
		}
		a.end(err)
		r.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	}
}

// discover reads the issuer's discovery document and names its keys.
func (r *Resolver) discover(ctx context.Context) (*oidc.Provider, *keySet, error) {
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, r.client), r.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OIDC discovery at %s: %w", r.cfg.Issuer, err)
	}
	var discovered struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&discovered); err != nil || discovered.JWKSURI == "" {
		return nil, nil, fmt.Errorf("OIDC discovery at %s names no jwks_uri", r.cfg.Issuer)
	}
	if err := ontology.CheckIssuerURL("the issuer's jwks_uri", discovered.JWKSURI); err != nil {
		return nil, nil, fmt.Errorf("OIDC discovery at %s: %w", r.cfg.Issuer, err)
	}
	return provider, &keySet{url: discovered.JWKSURI, client: r.client, now: r.now, interval: r.refetch}, nil
}

// Resolve verifies a bearer token and maps its claims to a caller, then
// admits it for the request facts ctx carries (WithFacts). Every refusal of
// the token wraps ErrInvalidToken; a valid token the admission policy
// refuses for this request wraps ErrRefused instead. A token verified in
// the last CacheTTL is not verified again, but every request is admitted
// on its own facts; each call returns a caller of its own.
func (r *Resolver) Resolve(ctx context.Context, token string) (*Caller, error) {
	c, err := r.resolve(ctx, token)
	if err != nil {
		return nil, err
	}
	facts, _ := FactsFrom(ctx)
	if err := r.admit.Admit(facts); err != nil {
		return nil, err
	}
	return c, nil
}

// AdmitNetwork admits the request ctx carries the facts of by its address
// alone: for a person whose token was verified when a session began (the
// desk's), every later request of the session is bound to the networks
// the token was. The origin is the page's own concern there: the desk is a
// browser page, and refuses cross-site posts itself.
func (r *Resolver) AdmitNetwork(ctx context.Context) error {
	facts, _ := FactsFrom(ctx)
	return Admission{Networks: r.admit.Networks}.Admit(facts)
}

func (r *Resolver) resolve(ctx context.Context, token string) (*Caller, error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	r.cacheMu.Lock()
	hit, ok := r.cache[key]
	r.cacheMu.Unlock()
	if ok && now.Before(hit.until) {
		c := *hit.caller
		return &c, nil
	}
	c, err := r.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	until := now.Add(CacheTTL)
	if exp := c.Expires.Add(r.skew); exp.Before(until) {
		until = exp
	}
	r.cacheMu.Lock()
	if r.cache == nil || len(r.cache) >= CacheSize {
		r.cache = map[[sha256.Size]byte]cached{} // start over rather than track age
	}
	r.cache[key] = cached{caller: c, until: until}
	r.cacheMu.Unlock()
	copied := *c
	return &copied, nil
}

func (r *Resolver) verify(ctx context.Context, token string) (*Caller, error) {
	if !compactJWS(token) {
		return nil, fmt.Errorf("%w: not a JWS in compact serialization", ErrInvalidToken)
	}
	v, keys, err := r.load(ctx)
	if err != nil {
		return nil, err // not the token's fault: the issuer is unreachable
	}
	if err := keys.ready(ctx); err != nil {
		return nil, err // nor is a key set that cannot be had
	}
	var seen verification
	idToken, err := v.Verify(context.WithValue(ctx, verificationKey{}, &seen), token)
	if seen.fetchFault != nil {
		// The token names a key the issuer could not be asked for: the
		// issuer's fault, answered as unavailable, not as a bad token.
		return nil, fmt.Errorf("fetch the issuer's keys: %w", seen.fetchFault)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	// The verified payload, read once: each reading below decodes it.
	var payload json.RawMessage
	if err := idToken.Claims(&payload); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if !textOnly(payload) {
		return nil, fmt.Errorf("%w: its claims hold a byte that is not UTF-8 or a lone UTF-16 surrogate escape", ErrInvalidToken)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := noStructClaimVariant(claims); err != nil {
		return nil, err
	}
	var dates struct {
		Exp json.RawMessage `json:"exp"`
		Nbf json.RawMessage `json:"nbf"`
		Iat json.RawMessage `json:"iat"`
	}
	if err := json.Unmarshal(payload, &dates); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	// The verifier reads these dates leniently (a string of digits, an
	// overflowing float); they are read here again, strictly, and only
	// these readings decide.
	exp, err := numericDate("exp", dates.Exp)
	if err != nil {
		return nil, err
	}
	notBefore, err := numericDate("nbf", dates.Nbf)
	if err != nil {
		return nil, err
	}
	if _, err := numericDate("iat", dates.Iat); err != nil {
		return nil, err
	}
	now := r.now()
	if exp.IsZero() || !now.Before(exp.Add(r.skew)) {
		return nil, fmt.Errorf("%w: expired at %s", ErrInvalidToken, exp.UTC().Format(time.RFC3339))
	}
	if !notBefore.IsZero() && now.Add(r.skew).Before(notBefore) {
		return nil, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, notBefore.UTC().Format(time.RFC3339))
	}
	if err := notAnAccessToken(seen.typ, claims); err != nil {
		return nil, err
	}
	return r.callerOf(idToken.Subject, exp, claims)
}

// compactJWS reports whether token is a JWS in compact serialization (RFC
// 7515 7.1): three parts of unpadded base64url joined by dots, the
// signature not empty. A bearer token is one (RFC 9068); the JOSE library
// also verifies the JSON serializations, whose unprotected headers and
// extra members the claims the verifier reads need not come from.
func compactJWS(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.ContainsFunc(p, func(c rune) bool {
			return !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_')
		}) {
			return false
		}
	}
	return true
}

// textOnly reports whether a token's payload, valid JSON, is text
// throughout: UTF-8, and every \u escape of a UTF-16 surrogate one half
// of a pair. encoding/json reads a byte that is not UTF-8 and a lone
// surrogate alike as U+FFFD, so subjects "a\ud800" and "a\udc00" would be
// one caller, and their roles and kind not what the issuer wrote.
func textOnly(payload []byte) bool {
	if !utf8.Valid(payload) {
		return false
	}
	// Valid JSON holds a backslash only in a string, as an escape.
	high := false // the escape before was a high surrogate
	for i := 0; i < len(payload); i++ {
		if payload[i] != '\\' {
			if high {
				return false
			}
			continue
		}
		i++
		if i >= len(payload) || payload[i] != 'u' {
			if high {
				return false
			}
			continue
		}
		if i+4 >= len(payload) {
			return false
		}
		v, err := strconv.ParseUint(string(payload[i+1:i+5]), 16, 16)
		if err != nil {
			return false
		}
		i += 4
		switch {
		case v >= 0xD800 && v < 0xDC00:
			if high {
				return false
			}
			high = true
		case v >= 0xDC00 && v < 0xE000:
			if !high {
				return false
			}
			high = false
		default:
			if high {
				return false
			}
		}
	}
	return !high
}

// structClaims are the claims read into Go structs — go-oidc's (the
// issuer, subject, audience and dates it checks, its nonce, at_hash and
// distributed claims) and the dates verify reads again — whose names
// encoding/json matches in any case and by Unicode folding ("ſub" is
// "sub"), the last member winning; every other claim is read from the map
// by its exact name.
var structClaims = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "nonce", "at_hash", "_claim_names", "_claim_sources"}

// noStructClaimVariant refuses a token carrying a claim whose name is one
// of structClaims but for case or folding: read into the struct, a custom
// "Sub", "Aud" or "Exp" (a claim mapper's, an attribute a user may edit)
// written after the registered claim was taken as the caller's subject,
// the token's audience or its expiry.
func noStructClaimVariant(claims map[string]any) error {
	for name := range claims {
		for _, c := range structClaims {
			if name != c && strings.EqualFold(name, c) {
				return fmt.Errorf("%w: its claim %q is %q but for case", ErrInvalidToken, name, c)
			}
		}
	}
	return nil
}

// idTokenClaims are the claims only an OpenID Connect ID token carries
// (Core 3.1.3.6 and 3.3.2.11): the hashes that bind it to the access
// token and the code it came with.
var idTokenClaims = []string{"at_hash", "c_hash"}

// notAnAccessToken refuses a token that says it is none: one carrying an
// ID token's own claims, or Keycloak's typ claim "ID", or whose header's
// typ, as the key set read it, names another kind (otherTokenType;
// "application/" before it or not, any case: RFC 7515 4.1.9). Where an
// issuer's client id equals the audience, its ID tokens verify as this
// resource's access tokens: issued to a browser or an app, they are no
// bearer token for it. A nonce is no such mark:
// Keycloak before 24 put the sign-in's nonce in access tokens too.
func notAnAccessToken(typ string, claims map[string]any) error {
	for _, c := range idTokenClaims {
		if _, ok := claims[c]; ok {
			return fmt.Errorf("%w: an ID token (it carries %s), not an access token", ErrInvalidToken, c)
		}
	}
	if typ, ok := claims["typ"].(string); ok && strings.EqualFold(typ, "ID") {
		return fmt.Errorf("%w: an ID token (its typ claim is %q), not an access token", ErrInvalidToken, typ)
	}
	if otherTokenType(typ) {
		return fmt.Errorf("%w: a token of type %q, not an access token", ErrInvalidToken, typ)
	}
	return nil
}

// otherTokenType reports whether a header's typ names a kind of token
// other than an access token: an ID token's, or a JWT of another use
// (RFC 8725 3.11: logout+jwt, secevent+jwt, dpop+jwt …). JWT, at+jwt and
// an issuer's own access type (Okta's okta-internal-at+jwt) are an access
// token's, as is a typ that names no kind (JOSE).
func otherTokenType(typ string) bool {
	t := strings.TrimPrefix(strings.ToLower(typ), "application/")
	switch {
	case t == "id_token" || t == "idtoken" || t == "id+jwt":
		return true
	case strings.HasSuffix(t, "+jwt"):
		return !strings.HasSuffix(t, "at+jwt")
	}
	return false
}

// maxNumericDate is the last second of the year 9999: no honest token's
// date is later, and every date up to it converts to a time exactly.
const maxNumericDate = 253402300799

// numericDate reads a token's date claim (RFC 7519 NumericDate): absent,
// the zero time; else a JSON number of seconds since the epoch, integer or
// decimal, above 0 and at most maxNumericDate. Anything else — a string, a
// null, an overflowing or negative number — makes the token invalid.
func numericDate(name string, raw json.RawMessage) (time.Time, error) {
	if raw == nil {
		return time.Time{}, nil
	}
	refuse := fmt.Errorf("%w: %q is not a date in seconds between 1970 and 9999", ErrInvalidToken, name)
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return time.Time{}, refuse // a string, null, true, an array or object
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(v > 0 && v <= maxNumericDate) {
		return time.Time{}, refuse
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// callerOf maps verified claims to a caller, as the config says.
func (r *Resolver) callerOf(subject string, expires time.Time, claims map[string]any) (*Caller, error) {
	tenant, _ := claims[r.cfg.TenantClaim].(string)
	if tenant == "" {
		return nil, &TenantError{Claim: r.cfg.TenantClaim, Missing: true}
	}
	if err := database.ValidateTenantID(tenant); err != nil {
		return nil, &TenantError{Claim: r.cfg.TenantClaim}
	}
	if subject == "" {
		return nil, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	if err := checkSubject(subject); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	c := &Caller{Expires: expires}
	// The verifier accepts only tokens whose iss is the configured issuer.
	c.Subject, c.Issuer, c.Tenant, c.Kind = subject, r.cfg.Issuer, tenant, engine.ActorAgent
	c.Roles = stringList(claims[cmp.Or(r.cfg.RolesClaim, RolesClaimDefault)])
	c.Scopes = stringList(claims[cmp.Or(r.cfg.ScopesClaim, ScopesClaimDefault)])
	if slices.ContainsFunc(c.Roles, unreadable) || slices.ContainsFunc(c.Scopes, unreadable) {
		return nil, ErrUnreadableClaims
	}
	if h := r.cfg.Human; h != nil && holdsOneOf(claims[h.Claim], h.Values) {
		c.Kind = engine.ActorHuman
	}
	return c, nil
}

// holdsOneOf reports whether the claim v holds one of values: as a whole
// string, or as one of the strings stringList reads it as (a groups
// array, a space-separated list), as the roles claim is read. A rule on
// a claim an issuer sends as a list read it as no string at all, and so
// made nobody a person.
func holdsOneOf(v any, values []string) bool {
	if s, ok := v.(string); ok && slices.Contains(values, s) {
		return true
	}
	return slices.ContainsFunc(stringList(v), func(s string) bool { return slices.Contains(values, s) })
}

// unreadable reports whether a role or scope holds a character none may
// (ErrUnreadableClaims).
func unreadable(s string) bool { return strings.ContainsFunc(s, display.Unsafe) }

// stringList reads a claim that is a JSON array of strings or one
// space-separated string.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, item := range v {
			if s, ok := item.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// MaxSubjectBytes bounds a token's subject, as OpenID Connect bounds sub
// (255 ASCII characters).
const MaxSubjectBytes = 255

// checkSubject refuses a subject no audit record should carry: every
// record names its actor, so a subject holding U+0000 (which the audit
// table's jsonb cannot store) would block every call of its caller, and
// what does not show as itself (display.Unsafe: a control or format
// character — the bidirectional overrides, which show "agent-7" + U+202E
// + "gnp.exe" as another name — a line separator, an invisible one) would
// reach the people who read the log and the desk's requester.
func checkSubject(subject string) error {
	if len(subject) > MaxSubjectBytes {
		return fmt.Errorf("the subject is longer than %d bytes", MaxSubjectBytes)
	}
	if !utf8.ValidString(subject) {
		return errors.New("the subject is not UTF-8")
	}
	if strings.ContainsFunc(subject, display.Unsafe) {
		return errors.New("the subject holds a control, format, separator or invisible character")
	}
	return nil
}

// IssuerRedirects is a client's CheckRedirect on the way to an issuer
// (what names where): each redirect is held to the issuer's rule
// (ontology.CheckIssuerURL) — else anyone on a path redirected to plain
// http could serve the issuer's keys or endpoints — then to follow's, or,
// without one, to net/http's bound of 10 redirects.
func IssuerRedirects(what string, follow func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := ontology.CheckIssuerURL(what, req.URL.String()); err != nil {
			return err
		}
		if follow != nil {
			return follow(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}
