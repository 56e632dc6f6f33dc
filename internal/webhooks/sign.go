package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com/).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix starts a Standard Webhooks secret; base64 follows.
const secretPrefix = "whsec_"

// minSecretBytes is the shortest key accepted: the convention asks for 24
// to 64 bytes, and a shorter HMAC key is guessable.
const minSecretBytes = 24

// Secret is an endpoint's signing key. Its String and its JSON never show
// the key, so no log line or error can carry it.
type Secret struct{ key []byte }

// String hides the key.
func (Secret) String() string { return "[secret]" }

// GoString hides the key from %#v too.
func (Secret) GoString() string { return "[secret]" }

// MarshalText hides the key from encoders.
func (Secret) MarshalText() ([]byte, error) { return []byte("[secret]"), nil }

// ParseSecret reads a secret written whsec_ + base64 (standard alphabet,
// padded, as the convention's libraries write it).
func ParseSecret(s string) (Secret, error) {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return Secret{}, errors.New("the secret must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return Secret{}, errors.New("the secret after whsec_ must be base64")
	}
	if len(key) < minSecretBytes {
		return Secret{}, errors.New("the secret must hold at least 24 bytes")
	}
	return Secret{key: key}, nil
}

// Sign returns the webhook-signature value of a message: "v1," and the
// base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body), the
// timestamp in Unix seconds.
func Sign(s Secret, id string, at time.Time, body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
