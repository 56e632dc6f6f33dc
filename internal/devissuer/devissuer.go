// Package devissuer is a DEVELOPMENT-ONLY OpenID Connect issuer: discovery,
// a JWKS, a login page, the authorization-code flow with PKCE, the device
// authorization grant, and tokens it mints on request, all over plain HTTP
// on loopback. The demo (`make run`) and the tests use it so that every token
// goes through the same verification as production and every sign-in goes
// through a real OAuth client. `orangerail serve` never starts it, and
// nothing here is fit to issue real credentials: accounts and clients live in
// memory, the issuer URL is whatever Host the request names, and there is no
// TLS.
//
// Endpoints (relative to the origin the issuer is reached at):
//
//	GET  /.well-known/openid-configuration  discovery
//	GET  /jwks                              the published keys
//	GET  /authorize                         the login page of an authorization request
//	POST /authorize                         the login form; redirects with code and state
//	POST /token                             authorization_code and device_code grants
//	POST /device_authorization              starts a device grant (RFC 8628)
//	GET  /device, POST /device              where a person enters a user code and approves
//	GET  /assets/devissuer.css              the pages' stylesheet
package devissuer

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Key is one signing key of the issuer.
type Key struct {
	ID      string
	private *ecdsa.PrivateKey
}

// Public returns the key's public half as a JWK.
func (k *Key) Public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.private.PublicKey, KeyID: k.ID, Algorithm: string(jose.ES256), Use: "sig"}
}

// Defaults of [Config].
const (
	AudienceDefault           = "orangerail"
	AccessTokenTTLDefault     = time.Hour
	CodeTTLDefault            = time.Minute
	LoginTTLDefault           = 10 * time.Minute
	DeviceCodeTTLDefault      = 10 * time.Minute
	DevicePollIntervalDefault = 5 * time.Second
)

// Config tunes an issuer. Every zero field takes its default.
type Config struct {
	// Audience is the aud of the access tokens the flows issue. Defaults to
	// "orangerail", the audience the example's identity.oidc expects.
	Audience string
	// AccessTokenTTL is how long issued access and ID tokens live. Defaults
	// to an hour.
	AccessTokenTTL time.Duration
	// CodeTTL is how long an authorization code may wait for its exchange.
	// Defaults to a minute (RFC 6749 4.1.2 recommends at most ten).
	CodeTTL time.Duration
	// LoginTTL is how long a login page stays usable. Defaults to ten minutes.
	LoginTTL time.Duration
	// DeviceCodeTTL is how long a device code and its user code live.
	// Defaults to ten minutes.
	DeviceCodeTTL time.Duration
	// DevicePollInterval is the interval a device must wait between polls of
	// the token endpoint; whole seconds, as RFC 8628 counts it. Defaults to
	// five seconds.
	DevicePollInterval time.Duration
	// Now is the flows' clock (codes, pages, device grants and the tokens
	// they issue); tests move it. Defaults to time.Now. Token and SignWith
	// keep using the real time.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	c.Audience = cmp.Or(c.Audience, AudienceDefault)
	c.AccessTokenTTL = cmp.Or(c.AccessTokenTTL, AccessTokenTTLDefault)
	c.CodeTTL = cmp.Or(c.CodeTTL, CodeTTLDefault)
	c.LoginTTL = cmp.Or(c.LoginTTL, LoginTTLDefault)
	c.DeviceCodeTTL = cmp.Or(c.DeviceCodeTTL, DeviceCodeTTLDefault)
	c.DevicePollInterval = cmp.Or(c.DevicePollInterval, DevicePollIntervalDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	for name, d := range map[string]time.Duration{"AccessTokenTTL": c.AccessTokenTTL, "CodeTTL": c.CodeTTL,
		"LoginTTL": c.LoginTTL, "DeviceCodeTTL": c.DeviceCodeTTL} {
		if d < 0 {
			return c, fmt.Errorf("devissuer: %s is negative (%s)", name, d)
		}
	}
	if c.DevicePollInterval < time.Second || c.DevicePollInterval%time.Second != 0 {
		return c, fmt.Errorf("devissuer: DevicePollInterval must be whole seconds, at least one (%s)", c.DevicePollInterval)
	}
	return c, nil
}

// Issuer serves discovery, keys, the login and device pages and the token
// endpoint, and mints tokens. Its issuer URL is the origin it is reached at,
// so it works on any loopback port. It is safe for concurrent use.
type Issuer struct {
	cfg     Config
	csrfKey []byte

	mu        sync.Mutex
	published []*Key // in the JWKS
	current   *Key   // signs new tokens
	accounts  map[string]*account
	clients   map[string]*client
	logins    map[string]*login       // login pages not yet answered, by id
	codes     map[string]*codeGrant   // authorization codes not yet exchanged
	devices   map[string]*deviceGrant // device grants, by device code
	userCodes map[string]*deviceGrant // the same grants, by normalized user code
}

// New returns an issuer with one published signing key and the default
// [Config].
func New() (*Issuer, error) {
	return NewWithConfig(Config{})
}

// NewWithConfig returns an issuer with one published signing key.
func NewWithConfig(cfg Config) (*Issuer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	csrfKey := make([]byte, 32)
	if _, err := rand.Read(csrfKey); err != nil {
		return nil, err
	}
	return &Issuer{cfg: cfg, csrfKey: csrfKey, published: []*Key{k}, current: k,
		accounts: map[string]*account{}, clients: map[string]*client{}, logins: map[string]*login{},
		codes: map[string]*codeGrant{}, devices: map[string]*deviceGrant{}, userCodes: map[string]*deviceGrant{}}, nil
}

// NewKey makes an ES256 key with a random id.
func NewKey() (*Key, error) {
	private, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return &Key{ID: hex.EncodeToString(id), private: private}, nil
}

// Rotate makes k the signing key and publishes it beside the old ones.
func (i *Issuer) Rotate(k *Key) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.published = append(i.published, k)
	i.current = k
}

