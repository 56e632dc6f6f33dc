package httpeffect

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/opfile"
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
	place map[string]func(ctx context.Context, req *http.Request, q url.Values) error
	tls   map[string]tls.Certificate
	// tokens are the oauth2_client_credentials schemes' caches: a token
	// the upstream refuses is dropped from its cache (refusedToken).
	tokens []*tokenCache
	mu     sync.Mutex
	static []string // every fixed secret's forms
	// recent holds, per oauth2_client_credentials scheme, the tokens it
	// fetched last (keptTokens): one still in flight on a call that began
	// before its successor was fetched is scrubbed too, and no older one
	// is kept, so that the list does not grow with every renewal.
	recent  map[string][]string
	secrets [][]byte // static and recent's forms, longest first: what is scrubbed
}

// keptTokens is how many of a scheme's tokens are scrubbed: the current
// one and the one before it.
const keptTokens = 2

// maxCredentialBytes bounds a credential file: a token, a password, or a
// client certificate, its chain and its key in PEM.
const maxCredentialBytes = 256 << 10

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
	data, err := opfile.Read(path, maxCredentialBytes, "credential")
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
	case ontology.AuthBearer:
		if !httpguts.ValidHeaderFieldValue(value) {
			return true, fmt.Errorf("%s: a bearer credential is sent in the Authorization header, which cannot hold a line break or another control character, and this one does (a trailing newline?)", env)
		}
	case ontology.AuthAPIKey:
		switch {
		case a.In == ontology.InHeader && !httpguts.ValidHeaderFieldValue(value):
			return true, fmt.Errorf("%s: an api_key in a header cannot hold a line break or another control character, and this one does (a trailing newline?)", env)
		case a.In == ontology.InCookie && strings.IndexFunc(value, droppedFromCookie) >= 0:
			// net/http drops such a byte from the cookie, sending another
			// credential, and logs the first it dropped.
			return true, fmt.Errorf("%s: an api_key in a cookie cannot hold a control or non-ASCII character, a quote, a semicolon or a backslash, which would be dropped from it, and this one does", env)
		}
	}
	return true, nil
}

// droppedFromCookie reports whether net/http drops r from a cookie's
// value (its sanitizeCookieValue): a control or non-ASCII character, '"',
// ';' or '\'. A space or a comma it keeps, sending the value quoted.
func droppedFromCookie(r rune) bool {
	return r < ' ' || r >= 0x7f || r == '"' || r == ';' || r == '\\'
}

