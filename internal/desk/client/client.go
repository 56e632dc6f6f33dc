// Package client calls the decision API (/api/v1) as a person, with the
// bearer token that person signed in for: the command line decides
// through the same door, the same checks and the same audit as the desk.
package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// MaxAnswerBytes bounds an answer the client reads.
const MaxAnswerBytes = 4 << 20

// Client is one person's session with a deployment's API. It is safe for
// concurrent use.
type Client struct {
	base   *url.URL
	token  string
	issuer string
	http   *http.Client

	// mu guards verdict: whether the server takes tokens of issuer, once
	// known (a failure to ask is asked again at the next request).
	mu      sync.Mutex
	verdict error
	known   bool
}

// Options configure a client beyond its server and token.
type Options struct {
	// Issuer is the issuer the token came from (the one `orangerail
	// login` kept it from). Empty, it is read from the token when the
	// token is a JWT (unverified: only to decide where to send it). The
	// token is then sent only to a server whose protected-resource
	// metadata names that issuer among its authorization servers: a
	// guard against sending it to a deployment of another issuer by
	// mistake. A token of no issuer known is sent unchecked.
	Issuer string
	// PlainHTTP allows a server reached over plain http off loopback,
	// where the token crosses the network readable by anyone on the path:
	// a development server only.
	PlainHTTP bool
}

// New returns a client of the deployment at server (its http.public_url)
// sending token. Plain http is refused off loopback unless o.PlainHTTP.
func New(server, token string, o Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(server, "/"))
	if err != nil || ontology.CheckPublicURL(server) != nil {
		return nil, errcode.New(errcode.Usage, fmt.Sprintf("--server %q is not the deployment's address (its http.public_url, an origin such as https://orangerail.example.com)", server), nil)
	}
	if ontology.PlainOffLoopback(u) && !o.PlainHTTP {
		return nil, errcode.New(errcode.ServerInsecure, fmt.Sprintf("--server %q is plain http off loopback: the token would cross the network in the clear; use the deployment's https address (or, for a development server, --plain-http)", server), nil)
	}
	if token == "" {
		return nil, errcode.New(errcode.MCPUnauthorized, "no token: run `orangerail login`, or set ORANGERAIL_TOKEN", nil)
	}
	issuer := o.Issuer
	if issuer == "" {
		issuer = jwtIssuer(token)
	}
	return &Client{base: u, token: token, issuer: issuer, http: &http.Client{
		Timeout: 30 * time.Second,
		// The API never redirects. Followed, a redirect could carry the
		// token from https to http on the same host (Go drops it only for
		// another host); its answer is refused instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// ListQuery selects approvals; empty fields select all (status: pending).
type ListQuery struct {
	Status, Action, RequestedBy, Cursor string
	Limit                               int
}

// List returns one page of the caller's tenant's approvals.
func (c *Client) List(ctx context.Context, q ListQuery) (*api.List, error) {
	v := url.Values{}
	for k, s := range map[string]string{"status": q.Status, "action": q.Action, "requested_by": q.RequestedBy, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out api.List
	return &out, c.do(ctx, http.MethodGet, "/api/v1/approvals?"+v.Encode(), nil, &out)
}

// Show returns one approval as its approver reviews it.
func (c *Client) Show(ctx context.Context, id string) (*api.Detail, error) {
	var out api.Detail
	path := "/api/v1/approvals/" + url.PathEscape(id)
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	// The API names a decider and the time of the decision together, or
	// neither: an answer with one alone is none of its.
	if (out.DecidedBy == nil) != (out.DecidedAt == nil) {
		return nil, errcode.New(errcode.ServerUnreachable, fmt.Sprintf("GET %s answered what is not its JSON: decided_by and decided_at not both set or both null", path), nil)
	}
	return &out, nil
}

// Decide records the caller's decision on an approval.
func (c *Client) Decide(ctx context.Context, id string, d api.DecisionRequest) (*api.DecisionResult, error) {
	var out api.DecisionResult
	return &out, c.do(ctx, http.MethodPost, "/api/v1/approvals/"+url.PathEscape(id)+"/decision", d, &out)
}

// codeShape is the form of every error code: an answer's code of any other
// form is not the API's, and is never printed as one.
var codeShape = regexp.MustCompile(`^X_[A-Z0-9_]{1,64}$`)

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code          string `json:"code"`
		Message       string `json:"message"`
		Fix           string `json:"fix"`
		CorrelationID string `json:"correlation_id"`
	} `json:"error"`
}

// do sends one request and decodes a 2xx answer into out; any other answer
// is an *errcode.Error carrying the API's code and message.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	if err := c.checkIssuer(ctx); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return unreachable(ctx, fmt.Sprintf("reach %s", c.base.Host), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return unreachable(ctx, fmt.Sprintf("read the answer of %s", c.base.Host), err)
	}
	if resp.StatusCode/100 == 3 {
		return redirected(method+" "+path, resp)
	}
	if resp.StatusCode/100 != 2 {
		var e apiError
		if json.Unmarshal(raw, &e) == nil && codeShape.MatchString(e.Error.Code) {
			msg := e.Error.Message
			if e.Error.CorrelationID != "" {
				msg += " (correlation id " + e.Error.CorrelationID + ")"
			}
			return errcode.New(errcode.Code(e.Error.Code), display.Text(msg), nil)
		}
		return errcode.New(errcode.ServerUnreachable, fmt.Sprintf("%s %s answered %q, not as the approvals API answers", method, path, resp.Status), nil)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errcode.New(errcode.ServerUnreachable, fmt.Sprintf("%s %s answered what is not its JSON: %v", method, path, err), err)
	}
	return nil
}