// Withdraw stops publishing the key of id, as an issuer does with a key
// it no longer trusts: tokens it signed stop verifying once a verifier
// fetches the keys again. The key that signs new tokens is not withdrawn
// (Rotate first); Withdraw reports whether a key was.
func (i *Issuer) Withdraw(id string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.current.ID == id {
		return false
	}
	n := len(i.published)
	i.published = slices.DeleteFunc(i.published, func(k *Key) bool { return k.ID == id })
	return len(i.published) < n
}

// KeyID returns the id of the key that signs new tokens.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current.ID
}

func (i *Issuer) signingKey() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current
}

// Grant types the token endpoint takes.
const (
	grantAuthorizationCode = "authorization_code"
	grantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code"
)

// Handler serves every endpoint listed in the package documentation. The
// form POSTs refuse cross-origin browser requests (http.CrossOriginProtection)
// on top of their per-form tokens.
func (i *Issuer) Handler() http.Handler {
	forms := http.NewCrossOriginProtection()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		origin := issuerURL(r)
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                origin,
			"jwks_uri":                              origin + "/jwks",
			"authorization_endpoint":                origin + "/authorize",
			"token_endpoint":                        origin + "/token",
			"device_authorization_endpoint":         origin + "/device_authorization",
			"response_types_supported":              []string{"code"},
			"response_modes_supported":              []string{"query"},
			"grant_types_supported":                 []string{grantAuthorizationCode, grantDeviceCode},
			"code_challenge_methods_supported":      []string{pkceS256},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
			"scopes_supported":                      []string{"openid"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
			"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash"},
			// RFC 9207: the authorization response names its issuer.
			"authorization_response_iss_parameter_supported": true,
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range i.published {
			set.Keys = append(set.Keys, k.Public())
		}
		i.mu.Unlock()
		writeJSON(w, http.StatusOK, set)
	})
	mux.HandleFunc("GET /authorize", i.authorizePage)
	mux.Handle("POST /authorize", forms.Handler(http.HandlerFunc(i.authorizeSubmit)))
	mux.HandleFunc("POST /token", i.token)
	mux.HandleFunc("POST /device_authorization", i.deviceAuthorization)
	mux.HandleFunc("GET /device", i.devicePage)
	mux.Handle("POST /device", forms.Handler(http.HandlerFunc(i.deviceSubmit)))
	mux.HandleFunc("GET /assets/devissuer.css", serveStylesheet)
	return mux
}

// issuerURL is the issuer's URL as this request reached it.
func issuerURL(r *http.Request) string {
	return "http://" + r.Host
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Claims are a token's claims. Issuer, Subject, Audience and the times are
// the registered ones; Extra holds the rest (tenant, roles, scope …).
type Claims struct {
	Issuer    string
	Subject   string
	Audience  string
	Expiry    time.Time
	NotBefore time.Time
	Extra     map[string]any
	// Type is the header's typ: JWT when empty.
	Type string
}

// Token mints a token signed with the current key.
func (i *Issuer) Token(c Claims) (string, error) {
	return SignWith(i.signingKey(), c)
}

// SignWith mints a token signed with k, published or not.
func SignWith(k *Key, c Claims) (string, error) {
	signer, err := newSigner(k, cmp.Or(c.Type, typeJWT))
	if err != nil {
		return "", err
	}
	registered := jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience{c.Audience},
		IssuedAt: jwt.NewNumericDate(time.Now())}
	if !c.Expiry.IsZero() {
		registered.Expiry = jwt.NewNumericDate(c.Expiry)
	}
	if !c.NotBefore.IsZero() {
		registered.NotBefore = jwt.NewNumericDate(c.NotBefore)
	}
	return jwt.Signed(signer).Claims(registered).Claims(c.Extra).Serialize()
}

// The header types the issuer signs: an access token's is RFC 9068's, any
// other token's (an ID token's) plain JWT.
const (
	typeJWT         = "JWT"
	typeAccessToken = "at+jwt"
)

func newSigner(k *Key, typ string) (jose.Signer, error) {
	return jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.private},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)).WithHeader("kid", k.ID))
}

// sign mints a token of header type typ from a complete claim set.
func (i *Issuer) sign(typ string, claims map[string]any) (string, error) {
	signer, err := newSigner(i.signingKey(), typ)
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// maxPending bounds each map of pending requests (logins, codes, devices),
// so that a page reloaded in a loop cannot grow the issuer's memory; past
// it, new requests are told temporarily_unavailable.
const maxPending = 10_000
