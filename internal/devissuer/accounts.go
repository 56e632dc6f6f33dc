package devissuer

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
)

// Account is a person who can sign in at the login and device pages.
type Account struct {
	Username string
	Password string
	// Subject is the sub of the tokens the person gets.
	Subject string
	// Claims go into the person's access and ID tokens beside the
	// registered claims (tenant, roles, kind, name …). They must not use a
	// name the issuer sets itself (see reservedClaims).
	Claims map[string]any
}

// Client is an OAuth client allowed to use the flows.
type Client struct {
	ID string
	// Secret authenticates a confidential client at the token endpoint
	// (client_secret_basic or client_secret_post). Empty means a public
	// client, which sends only its id and must use PKCE.
	Secret string
	// RedirectURIs are the only redirect_uri values the authorization
	// endpoint accepts, compared exactly. A client that only uses the device
	// grant needs none.
	RedirectURIs []string
}

type account struct {
	username string
	subject  string
	password secretHash
	claims   map[string]any
}

type client struct {
	id           string
	secret       *secretHash // nil for a public client
	redirectURIs []string
}

// reservedClaims are the claims the issuer sets in the tokens it issues
// from the flows; an account's claims cannot override them.
func reservedClaims() []string {
	return []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "nonce", "auth_time", "azp", "client_id", "at_hash", "c_hash"}
}

// AddAccount lets a person sign in. The password is kept only as a salted
// PBKDF2 hash. It refuses a username already taken, an empty username,
// password or subject, claims that are not JSON or that use a reserved name.
func (i *Issuer) AddAccount(a Account) error {
	if a.Username == "" || a.Password == "" || a.Subject == "" {
		return errors.New("devissuer: an account needs a username, a password and a subject")
	}
	claims := map[string]any{}
	if a.Claims != nil {
		// A JSON round trip both copies the claims (the caller may change its
		// map later) and proves they can go into a token.
		raw, err := json.Marshal(a.Claims)
		if err != nil {
			return fmt.Errorf("devissuer: account %q: claims are not JSON: %w", a.Username, err)
		}
		if err := json.Unmarshal(raw, &claims); err != nil {
			return fmt.Errorf("devissuer: account %q: claims are not JSON: %w", a.Username, err)
		}
	}
	for name := range claims {
		if slices.Contains(reservedClaims(), name) {
			return fmt.Errorf("devissuer: account %q: claim %q is set by the issuer", a.Username, name)
		}
	}
	hash, err := newSecretHash(a.Password)
	if err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, taken := i.accounts[a.Username]; taken {
		return fmt.Errorf("devissuer: account %q exists", a.Username)
	}
	i.accounts[a.Username] = &account{username: a.Username, subject: a.Subject, password: hash, claims: claims}
	return nil
}

// AddClient registers an OAuth client. Redirect URIs must be absolute http
// or https URLs without a fragment (RFC 6749 3.1.2).
func (i *Issuer) AddClient(c Client) error {
	if c.ID == "" {
		return errors.New("devissuer: a client needs an id")
	}
	for _, raw := range c.RedirectURIs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("devissuer: client %q: redirect URI %q is not an absolute http(s) URL without fragment or user info", c.ID, raw)
		}
	}
	registered := &client{id: c.ID, redirectURIs: slices.Clone(c.RedirectURIs)}
	if c.Secret != "" {
		hash, err := newSecretHash(c.Secret)
		if err != nil {
			return err
		}
		registered.secret = &hash
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, taken := i.clients[c.ID]; taken {
		return fmt.Errorf("devissuer: client %q exists", c.ID)
	}
	i.clients[c.ID] = registered
	return nil
}

// authenticate returns the account when username and password match. An
// unknown username costs the same hash as a known one, so the answer's
// timing does not tell which usernames exist.
func (i *Issuer) authenticate(username, password string) (*account, bool) {
	i.mu.Lock()
	a := i.accounts[username]
	i.mu.Unlock()
	if a == nil {
		dummySecretHash().matches(password)
		return nil, false
	}
	if !a.password.matches(password) {
		return nil, false
	}
	return a, true
}

func (i *Issuer) client(id string) *client {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.clients[id]
}

// secretHash is a salted PBKDF2-HMAC-SHA256 hash of a password or a client
// secret: no plaintext stays in memory, and comparisons take constant time.
type secretHash struct {
	salt []byte
	sum  []byte
}

// secretHashIterations is far below what stored production passwords need
// (OWASP asks 600,000): these are demo passwords that live only in this
// process's memory, and the tests sign in often under the race detector,
// where 100,000 iterations cost about 0.4 s per sign-in; 10,000 cost 5 ms
// without it.
const secretHashIterations = 10_000

func newSecretHash(secret string) (secretHash, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return secretHash{}, err
	}
	sum, err := pbkdf2.Key(sha256.New, secret, salt, secretHashIterations, sha256.Size)
	if err != nil {
		return secretHash{}, err
	}
	return secretHash{salt: salt, sum: sum}, nil
}

func (h secretHash) matches(secret string) bool {
	sum, err := pbkdf2.Key(sha256.New, secret, h.salt, secretHashIterations, sha256.Size)
	return err == nil && subtle.ConstantTimeCompare(sum, h.sum) == 1
}

// dummySecretHash is what an unknown username is compared against.
var dummySecretHash = sync.OnceValue(func() secretHash {
	h, err := newSecretHash("no account has this password")
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return h
})
