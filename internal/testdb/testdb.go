// Package testdb gives each test its own real Postgres database, cloned from
// a template migrated once per migration set, so tests run in parallel.
//
// The server comes from TEST_DATABASE_URL (a superuser URL); without it, from
// a Postgres container where a Docker engine answers; with neither, the test
// fails and says how to get one. It never skips.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/migrations"
)

// EnvURL names the environment variable holding the test server's URL.
const EnvURL = "TEST_DATABASE_URL"

var server = sync.OnceValues(func() (string, error) {
	return resolveServer(os.Getenv(EnvURL))
})

// resolveServer returns env when set, else the URL of a Postgres container,
// else an error that says how to get a database.
func resolveServer(env string) (string, error) {
	if env != "" {
		return env, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("%s is not set and no Docker engine could start Postgres (%v).\n"+
			"Set %s to a superuser URL, e.g. %s=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable, "+
			"or start a Docker engine", EnvURL, err, EnvURL, EnvURL)
	}
	// testcontainers' reaper removes the container when the test process
	// exits.
	return c.ConnectionString(ctx, "sslmode=disable")
}

// ServerURL returns the superuser URL of the test server, or fails the test
// with instructions.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u, err := server()
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// New creates a database cloned from the migrated template and returns its
// superuser URL — through a PgBouncer of its own when TEST_PGBOUNCER is
// set (see Bouncer). The database is dropped when the test ends.
func New(tb testing.TB) string {
	tb.Helper()
	admin := ServerURL(tb)
	tmpl, err := template()
	if err != nil {
		tb.Fatalf("prepare template database: %v", err)
	}
	u := createDatabase(tb, admin, " TEMPLATE "+pgx.Identifier{tmpl}.Sanitize())
	if Bouncing() {
		return Bouncer(tb, u)
	}
	return u
}

// NewEmpty creates an unmigrated database and returns its superuser URL.
// The database is dropped when the test ends.
func NewEmpty(tb testing.TB) string {
	tb.Helper()
	return createDatabase(tb, ServerURL(tb), "")
}

// NewOwned creates a database migrated by an owner of its own that is no
// superuser, so that Row Level Security's FORCE binds the owner as it
// binds a real deployment's. It returns the URL logging in as that owner
// (a member of orangerail_runtime, so that a RuntimePool on it runs as
// the server does) and a superuser pool on the database. The database and
// the owner are dropped when the test ends.
func NewOwned(tb testing.TB) (ownerURL string, admin *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	url := NewEmpty(tb)
	admin = Pool(tb, url)
	var dbname string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		tb.Fatal(err)
	}
	owner := pgx.Identifier{"orangerail_test_owner_" + randomSuffix()}
	tb.Cleanup(func() {
		_, _ = Pool(tb, ServerURL(tb)).Exec(context.Background(), "DROP ROLE IF EXISTS "+owner.Sanitize())
	})
	if _, err := admin.Exec(ctx, "CREATE ROLE "+owner.Sanitize()+" LOGIN NOSUPERUSER NOBYPASSRLS; ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+
		" OWNER TO "+owner.Sanitize()+"; ALTER SCHEMA public OWNER TO "+owner.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	ownerURL = WithUser(tb, url, owner[0], "")
	if err := database.MigrateUp(ctx, ownerURL); err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "GRANT orangerail_runtime TO "+owner.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	return ownerURL, admin
}

// createDatabase creates a database of a fresh name on the admin URL's
// server with the CREATE DATABASE options given, drops it when the test
// ends, and returns its superuser URL.
func createDatabase(tb testing.TB, admin, options string) string {
	tb.Helper()
	name := "orangerail_test_" + randomSuffix()
	ident := pgx.Identifier{name}.Sanitize()
	if err := exec(context.Background(), admin, "CREATE DATABASE "+ident+options); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		if err := exec(context.Background(), admin, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	return WithDatabase(tb, admin, name)
}

// Pool returns a superuser pool on url (past PgBouncer: see Direct),
// closed when the test ends.
func Pool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), Direct(url))
	if err != nil {
		tb.Fatalf("open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// RuntimePool returns the server's own kind of pool on url: every connection
// acts as orangerail_runtime.
func RuntimePool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := database.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("open runtime pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// WithDatabase returns u with its database replaced.
func WithDatabase(tb testing.TB, u, dbname string) string {
	tb.Helper()
	s, err := database.WithDatabase(u, dbname)
	if err != nil {
		tb.Fatalf("%s must be a postgres:// URL: %v", EnvURL, err)
	}
	return s
}

// WithUser returns u logging in as user with password — past PgBouncer,
// whose logins are the test server's superuser only (see Direct).
func WithUser(tb testing.TB, u, user, password string) string {
	tb.Helper()
	parsed, err := url.Parse(Direct(u))
	if err != nil {
		tb.Fatalf("parse url: %v", err)
	}
	parsed.User = url.UserPassword(user, password)
	return parsed.String()
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func exec(ctx context.Context, u, sql string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// templateName names the template by the migrations' content, so a changed
// migration never reuses a stale template.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return "orangerail_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// template is the migrated template of this process's server, prepared once.
var template = sync.OnceValues(func() (string, error) {
	admin, err := server()
	if err != nil {
		return "", err
	}
	return ensureTemplate(context.Background(), admin)
})

// ensureTemplate creates and migrates the template database once per
// server. Test binaries of several packages run at once, so creation is
// serialized by an advisory lock on the server's maintenance database; a
// template is marked IS_TEMPLATE only once fully migrated, and an unmarked
// leftover of a crashed run is rebuilt.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		return "", err
	}
	// The lock is the session's: closing the connection releases it too,
	// so a failed unlock leaves nothing held.
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", name) }()

	var exists, ready bool
	err = conn.QueryRow(ctx, "SELECT true, datistemplate FROM pg_database WHERE datname = $1", name).Scan(&exists, &ready)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if ready {
		return name, nil
	}
	ident := pgx.Identifier{name}.Sanitize()
	if exists {
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", err
	}
	u, err := database.WithDatabase(admin, name)
	if err != nil {
		return "", err
	}
	if err := database.MigrateUp(ctx, u); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", err
	}
	return name, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
