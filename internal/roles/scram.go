package roles

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"golang.org/x/text/unicode/norm"

	"github.com/orangerail/orangerail/internal/errcode"
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
//
// Postgres, and the clients that log in, first prepare a password with
// SASLprep (RFC 4013): non-ASCII spaces become spaces, invisible
// characters such as the soft hyphen vanish, and the rest is normalized to
// NFKC. A verifier of the unprepared password would refuse every login, so
// a password SASLprep could change is refused (X_AUDITOR_PASSWORD_INVALID);
// for every other password, the prepared password is the password itself.
func ScramVerifier(password string) (string, error) {
	if saslprepChanges(password) {
		return "", errcode.New(errcode.AuditorPasswordInvalid,
			"the password holds a non-ASCII space, an invisible character or a letter not in NFKC form, which Postgres changes before hashing", nil)
	}
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

// saslprepChanges reports whether SASLprep's mapping or normalization
// (RFC 4013 section 2.1 and 2.2) could change p. When it could not, the
// password Postgres hashes is p: SASLprep either returns p, or fails on a
// prohibited or unassigned character, and then Postgres hashes the raw
// password, which is p too.
func saslprepChanges(p string) bool {
	for _, r := range p {
		if nonASCIISpace(r) || mappedToNothing(r) {
			return true
		}
	}
	return !norm.NFKC.IsNormalString(p)
}

// nonASCIISpace is RFC 3454 table C.1.2, which SASLprep maps to a space.
func nonASCIISpace(r rune) bool {
	switch r {
	case 0x00A0, 0x1680, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200B
}

// mappedToNothing is RFC 3454 table B.1, which SASLprep removes.
func mappedToNothing(r rune) bool {
	switch r {
	case 0x00AD, 0x034F, 0x1806, 0x180B, 0x180C, 0x180D, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF:
		return true
	}
	return r >= 0xFE00 && r <= 0xFE0F
}
