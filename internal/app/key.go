package app

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// SecretKeyEnv names the environment variable holding the server key.
const SecretKeyEnv = "ORANGERAIL_SECRET_KEY" //nolint:gosec // G101: the variable's name, not a credential

// secretKey reads the server key from the environment; a local developer
// (dev) without one gets a key kept in keyFile, so identical calls still
// share an approval after a restart.
func secretKey(dev bool, keyFile string) ([]byte, error) {
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
	return key, os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600)
}

// SecretKey is the server key from $ORANGERAIL_SECRET_KEY, which a server
// needs: it signs input digests and list cursors, the same on every
// replica.
func SecretKey() ([]byte, error) { return secretKey(false, "") }

// DevSecretKey is the key from $ORANGERAIL_SECRET_KEY or, without one, the
// key kept in keyFile (made on first use): for a local developer's server.
func DevSecretKey(keyFile string) ([]byte, error) { return secretKey(true, keyFile) }

// parseKey decodes a server key written as hex; source names where the
// text came from, for the error.
func parseKey(text, source string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) != engine.KeySize {
		return nil, errcode.New(errcode.SecretKeyMissing, source+" is not 64 hex characters", nil)
	}
	return key, nil
}
