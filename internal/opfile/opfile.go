// Package opfile reads the small files an operator names in a config or
// the environment — a signing key, a credential, a CA bundle — as the
// regular files they must be, and no more of them than such a file holds.
//
// A path that names a device, a pipe or a socket (/dev/zero, a FIFO no one
// writes to) or a file far too long (a log, a disk image, given by
// mistake) would otherwise be read until memory runs out, or block where
// no signal reaches, in `config check` and at `serve`'s start.
package opfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read returns the contents of the regular file at path, said to be a
// what ("signer key"; a symbolic link to one is followed, as a mounted
// secret is), refusing anything else before it is opened, and a file
// longer than limit bytes past them unread (ReadAtMost). Its errors are
// *fs.PathError naming the path and what is wrong, never the file's
// contents.
func Read(path string, limit int64, what string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		// Said as an open's failure, which is what the reader meant.
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			pe.Op = "open"
		}
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file (%s)", kind(info.Mode()))}
	}
	f, err := os.Open(path) //nolint:gosec // G304: the file the operator named is the point
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, path, limit, what)
}

// ReadAtMost reads r, the file at path, said to be a what, to its end:
// at most limit bytes, refusing a longer one past them unread with an
// *fs.PathError, as a file that cannot be read at all is.
func ReadAtMost(r io.Reader, path string, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("longer than %s, more than any %s", size(limit), what)}
	}
	return data, nil
}

// size says n bytes in the largest binary unit that holds it whole.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// kind names a file mode's type.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "of mode " + m.Type().String()
}
