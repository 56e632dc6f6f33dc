package devissuer

import (
	"net/http"
	"net/url"
	"slices"
	"time"
)

// login is an authorization request waiting for its login form.
type login struct {
	id          string
	client      *client
	redirectURI string
	state       string
	nonce       string
	scope       string
	challenge   string
	expires     time.Time
	attempts    int
}

// codeGrant is an authorization code waiting for its exchange.
type codeGrant struct {
	issued
	client      *client
	redirectURI string
	challenge   string
	expires     time.Time
}

// maxLoginAttempts is how many wrong passwords one login page takes before
// it is dropped and the client told access_denied.
const maxLoginAttempts = 5

// authorizePage validates an authorization request and shows its login
// page. Until the client and redirect URI are known good, errors are shown
// here and never redirected (RFC 6749 4.1.2.1); after that they go back to
// the client.
func (i *Issuer) authorizePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if name, ok := repeated(q); ok {
		showError(w, http.StatusBadRequest, "Parameter "+name+" is given more than once.")
		return
	}
	c := i.client(q.Get("client_id"))
	if c == nil {
		showError(w, http.StatusBadRequest, "The application is not registered here (unknown client_id).")
		return
	}
	registered := slices.Index(c.redirectURIs, q.Get("redirect_uri"))
	if registered < 0 {
		showError(w, http.StatusBadRequest, "The redirect_uri is not one registered for "+c.id+".")
		return
	}
	// From here on the browser is only ever sent to the registered string,
	// never to what the request carried.
	redirectURI := c.redirectURIs[registered]
	state := q.Get("state")
	if q.Get("response_type") != "code" {
		redirectError(w, r, redirectURI, state, refuse(errUnsupportedResponseType, "only response_type=code"))
		return
	}
	if e := checkChallenge(q.Get("code_challenge"), q.Get("code_challenge_method"), true); e != nil {
		redirectError(w, r, redirectURI, state, e)
		return
	}
	now := i.cfg.Now()
	l := &login{id: randomToken(), client: c, redirectURI: redirectURI, state: state, nonce: q.Get("nonce"),
		scope: q.Get("scope"), challenge: q.Get("code_challenge"), expires: now.Add(i.cfg.LoginTTL)}
	i.mu.Lock()
	i.sweepLocked(now)
	full := len(i.logins) >= maxPending
	if !full {
		i.logins[l.id] = l
	}
	i.mu.Unlock()
	if full {
		redirectError(w, r, redirectURI, state, refuse(errTemporarilyUnavailable, "too many sign-ins are waiting"))
		return
	}
	i.showLogin(w, r, http.StatusOK, l, "", "")
}

func (i *Issuer) showLogin(w http.ResponseWriter, r *http.Request, status int, l *login, username, problem string) {
	browser := browserID(w, r)
	origin := redirectOrigin(l.redirectURI)
	render(w, status, "login", cspSource(origin), page{Title: "Sign in", Error: problem, Request: l.id,
		CSRF: i.csrfToken("authorize:"+l.id, browser), Client: l.client.id, RedirectOrigin: origin, Username: username})
}

