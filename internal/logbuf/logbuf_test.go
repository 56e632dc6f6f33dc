package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBuffer: lines written from several goroutines while another reads
// are each kept whole (the race detector watches the reads).
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = b.String()
		}
	})
	wg.Wait()
	lines := b.Lines()
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "writer ") || strings.Count(l, " ") != 3 {
			t.Fatalf("a line was torn: %q", l)
		}
	}
}
