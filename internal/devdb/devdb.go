// Package devdb finds or starts a Postgres for the local demo (`make run`).
// It is for a developer's machine only; `orangerail serve` never uses it.
package devdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
)

// DemoDatabase is the database the demo creates on a server it finds.
const DemoDatabase = "orangerail_demo"

// LocalURL is where the demo looks for a running Postgres.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Source says where a database came from.
type Source string

// The sources, in the order they are tried.
const (
	SourceEnv     Source = "DATABASE_URL"
	SourceLocal   Source = "local server on 127.0.0.1:5432"
	SourcePrivate Source = "private cluster"
)

// Database is a database found or started for the demo.
type Database struct {
	URL    string
	Source Source
	// Dir holds a private cluster's data, socket and log; "" otherwise.
	Dir string
	// StopFunc stops a private cluster this process started; nil otherwise
	// (also for a private cluster that was already running).
	StopFunc func() error
}

// Options tunes Find. The zero value is ready to use.
type Options struct {
	// Env is the value of DATABASE_URL; empty means unset.
	Env string
	// LocalURL overrides LocalURL (for tests).
	LocalURL string
	// Database names the demo database. Defaults to DemoDatabase.
	Database string
	// Dir holds a private cluster (its data, socket and log). Defaults to
	// .orangerail/postgres.
	Dir string
	// Port is the private cluster's port. Defaults to 54329.
	Port int
	// Logf reports what Find is doing.
	Logf func(format string, args ...any)
}

// Find returns a database for the demo: DATABASE_URL when set; else the
// orangerail_demo database on a Postgres answering at 127.0.0.1:5432
// (created if missing); else a private cluster under Dir, started from the
// local Postgres binaries. With none of these it returns X_NO_DATABASE.
func Find(ctx context.Context, opts Options) (*Database, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.Env != "" {
		return &Database{URL: opts.Env, Source: SourceEnv}, nil
	}
	local := opts.LocalURL
	if local == "" {
		local = LocalURL
	}
	if opts.Database == "" {
		opts.Database = DemoDatabase
	}
	if u, err := ensureDatabase(ctx, local, opts.Database); err == nil {
		return &Database{URL: u, Source: SourceLocal}, nil
	} else {
		logf("no usable Postgres at %s (%v); trying a private cluster", database.RedactURL(local), err)
	}
	db, err := startPrivate(ctx, opts, logf)
	if err != nil {
		return nil, errcode.New(errcode.NoDatabaseAvailable, "no Postgres found: DATABASE_URL is unset, 127.0.0.1:5432 does not answer, and "+err.Error(), err)
	}
	return db, nil
}

// ensureDatabase connects to the server at serverURL and creates dbname on
// it if missing, returning the URL of dbname.
func ensureDatabase(ctx context.Context, serverURL, dbname string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", dbname).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbname}.Sanitize()); err != nil {
			return "", err
		}
	}
	return database.WithDatabase(serverURL, dbname)
}

// binDir finds the directory of initdb and pg_ctl: PATH first, then the
// Debian layout, newest version first.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no Postgres binaries (initdb, pg_ctl) were found")
}

// startPrivate initializes (once) and starts a cluster under opts.Dir. Run as
// root, the cluster belongs to and runs as the postgres user, since
// Postgres refuses to run as root.
func startPrivate(ctx context.Context, opts Options, logf func(string, ...any)) (*Database, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(".orangerail", "postgres")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		port = 54329
	}
	asUser, dir, err := runAs(ctx, dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	run := func(ctx context.Context, name string, args ...string) error {
		// G204: the programs are the local Postgres installation's, found
		// by binDir; their arguments are this package's own.
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...) //nolint:gosec // see above
		if asUser != "" {
			cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", asUser, "--", filepath.Join(bin, name)}, args...)...) //nolint:gosec // see above
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		logf("initializing a private Postgres cluster in %s", data)
		// Reachable only through a socket in dir, which only its owner
		// may enter: no TCP, so no other local user can connect.
		if err := run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=reject", "-E", "UTF8", "--no-instructions"); err != nil {
			return nil, err
		}
	}
	// The settings go in the cluster's own file, not on a command line a
	// shell would split.
	settings := fmt.Sprintf("listen_addresses = ''\nport = %d\nunix_socket_directories = '%s'\n", port, strings.ReplaceAll(dir, "'", "''"))
	if err := writeAs(filepath.Join(data, "postgresql.auto.conf"), settings, asUser); err != nil {
		return nil, err
	}
	started := false
	if !answers(ctx, dir, port) {
		logf("starting the private cluster (socket in %s, port %d)", dir, port)
		if err := run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "start"); err != nil {
			return nil, err
		}
		started = true
	}
	serverURL := (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}.Encode()}).String()
	u, err := ensureDatabase(ctx, serverURL, opts.Database)
	if err != nil {
		return nil, err
	}
	db := &Database{URL: u, Source: SourcePrivate, Dir: dir}
	if started {
		// Stopping runs when the demo is interrupted, so it must not use
		// the interrupted context.
		db.StopFunc = func() error {
			return run(context.WithoutCancel(ctx), "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
		}
	}
	return db, nil
}

// runAs returns the user to run the cluster as and the directory to keep it
// in: the current user and dir, or, for root, the postgres user (Postgres
// refuses to run as root) and a dir it owns. When postgres cannot reach dir
// (a checkout under /root, say), the cluster lives in the system temporary
// directory instead, under a name derived from dir.
func runAs(ctx context.Context, dir string) (runUser, clusterDir string, err error) {
	if os.Geteuid() != 0 {
		return "", dir, os.MkdirAll(dir, 0o700)
	}
	pg, err := osuser.Lookup("postgres")
	if err != nil {
		return "", "", errors.New("running as root, but there is no postgres user to run a private cluster as")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if exec.CommandContext(ctx, "runuser", "-u", "postgres", "--", "test", "-x", filepath.Dir(dir)).Run() != nil { //nolint:gosec // G204: dir is this package's own cluster directory
		sum := sha256.Sum256([]byte(dir))
		dir = filepath.Join(os.TempDir(), "orangerail-postgres-"+hex.EncodeToString(sum[:6]))
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return "", "", err
		}
		// In a shared directory, a directory someone else made first is
		// not ours to start a cluster in.
		info, err := os.Lstat(dir)
		if err != nil {
			return "", "", err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || !info.IsDir() || (st.Uid != 0 && int(st.Uid) != uid) || info.Mode().Perm()&0o077 != 0 {
			return "", "", fmt.Errorf("%s exists and is not a private directory of root or postgres; remove it", dir)
		}
	}
	return "postgres", dir, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid) //nolint:gosec // G122: Lchown never follows a link, and Walk does not descend into one
	})
}

// answers reports whether a cluster listens on the socket for port in dir.
func answers(ctx context.Context, dir string, port int) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", port)))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// writeAs writes a file the cluster's user owns.
func writeAs(path, content, user string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if user == "" {
		return nil
	}
	pg, err := osuser.Lookup(user)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	return os.Lchown(path, uid, gid)
}
