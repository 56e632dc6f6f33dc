package testdb

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBouncer names the environment variable that puts PgBouncer between
// the tests and Postgres: when it is set (to 1), every URL New returns
// leads through a PgBouncer of its own in transaction pooling mode, as a
// team running orangerail behind one would configure it. The binary is
// Debian's pgbouncer, or the one EnvBouncerBin names.
const (
	EnvBouncer    = "TEST_PGBOUNCER"
	EnvBouncerBin = "TEST_PGBOUNCER_BIN"
)

// Bouncing reports whether New's URLs lead through PgBouncer.
func Bouncing() bool { return os.Getenv(EnvBouncer) != "" }

// Bouncer starts a PgBouncer in transaction pooling mode in front of
// dbURL's server, stopped when the test ends, and returns dbURL through it:
// every transaction runs on whichever of PgBouncer's server connections is
// free, and nothing of a session survives between transactions. The URL
// asks pgx for unnamed statements (default_query_exec_mode=cache_describe):
// PgBouncer before 1.21 cannot carry a session's prepared statements.
//
// PgBouncer refuses to run as root; a test run as root starts it as the
// postgres user.
func Bouncer(tb testing.TB, dbURL string) string {
	tb.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("bouncer: %v", err)
	}
	bin := os.Getenv(EnvBouncerBin)
	if bin == "" {
		bin = "/usr/sbin/pgbouncer"
	}
	if _, err := os.Stat(bin); err != nil { //nolint:gosec // G703: the binary the test run names
		tb.Fatalf("no PgBouncer at %s (as root: apt-get install -y pgbouncer; %s names another): %v", bin, EnvBouncerBin, err)
	}
	dir, err := os.MkdirTemp("", "orangerail-pgbouncer-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: the postgres user must read its configuration
		tb.Fatal(err)
	}
	// FreePort's port is free when it answers, not when PgBouncer binds
	// it: another test's listener may take it between. A bind that fails
	// so is tried again on another port.
	var addr string
	for attempt := 1; ; attempt++ {
		port := FreePort(tb)
		taken, output := startBouncer(tb, bin, dir, u, port)
		if !taken {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			break
		}
		if attempt == bouncerBindAttempts {
			tb.Fatalf("PgBouncer found each of %d free ports taken by the time it bound it:\n%s", attempt, output)
		}
	}
	u.Host = addr
	q := u.Query()
	q.Set("default_query_exec_mode", "cache_describe")
	u.RawQuery = q.Encode()
	bounced.Store(u.String(), dbURL)
	return u.String()
}

// bouncerBindAttempts bounds how many ports Bouncer tries.
const bouncerBindAttempts = 5

// startBouncer starts PgBouncer, configured in dir, on 127.0.0.1:port in
// front of u's server, stopped when the test ends, and waits until it
// listens. taken: the port was taken by the time it bound it (its output
// says so); it exited, and another port may be tried.
func startBouncer(tb testing.TB, bin, dir string, u *url.URL, port int) (taken bool, output string) {
	tb.Helper()
	// A log of its own: what an attempt before wrote is not this one's.
	if err := os.Remove(filepath.Join(dir, "pgbouncer.log")); err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	login := u.User.Username()
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 400
default_pool_size = 8
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
`, u.Hostname(), cmp.Or(u.Port(), "5432"), port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	for name, body := range map[string]string{"pgbouncer.ini": conf, "users.txt": strconv.Quote(login) + ` ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil { //nolint:gosec // G306: read by the postgres user; no secret
			tb.Fatal(err)
		}
	}
	// Stopped by Cleanup, which signals it: no context ends it.
	cmd := osexec.CommandContext(context.Background(), bin, filepath.Join(dir, "pgbouncer.ini")) //nolint:gosec // G204: the pgbouncer binary the test run names
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("bouncer: PgBouncer refuses root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.ParseUint(pg.Uid, 10, 32)
		gid, _ := strconv.ParseUint(pg.Gid, 10, 32)
		// It writes its log into the directory.
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			tb.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start PgBouncer: %v", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log")) //nolint:gosec // G304: the log in the directory made above
			said := out.String() + string(log)
			if strings.Contains(said, "Address already in use") {
				return true, said
			}
			tb.Fatalf("PgBouncer exited: %v\n%s", exitErr, said)
		case <-ctx.Done():
			tb.Fatalf("PgBouncer did not listen on %s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false, ""
}

// bounced maps each URL Bouncer returned to the URL it leads to.
var bounced sync.Map

// Direct returns the URL that url leads to past PgBouncer, or url when it
// leads through none. A test's own setup goes direct: behind a pooler in
// transaction mode, its connections, logged in as the superuser the
// server's are, would share server connections with the server's, and a
// runtime connection's SET ROLE on connect would carry over into them.
func Direct(url string) string {
	if d, ok := bounced.Load(url); ok {
		return d.(string)
	}
	return url
}
