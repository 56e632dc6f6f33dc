package app

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/keyring"
)

// SecretKeyEnv names the environment variable holding the server's key
// ring (or, as before rings, one bare key).
const SecretKeyEnv = "ORANGERAIL_SECRET_KEY" //nolint:gosec // G101: the variable's name, not a credential

// secretKey reads the server's key ring from the environment; a local
// developer (dev) without one gets a key kept in keyFile, so identical
// calls still share an approval after a restart.
func secretKey(dev bool, keyFile string) (*keyring.Ring, error) {
	if text := os.Getenv(SecretKeyEnv); text != "" {
		return parseKey(text, SecretKeyEnv)
	}
	if !dev {
		return nil, errcode.New(errcode.SecretKeyMissing, SecretKeyEnv+" is not set", nil)
	}
	if text, err := os.ReadFile(keyFile); err == nil { //nolint:gosec // G304: the operator names the file
		return parseKey(string(text), keyFile)
	}
	key := make([]byte, engine.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return keyring.Single(key)
}

// SecretKey is the server's key ring from $ORANGERAIL_SECRET_KEY, which a
// server needs: its keys sign input digests and list cursors, the same on
// every replica.
func SecretKey() (*keyring.Ring, error) { return secretKey(false, "") }

// DevSecretKey is the ring from $ORANGERAIL_SECRET_KEY or, without one,
// the key kept in keyFile (made on first use): for a local developer's
// server.
func DevSecretKey(keyFile string) (*keyring.Ring, error) { return secretKey(true, keyFile) }

// parseKey reads a key ring (keyring.Parse); source names where the text
// came from, for the error. A bare value, the form before rings, is
// refused as it always was (SecretKeyMissing) when it is not one key.
func parseKey(text, source string) (*keyring.Ring, error) {
	text = strings.TrimSpace(text)
	if !keyring.Bare(text) {
		return keyring.Parse(text, source)
	}
	key, err := hex.DecodeString(text)
	if err != nil || len(key) != engine.KeySize {
		return nil, errcode.New(errcode.SecretKeyMissing, source+" is not 64 hex characters", nil)
	}
	return keyring.Single(key)
}
