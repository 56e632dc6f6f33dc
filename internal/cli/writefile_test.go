package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileKeepsWhatIsNotAFile: an output that is a pipe or a device
// (-o /dev/null) is written to, never renamed over — as root, a rename
// made /dev/null a regular file — and one through a symbolic link writes
// the file it names, the link kept.
func TestWriteFileKeepsWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	// A null device of the test's own (root may make one): what -o
	// /dev/null names.
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3 /* makedev(1, 3): Linux's null device */); err != nil {
		t.Skipf("no device node here (not root?): %v", err)
	}
	if err := writeFile(null, []byte("manifest\n")); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(null); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("the device was replaced: %v %v", info.Mode(), err)
	}

	target := filepath.Join(dir, "real.json")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
		t.Fatalf("the linked file holds %q (%v)", b, err)
	}
}
