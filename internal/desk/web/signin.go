package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
)

// provider is the issuer as the desk's OAuth client sees it, discovered at
// the first sign-in and kept once discovery succeeds.
type provider struct {
	c           Config
	redirectURL string

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newProvider(c Config, redirectURL string) *provider {
	return &provider{c: c, redirectURL: redirectURL}
}

// load discovers the issuer, once it answers: through the resolver, so
// the desk's sign-ins and the bearer tokens share one discovery, one
// attempt at a time, spaced while the issuer does not answer.
func (p *provider) load(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	discovered, err := p.c.Resolver.Provider(ctx)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oauth != nil {
		return p.oauth, p.verifier, nil
	}
	p.oauth = &oauth2.Config{ClientID: p.c.Ontology.Desk.ClientID, ClientSecret: p.c.ClientSecret, RedirectURL: p.redirectURL,
		Endpoint: discovered.Endpoint(), Scopes: []string{oidc.ScopeOpenID}}
	p.verifier = discovered.Verifier(&oidc.Config{ClientID: p.c.Ontology.Desk.ClientID})
	return p.oauth, p.verifier, nil
}

// loginTTL bounds how long a sign-in may take at the issuer.
const loginTTL = 10 * time.Minute

// signIn starts an authorization request: a state, a nonce and a PKCE
// verifier, kept in a short-lived cookie of this browser, and the browser
// sent to the issuer's login page.
func (d *Desk) signIn(w http.ResponseWriter, r *http.Request) {
	config, _, err := d.oidc.load(r.Context())
	if err != nil {
		d.log.WarnContext(r.Context(), "desk: the issuer could not be discovered", "error", err)
		d.refuse(w, r, http.StatusServiceUnavailable, signInFailedCode, "The sign-in service does not answer; try again shortly.")
		return
	}
	state, nonce, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	// These are random URL-safe strings, so a dot cannot occur in them;
	// the landing page is kept in unpadded base64url, which has none either
	// (a list's cursor, in its query, does).
	landing := base64.RawURLEncoding.EncodeToString([]byte(localPath(r.URL.Query().Get("next"))))
	d.setCookie(w, loginCookie, strings.Join([]string{state, nonce, verifier, landing}, "."), loginTTL)
	http.Redirect(w, r, config.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusSeeOther)
}

// localPath returns next's path and query when its path is one of the
// desk's, else the list: a sign-in never sends the browser anywhere else.
// Its path, decoded, may hold no dot and no backslash (a step out of the
// desk, which a browser or a proxy may resolve). The query is kept as its
// parameters, encoded again, so a filtered search or a page of older
// approvals is where the sign-in lands; one that would make the login
// cookie longer than a browser keeps (maxLanding) is dropped.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || (u.Path != Path && !strings.HasPrefix(u.Path, Path+"/")) ||
		strings.ContainsAny(u.Path, `.\`) || len(u.EscapedPath()) > maxLanding {
		return Path
	}
	query, err := url.ParseQuery(u.RawQuery)
	if landing := u.EscapedPath() + "?" + query.Encode(); err == nil && len(query) > 0 && len(landing) <= maxLanding {
		return landing
	}
	return u.EscapedPath()
}

// maxLanding bounds the page a sign-in lands on, as kept in the login
// cookie (which a browser keeps to 4 KB, its name and attributes with it).
const maxLanding = 2048

// callback completes the sign-in: the state must be this browser's, the
// code is exchanged with the PKCE verifier, the ID token must verify and
// carry the nonce, and the access token must verify as the API's bearer
// tokens do, naming a person and a tenant.
func (d *Desk) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cookie, err := r.Cookie(d.cookieName(loginCookie))
	d.setCookie(w, loginCookie, "", -1) // one use
	parts := []string{}
	if err == nil {
		parts = strings.Split(cookie.Value, ".")
	}
	q := r.URL.Query()
	if len(parts) != 4 || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(parts[0])) != 1 {
		d.refuse(w, r, http.StatusBadRequest, signInFailedCode, "This sign-in did not start in this browser, or it took too long. Start again.")
		return
	}
	nonce, verifier := parts[1], parts[2]
	next := Path
	if landing, err := base64.RawURLEncoding.DecodeString(parts[3]); err == nil {
		next = localPath(string(landing)) // checked again: the cookie came back from the browser
	}
	if e := q.Get("error"); e != "" {
		d.refuse(w, r, http.StatusForbidden, signInFailedCode, "The sign-in service refused the sign-in ("+e+").")
		return
	}
	caller, issuer, expires, err := d.exchange(ctx, q.Get("code"), verifier, nonce)
	if errors.Is(err, identity.ErrNetworkRefused) {
		d.refuse(w, r, http.StatusForbidden, errcode.IdentityNetworkRefused, "This address may not sign in to the desk (identity.allowed_networks).")
		return
	}
	if errors.Is(err, identity.ErrUnreadableClaims) {
		d.refuse(w, r, http.StatusForbidden, signInFailedCode, "The sign-in service sent roles or scopes holding a control or invisible character, which the desk cannot keep; its administrator corrects this account's roles.")
		return
	}
	if errors.Is(err, errNotAPerson) {
		d.refuse(w, r, http.StatusForbidden, notAPersonCode, "This account is not a person's, or names no tenant; only people decide approvals.")
		return
	}
	if err != nil {
		d.log.WarnContext(ctx, "desk: sign-in failed", "error", err)
		d.refuse(w, r, http.StatusForbidden, signInFailedCode, "The sign-in could not be completed. Start again.")
		return
	}
	if err := d.startSession(ctx, w, r, caller, issuer, expires); err != nil {
		d.failed(w, r, "start a session", err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: next passed localPath: a path of the desk
}

var errNotAPerson = errors.New("not a person")

// exchange redeems the code and verifies both tokens.
func (d *Desk) exchange(ctx context.Context, code, verifier, nonce string) (*engine.Caller, string, time.Time, error) {
	config, idVerifier, err := d.oidc.load(ctx)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	ctx = oidc.ClientContext(ctx, d.c.HTTPClient)
	tok, err := config.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, "", time.Time{}, err
	}
	rawID, _ := tok.Extra("id_token").(string)
	idToken, err := idVerifier.Verify(ctx, rawID)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(nonce)) != 1 {
		return nil, "", time.Time{}, errors.New("the ID token's nonce is not this sign-in's")
	}
	// The desk is a browser's page by design: identity.allowed_networks
	// binds its sign-in as it binds bearer calls, but
	// refuse_browser_origins, which is about bearer calls from web pages,
	// does not refuse it.
	if facts, ok := identity.FactsFrom(ctx); ok {
		facts.Origin = ""
		ctx = identity.WithFacts(ctx, facts)
	}
	caller, err := d.c.Resolver.Resolve(ctx, tok.AccessToken)
	if tenant := (*identity.TenantError)(nil); errors.As(err, &tenant) {
		return nil, "", time.Time{}, errNotAPerson
	}
	if err != nil {
		return nil, "", time.Time{}, err
	}
	if caller.Subject != idToken.Subject {
		return nil, "", time.Time{}, errors.New("the access and ID tokens name different subjects")
	}
	if caller.Kind != engine.ActorHuman || caller.Tenant == "" {
		return nil, "", time.Time{}, errNotAPerson
	}
	return &caller.Caller, idToken.Issuer, caller.Expires, nil
}