// authorizeSubmit checks a login form and sends the browser back to the
// client with a code, or with access_denied when the person cancels.
func (i *Issuer) authorizeSubmit(w http.ResponseWriter, r *http.Request) {
	if e := parsePost(w, r); e != nil {
		showError(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	id := r.PostForm.Get("request")
	now := i.cfg.Now()
	i.mu.Lock()
	l := i.logins[id]
	if l != nil && !now.Before(l.expires) {
		delete(i.logins, id)
		l = nil
	}
	i.mu.Unlock()
	if l == nil {
		showError(w, http.StatusBadRequest, "This sign-in has expired or was already used. Start again from the application.")
		return
	}
	if !i.checkCSRF(r, "authorize:"+id) {
		showError(w, http.StatusForbidden, "This form was not loaded by this browser. Start again from the application.")
		return
	}
	if r.PostForm.Get("action") == "cancel" {
		i.dropLogin(id)
		redirectError(w, r, l.redirectURI, l.state, refuse(errAccessDenied, "the person refused"))
		return
	}
	username := r.PostForm.Get("username")
	a, ok := i.authenticate(username, r.PostForm.Get("password"))
	if !ok {
		i.mu.Lock()
		l.attempts++
		exhausted := l.attempts >= maxLoginAttempts
		i.mu.Unlock()
		if exhausted {
			i.dropLogin(id)
			redirectError(w, r, l.redirectURI, l.state, refuse(errAccessDenied, "too many wrong passwords"))
			return
		}
		i.showLogin(w, r, http.StatusUnauthorized, l, username, "Wrong username or password.")
		return
	}
	code := randomToken()
	g := &codeGrant{issued: issued{account: a, scope: l.scope, nonce: l.nonce, authTime: now},
		client: l.client, redirectURI: l.redirectURI, challenge: l.challenge, expires: now.Add(i.cfg.CodeTTL)}
	i.mu.Lock()
	_, pending := i.logins[id]
	delete(i.logins, id)
	full := len(i.codes) >= maxPending
	if pending && !full {
		i.codes[code] = g
	}
	i.mu.Unlock()
	switch {
	case !pending: // a concurrent submission of the same form won
		showError(w, http.StatusBadRequest, "This sign-in was already used. Start again from the application.")
	case full:
		redirectError(w, r, l.redirectURI, l.state, refuse(errTemporarilyUnavailable, "too many codes are waiting"))
	default:
		redirectTo(w, r, l.redirectURI, url.Values{"code": {code}, "state": {l.state}})
	}
}

func (i *Issuer) dropLogin(id string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.logins, id)
}

// exchangeCode is the authorization_code grant. The code is spent by the
// first attempt whatever its outcome, so a stolen code is good for one
// guess at most (RFC 6749 4.1.2: single use).
func (i *Issuer) exchangeCode(c *client, form url.Values) (*issued, *oauthError) {
	code := form.Get("code")
	if code == "" {
		return nil, refuse(errInvalidRequest, "code is missing")
	}
	i.mu.Lock()
	g := i.codes[code]
	delete(i.codes, code)
	i.mu.Unlock()
	switch {
	case g == nil || !i.cfg.Now().Before(g.expires):
		return nil, refuse(errInvalidGrant, "the code is unknown, expired or already used")
	case g.client != c:
		return nil, refuse(errInvalidGrant, "the code was issued to another client")
	case form.Get("redirect_uri") != g.redirectURI:
		return nil, refuse(errInvalidGrant, "redirect_uri differs from the authorization request's")
	case !verifierMatches(form.Get("code_verifier"), g.challenge):
		return nil, refuse(errInvalidGrant, "code_verifier does not match the code_challenge")
	}
	return &g.issued, nil
}

// redirectTo sends the browser to redirectURI with params added to its
// query, plus iss (RFC 9207) so the client can tell which issuer answered.
// An empty state is left out.
func redirectTo(w http.ResponseWriter, r *http.Request, redirectURI string, params url.Values) {
	u, err := url.Parse(redirectURI)
	if err != nil { // AddClient parsed it already
		showError(w, http.StatusInternalServerError, "The redirect URI cannot be parsed.")
		return
	}
	q := u.Query()
	for k, vs := range params {
		if len(vs) == 1 && vs[0] != "" {
			q.Set(k, vs[0])
		}
	}
	q.Set("iss", issuerURL(r))
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func redirectError(w http.ResponseWriter, r *http.Request, redirectURI, state string, e *oauthError) {
	redirectTo(w, r, redirectURI, url.Values{"error": {string(e.code)}, "error_description": {e.description}, "state": {state}})
}

func showError(w http.ResponseWriter, status int, message string) {
	render(w, status, "message", "", page{Title: "Cannot continue", Error: message})
}

// redirectOrigin is scheme://host of a registered redirect URI.
func redirectOrigin(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// sweepLocked drops every pending request that has expired. Callers hold
// i.mu; it runs on every new request, so the maps hold only live entries
// plus what arrived since.
func (i *Issuer) sweepLocked(now time.Time) {
	for id, l := range i.logins {
		if !now.Before(l.expires) {
			delete(i.logins, id)
		}
	}
	for code, g := range i.codes {
		if !now.Before(g.expires) {
			delete(i.codes, code)
		}
	}
	for code, d := range i.devices {
		// An expired device code stays a while longer, so that a late poll
		// hears expired_token rather than that the code is unknown.
		if !now.Before(d.expires.Add(i.cfg.DeviceCodeTTL)) {
			delete(i.devices, code)
			delete(i.userCodes, d.userCode)
		}
	}
}