// newCredentials reads and checks each scheme's credential. An
// oauth2_client_credentials scheme the call presents (present) requests
// its token with scopes when they are set (non-nil: empty asks for no
// scope parameter, the server's default), else with the scheme's; each
// Caller holds caches of its own, so two calls asking for different
// scopes never share a token. An error names the variable and what is
// wrong with its value, never the value.
func newCredentials(upstream string, u *ontology.Upstream, present, scopes []string, client *http.Client) (*credentials, error) {
	c := &credentials{place: map[string]func(context.Context, *http.Request, url.Values) error{}, tls: map[string]tls.Certificate{}}
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
		c.addSecret(value)
		switch a.Type {
		case ontology.AuthAPIKey:
			name, in := a.Name, a.In
			if a.SetsAuthorization() {
				// Sent verbatim, as "<scheme> <credentials>" (Discord's
				// "Bot <token>"): an upstream that echoes the credentials
				// without their scheme word must not pass them on either.
				if _, token, ok := strings.Cut(value, " "); ok && strings.TrimSpace(token) != "" {
					c.addSecret(strings.TrimSpace(token))
				}
			}
			c.place[scheme] = func(_ context.Context, req *http.Request, q url.Values) error {
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
			c.addSecret(password)
			c.addSecret(base64.StdEncoding.EncodeToString([]byte(value)))
			c.place[scheme] = func(_ context.Context, req *http.Request, _ url.Values) error {
				req.SetBasicAuth(user, password)
				return nil
			}
		case ontology.AuthBearer:
			c.place[scheme] = func(_ context.Context, req *http.Request, _ url.Values) error {
				req.Header.Set("Authorization", "Bearer "+value)
				return nil
			}
		case ontology.AuthOAuth2ClientCredentials:
			id, secret, _ := strings.Cut(value, ":")
			c.addSecret(secret)
			asked := a.Scopes
			// nil is the scheme's scopes; empty, not nil, is the call's
			// scopes: [] — no scope parameter at all (clientcredentials
			// sends none for an empty list), not the scheme's.
			if scopes != nil && slices.Contains(present, scheme) {
				asked = scopes
			}
			// Sorted and each once: the scope parameter (RFC 6749 §3.3,
			// space-delimited, order-independent) is the same string for
			// the same set.
			tokens := newTokenCache(&clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: a.TokenURL, Scopes: ontology.ScopeSet(asked)}, client.Transport)
			c.tokens = append(c.tokens, tokens)
			c.place[scheme] = func(ctx context.Context, req *http.Request, _ url.Values) error {
				tok, err := tokens.token(ctx)
				switch {
				case err != nil && ctx.Err() != nil:
					return fmt.Errorf("no token within the timeout or the deadline: %w", ctx.Err())
				case err != nil:
					// The token endpoint's answer may quote what was sent.
					var re *oauth2.RetrieveError
					if errors.As(err, &re) && re.Response != nil {
						return &tokenRefused{status: re.Response.StatusCode, text: statusText(re.Response.StatusCode)}
					}
					if typ, ok := errors.AsType[*tokenTypeRefused](err); ok {
						return typ
					}
					return errors.New("the token request failed")
				}
				c.addToken(scheme, tok.AccessToken)
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

// tokenRefused is a token request the token endpoint answered with
// other than a token: its status, never its body, which may quote what
// was sent.
type tokenRefused struct {
	status int
	text   string
}

func (t *tokenRefused) Error() string { return "the token request was refused: " + t.text }

// tokenTypeRefused is a token the token endpoint issued of a type other
// than bearer (token_type), which is never sent: asking again issues one
// of the same type.
type tokenTypeRefused struct {
	kind string
}

func (t *tokenTypeRefused) Error() string {
	return "the token endpoint issued a token of type " + t.kind + ", not bearer: it is not sent"
}

// tokenTypeName is how an error names a token_type: a registered type
// (RFC 6749 §11.1's registry) by its name, another unquoted, since the
// answer is the token endpoint's and may echo what it was sent.
func tokenTypeName(typ string) string {
	switch lower := strings.ToLower(typ); lower {
	case "mac", "dpop", "n_a", "pop":
		return lower
	}
	return "an unregistered type"
}

// tokenCache holds an oauth2_client_credentials scheme's token until it
// expires, and fetches the next within the asking call's context: its
// attempt's timeout and its deadline bound the fetch, and a call waiting
// for another's fetch gives up at its own (x/oauth2's cached source
// fetches under a context fixed when it was made, and callers queue behind
// it without bound).
type tokenCache struct {
	config *clientcredentials.Config
	client *http.Client
	fetch  chan struct{} // held by the call fetching

	mu  sync.Mutex
	tok *oauth2.Token
}

func newTokenCache(config *clientcredentials.Config, transport http.RoundTripper) *tokenCache {
	return &tokenCache{config: config, fetch: make(chan struct{}, 1), client: &http.Client{
		Timeout: tokenTimeout, Transport: transport,
		// A redirect is an answer, never followed: followed, a 307 or 308
		// would send the client's secret to whatever host it names.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// token returns the cached token while it is valid, else a new one.
func (t *tokenCache) token(ctx context.Context) (*oauth2.Token, error) {
	if tok := t.cached(); tok != nil {
		return tok, nil
	}
	select {
	case t.fetch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-t.fetch }()
	if tok := t.cached(); tok != nil {
		return tok, nil // fetched while this call waited
	}
	tok, err := t.config.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	if err != nil {
		return nil, err
	}
	// token_type says how the token is presented (RFC 6749 §7.1); only a
	// bearer token can be sent as one. A mac or DPoP token binds each
	// request to a key this client does not hold: sent as Bearer, it
	// would be refused at best, and honoured by an upstream that checks
	// less than its issuer meant at worst. RFC 6749 §5.1 makes token_type
	// REQUIRED, but an absent one is taken as bearer, as x/oauth2's
	// Token.Type does: the scheme is declared oauth2_client_credentials
	// for this upstream, whose bearer tokens some endpoints issue without
	// naming their type, and a key-bound type is always named (RFC 9449
	// §5 for DPoP).
	if tok.TokenType != "" && !strings.EqualFold(tok.TokenType, "bearer") {
		return nil, &tokenTypeRefused{kind: tokenTypeName(tok.TokenType)}
	}
	t.mu.Lock()
	t.tok = tok
	t.mu.Unlock()
	return tok, nil
}

// drop forgets the cached token when it is access: the upstream refused
// it (401), though it is not past its expiry — revoked, or issued without
// expires_in, which x/oauth2 counts valid forever. The next call fetches
// another. A token fetched since is kept.
func (t *tokenCache) drop(access string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != nil && t.tok.AccessToken == access {
		t.tok = nil
	}
}

// refusedToken drops from its cache the token a request the upstream
// answered 401 carried in authorization, its Authorization header.
func (c *credentials) refusedToken(authorization string) {
	if c == nil {
		return
	}
	access, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || access == "" {
		return
	}
	for _, t := range c.tokens {
		t.drop(access)
	}
}

// cached is the token while it is valid (x/oauth2's rule: until shortly
// before it expires), or nil.
func (t *tokenCache) cached() *oauth2.Token {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok.Valid() {
		return t.tok
	}
	return nil
}

// addSecret adds s to the secrets to scrub, with the forms an upstream
// that echoes a request gives it back in: as sent in a URL's query or
// path (percent-encoded, in upper- or lower-case hex), inside a JSON
// string (escaped, "/" too, as PHP's encoder writes it, and &, <, > as
// \u0026 and the like, as Go's does, in either case of hex), and in HTML
// or XML text (&amp;, &lt;, and quotes as numbered or named entities) —
// what an error's excerpt, cut short of valid JSON or markup, can only be
// scrubbed of byte for byte. The longest are replaced first, so that no
// shorter secret inside a longer one leaves the rest of it behind.
func (c *credentials) addSecret(s string) {
	if s == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.static = append(c.static, forms(s)...)
	c.rebuild()
}

// addToken makes tok the latest token of scheme, scrubbed with the one
// before it; older ones are dropped.
func (c *credentials) addToken(scheme, tok string) {
	if tok == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.recent[scheme], tok) {
		return
	}
	if c.recent == nil {
		c.recent = map[string][]string{}
	}
	kept := append(c.recent[scheme], tok)
	c.recent[scheme] = slices.Clone(kept[max(0, len(kept)-keptTokens):])
	c.rebuild()
}

// none reports whether there is no secret to scrub: read under the lock,
// since a token fetched on another call adds one.
func (c *credentials) none() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.secrets) == 0
}

// rebuild makes secrets of static and recent's forms, each once, longest
// first, so that no shorter secret inside a longer one leaves the rest of
// it behind. c.mu is held.
func (c *credentials) rebuild() {
	all := slices.Clone(c.static)
	for _, scheme := range slices.Sorted(maps.Keys(c.recent)) {
		for _, tok := range c.recent[scheme] {
			all = append(all, forms(tok)...)
		}
	}
	secrets := make([][]byte, 0, len(all))
	seen := map[string]bool{}
	for _, form := range all {
		if !seen[form] {
			seen[form] = true
			secrets = append(secrets, []byte(form))
		}
	}
	slices.SortStableFunc(secrets, func(a, b []byte) int { return len(b) - len(a) })
	c.secrets = secrets
}

// forms are s as an upstream may echo it (see addSecret).
func forms(s string) []string {
	inJSON := string(appendJSONString(nil, s))
	inJSON = inJSON[1 : len(inJSON)-1]
	goJSON, _ := json.Marshal(s) // cannot fail: a string
	htmlJSON := string(goJSON[1 : len(goJSON)-1])
	return []string{s, url.QueryEscape(s), url.PathEscape(s), lowerHex(url.QueryEscape(s)), lowerHex(url.PathEscape(s)),
		inJSON, strings.ReplaceAll(inJSON, "/", `\/`), htmlJSON, upperUnicodeHex(htmlJSON),
		html.EscapeString(s), namedEntities.Replace(s)}
}

// namedEntities escapes as markup does with named entities only.
var namedEntities = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// upperUnicodeHex writes the \uXXXX escapes of a JSON string's text in
// upper-case hex.
func upperUnicodeHex(s string) string {
	b := []byte(s)
	for i := 0; i+5 < len(b); i++ {
		switch {
		case b[i] == '\\' && b[i+1] == 'u':
			for j := i + 2; j < i+6; j++ {
				if 'a' <= b[j] && b[j] <= 'f' {
					b[j] -= 'a' - 'A'
				}
			}
			i += 5
		case b[i] == '\\':
			i++ // an escaped character: \\ is not the start of \u
		}
	}
	return string(b)
}

// lowerHex writes the percent-escapes of s in lower-case hex.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerHex(b[i+1]), toLowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// redacted is what a secret is replaced with.
const redacted = "[redacted]"

// scrub replaces every secret in b: an upstream that echoes what it was
// sent must not pass a credential on to a result, an audit record or a log.
func (c *credentials) scrub(b []byte) []byte {
	if c == nil {
		return b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.secrets {
		b = bytes.ReplaceAll(b, s, []byte(redacted))
	}
	return b
}

// longest is the length of the longest secret form: how far past a cut
// a secret that straddles it can reach.
func (c *credentials) longest() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.secrets) == 0 {
		return 0
	}
	return len(c.secrets[0]) // sorted longest first
}

// excerpt is the text of a failing answer an audit record's error keeps:
// at most the first excerptBytes of b, scrubbed, in valid UTF-8. whole
// says whether b is the whole body; where it is not, its last longest()
// bytes may end inside a secret, and are left out. A secret the excerpt's
// end falls inside is left out whole: cut first and scrubbed after, its
// beginning would be kept.
func (c *credentials) excerpt(b []byte, whole bool) string {
	end := min(len(b), excerptBytes)
	if !whole {
		end = min(end, max(0, len(b)-c.longest()))
	}
	if c != nil {
		c.mu.Lock()
		for moved := true; moved; {
			moved = false
			for _, s := range c.secrets {
				for from := 0; from < end; {
					i := bytes.Index(b[from:], s)
					if i < 0 || from+i >= end {
						break
					}
					if from+i+len(s) > end {
						end, moved = from+i, true
						break
					}
					from += i + len(s)
				}
			}
		}
		c.mu.Unlock()
	}
	return strings.ToValidUTF8(c.scrubText(string(b[:end])), "\uFFFD")
}

// scrubText is scrub of a string, read as markup is too: HTML and XML
// may spell any character as an entity (&#x66;, &amp;), and a text whose
// entities, decoded, spell a secret is kept as decoded, scrubbed.
func (c *credentials) scrubText(s string) string {
	if c == nil {
		return s
	}
	scrubbed := string(c.scrub([]byte(s)))
	if strings.IndexByte(scrubbed, '&') >= 0 {
		decoded := html.UnescapeString(scrubbed)
		if again := string(c.scrub([]byte(decoded))); again != decoded {
			return again
		}
	}
	return scrubbed
}

// scrubError is err, or an error of its text scrubbed when that holds a
// secret.
func (c *credentials) scrubError(err error) error {
	if err == nil {
		return nil
	}
	// Answer.Err as the plan's Read made it, not one it wraps: scrubbed
	// in its place, a wrapped one would drop its wrapper.
	if s, ok := err.(Scrubbable); ok { //nolint:errorlint // see above
		err = s.Scrubbed(c.scrubText)
	}
	if text := c.scrubText(err.Error()); text != err.Error() {
		return errors.New(text)
	}
	return err
}

// scrubJSON scrubs every string of a JSON text as it reads — its escapes
// decoded — where scrub sees only bytes: an upstream that answers
// "fk\/SECRET" or "\u0066k…" spells a secret that scrub cannot find and
// that every JSON reader decodes. A string that holds none is kept byte
// for byte, as is everything between strings; one that does is written
// anew with the secrets replaced. Text that is not JSON is returned as
// it is.
func (c *credentials) scrubJSON(b json.RawMessage) json.RawMessage {
	if c == nil || c.none() || !json.Valid(b) {
		return b
	}
	var out []byte
	last := 0 // b[last:] is not yet in out
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end := stringEnd(b, i)
		var text string
		if err := json.Unmarshal(b[i:end], &text); err != nil {
			return b // cannot be: b is valid JSON
		}
		if scrubbed := c.scrubText(text); scrubbed != text {
			out = append(out, b[last:i]...)
			out = appendJSONString(out, scrubbed)
			last = end
		}
		i = end - 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// stringEnd returns the index just past the JSON string that begins with
// the quote at b[start].
func stringEnd(b []byte, start int) int {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// appendJSONString appends s as a JSON string, without HTML's escapes.
func appendJSONString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
