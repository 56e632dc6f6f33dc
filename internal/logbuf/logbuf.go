// Package logbuf is a buffer one goroutine writes while another reads it:
// the host log a server writes as the test that runs it reads what it
// said.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an output a log writes to and a reader reads at any time. The
// zero Buffer is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p, as io.Writer does.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines returns what was written so far, a line each, without the blank
// space around it.
func (b *Buffer) Lines() []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}
