package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWaitsOnTerminal: check-proof says how to end its input exactly when
// it was named no FILE and its standard input is a terminal — where it
// used to wait in silence; never for a named FILE or -, nor for input
// piped or redirected from a file. The terminal itself is the caller's
// (term.IsTerminal); here a stand-in says which descriptor is one.
func TestWaitsOnTerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "proof.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	terminal := func(fd int) bool { return fd == int(f.Fd()) }
	notTerminal := func(int) bool { return false }
	for _, tt := range []struct {
		name     string
		args     []string
		in       io.Reader
		terminal func(int) bool
		want     bool
	}{
		{"no FILE, a terminal", nil, f, terminal, true},
		{"no FILE, a file or a pipe", nil, f, notTerminal, false},
		{"no FILE, not a file at all", nil, bytes.NewReader(nil), terminal, false},
		{"-, a terminal", []string{"-"}, f, terminal, false},
		{"a FILE, a terminal", []string{"proof.json"}, f, terminal, false},
	} {
		if got := waitsOnTerminal(tt.args, tt.in, tt.terminal); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
