package opfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestRead: a regular file, and a link to one, are read; a file past the
// limit is refused unread past it (a sparse 512 MiB file allocates next to
// nothing); a directory, a FIFO no one writes to and a character device
// are refused before they are opened, so nothing blocks.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "key")
	if err := os.WriteFile(small, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(small, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{small, link} {
		if got, err := Read(p, 64, "key"); err != nil || string(got) != "secret\n" {
			t.Errorf("%s: %q, %v", p, got, err)
		}
	}

	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(512 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Read(huge, 4096, "key")
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "longer than 4 KiB, more than any key") {
		t.Errorf("a 512 MiB file: %v", err)
	}
	if read := after.TotalAlloc - before.TotalAlloc; read > 1<<20 {
		t.Errorf("reading a 512 MiB file under a 4 KiB limit allocated %d KiB", read>>10)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{dir: "a directory", fifo: "a named pipe", "/dev/zero": "a character device"} {
		if _, err := Read(p, 64, "key"); err == nil || !strings.Contains(err.Error(), "not a regular file ("+want+")") {
			t.Errorf("%s: %v, want it refused as %s", p, err, want)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := Read(missing, 64, "key"); !os.IsNotExist(err) || err.Error() != "open "+missing+": no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
}
