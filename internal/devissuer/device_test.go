package devissuer_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/devissuer"
)

// userCodePattern is eight letters of RFC 8628's consonant alphabet, shown
// as XXXX-XXXX.
var userCodePattern = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)

// answerDevice signs in at the device page (as a second client, with its
// own cookies) and answers for userCode.
func answerDevice(t *testing.T, pageURL, userCode, pass, decision string) page {
	t.Helper()
	b := newBrowser(t)
	form := b.get(pageURL)
	if form.status != http.StatusOK {
		t.Fatalf("device page: %d", form.status)
	}
	return b.submit(form, map[string]string{"user_code": userCode, "username": username, "password": pass, "decision": decision})
}

// poll asks the token endpoint once for the device code's tokens and
// returns the status and the error code ("" for tokens).
func poll(t *testing.T, f *fixture, clientID, deviceCode string, extra url.Values) (int, string) {
	t.Helper()
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "client_id": {clientID}, "device_code": {deviceCode}}
	for k, v := range extra {
		form[k] = v
	}
	status, body := tokenCall(t, f, form)
	code, _ := body["error"].(string)
	if code == "" && body["access_token"] == nil {
		t.Fatalf("poll: %d %v has neither an error nor an access token", status, body)
	}
	return status, code
}

func TestDeviceGrantWithTheOAuthClient(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, devissuer.Config{DevicePollInterval: time.Second})
	cli := f.oauth(cliClient, "", "")
	da, err := cli.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !userCodePattern.MatchString(da.UserCode) || da.VerificationURI != f.url+"/device" || da.Interval != 1 || da.Expiry.IsZero() {
		t.Fatalf("device authorization %+v", da)
	}
	if want := f.url + "/device?user_code=" + da.UserCode; da.VerificationURIComplete != want {
		t.Fatalf("verification_uri_complete %q, want %q", da.VerificationURIComplete, want)
	}
	if status, code := poll(t, f, cliClient, da.DeviceCode, nil); status != http.StatusBadRequest || code != "authorization_pending" {
		t.Fatalf("before the answer: %d %s", status, code)
	}

	// The person opens the complete URI on another device; the code is
	// already filled in.
	b := newBrowser(t)
	form := b.get(da.VerificationURIComplete)
	if _, values := parseForm(t, form.body); values.Get("user_code") != da.UserCode {
		t.Fatalf("the device page does not fill in %s: %v", da.UserCode, values)
	}
	done := b.submit(form, map[string]string{"username": username, "password": password, "decision": "approve"})
	if done.status != http.StatusOK || !strings.Contains(done.body, "You approved "+cliClient) {
		t.Fatalf("approve: %d\n%s", done.status, done.body)
	}

	tok, err := cli.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	rawID, _ := tok.Extra("id_token").(string)
	idToken, err := f.provider.Verifier(&oidc.Config{ClientID: cliClient}).Verify(ctx, rawID)
	if err != nil || idToken.Subject != subject {
		t.Fatalf("ID token: %v, %+v", err, idToken)
	}
	access, err := f.provider.Verifier(&oidc.Config{ClientID: devissuer.AudienceDefault}).Verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Tenant   string `json:"org_id"`
		ClientID string `json:"client_id"`
	}
	if err := access.Claims(&claims); err != nil || claims.Tenant != "acme" || claims.ClientID != cliClient {
		t.Fatalf("access token claims %+v, %v", claims, err)
	}
	// The device code is spent.
	if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "invalid_grant" {
		t.Fatalf("a spent device code: %s", code)
	}
}

