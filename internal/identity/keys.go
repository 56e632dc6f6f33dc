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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// MinRefetchIntervalDefault is the least time between two fetches of an
// issuer's keys once they are loaded.
const MinRefetchIntervalDefault = time.Minute

// KeyMaxAgeDefault is how long fetched keys verify tokens before they are
// fetched again (sooner where the issuer's answer says, by Cache-Control
// max-age): a key the issuer withdraws, with no new key id to prompt a
// fetch, stops verifying within it. A fetch that fails keeps the keys.
const KeyMaxAgeDefault = time.Hour

// maxKeySetBytes bounds a JWKS document: real ones are a few kilobytes.
const maxKeySetBytes = 1 << 20

// errTooSoon refuses a refetch within the minimum interval of the last.
var errTooSoon = errors.New("the issuer's keys were fetched too recently to fetch again")

// keySet is the issuer's signing keys, fetched from its jwks_uri and
// cached; it implements oidc.KeySet. A token is verified only with the
// cached keys of the id its header names. The keys are fetched again for
// an id the cache does not hold (an issuer that rotated keys) and once
// they are older than their maximum age (an issuer that withdrew one), at
// most once per interval: a token with a bad signature, or a flood of
// invented ids, cannot make orangerail ask the issuer again and again.
// Until a fetch has succeeded, one is tried again only after a backoff.
// Callers that need a fetch while one is under way wait for it and share
// its result. A keySet is safe for concurrent use.
type keySet struct {
	url      string
	client   *http.Client
	now      func() time.Time
	interval time.Duration

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	loaded    bool          // a fetch has succeeded
	loadedAt  time.Time     // when the fetch that loaded keys began
	maxAge    time.Duration // how long those keys verify before a fetch
	fetchedAt time.Time     // when the last fetch began, whatever its outcome
	inflight  *attempt
	// failed is the last fetch's error while none has succeeded, and
	// retry when the next may begin.
	failed error
	retry  backoff
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
	seen, _ := ctx.Value(verificationKey{}).(*verification)
	if seen != nil {
		seen.typ, _ = jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType].(string)
	}
	if k.stale() {
		// A failed fetch keeps the keys: the issuer's outage is no
		// token's fault. Within the interval of the last fetch, none is
		// tried.
		_ = k.refresh(ctx, true)
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
		if seen != nil {
			seen.fetchFault = err
		}
		return nil, err
	}
	return verifyWith(jws, k.lookup(kid))
}

// verification is what the key set learns of a token that go-oidc's
// verification does not pass on: that fetching the issuer's keys failed
// (go-oidc flattens the error into text), and the header's typ, read from
// the header the key set parses anyway.
type verification struct {
	fetchFault error
	typ        string
}

// verificationKey carries a *verification through go-oidc's verification.
type verificationKey struct{}

// stale reports whether the cached keys are past their maximum age.
func (k *keySet) stale() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loaded && !k.now().Before(k.loadedAt.Add(k.maxAge))
}

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
// once keys are loaded; before, a fetch within the backoff of the last
// failed one is not tried, and its error is returned. The fetch itself
// does not end with ctx: others may be waiting for it (the HTTP client's
// timeout bounds it).
func (k *keySet) refresh(ctx context.Context, limited bool) error {
	k.mu.Lock()
	if f := k.inflight; f != nil {
		k.mu.Unlock()
		if err := f.wait(ctx); err != nil {
			return err
		}
		return f.err
	}
	now := k.now()
	if limited && k.loaded && now.Before(k.fetchedAt.Add(k.interval)) {
		k.mu.Unlock()
		return errTooSoon
	}
	if err := k.failed; !k.loaded && err != nil && !k.retry.due(now) {
		k.mu.Unlock()
		return err
	}
	f := newAttempt()
	k.inflight, k.fetchedAt = f, now
	k.mu.Unlock()

	keys, maxAge, err := k.fetch(context.WithoutCancel(ctx))
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		k.keys, k.loaded, k.loadedAt, k.maxAge, k.failed = keys, true, now, maxAge, nil
		k.retry.succeeded()
	} else if !k.loaded {
		k.failed = err
		k.retry.failed(k.now(), k.interval)
	}
	k.inflight = nil
	f.end(err)
	return err
}

// fetch reads the JWKS document. A key this server cannot use (another
// type or curve, an encryption key, a private key) is skipped, as RFC 7517
// section 5 asks, rather than spoiling the set.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("the issuer's jwks_uri %q: %w", k.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetching the issuer's keys: %s answered %s", k.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	if len(body) > maxKeySetBytes {
		return nil, 0, fmt.Errorf("the issuer's key set at %s is larger than %d bytes", k.url, maxKeySetBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, 0, fmt.Errorf("the issuer's key set at %s is not a JWKS: %w", k.url, err)
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
		return nil, 0, fmt.Errorf("the issuer's key set at %s holds no usable signing key", k.url)
	}
	return keys, keysMaxAge(resp.Header), nil
}

// keysMaxAge is how long keys fetched with header verify tokens:
// KeyMaxAgeDefault, or less where Cache-Control says (max-age, or none
// at all with no-cache or no-store; the interval between fetches still
// applies).
func keysMaxAge(header http.Header) time.Duration {
	age := KeyMaxAgeDefault
	for _, value := range header.Values("Cache-Control") {
		for directive := range strings.SplitSeq(value, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(directive), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				age = 0
			case "max-age":
				if seconds, err := strconv.ParseInt(strings.Trim(arg, `"`), 10, 64); err == nil && seconds >= 0 &&
					seconds < int64(age/time.Second) {
					age = time.Duration(seconds) * time.Second
				}
			}
		}
	}
	return age
}

// attempt is one try at something several callers wait for: under way
// until end, then failed with err, or not.
type attempt struct {
	done chan struct{}
	err  error
}

func newAttempt() *attempt { return &attempt{done: make(chan struct{})} }

// ended reports whether the attempt is over.
func (a *attempt) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// wait returns once the attempt is over, or ctx's error if ctx ends first.
func (a *attempt) wait(ctx context.Context) error {
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end closes the attempt with its outcome.
func (a *attempt) end(err error) {
	a.err = err
	close(a.done)
}

// backoff spaces attempts at what keeps failing: none before 1s after the
// first failure, the wait doubling with each failure in a row up to
// backoffMax, or a shorter limit. The zero value allows an attempt now.
type backoff struct {
	failures int
	next     time.Time
}

// due reports whether an attempt may begin at now.
func (b *backoff) due(now time.Time) bool { return !now.Before(b.next) }

// failed records a failure at now; the wait is at most limit.
func (b *backoff) failed(now time.Time, limit time.Duration) {
	b.failures++
	b.next = now.Add(min(time.Second<<min(b.failures-1, 20), limit, backoffMax))
}

// backoffMax bounds the wait between attempts at an issuer that does not
// answer: at most that long after it answers again, tokens verify.
const backoffMax = 15 * time.Second

// succeeded forgets the failures.
func (b *backoff) succeeded() { *b = backoff{} }

// signingAlgorithms is SigningAlgorithms as go-jose names them.
func signingAlgorithms() []jose.SignatureAlgorithm {
	algs := SigningAlgorithms()
	out := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}
