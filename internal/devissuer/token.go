package devissuer

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// errorCode is an OAuth error code (RFC 6749 4.1.2.1 and 5.2, RFC 8628 3.5).
type errorCode string

const (
	errInvalidRequest          errorCode = "invalid_request"
	errInvalidClient           errorCode = "invalid_client"
	errInvalidGrant            errorCode = "invalid_grant"
	errUnsupportedGrantType    errorCode = "unsupported_grant_type"
	errUnsupportedResponseType errorCode = "unsupported_response_type"
	errAccessDenied            errorCode = "access_denied"
	errTemporarilyUnavailable  errorCode = "temporarily_unavailable"
	errAuthorizationPending    errorCode = "authorization_pending"
	errSlowDown                errorCode = "slow_down"
	errExpiredToken            errorCode = "expired_token"
)

// oauthError is a refusal of the token or device authorization endpoint.
type oauthError struct {
	code        errorCode
	description string
}

func refuse(code errorCode, description string) *oauthError {
	return &oauthError{code: code, description: description}
}

// status is the HTTP status RFC 6749 5.2 gives the code: 401 for a client
// that failed to authenticate, 503 when the issuer is full, else 400.
func (e *oauthError) status() int {
	switch e.code {
	case errInvalidClient:
		return http.StatusUnauthorized
	case errTemporarilyUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	if e.code == errInvalidClient {
		w.Header().Set("WWW-Authenticate", `Basic realm="devissuer"`)
	}
	writeJSON(w, e.status(), map[string]string{"error": string(e.code), "error_description": e.description})
}

// maxFormBytes bounds the bodies of the token, device and form endpoints.
const maxFormBytes = 64 << 10

// parsePost reads a form body and refuses a parameter given twice (RFC
// 6749 3.1 and 3.2).
func parsePost(w http.ResponseWriter, r *http.Request) *oauthError {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return refuse(errInvalidRequest, "the body is not a form")
	}
	if name, ok := repeated(r.PostForm); ok {
		return refuse(errInvalidRequest, "parameter "+name+" is given more than once")
	}
	return nil
}

func repeated(v url.Values) (string, bool) {
	for name, values := range v {
		if len(values) > 1 {
			return name, true
		}
	}
	return "", false
}

// clientPost starts an answer to a client's form POST: never cached
// (RFC 6749 5.1), the form parsed, the client authenticated. It reports
// false, having answered the error, when the request goes no further.
func (i *Issuer) clientPost(w http.ResponseWriter, r *http.Request) (*client, bool) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if e := parsePost(w, r); e != nil {
		writeOAuthError(w, e)
		return nil, false
	}
	c, e := i.authenticateClient(r)
	if e != nil {
		writeOAuthError(w, e)
		return nil, false
	}
	return c, true
}

// token is the token endpoint.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	c, ok := i.clientPost(w, r)
	if !ok {
		return
	}
	var (
		grant *issued
		e     *oauthError
	)
	switch r.PostForm.Get("grant_type") {
	case grantAuthorizationCode:
		grant, e = i.exchangeCode(c, r.PostForm)
	case grantDeviceCode:
		grant, e = i.pollDevice(c, r.PostForm)
	case "":
		e = refuse(errInvalidRequest, "grant_type is missing")
	default:
		e = refuse(errUnsupportedGrantType, "this issuer takes authorization_code and "+grantDeviceCode)
	}
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	answer, err := i.mintTokens(issuerURL(r), c, grant)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// authenticateClient finds the client and checks its secret, sent either
// in HTTP Basic (form-encoded, RFC 6749 2.3.1) or in the body, never both.
// A public client sends only its id.
func (i *Issuer) authenticateClient(r *http.Request) (*client, *oauthError) {
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if basicID, basicSecret, ok := r.BasicAuth(); ok {
		if secret != "" {
			return nil, refuse(errInvalidRequest, "the client authenticates in the header and the body at once")
		}
		var errID, errSecret error
		basicID, errID = url.QueryUnescape(basicID)
		basicSecret, errSecret = url.QueryUnescape(basicSecret)
		if errID != nil || errSecret != nil || (id != "" && id != basicID) {
			return nil, refuse(errInvalidClient, "the client's credentials are malformed")
		}
		id, secret = basicID, basicSecret
	}
	if id == "" {
		return nil, refuse(errInvalidClient, "no client_id")
	}
	c := i.client(id)
	switch {
	case c == nil:
		return nil, refuse(errInvalidClient, "unknown client")
	case c.secret == nil && secret != "":
		return nil, refuse(errInvalidClient, "a public client has no secret")
	case c.secret != nil && (secret == "" || !c.secret.matches(secret)):
		return nil, refuse(errInvalidClient, "the client's secret is wrong or missing")
	}
	return c, nil
}

