package roles

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// scramIterations is the PBKDF2 cost of a SCRAM-SHA-256 verifier, as
// Postgres computes it (scram_iterations' default).
const scramIterations = 4096

// scramSaltSize is the size of a verifier's random salt, as Postgres makes
// it.
const scramSaltSize = 16

// ScramVerifier computes the SCRAM-SHA-256 verifier Postgres stores for a
// password (RFC 5802, RFC 7677), under a fresh random salt, so that the
// password itself never reaches the server, nor any log of its statements.
func ScramVerifier(password string) (string, error) {
	salt := make([]byte, scramSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	return scramVerifier(password, salt, scramIterations)
}

// scramVerifier is ScramVerifier under a given salt and cost:
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// where SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, iterations),
// StoredKey = SHA-256(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"), each in standard base64.
func scramVerifier(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}
