package httpeffect

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/orangerail/orangerail/internal/ontology"
)

// tokenTimeout bounds a token request of an oauth2_client_credentials
// scheme.
const tokenTimeout = 10 * time.Second

// credentials holds an upstream's credentials, keyed by scheme name, each
// placed on a request only by a call that presents it; and it knows every
// secret byte string it holds, so that none leaves in a result or an
// error.
type credentials struct {
	// place places a header, query or cookie scheme; tls holds an mtls
	// scheme's certificate, which goes on the connection instead. A
	// scheme whose credential is unset is in neither.
	place   map[string]func(req *http.Request, q url.Values) error
	tls     map[string]tls.Certificate
	mu      sync.Mutex
	secrets [][]byte // every secret and its encodings, to scrub
}

// Credential reads the credential of an upstream's scheme from the
// environment: CredentialEnv, or the file CredentialEnv_FILE names. ok is
// false when neither is set: the scheme is then omitted, never sent empty.
func Credential(upstream, scheme string) (value string, ok bool, err error) {
	env := ontology.CredentialEnv(upstream, scheme)
	if v := os.Getenv(env); v != "" {
		return v, true, nil
	}
	path := os.Getenv(env + "_FILE")
	if path == "" {
		return "", false, nil
	}
	data, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the file
	if err != nil {
		// The path is the operator's; the file's content is never read
		// into an error.
		return "", false, fmt.Errorf("%s_FILE: %w", env, errors.Unwrap(err))
	}
	v := strings.TrimRight(string(data), "\r\n")
	return v, v != "", nil
}

// CheckCredential reads the credential of an upstream's scheme and checks
// that it can be placed: what config check and serve report. set is false
// when it is unset (the scheme is then omitted). An error names the
// variable and what is wrong with its value, never the value.
func CheckCredential(upstream, scheme string, a *ontology.UpstreamAuth) (set bool, err error) {
	value, set, err := Credential(upstream, scheme)
	if err != nil || !set {
		return false, err
	}
	env := ontology.CredentialEnv(upstream, scheme)
	switch a.Type {
	case ontology.AuthBasic, ontology.AuthOAuth2ClientCredentials:
		if !strings.Contains(value, ":") {
			return true, fmt.Errorf("%s: a %s credential is %s, and this one has no colon", env, a.Type,
				map[ontology.AuthType]string{ontology.AuthBasic: "user:password", ontology.AuthOAuth2ClientCredentials: "client_id:client_secret"}[a.Type])
		}
	case ontology.AuthMTLS:
		if _, err := tls.X509KeyPair([]byte(value), []byte(value)); err != nil {
			return true, fmt.Errorf("%s: an mtls credential is PEM holding the client certificate and its key, and this one is not", env)
		}
	}
	return true, nil
}

// newCredentials reads and checks each scheme's credential. An error names
// the variable and what is wrong with its value, never the value.
func newCredentials(upstream string, u *ontology.Upstream, client *http.Client) (*credentials, error) {
	c := &credentials{place: map[string]func(*http.Request, url.Values) error{}, tls: map[string]tls.Certificate{}}
	for _, scheme := range slices.Sorted(maps.Keys(u.Auth)) {
		a := u.Auth[scheme]
		if set, err := CheckCredential(upstream, scheme, a); err != nil || !set {
			if err != nil {
				return nil, err
			}
			continue
		}
		value, _, err := Credential(upstream, scheme)
		if err != nil {
			return nil, err
		}
		c.secrets = append(c.secrets, []byte(value))
		switch a.Type {
		case ontology.AuthAPIKey:
			name, in := a.Name, a.In
			if a.SetsAuthorization() {
				// Sent verbatim, as "<scheme> <credentials>" (Discord's
				// "Bot <token>"): an upstream that echoes the credentials
				// without their scheme word must not pass them on either.
				if _, token, ok := strings.Cut(value, " "); ok && strings.TrimSpace(token) != "" {
					c.secrets = append(c.secrets, []byte(strings.TrimSpace(token)))
				}
			}
			c.place[scheme] = func(req *http.Request, q url.Values) error {
				switch in {
				case ontology.InHeader:
					req.Header.Set(name, value)
				case ontology.InQuery:
					q.Set(name, value)
				case ontology.InCookie:
					req.AddCookie(&http.Cookie{Name: name, Value: value}) //nolint:gosec // G124: a request cookie sends only name=value; Secure, HttpOnly and SameSite are a server's attributes
				}
				return nil
			}
		case ontology.AuthBasic:
			user, password, _ := strings.Cut(value, ":")
			c.secrets = append(c.secrets, []byte(password), []byte(base64.StdEncoding.EncodeToString([]byte(value))))
			c.place[scheme] = func(req *http.Request, _ url.Values) error {
				req.SetBasicAuth(user, password)
				return nil
			}
		case ontology.AuthBearer:
			c.place[scheme] = func(req *http.Request, _ url.Values) error {
				req.Header.Set("Authorization", "Bearer "+value)
				return nil
			}
		case ontology.AuthOAuth2ClientCredentials:
			id, secret, _ := strings.Cut(value, ":")
			c.secrets = append(c.secrets, []byte(secret))
			cc := &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: a.TokenURL, Scopes: a.Scopes}
			// The token source caches the token until it expires.
			tokens := cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: tokenTimeout, Transport: client.Transport}))
			c.place[scheme] = func(req *http.Request, _ url.Values) error {
				tok, err := tokens.Token()
				if err != nil {
					// The token endpoint's answer may quote what was sent.
					var re *oauth2.RetrieveError
					if errors.As(err, &re) && re.Response != nil {
						return fmt.Errorf("the token request was refused: %s", re.Response.Status)
					}
					return errors.New("the token request failed")
				}
				c.addSecret(tok.AccessToken)
				req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
				return nil
			}
		case ontology.AuthMTLS:
			cert, err := tls.X509KeyPair([]byte(value), []byte(value))
			if err != nil {
				return nil, err // CheckCredential refused it already
			}
			c.tls[scheme] = cert
		default:
			return nil, fmt.Errorf("%s: the scheme's type %q cannot be placed", ontology.CredentialEnv(upstream, scheme), a.Type)
		}
	}
	return c, nil
}

func (c *credentials) addSecret(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.ContainsFunc(c.secrets, func(b []byte) bool { return string(b) == s }) {
		c.secrets = append(c.secrets, []byte(s))
	}
}

// scrub replaces every secret in b: an upstream that echoes what it was
// sent must not pass a credential on to a result, an audit record or a log.
func (c *credentials) scrub(b []byte) []byte {
	if c == nil {
		return b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.secrets {
		if len(s) > 0 {
			b = bytes.ReplaceAll(b, s, []byte("[redacted]"))
		}
	}
	return b
}
