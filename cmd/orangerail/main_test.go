package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalEndsTheCommand: a command that does not stop when asked
// (the first SIGTERM ends its context, which this one never reads: it
// waits to open a FIFO) ends at the next, as by default, where it ran on
// until SIGKILL.
func TestSecondSignalEndsTheCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "orangerail")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil { //nolint:gosec // G204: the test's own directory
		t.Fatalf("build: %v\n%s", err, out)
	}
	fifo := filepath.Join(dir, "spec.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	cmd := exec.Command(bin, "policy", "compile", fifo, "--service", "s") //nolint:gosec // G204: the binary just built
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	// SIGTERM until it ends: the first, if its handlers are installed,
	// only ends its context; one after that ends it.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-ended:
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
				t.Fatalf("the command ended with %v, not by a SIGTERM", err)
			}
			return
		case <-tick.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("the command runs on after a minute of SIGTERMs")
		}
	}
}