func TestDeviceGrantRefusals(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	f := newFixture(t, devissuer.Config{Now: clk.Now})
	cli := f.oauth(cliClient, "", "")
	start := func(t *testing.T, opts ...oauth2.AuthCodeOption) *oauth2.DeviceAuthResponse {
		t.Helper()
		da, err := cli.DeviceAuth(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return da
	}
	interval := devissuer.DevicePollIntervalDefault

	t.Run("polling faster than the interval is slow_down, and the interval grows", func(t *testing.T) {
		da := start(t)
		for _, step := range []struct {
			wait time.Duration
			want string
		}{
			{0, "authorization_pending"},
			{0, "slow_down"},        // the interval is now 10 s
			{interval, "slow_down"}, // 5 s is no longer enough; now 15 s
			{interval * 3, "authorization_pending"},
		} {
			clk.advance(step.wait)
			if status, code := poll(t, f, cliClient, da.DeviceCode, nil); code != step.want || status != http.StatusBadRequest {
				t.Fatalf("after %s: %d %s, want %s", step.wait, status, code, step.want)
			}
		}
	})
	t.Run("an expired device code is expired_token and cannot be answered", func(t *testing.T) {
		da := start(t)
		clk.advance(devissuer.DeviceCodeTTLDefault)
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "expired_token" {
			t.Fatalf("expired: %s", code)
		}
		p := answerDevice(t, da.VerificationURI, da.UserCode, password, "approve")
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, "unknown, expired or already answered") {
			t.Fatalf("answering an expired code: %d\n%s", p.status, p.body)
		}
	})
	t.Run("a denied device hears access_denied, then nothing more", func(t *testing.T) {
		da := start(t)
		if p := answerDevice(t, da.VerificationURI, da.UserCode, password, "deny"); !strings.Contains(p.body, "You denied") {
			t.Fatalf("deny: %d\n%s", p.status, p.body)
		}
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "access_denied" {
			t.Fatalf("denied: %s", code)
		}
		clk.advance(interval)
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "invalid_grant" {
			t.Fatalf("after access_denied: %s", code)
		}
	})
	t.Run("a wrong password answers nothing", func(t *testing.T) {
		da := start(t)
		p := answerDevice(t, da.VerificationURI, da.UserCode, "wrong", "approve")
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password") {
			t.Fatalf("wrong password: %d\n%s", p.status, p.body)
		}
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "authorization_pending" {
			t.Fatalf("after a wrong password: %s", code)
		}
	})
	t.Run("a code is answered once; it may be typed in lower case without the dash", func(t *testing.T) {
		da := start(t)
		typed := strings.ToLower(strings.ReplaceAll(da.UserCode, "-", ""))
		if p := answerDevice(t, da.VerificationURI, typed, password, "approve"); p.status != http.StatusOK {
			t.Fatalf("approve %q: %d\n%s", typed, p.status, p.body)
		}
		if p := answerDevice(t, da.VerificationURI, da.UserCode, password, "deny"); p.status != http.StatusBadRequest {
			t.Fatalf("a second answer: %d", p.status)
		}
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "" {
			t.Fatalf("after approval: %s", code)
		}
	})
	t.Run("an unknown user code is refused", func(t *testing.T) {
		if p := answerDevice(t, f.url+"/device", "BCDF-GHJK", password, "approve"); p.status != http.StatusBadRequest {
			t.Fatalf("unknown user code: %d", p.status)
		}
	})
	t.Run("another client cannot redeem the device code", func(t *testing.T) {
		da := start(t)
		if _, code := poll(t, f, spaClient, da.DeviceCode, nil); code != "invalid_grant" {
			t.Fatalf("another client: %s", code)
		}
	})
	t.Run("a confidential client must authenticate to start", func(t *testing.T) {
		_, err := f.oauth(deskClient, "", "").DeviceAuth(ctx)
		if code, status := oauthError(t, err); code != "invalid_client" || status != http.StatusUnauthorized {
			t.Fatalf("desk without its secret: %s %d", code, status)
		}
	})
	t.Run("PKCE on the device grant: plain refused, the verifier checked", func(t *testing.T) {
		verifier := oauth2.GenerateVerifier()
		_, err := cli.DeviceAuth(ctx, oauth2.SetAuthURLParam("code_challenge", verifier), oauth2.SetAuthURLParam("code_challenge_method", "plain"))
		if code, _ := oauthError(t, err); code != "invalid_request" {
			t.Fatalf("plain: %s", code)
		}
		for _, tc := range []struct {
			verifier, want string
		}{{oauth2.GenerateVerifier(), "invalid_grant"}, {verifier, ""}} {
			da := start(t, oauth2.S256ChallengeOption(verifier))
			answerDevice(t, da.VerificationURI, da.UserCode, password, "approve")
			if _, code := poll(t, f, cliClient, da.DeviceCode, url.Values{"code_verifier": {tc.verifier}}); code != tc.want {
				t.Fatalf("verifier %s: %q, want %q", tc.verifier, code, tc.want)
			}
		}
	})
	t.Run("a device form posted from another browser is refused", func(t *testing.T) {
		da := start(t)
		form := newBrowser(t).get(da.VerificationURIComplete)
		p := newBrowser(t).submit(form, map[string]string{"username": username, "password": password, "decision": "approve"})
		if p.status != http.StatusForbidden {
			t.Fatalf("forged device form: %d", p.status)
		}
		if _, code := poll(t, f, cliClient, da.DeviceCode, nil); code != "authorization_pending" {
			t.Fatalf("after a forged form: %s", code)
		}
	})
}