// checkIssuer asks whether the server takes tokens of the issuer the
// token came from (when known), before the token is first sent: the API's
// protected-resource metadata (RFC 9728) names its authorization servers,
// and is read without the token. The answer is kept; a failure to ask is
// not, and is asked again.
func (c *Client) checkIssuer(ctx context.Context) error {
	if c.issuer == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known {
		return c.verdict
	}
	verdict, err := c.askIssuer(ctx)
	if err != nil {
		return err
	}
	c.verdict, c.known = verdict, true
	return verdict
}

// askIssuer returns the server's verdict on the token's issuer (nil: it
// takes it), or an error when the server could not be asked.
func (c *Client) askIssuer(ctx context.Context) (verdict, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+api.MetadataPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, unreachable(ctx, fmt.Sprintf("reach %s", c.base.Host), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return redirected("GET "+api.MetadataPath, resp), nil
	}
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		// The server (or a proxy before it) could not answer now: asked
		// again at the next request.
		return nil, errcode.New(errcode.ServerUnreachable, fmt.Sprintf("%s answered %q for its protected-resource metadata (%s); try again", c.base.Host, resp.Status, api.MetadataPath), nil)
	}
	if resp.StatusCode != http.StatusOK {
		return errcode.New(errcode.TokenIssuerMismatch, fmt.Sprintf("%s answered %q for its protected-resource metadata (%s): which issuers' tokens it takes is unknown, so the token from %s is not sent",
			c.base.Host, resp.Status, api.MetadataPath, c.issuer), nil), nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxAnswerBytes)).Decode(&doc); err != nil {
		return errcode.New(errcode.TokenIssuerMismatch, fmt.Sprintf("%s's protected-resource metadata (%s) is not its JSON: which issuers' tokens it takes is unknown, so the token from %s is not sent",
			c.base.Host, api.MetadataPath, c.issuer), nil), nil
	}
	// RFC 9728 section 3.3: the metadata must name the resource asked
	// about, else it is another's (a server reached by another name than
	// its public URL, or one answering for another).
	if want := c.base.String() + api.Prefix; !sameResource(doc.Resource, want) {
		return errcode.New(errcode.RequestInvalid, fmt.Sprintf("the server at %s says it is %q, not %s: pass its public URL as --server", c.base.Host, doc.Resource, want), nil), nil
	}
	for _, s := range doc.AuthorizationServers {
		if sameIssuer(s, c.issuer) {
			return nil, nil
		}
	}
	if len(doc.AuthorizationServers) == 0 {
		return errcode.New(errcode.TokenIssuerMismatch, fmt.Sprintf("%s names no issuer whose tokens it takes, so the token from %s is not sent", c.base.Host, c.issuer), nil), nil
	}
	return errcode.New(errcode.TokenIssuerMismatch, fmt.Sprintf("the token is from %s, and %s takes tokens of %s: it is not sent; run `orangerail login --issuer %s`",
		c.issuer, c.base.Host, display.Text(strings.Join(doc.AuthorizationServers, ", ")), display.Text(doc.AuthorizationServers[0])), nil), nil
}

// redirected is the refusal of a redirect: the API never redirects, and
// the token is not sent where one leads.
func redirected(request string, resp *http.Response) error {
	return errcode.New(errcode.ServerInsecure, fmt.Sprintf("%s answered %q to %q: the API never redirects, and the token is not sent on", request, resp.Status, resp.Header.Get("Location")), nil)
}

// jwtIssuer returns the iss claim of a token that is a JWT, unverified
// (only to decide where the token may go), or "" for any other token.
func jwtIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Issuer
}

// sameResource compares resource URLs as URLs: scheme and host in any
// case, a default port written or not.
func sameResource(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	norm := func(u *url.URL) string {
		scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
		if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
			port = ""
		}
		if port != "" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host + strings.TrimSuffix(u.EscapedPath(), "/")
	}
	return norm(ua) == norm(ub)
}

// sameIssuer compares issuer identifiers as OIDC does, exactly, but for a
// trailing slash, which the person typing one may add or leave out.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// unreachable is a failure to reach the server or read its answer:
// X_SERVER_UNREACHABLE, unless the command's own context ended it, which
// says nothing of the server.
func unreachable(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return errcode.New(errcode.ServerUnreachable, fmt.Sprintf("%s: %v", what, err), err)
}
