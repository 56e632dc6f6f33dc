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

// TestWriteFileKeepsTheMode: a file replaced keeps the mode its owner
// gave it (a config kept 0600 was made 0644, readable to all); a new one
// is 0644, for review.
func TestWriteFileKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "orangerail.yaml")
	if err := os.WriteFile(kept, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "manifest.json")
	if err := writeFiles(output{kept, []byte("new")}, output{fresh, []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{kept: 0o600, fresh: 0o644} {
		info, err := os.Stat(path)
		if err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", filepath.Base(path), info.Mode().Perm(), err, want)
		}
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "new" {
		t.Fatalf("the replaced file holds %q (%v)", b, err)
	}
}
