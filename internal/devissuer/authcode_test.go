package devissuer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/devissuer"
)

func TestDiscoveryNamesEveryEndpoint(t *testing.T) {
	f := newFixture(t, devissuer.Config{})
	var doc map[string]any
	if err := f.provider.Claims(&doc); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"issuer":                        f.url,
		"jwks_uri":                      f.url + "/jwks",
		"authorization_endpoint":        f.url + "/authorize",
		"token_endpoint":                f.url + "/token",
		"device_authorization_endpoint": f.url + "/device_authorization",
	} {
		if doc[field] != want {
			t.Errorf("%s = %v, want %s", field, doc[field], want)
		}
	}
	for field, want := range map[string][]string{
		"response_types_supported":              {"code"},
		"grant_types_supported":                 {"authorization_code", "urn:ietf:params:oauth:grant-type:device_code"},
		"code_challenge_methods_supported":      {"S256"},
		"id_token_signing_alg_values_supported": {"ES256"},
		"token_endpoint_auth_methods_supported": {"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                      {"openid"},
	} {
		var got []string
		raw, _ := json.Marshal(doc[field])
		_ = json.Unmarshal(raw, &got)
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", field, got, want)
		}
	}
	if e := f.provider.Endpoint(); e.DeviceAuthURL != f.url+"/device_authorization" || e.AuthURL != f.url+"/authorize" {
		t.Errorf("go-oidc reads the endpoints as %+v", e)
	}
}

// authRequest is one authorization request a client makes.
type authRequest struct {
	config   *oauth2.Config
	state    string
	nonce    string
	verifier string
}

func newAuthRequest(config *oauth2.Config) *authRequest {
	return &authRequest{config: config, state: oauth2.GenerateVerifier(), nonce: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier()}
}

func (a *authRequest) url() string {
	return a.config.AuthCodeURL(a.state, oauth2.S256ChallengeOption(a.verifier), oidc.Nonce(a.nonce))
}

// code signs in and returns the code, after checking the redirect names
// the registered URI, the state and the issuer.
func (a *authRequest) code(t *testing.T, f *fixture) string {
	t.Helper()
	to := signIn(t, newBrowser(t), a.url(), username, password)
	q := to.Query()
	if got := to.Scheme + "://" + to.Host + to.Path; got != a.config.RedirectURL {
		t.Fatalf("redirected to %s, want %s", got, a.config.RedirectURL)
	}
	if q.Get("state") != a.state || q.Get("iss") != f.url || q.Get("code") == "" {
		t.Fatalf("redirect query %v: want the state, iss %s and a code", q, f.url)
	}
	return q.Get("code")
}

