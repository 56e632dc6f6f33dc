package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// MinRefetchIntervalDefault is the least time between two fetches of an
// issuer's keys once they are loaded.
const MinRefetchIntervalDefault = time.Minute

// maxKeySetBytes bounds a JWKS document: real ones are a few kilobytes.
const maxKeySetBytes = 1 << 20

// errTooSoon refuses a refetch within the minimum interval of the last.
var errTooSoon = errors.New("the issuer's keys were fetched too recently to fetch again")

// keySet is the issuer's signing keys, fetched from its jwks_uri and
// cached; it implements oidc.KeySet. A token is verified only with the
// cached keys of the id its header names. The keys are fetched again only
// for an id the cache does not hold (an issuer that rotated keys), and at
// most once per interval: a token with a bad signature, or a flood of
// invented ids, cannot make orangerail ask the issuer again and again.
// Callers that need a fetch while one is under way wait for it and share
// its result. A keySet is safe for concurrent use.
type keySet struct {
	url      string
	client   *http.Client
	now      func() time.Time
	interval time.Duration

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	loaded    bool      // a fetch has succeeded
	fetchedAt time.Time // when the last fetch began, whatever its outcome
	inflight  *keyFetch
}

// keyFetch is a fetch under way; done closes when err is set.
type keyFetch struct {
	done chan struct{}
	err  error
}

// ready fetches the keys if no fetch has succeeded yet. Its error is the
// issuer's (unreachable, or serving no usable key), never a token's.
func (k *keySet) ready(ctx context.Context) error {
	k.mu.Lock()
	loaded := k.loaded
	k.mu.Unlock()
	if loaded {
		return nil
	}
	return k.refresh(ctx, false)
}

// VerifySignature implements oidc.KeySet: it returns the payload of a
// token whose signature one of the issuer's keys verifies. The verifier
// calling it has already refused any algorithm but SigningAlgorithms.
func (k *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, signingAlgorithms())
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token carries exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := k.lookup(kid)
	if kid != "" && len(keys) > 0 {
		// The issuer publishes this id: a signature its key does not
		// verify is bad, and asking the issuer again cannot change that.
		return verifyWith(jws, keys)
	}
	if payload, err := verifyWith(jws, keys); err == nil {
		return payload, nil // no id named, and a cached key verifies
	}
	// An id the cache does not hold (or none, and no cached key verifies):
	// the issuer may have rotated its keys since they were fetched.
	switch err := k.refresh(ctx, true); {
	case errors.Is(err, errTooSoon):
		return nil, fmt.Errorf("the issuer publishes no key of id %q (its keys were fetched less than %s ago)", kid, k.interval)
	case err != nil:
		// Not the token's fault: go-oidc flattens this error into text, so
		// say so to the resolver through the context.
		if fault, ok := ctx.Value(fetchFaultKey{}).(*error); ok {
			*fault = err
		}
		return nil, err
	}
	return verifyWith(jws, k.lookup(kid))
}

// fetchFaultKey carries, through go-oidc's verification, where the key set
// records that fetching the issuer's keys failed.
type fetchFaultKey struct{}

// lookup returns the cached keys of id kid; every key when kid is empty.
func (k *keySet) lookup(kid string) []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	if kid == "" {
		return k.keys
	}
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, error) {
	for _, key := range keys {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the issuer publishes no key of the token's id")
	}
	return nil, errors.New("the signature does not verify")
}

// refresh fetches the keys, or waits for the fetch under way. limited
// refuses with errTooSoon a fetch within the interval of the last one,
// once keys are loaded. The fetch itself does not end with ctx: others may
// be waiting for it (the HTTP client's timeout bounds it).
func (k *keySet) refresh(ctx context.Context, limited bool) error {
	k.mu.Lock()
	if f := k.inflight; f != nil {
		k.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if limited && k.loaded && k.now().Before(k.fetchedAt.Add(k.interval)) {
		k.mu.Unlock()
		return errTooSoon
	}
	f := &keyFetch{done: make(chan struct{})}
	k.inflight, k.fetchedAt = f, k.now()
	k.mu.Unlock()

	defer close(f.done)
	keys, err := k.fetch(context.WithoutCancel(ctx))
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		k.keys, k.loaded = keys, true
	}
	f.err, k.inflight = err, nil
	return err
}

// fetch reads the JWKS document. A key this server cannot use (another
// type or curve, an encryption key, a private key) is skipped, as RFC 7517
// section 5 asks, rather than spoiling the set.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("the issuer's jwks_uri %q: %w", k.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the issuer's keys: %s answered %s", k.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("the issuer's key set at %s is larger than %d bytes", k.url, maxKeySetBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("the issuer's key set at %s is not a JWKS: %w", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || !key.Valid() || !key.IsPublic() || key.Use == "enc" {
			continue
		}
		switch key.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the issuer's key set at %s holds no usable signing key", k.url)
	}
	return keys, nil
}

// signingAlgorithms is SigningAlgorithms as go-jose names them.
func signingAlgorithms() []jose.SignatureAlgorithm {
	algs := SigningAlgorithms()
	out := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}
