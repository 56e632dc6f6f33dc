package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
)

// TestNamedFilesStopAtTheFirstSignal: a command reading a file the
// operator named that never comes — a FIFO no one writes to — stops at
// the first signal, X_INTERRUPTED, where it waited for a second to end the
// process.
func TestNamedFilesStopAtTheFirstSignal(t *testing.T) {
	t.Parallel()
	key := checkpointPublicKey(t)
	for _, args := range [][]string{
		{"config", "check", "FILE"},
		{"surface", "measure", "FILE"},
		{"policy", "explain", "createLabel", "--manifest", "FILE"},
		{"policy", "diff", "FILE", "FILE"},
		{"policy", "compile", "FILE", "--service", "carrier"},
		{"serve", "--config", "FILE", "--stdio"},
		{"audit", "check-proof", "--keys-file", "FILE", "-"},
		{"audit", "check-proof", "--key", "KEY", "--checkpoint", "FILE", "-"},
		{"audit", "check-proof", "--key", "KEY", "FILE"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			// A writer opened and closed ends the read left behind.
			t.Cleanup(func() {
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					_ = w.Close()
				}
			})
			named := make([]string, len(args))
			for i, a := range args {
				named[i] = strings.NewReplacer("FILE", fifo, "KEY", key).Replace(a)
			}
			ctx, signal := context.WithCancel(context.Background())
			type ran struct {
				code   int
				stderr string
			}
			done := make(chan ran, 1)
			go func() {
				var out, errOut bytes.Buffer
				done <- ran{Run(ctx, named, &out, &errOut), errOut.String()}
			}()
			time.Sleep(50 * time.Millisecond) // reading, most likely; before it, the signal ends it too
			signal()
			select {
			case r := <-done:
				if r.code != exitError {
					t.Fatalf("exit %d, want %d", r.code, exitError)
				}
				oneLine(t, r.stderr, string(errcode.Interrupted))
			case <-time.After(10 * time.Second):
				t.Fatal("the command still waits on the file after the signal")
			}
		})
	}
}

// TestNamedFilesAreBounded: a config that never ends (a device) is
// refused once past any config's length, naming it, not read until memory
// runs out.
func TestNamedFilesAreBounded(t *testing.T) {
	t.Parallel()
	code, _, stderr := cli(t, "config", "check", "/dev/zero")
	if code != exitError || !strings.Contains(stderr, "/dev/zero: longer than 8 MiB, more than any config") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	oneLine(t, stderr, string(errcode.FileUnusable))

	// A proof too: said on the file's own line, with the others'.
	key := checkpointPublicKey(t)
	code, out, stderr := cli(t, "audit", "check-proof", "--key", key, "/dev/zero")
	if code != exitError || !strings.Contains(out, "/dev/zero: FAILED: X_FILE_UNUSABLE: read /dev/zero: longer than 64 MiB, more than any proof") {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	oneLine(t, stderr, string(errcode.FileUnusable))
}

// checkpointPublicKey generates a checkpoint key and returns its public
// key, as `audit check-proof --key` takes it.
func checkpointPublicKey(t *testing.T) string {
	t.Helper()
	code, key, stderr := cli(t, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", filepath.Join(t.TempDir(), "checkpoint.key"))
	if code != exitOK {
		t.Fatalf("checkpoint-key generate: exit %d: %s", code, stderr)
	}
	return strings.TrimSpace(key)
}

// TestWriteNew: a new file is written with its mode; one that is there
// already is refused and left as it was; a write that fails leaves no half
// of the file behind to refuse the retry.
func TestWriteNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	write := func(text string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, text); return err }
	}
	if err := writeNew(path, 0o600, write("first\n")); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", info.Mode(), err)
	}
	if err := writeNew(path, 0o600, write("second\n")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a file there already: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "first\n" {
		t.Errorf("the file there already now holds %q", data)
	}
	failed := filepath.Join(dir, "failed")
	if err := writeNew(failed, 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return errors.New("disk full")
	}); err == nil || err.Error() != "disk full" {
		t.Errorf("a failed write: %v", err)
	}
	if _, err := os.Stat(failed); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed write left its file: %v", err)
	}
}
