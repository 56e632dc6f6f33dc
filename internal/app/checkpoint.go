package app

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/periodic"
)

// startCheckpointer starts signing the tenants' audit checkpoints every
// audit.checkpoint.interval with the configured key; without
// audit.checkpoint, none are signed (and proofs answer
// X_AUDIT_CHECKPOINT_MISSING). A key that cannot be read refuses to open.
func (rt *Runtime) startCheckpointer() error {
	cp := rt.Config.Audit.Checkpoint
	if cp == nil {
		rt.log.Info("audit checkpoints are off: audit.checkpoint names no signing key")
		return nil
	}
	signer, err := checkpoint.LoadSigner(cp.KeyFile, cp.KeyEnv, os.Getenv)
	if err != nil {
		return err
	}
	if mode, exposed := keyFileExposed(cp.KeyFile); exposed {
		// Warned, not refused: a Kubernetes secret is mounted 0644 unless
		// its volume says otherwise, and refusing would stop such a server.
		rt.log.Warn("audit.checkpoint.key_file "+keyFileExposedAdvice, "key_file", cp.KeyFile, "mode", mode.String())
	}
	rt.checkpointer = engine.StartCheckpointer(rt.Engine.Store(), signer, cp.Origin, periodic.Config{Interval: time.Duration(cp.Interval), Log: rt.log})
	rt.log.Info("signing audit checkpoints", "key_id", signer.KeyID(), "public_key", signer.VerifierKey(),
		"origin", cp.Origin, "interval", time.Duration(cp.Interval).String())
	return nil
}

// keyFileExposedAdvice is what serve's log and config check say of a
// checkpoint key file keyFileExposed finds readable to others.
const keyFileExposedAdvice = "may be read by other users of this host: whoever reads it signs checkpoints as this server; " +
	"make it readable by the server's user only (chmod 600, or defaultMode: 0400 on a Kubernetes secret volume)"

// keyFileExposed reports whether the file path, a signing key, may be read
// by its group or others, and its mode; false where path is empty or
// cannot be read (LoadSigner said so already).
func keyFileExposed(path string) (fs.FileMode, bool) {
	if path == "" {
		return 0, false
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return info.Mode().Perm(), info.Mode().Perm()&0o044 != 0
}

// DevCheckpointKey returns the public key of the checkpoint signing key
// kept in keyFile, made on first use (named name): for a local
// developer's server, whose checkpoints stay verifiable across restarts.
func DevCheckpointKey(keyFile, name string) (string, error) {
	text, err := os.ReadFile(keyFile) //nolint:gosec // G304: the demo's own state file
	if errors.Is(err, fs.ErrNotExist) {
		skey, _, err := checkpoint.GenerateKey(name)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(keyFile, []byte(skey+"\n"), 0o600); err != nil {
			return "", err
		}
		text = []byte(skey)
	} else if err != nil {
		return "", err
	}
	s, err := checkpoint.NewSigner(string(text))
	if err != nil {
		return "", err
	}
	return s.VerifierKey(), nil
}
