package cli

import (
	"context"
	"io"
	"io/fs"
	"os"

	"github.com/orangerail/orangerail/internal/opfile"
)

// readFile reads a file the operator named, said to be a what ("config",
// "manifest"): at most limit bytes, refusing a longer one past them unread
// (a device such as /dev/zero, a pipe that never ends), and only while ctx
// lasts. Opening or reading a FIFO no one writes to blocks where no signal
// reaches, so the file is read aside (untilDone) and readFile returns once
// ctx ends (X_INTERRUPTED, on the first signal).
func readFile(ctx context.Context, path string, limit int64, what string) ([]byte, error) {
	return readUntilDone(ctx, func() ([]byte, error) { return readBounded(path, limit, what) })
}

// readFrom is readFile of r, named name: standard input for a command
// that reads it for "-".
func readFrom(ctx context.Context, r io.Reader, name string, limit int64, what string) ([]byte, error) {
	return readUntilDone(ctx, func() ([]byte, error) { return opfile.ReadAtMost(r, name, limit, what) })
}

// readUntilDone returns what read returns, or ctx's error should ctx end
// first (untilDone), leaving read to run on.
func readUntilDone(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	var data []byte
	err := untilDone(ctx, func() (err error) {
		data, err = read()
		return err
	})
	if err != nil {
		// data is the read's until it returns: not read here unless it did.
		return nil, err
	}
	return data, nil
}

// untilDone runs f, which writes nothing, and returns its error; or
// ctx's, should ctx end first, leaving f to run on until the process
// exits.
func untilDone(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readBounded is readFile's read. A file too long is an *fs.PathError,
// as a file that cannot be read at all is: X_FILE_UNUSABLE, naming it.
func readBounded(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the file the operator named
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return opfile.ReadAtMost(f, path, limit, what)
}

// writeNew writes a new file at path, mode perm, with write: refused if
// anything is there already (nothing is replaced), and removed again if
// the write fails, so that a retry finds no half of it in its way.
func writeNew(path string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm) //nolint:gosec // G304: the file the operator named
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()       //nolint:errcheck,gosec // the write's error is the one reported
		os.Remove(path) //nolint:errcheck,gosec // ours: made above
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path) //nolint:errcheck,gosec // ours: made above
		return err
	}
	return nil
}