// issued is what a grant hands out: the person and the request's details.
type issued struct {
	account  *account
	scope    string
	nonce    string
	authTime time.Time
}

// tokenResponse is RFC 6749 5.1 plus OpenID Connect's id_token.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	IDToken     string `json:"id_token,omitempty"`
	Scope       string `json:"scope,omitempty"`
}

// mintTokens signs the access token (the account's claims for the
// configured audience) and, when the scope asks for openid, the ID token
// (for the client).
func (i *Issuer) mintTokens(issuer string, c *client, g *issued) (*tokenResponse, error) {
	now := i.cfg.Now()
	exp := now.Add(i.cfg.AccessTokenTTL)
	claims := func(audience string) map[string]any {
		m := make(map[string]any, len(g.account.claims)+8)
		for k, v := range g.account.claims {
			m[k] = v
		}
		m["iss"], m["sub"], m["aud"] = issuer, g.account.subject, audience
		m["iat"], m["exp"] = now.Unix(), exp.Unix()
		return m
	}
	access := claims(i.cfg.Audience)
	access["client_id"] = c.id // RFC 9068 2.2
	access["jti"] = randomToken()
	accessToken, err := i.sign(typeAccessToken, access)
	if err != nil {
		return nil, err
	}
	answer := &tokenResponse{AccessToken: accessToken, TokenType: "Bearer", ExpiresIn: int64(i.cfg.AccessTokenTTL / time.Second), Scope: g.scope}
	if hasScope(g.scope, "openid") {
		id := claims(c.id)
		id["auth_time"] = g.authTime.Unix()
		// The access token's hash (Core 3.1.3.6; ES256: the left half of
		// its SHA-256): it binds the two, and marks this token an ID
		// token, which no resource takes as its bearer token.
		sum := sha256.Sum256([]byte(accessToken))
		id["at_hash"] = base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
		if g.nonce != "" {
			id["nonce"] = g.nonce
		}
		if answer.IDToken, err = i.sign(typeJWT, id); err != nil {
			return nil, err
		}
	}
	return answer, nil
}

func hasScope(scope, want string) bool {
	for _, s := range strings.Fields(scope) {
		if s == want {
			return true
		}
	}
	return false
}

// PKCE (RFC 7636). Only S256: plain sends the verifier's equal in the front
// channel, which is what PKCE exists to avoid.
const pkceS256 = "S256"

// challengePattern is an S256 challenge: 32 bytes, base64url, no padding.
var challengePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// verifierPattern is RFC 7636 4.1's code_verifier.
var verifierPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// checkChallenge validates a request's code_challenge and method; required
// says whether PKCE may be absent.
func checkChallenge(challenge, method string, required bool) *oauthError {
	if challenge == "" && method == "" && !required {
		return nil
	}
	if challenge == "" {
		return refuse(errInvalidRequest, "code_challenge is required (PKCE with S256)")
	}
	if method != pkceS256 {
		return refuse(errInvalidRequest, "code_challenge_method must be S256; plain and a missing method are refused")
	}
	if !challengePattern.MatchString(challenge) {
		return refuse(errInvalidRequest, "code_challenge is not a base64url SHA-256")
	}
	return nil
}

// verifierMatches reports whether verifier hashes to challenge.
func verifierMatches(verifier, challenge string) bool {
	if !verifierPattern.MatchString(verifier) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}
