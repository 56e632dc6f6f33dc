package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignals: the first SIGTERM ends a command's context — one that reads
// it stops at once, X_INTERRUPTED (config check, policy compile and audit
// check-proof, which wait to open a FIFO here, and check-proof reading a
// stdin no one writes to) — and a command that does not stop when asked
// (stubborn, which takes the signals as main does and ignores its
// context) ends at the next, as by default, where it ran on until SIGKILL.
func TestSignals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, stubborn := filepath.Join(dir, "orangerail"), filepath.Join(dir, "stubborn")
	for path, pkg := range map[string]string{bin: ".", stubborn: "./testdata/stubborn"} {
		if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil { //nolint:gosec // G204: the test's own packages
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	fifo := filepath.Join(dir, "spec.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	key, err := exec.Command(bin, "audit", "checkpoint-key", "generate", "--name", "orangerail.test", "--out", filepath.Join(dir, "checkpoint.key")).Output() //nolint:gosec // G204: the binary just built
	if err != nil {
		t.Fatalf("checkpoint-key generate: %v", err)
	}
	pub := strings.TrimSpace(string(key))
	for _, c := range []struct {
		name     string
		bin      string
		args     []string
		stdin    bool // a pipe no one writes to, else none
		signaled bool // ended by the signal itself, not by its own exit
	}{
		{"policy compile", bin, []string{"policy", "compile", fifo, "--service", "s"}, false, false},
		{"config check", bin, []string{"config", "check", fifo}, false, false},
		{"check-proof of a file", bin, []string{"audit", "check-proof", "--key", pub, fifo}, false, false},
		{"check-proof of stdin", bin, []string{"audit", "check-proof", "--key", pub}, true, false},
		{"a command that does not stop", stubborn, nil, false, true},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(c.bin, c.args...) //nolint:gosec // G204: the binaries just built
		cmd.Stderr = &stderr
		if c.stdin {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = w.Close(), r.Close() })
			cmd.Stdin = r
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- cmd.Wait() }()
		// Its handlers installed first: a SIGTERM before them ends any
		// command, as by default.
		for start := time.Now(); !catches(cmd.Process.Pid, syscall.SIGTERM) && time.Since(start) < 30*time.Second; {
			time.Sleep(10 * time.Millisecond)
		}
		// SIGTERM until it ends: the first ends its context; one after
		// that ends it.
		tick := time.NewTicker(200 * time.Millisecond)
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case err := <-ended:
				ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
				switch {
				case c.signaled && (!ws.Signaled() || ws.Signal() != syscall.SIGTERM):
					t.Errorf("%s ended with %v, not by a SIGTERM", c.name, err)
				case !c.signaled && (ws.Signaled() || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "X_INTERRUPTED")):
					t.Errorf("%s ended with %v, not by its own exit 2 X_INTERRUPTED: %s", c.name, err, stderr.String())
				}
				break wait
			case <-tick.C:
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("%s runs on after a minute of SIGTERMs", c.name)
			}
		}
		tick.Stop()
	}
}

// catches reports whether the process pid catches sig (Linux's
// /proc/PID/status, SigCgt); false where that cannot be read.
func catches(pid int, sig syscall.Signal) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && bits&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// TestErrorsNameTheProgramAsRun: a command an error names runs as printed
// — written with the program as its operator ran it (a path, from a
// checkout), not as orangerail, which may be on no PATH.
func TestErrorsNameTheProgramAsRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "orangerail")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil { //nolint:gosec // G204: the test's own directory
		t.Fatalf("build: %v\n%s", err, out)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "errors", "explain", "X_NO_SUCH_CODE") //nolint:gosec // G204: the binary just built
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "`"+bin+" errors explain` lists them all") {
		t.Fatalf("%v: %s", err, stderr.String())
	}
}