func TestAuthorizationCodeWithPKCEIssuesVerifiableTokens(t *testing.T) {
	f := newFixture(t, devissuer.Config{AccessTokenTTL: 20 * time.Minute})
	for _, tc := range []struct {
		name   string
		config *oauth2.Config
	}{
		{"confidential client", f.oauth(deskClient, deskSecret, deskRedirect)},
		{"public client", f.oauth(spaClient, "", spaRedirect)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			req := newAuthRequest(tc.config)
			tok, err := tc.config.Exchange(ctx, req.code(t, f), oauth2.VerifierOption(req.verifier))
			if err != nil {
				t.Fatal(err)
			}
			if tok.TokenType != "Bearer" || tok.ExpiresIn != int64((20*time.Minute)/time.Second) {
				t.Errorf("token_type %q, expires_in %d", tok.TokenType, tok.ExpiresIn)
			}
			rawID, _ := tok.Extra("id_token").(string)
			idToken, err := f.provider.Verifier(&oidc.Config{ClientID: tc.config.ClientID}).Verify(ctx, rawID)
			if err != nil {
				t.Fatalf("go-oidc refuses the ID token: %v", err)
			}
			if idToken.Nonce != req.nonce || idToken.Subject != subject || idToken.Issuer != f.url {
				t.Errorf("ID token nonce %q sub %q iss %q", idToken.Nonce, idToken.Subject, idToken.Issuer)
			}
			var idClaims map[string]any
			if err := idToken.Claims(&idClaims); err != nil {
				t.Fatal(err)
			}
			if idClaims["iat"] == nil || idClaims["auth_time"] == nil || idClaims["name"] != "Ada" {
				t.Errorf("ID token claims %v lack iat, auth_time or the account's claims", idClaims)
			}
			// Its at_hash binds it to the access token, and marks it an ID
			// token: no resource takes it as its bearer token.
			if err := idToken.VerifyAccessToken(tok.AccessToken); err != nil || idToken.AccessTokenHash == "" {
				t.Errorf("the ID token's at_hash %q: %v", idToken.AccessTokenHash, err)
			}
			if typ := headerType(t, tok.AccessToken); typ != "at+jwt" {
				t.Errorf("the access token's typ is %q, want RFC 9068's at+jwt", typ)
			}

			// The access token is for the configured audience and carries
			// the account's claims.
			access, err := f.provider.Verifier(&oidc.Config{ClientID: devissuer.AudienceDefault}).Verify(ctx, tok.AccessToken)
			if err != nil {
				t.Fatalf("the access token does not verify for audience %q: %v", devissuer.AudienceDefault, err)
			}
			var claims map[string]any
			if err := access.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			for k, want := range accountClaims() {
				if got, _ := json.Marshal(claims[k]); string(got) != mustJSON(t, want) {
					t.Errorf("access token claim %s = %s, want %s", k, got, mustJSON(t, want))
				}
			}
			if claims["sub"] != subject || claims["client_id"] != tc.config.ClientID || claims["nonce"] != nil {
				t.Errorf("access token claims %v", claims)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAuthorizationCodeRefusals(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	f := newFixture(t, devissuer.Config{Now: clk.Now})
	desk := f.oauth(deskClient, deskSecret, deskRedirect)

	t.Run("a wrong password shows the page again and does not redirect", func(t *testing.T) {
		b := newBrowser(t)
		req := newAuthRequest(desk)
		login := b.get(req.url())
		again := b.submit(login, map[string]string{"username": username, "password": "wrong", "action": "sign_in"})
		if again.status != http.StatusUnauthorized || again.header.Get("Location") != "" || !strings.Contains(again.body, "Wrong username or password") {
			t.Fatalf("wrong password: status %d, Location %q:\n%s", again.status, again.header.Get("Location"), again.body)
		}
		// The same page still signs in with the right password.
		to := redirected(t, b.submit(again, map[string]string{"username": username, "password": password, "action": "sign_in"}))
		if to.Query().Get("code") == "" {
			t.Fatalf("no code after the right password: %s", to)
		}
	})
	t.Run("an unknown username is refused like a wrong password", func(t *testing.T) {
		b := newBrowser(t)
		again := b.submit(b.get(newAuthRequest(desk).url()), map[string]string{"username": "nobody", "password": password, "action": "sign_in"})
		if again.status != http.StatusUnauthorized || !strings.Contains(again.body, "Wrong username or password") {
			t.Fatalf("unknown user: status %d:\n%s", again.status, again.body)
		}
	})
	t.Run("too many wrong passwords send the client access_denied", func(t *testing.T) {
		b := newBrowser(t)
		req := newAuthRequest(desk)
		p := b.get(req.url())
		for p.status == http.StatusOK || p.status == http.StatusUnauthorized {
			p = b.submit(p, map[string]string{"username": username, "password": "wrong", "action": "sign_in"})
		}
		if to := redirected(t, p); to.Query().Get("error") != "access_denied" || to.Query().Get("state") != req.state {
			t.Fatalf("after too many wrong passwords: %s", to)
		}
	})
	t.Run("cancel sends the client access_denied", func(t *testing.T) {
		b := newBrowser(t)
		req := newAuthRequest(desk)
		to := redirected(t, b.submit(b.get(req.url()), map[string]string{"action": "cancel"}))
		if to.Query().Get("error") != "access_denied" || to.Query().Get("state") != req.state || to.Query().Get("code") != "" {
			t.Fatalf("cancel: %s", to)
		}
	})
	t.Run("a wrong verifier is invalid_grant and spends the code", func(t *testing.T) {
		req := newAuthRequest(desk)
		code := req.code(t, f)
		_, err := desk.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
		if got, status := oauthError(t, err); got != "invalid_grant" || status != http.StatusBadRequest {
			t.Fatalf("wrong verifier: %s %d", got, status)
		}
		_, err = desk.Exchange(ctx, code, oauth2.VerifierOption(req.verifier))
		if got, _ := oauthError(t, err); got != "invalid_grant" {
			t.Fatalf("the right verifier after a wrong one: %s, want invalid_grant", got)
		}
	})
	t.Run("no verifier is invalid_grant", func(t *testing.T) {
		req := newAuthRequest(desk)
		_, err := desk.Exchange(ctx, req.code(t, f))
		if got, _ := oauthError(t, err); got != "invalid_grant" {
			t.Fatalf("no verifier: %s", got)
		}
	})
	t.Run("a code is good once", func(t *testing.T) {
		req := newAuthRequest(desk)
		code := req.code(t, f)
		if _, err := desk.Exchange(ctx, code, oauth2.VerifierOption(req.verifier)); err != nil {
			t.Fatal(err)
		}
		_, err := desk.Exchange(ctx, code, oauth2.VerifierOption(req.verifier))
		if got, status := oauthError(t, err); got != "invalid_grant" || status != http.StatusBadRequest {
			t.Fatalf("reused code: %s %d", got, status)
		}
	})
	t.Run("an expired code is invalid_grant", func(t *testing.T) {
		req := newAuthRequest(desk)
		code := req.code(t, f)
		clk.advance(devissuer.CodeTTLDefault)
		_, err := desk.Exchange(ctx, code, oauth2.VerifierOption(req.verifier))
		if got, _ := oauthError(t, err); got != "invalid_grant" {
			t.Fatalf("expired code: %s", got)
		}
	})
	t.Run("a redirect URI not registered is shown, never redirected to", func(t *testing.T) {
		other := *desk
		other.RedirectURL = "http://127.0.0.1:9/elsewhere"
		p := newBrowser(t).get(newAuthRequest(&other).url())
		if p.status != http.StatusBadRequest || p.header.Get("Location") != "" || !strings.Contains(p.body, "redirect_uri") {
			t.Fatalf("unregistered redirect: status %d, Location %q", p.status, p.header.Get("Location"))
		}
	})
	t.Run("a redirect URI at the token endpoint that differs is invalid_grant", func(t *testing.T) {
		req := newAuthRequest(desk)
		code := req.code(t, f)
		other := *desk
		other.RedirectURL = "http://127.0.0.1:9/elsewhere"
		_, err := other.Exchange(ctx, code, oauth2.VerifierOption(req.verifier))
		if got, _ := oauthError(t, err); got != "invalid_grant" {
			t.Fatalf("mismatched redirect_uri: %s", got)
		}
	})
	t.Run("an unknown client is shown at the authorization endpoint", func(t *testing.T) {
		p := newBrowser(t).get(newAuthRequest(f.oauth("stranger", "", deskRedirect)).url())
		if p.status != http.StatusBadRequest || p.header.Get("Location") != "" {
			t.Fatalf("unknown client: status %d, Location %q", p.status, p.header.Get("Location"))
		}
	})
	t.Run("an unknown client or a wrong secret is invalid_client with 401", func(t *testing.T) {
		for _, config := range []*oauth2.Config{
			f.oauth("stranger", "", deskRedirect),
			f.oauth(deskClient, "not-the-secret", deskRedirect),
			f.oauth(deskClient, "", deskRedirect), // a confidential client without its secret
			f.oauth(spaClient, "invented", spaRedirect),
		} {
			req := newAuthRequest(desk)
			_, err := config.Exchange(ctx, req.code(t, f), oauth2.VerifierOption(req.verifier))
			if got, status := oauthError(t, err); got != "invalid_client" || status != http.StatusUnauthorized {
				t.Errorf("client %q secret %q: %s %d", config.ClientID, config.ClientSecret, got, status)
			}
		}
	})
	t.Run("a code issued to another client is invalid_grant", func(t *testing.T) {
		req := newAuthRequest(f.oauth(spaClient, "", spaRedirect))
		code := req.code(t, f)
		thief := f.oauth(deskClient, deskSecret, spaRedirect)
		_, err := thief.Exchange(ctx, code, oauth2.VerifierOption(req.verifier))
		if got, _ := oauthError(t, err); got != "invalid_grant" {
			t.Fatalf("another client's code: %s", got)
		}
	})
	t.Run("plain or missing PKCE is refused back to the client", func(t *testing.T) {
		verifier := oauth2.GenerateVerifier()
		for name, opts := range map[string][]oauth2.AuthCodeOption{
			"plain":     {oauth2.SetAuthURLParam("code_challenge", verifier), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
			"no method": {oauth2.SetAuthURLParam("code_challenge", oauth2.S256ChallengeFromVerifier(verifier))},
			"missing":   nil,
		} {
			to := redirected(t, newBrowser(t).get(desk.AuthCodeURL("st", opts...)))
			if to.Query().Get("error") != "invalid_request" || to.Query().Get("state") != "st" || to.Query().Get("code") != "" {
				t.Errorf("%s PKCE: redirected to %s", name, to)
			}
		}
	})
	t.Run("a response type other than code is refused back to the client", func(t *testing.T) {
		u := newAuthRequest(desk).url()
		u = strings.Replace(u, "response_type=code", "response_type=token", 1)
		if to := redirected(t, newBrowser(t).get(u)); to.Query().Get("error") != "unsupported_response_type" {
			t.Fatalf("response_type=token: %s", to)
		}
	})
	t.Run("a form posted from another browser is refused", func(t *testing.T) {
		login := newBrowser(t).get(newAuthRequest(desk).url())
		p := newBrowser(t).submit(login, map[string]string{"username": username, "password": password, "action": "sign_in"})
		if p.status != http.StatusForbidden || p.header.Get("Location") != "" {
			t.Fatalf("form from another browser: status %d, Location %q", p.status, p.header.Get("Location"))
		}
	})
	t.Run("a cross-site POST is refused", func(t *testing.T) {
		b := newBrowser(t)
		login := b.get(newAuthRequest(desk).url())
		_, values := parseForm(t, login.body)
		values.Set("username", username)
		values.Set("password", password)
		p := b.post(f.url+"/authorize", values, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"http://evil.example"}})
		if p.status != http.StatusForbidden || p.header.Get("Location") != "" {
			t.Fatalf("cross-site POST: status %d, Location %q", p.status, p.header.Get("Location"))
		}
	})
	t.Run("a login page expires", func(t *testing.T) {
		b := newBrowser(t)
		login := b.get(newAuthRequest(desk).url())
		clk.advance(devissuer.LoginTTLDefault)
		p := b.submit(login, map[string]string{"username": username, "password": password, "action": "sign_in"})
		if p.status != http.StatusBadRequest || p.header.Get("Location") != "" {
			t.Fatalf("expired login page: status %d, Location %q", p.status, p.header.Get("Location"))
		}
	})
	t.Run("an unknown grant type is unsupported_grant_type", func(t *testing.T) {
		status, body := tokenCall(t, f, url.Values{"grant_type": {"password"}, "client_id": {spaClient}})
		if status != http.StatusBadRequest || body["error"] != "unsupported_grant_type" {
			t.Fatalf("password grant: %d %v", status, body)
		}
	})
	t.Run("a parameter given twice is invalid_request", func(t *testing.T) {
		status, body := tokenCall(t, f, url.Values{"grant_type": {"authorization_code", "authorization_code"}, "client_id": {spaClient}})
		if status != http.StatusBadRequest || body["error"] != "invalid_request" {
			t.Fatalf("repeated grant_type: %d %v", status, body)
		}
	})
}

func TestLoginPageIsLockedDown(t *testing.T) {
	f := newFixture(t, devissuer.Config{})
	p := newBrowser(t).get(newAuthRequest(f.oauth(deskClient, deskSecret, deskRedirect)).url())
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "style-src 'self'", "form-action 'self' http://127.0.0.1:9", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows script or unsafe sources", csp)
	}
	if strings.Contains(strings.ToLower(p.body), "<script") || strings.Contains(strings.ToLower(p.body), " style=") {
		t.Errorf("the login page has inline script or style:\n%s", p.body)
	}
	if p.header.Get("Cache-Control") != "no-store" || p.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v", p.header)
	}
}

// headerType returns the typ of a token's header.
func headerType(t *testing.T, token string) string {
	t.Helper()
	header, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Typ string `json:"typ"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.Typ
}
