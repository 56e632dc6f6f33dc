package app

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/keyring"
)

func TestSecretKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(badFile, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, keyFile string
		stdio              bool
		wantIn             string
	}{
		{name: "http without a key", wantIn: SecretKeyEnv + " is not set"},
		{name: "env not hex", env: "zz", wantIn: SecretKeyEnv + " is not 64 hex"},
		{name: "env too short", env: strings.Repeat("ab", 31), stdio: true, wantIn: SecretKeyEnv + " is not 64 hex"},
		{name: "key file not hex", keyFile: badFile, stdio: true, wantIn: badFile + " is not 64 hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SecretKeyEnv, tc.env)
			_, err := secretKey(tc.stdio, tc.keyFile)
			if errcode.Of(err) != errcode.SecretKeyMissing || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("secretKey = %v, want %s saying %q", err, errcode.SecretKeyMissing, tc.wantIn)
			}
		})
	}
}

func TestSecretKeyKeptForStdio(t *testing.T) {
	t.Setenv(SecretKeyEnv, "")
	keyFile := filepath.Join(t.TempDir(), "sub", "secret.key")
	first, err := secretKey(true, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	again, err := secretKey(true, keyFile)
	if err != nil || !bytes.Equal(first.Active().Secret(), again.Active().Secret()) {
		t.Fatalf("second run = %v, %v; want the kept key", again.IDs(), err)
	}
	info, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, want 0600", info.Mode().Perm())
	}

	want := strings.Repeat("cd", 32)
	t.Setenv(SecretKeyEnv, " "+want+"\n")
	fromEnv, err := secretKey(true, keyFile)
	if err != nil || hex.EncodeToString(fromEnv.Active().Secret()) != want || fromEnv.Active().ID != keyring.Legacy {
		t.Fatalf("with %s set = %v, %v; want %s, legacy, over the kept file", SecretKeyEnv, fromEnv.IDs(), err, want)
	}
}

// TestSecretKeyRing: the variable holds a ring, read whole (the first
// entry active), and a malformed ring is refused with its own code, for a
// server and a local developer alike.
func TestSecretKeyRing(t *testing.T) {
	k1, k2 := strings.Repeat("11", 32), strings.Repeat("22", 32)
	t.Setenv(SecretKeyEnv, "k2:"+k2+",k1:"+k1)
	ring, err := secretKey(false, "")
	if err != nil || ring.Active().ID != "k2" || len(ring.IDs()) != 2 {
		t.Fatalf("secretKey = %v, %v; want k2 active of two", ring, err)
	}
	for _, tc := range []struct {
		ring string
		code errcode.Code
	}{
		{"k1:" + k1 + ",k1:" + k2, errcode.KeyRingDuplicateKID},
		{"k1:" + strings.Repeat("zz", 32), errcode.KeyRingKeyInvalid},
		{",k1:" + k1, errcode.KeyRingNoActiveKey},
	} {
		t.Setenv(SecretKeyEnv, tc.ring)
		for _, dev := range []bool{false, true} {
			if _, err := secretKey(dev, filepath.Join(t.TempDir(), "k")); errcode.Of(err) != tc.code {
				t.Fatalf("%q (dev %v) = %v, want %s", tc.ring, dev, err, tc.code)
			}
		}
	}
}
