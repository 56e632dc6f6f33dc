// Package devissuer is a DEVELOPMENT-ONLY OpenID Connect issuer: discovery
// and a JWKS over plain HTTP on loopback, and tokens it mints on request.
// The demo (`make run`) and the tests use it so that every token goes
// through the same verification as production. `orangerail serve` never
// starts it, and nothing here is fit to issue real credentials.
package devissuer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
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

// Issuer serves discovery and keys and mints tokens. Its issuer URL is
// the origin it is reached at, so it works on any loopback port. It is
// safe for concurrent use.
type Issuer struct {
	mu        sync.Mutex
	published []*Key // in the JWKS
	current   *Key   // signs new tokens
}

// New returns an issuer with one published signing key.
func New() (*Issuer, error) {
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	return &Issuer{published: []*Key{k}, current: k}, nil
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

// KeyID returns the id of the key that signs new tokens.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current.ID
}

// Handler serves /.well-known/openid-configuration and /jwks.
func (i *Issuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		origin := "http://" + r.Host
		writeJSON(w, map[string]any{
			"issuer":                                origin,
			"jwks_uri":                              origin + "/jwks",
			"authorization_endpoint":                origin + "/authorize",
			"token_endpoint":                        origin + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range i.published {
			set.Keys = append(set.Keys, k.Public())
		}
		i.mu.Unlock()
		writeJSON(w, set)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
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
}

// Token mints a token signed with the current key.
func (i *Issuer) Token(c Claims) (string, error) {
	i.mu.Lock()
	k := i.current
	i.mu.Unlock()
	return SignWith(k, c)
}

// SignWith mints a token signed with k, published or not.
func SignWith(k *Key, c Claims) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.private},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", k.ID))
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
