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
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		tb.Errorf("%s differs (run with -update and review the diff):\n%s", path, firstDifference(got, want))
	}
}

// firstDifference shows where got and want part: the whole of each when
// both are short, else the first line that differs, with its number and
// the lines around it.
func firstDifference(got, want []byte) string {
	if len(got)+len(want) < 8<<10 {
		return fmt.Sprintf(" got %s\nwant %s", got, want)
	}
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	i := 0
	for i < len(g) && i < len(w) && bytes.Equal(g[i], w[i]) {
		i++
	}
	window := func(lines [][]byte) string {
		var b strings.Builder
		for j := max(0, i-3); j < min(len(lines), i+4); j++ {
			fmt.Fprintf(&b, "  %6d  %s\n", j+1, lines[j])
		}
		return b.String()
	}
	return fmt.Sprintf("first difference at line %d (got %d lines, want %d)\n got:\n%swant:\n%s", i+1, len(g), len(w), window(g), window(w))
}
