// Package golden holds tests to files of what clients receive: an answer is
// encoded as indented JSON and compared byte for byte with its file under
// the package's testdata/. Run the tests with -update to rewrite the files
// from what the code answers now, then review the diff: these files are
// the contract with agents and people.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from what the code answers now")

// JSON compares v, encoded as indented JSON, with the file at path, or
// writes it there when the tests run with -update.
func JSON(tb testing.TB, path string, v any) {
	tb.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	Bytes(tb, path, append(got, '\n'))
}

// Bytes compares got with the file at path, or writes it there when the
// tests run with -update.
func Bytes(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o600); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path) //nolint:gosec // G304: the test's own golden file
	if err != nil {
		tb.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs (run with -update and review the diff):\n got %s\nwant %s", path, got, want)
	}
}
