// Package login signs a person in from the command line with the OAuth 2.0
// device authorization grant (RFC 8628) at the team's OIDC issuer, and keeps
// the access token for the commands that call orangerail's API as that
// person. The token is kept in a file only its owner can read.
package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TokenEnv names the environment variable that, when set, is the bearer
// token the commands send, over any kept token.
const TokenEnv = "ORANGERAIL_TOKEN"

// TokenFileEnv names the environment variable that moves the kept token's
// file.
const TokenFileEnv = "ORANGERAIL_TOKEN_FILE"

// ClientIDDefault is the command line's client id at the issuer.
const ClientIDDefault = "orangerail-cli"

// Options configure a sign-in.
type Options struct {
	// Issuer is the OIDC issuer (identity.oidc.issuer). Required.
	Issuer string
	// ClientID is the command line's public client at the issuer.
	// Defaults to ClientIDDefault.
	ClientID string
	// Scopes are asked for beside openid.
	Scopes []string
	// HTTPClient reaches the issuer. Defaults to a client with a timeout.
	HTTPClient *http.Client
	// Prompt tells the person where to go and which code to enter.
	// Required.
	Prompt func(verificationURI, verificationURIComplete, userCode string)
}

// The ways a sign-in fails, for callers to tell apart (errors.Is): the
// issuer could not be asked at all, or it was and the sign-in did not
// happen.
var (
	// ErrIssuerUnreachable: the issuer's discovery document could not be
	// read, or names another issuer.
	ErrIssuerUnreachable = errors.New("the issuer could not be reached")
	// ErrSignInFailed: the issuer offers no device sign-in, refused the
	// client, or the person denied the code or let it expire.
	ErrSignInFailed = errors.New("the sign-in failed")
)

// Device runs the device authorization grant: it asks the issuer for a
// code, has Prompt show it, and polls (as often as the issuer allows)
// until the person approves or denies it, the code expires, or ctx ends.
func Device(ctx context.Context, o Options) (*oauth2.Token, error) {
	if o.Issuer == "" || o.Prompt == nil {
		return nil, errors.New("login: Options.Issuer and Options.Prompt are required")
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	// Every URL of the sign-in is held to the issuer's rule, as the server
	// holds its keys' and redirects: https, or http on loopback.
	guarded := *client
	guarded.CheckRedirect = identity.IssuerRedirects("a redirect on the way to the issuer", client.CheckRedirect)
	client = &guarded
	ctx = oidc.ClientContext(ctx, client)
	provider, err := oidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: the issuer's discovery document: %w", ErrIssuerUnreachable, err)
	}
	endpoint := provider.Endpoint()
	// A public client names itself in the form. Left to detect the style,
	// x/oauth2 retries a refused poll the other way, and the issuer, which
	// spends a device code on its first refusal, would answer the retry
	// invalid_grant in place of the person's access_denied.
	endpoint.AuthStyle = oauth2.AuthStyleInParams
	for what, u := range map[string]string{"device_authorization_endpoint": endpoint.DeviceAuthURL, "token_endpoint": endpoint.TokenURL} {
		if u == "" {
			continue
		}
		if err := ontology.CheckIssuerURL("the issuer's "+what, u); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSignInFailed, err)
		}
	}
	if endpoint.DeviceAuthURL == "" {
		return nil, fmt.Errorf("%w: the issuer %s offers no device authorization endpoint: sign in another way and set %s", ErrSignInFailed, o.Issuer, TokenEnv)
	}
	cfg := &oauth2.Config{ClientID: o.ClientID, Endpoint: endpoint, Scopes: append([]string{oidc.ScopeOpenID}, o.Scopes...)}
	if cfg.ClientID == "" {
		cfg.ClientID = ClientIDDefault
	}
	verifier := oauth2.GenerateVerifier()
	auth, err := cfg.DeviceAuth(ctx, oauth2.S256ChallengeOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("%w: ask the issuer for a device code: %w", ErrSignInFailed, err)
	}
	o.Prompt(auth.VerificationURI, auth.VerificationURIComplete, auth.UserCode)
	tok, err := cfg.DeviceAccessToken(ctx, auth, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("%w: the sign-in did not complete: %w", ErrSignInFailed, err)
	}
	return tok, nil
}

// TokenPath is where the token is kept: $ORANGERAIL_TOKEN_FILE, else
// orangerail/token.json in the user's configuration directory.
func TokenPath() (string, error) {
	if p := os.Getenv(TokenFileEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory to keep the token in (set %s): %w", TokenFileEnv, err)
	}
	return filepath.Join(dir, "orangerail", "token.json"), nil
}

// kept is the token file's form.
type kept struct {
	AccessToken string    `json:"access_token"`
	Expiry      time.Time `json:"expiry"`
	Issuer      string    `json:"issuer"`
}

// Save keeps tok from issuer at path, readable and writable by its owner
// only, replacing any kept token in one rename.
func Save(path, issuer string, tok *oauth2.Token) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(kept{AccessToken: tok.AccessToken, Expiry: tok.Expiry, Issuer: issuer}) //nolint:gosec // G117: keeping the token in its owner-only file is the point
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// CreateTemp makes the file 0600 already; say so, whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	// On disk before it is renamed over the kept token: a crash after
	// the rename must not leave an empty or partial file in its place.
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename itself, durable.
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync()
		_ = dir.Close()
	}
	return nil
}

// ErrNoToken says there is no token to send: none in $ORANGERAIL_TOKEN and
// none kept, or the kept one expired.
var ErrNoToken = errors.New("not signed in")

// Token returns the bearer token the commands send and the issuer it came
// from: $ORANGERAIL_TOKEN when set (its issuer unknown: ""), else the token
// kept at path while it is valid, with the issuer it was kept from. A kept
// file that others may read is refused, not used.
func Token(path string, now time.Time) (token, issuer string, err error) {
	if t := os.Getenv(TokenEnv); t != "" {
		return t, "", nil
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("%w: run `orangerail login`, or set %s", ErrNoToken, TokenEnv)
	}
	if err != nil {
		return "", "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", "", fmt.Errorf("%s can be read by others (mode %v): remove it and run `orangerail login` again", path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path) //nolint:gosec // G304: the token file this package keeps
	if err != nil {
		return "", "", err
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil || k.AccessToken == "" {
		return "", "", fmt.Errorf("%s is not a token orangerail kept: run `orangerail login` again", path)
	}
	if !k.Expiry.IsZero() && !now.Before(k.Expiry) {
		return "", "", fmt.Errorf("%w: the token kept in %s expired at %s; run `orangerail login` again", ErrNoToken, path, k.Expiry.UTC().Format(time.RFC3339))
	}
	return k.AccessToken, k.Issuer, nil
}
