// Package database owns orangerail's connection to Postgres: parsing the URL,
// the runtime role every pooled connection assumes, tenant-scoped
// transactions, the embedded migrations, and the one place where connection
// failures become clear, coded errors.
package database

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// RuntimeRole is the role every pooled connection of the server assumes.
const RuntimeRole = "orangerail_runtime"

// ParseURL parses a Postgres URL or keyword/value string. Its error never
// repeats a password.
func ParseURL(url string) (*pgxpool.Config, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errcode.New(errcode.DatabaseURLInvalid, "no database URL was given", nil)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's ParseConfigError redacts the password from its message.
		var parseErr *pgconn.ParseConfigError
		msg := "the database URL could not be parsed"
		if errors.As(err, &parseErr) && parseErr.Unwrap() != nil {
			msg += ": " + parseErr.Unwrap().Error()
		}
		return nil, errcode.New(errcode.DatabaseURLInvalid, msg, nil)
	}
	return cfg, nil
}

// Option changes a pool's config before the pool is made.
type Option func(*pgxpool.Config)

// WithQueryTracer has every connection of the pool report its statements
// to tracer (tracing.Tracing.SQL); a nil tracer changes nothing.
func WithQueryTracer(tracer pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) {
		if tracer != nil {
			c.ConnConfig.Tracer = tracer
		}
	}
}

// AuditorRole is the role whose member logins read the audit log of the
// tenants granted to them (orangerail.auditor_grants), and nothing else.
const AuditorRole = "orangerail_auditor"

// Open returns a pool for the server. Every connection it makes assumes
// orangerail_runtime before first use, reads and writes approval ids
// without formatting them (uuidCodec), and keeps a bounded transaction's
// deadline past a statement whose context ends (deadlineKeeper); Open
// refuses a database whose schema is not exactly the version this binary
// knows.
func Open(ctx context.Context, url string, opts ...Option) (*pgxpool.Pool, error) {
	pool, err := open(ctx, url, opts, func(ctx context.Context, conn *pgx.Conn) error {
		if err := store.New(conn).SessionAssumeRuntime(ctx); err != nil {
			return classifyRoleError(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	markRuntime(pool)
	return pool, nil
}

// OpenAuditor returns a pool for an auditor login (`orangerail audit
// verify` run by one): its connections act with the login's own rights,
// under which Row Level Security shows the tenants granted to it and
// nothing else, and read approval ids as Open's do. Like Open, it refuses
// a database whose schema is not exactly the version this binary knows;
// and a login that is no auditor — not a member of orangerail_auditor, or
// one that may act as orangerail_runtime, whose pool is Open's —
// X_DATABASE_ROLE_MISSING.
func OpenAuditor(ctx context.Context, url string, opts ...Option) (*pgxpool.Pool, error) {
	return open(ctx, url, opts, func(ctx context.Context, conn *pgx.Conn) error {
		auditor, err := store.New(conn).SessionActsAsAuditor(ctx)
		if err != nil {
			return fmt.Errorf("read the login's roles: %w", err)
		}
		if !auditor {
			return errcode.New(errcode.DatabaseRoleMissing,
				"this login is no auditor: not a member of "+AuditorRole+", or one that may act as "+RuntimeRole, nil)
		}
		return nil
	})
}

// open makes a pool of url whose connections run connected once made, and
// pings it; see Open.
func open(ctx context.Context, url string, opts []Option, connected func(context.Context, *pgx.Conn) error) (*pgxpool.Pool, error) {
	cfg, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(cfg)
	}
	if err := CheckCurrent(ctx, url); err != nil {
		return nil, err
	}
	KeepDeadlines(cfg)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		RegisterUUID(conn.TypeMap())
		return connected(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if errcode.Of(err) != "" {
			return nil, err
		}
		return nil, ClassifyConnectError(cfg.ConnConfig, err)
	}
	return pool, nil
}

// runtimePools are the pools Open made, weakly: a pool forgotten by its
// owner leaves the set.
var runtimePools sync.Map // weak.Pointer[pgxpool.Pool] → struct{}

// markRuntime records that pool's connections act as RuntimeRole. The
// session's SET ROLE on connect is not enough behind a pooler in
// transaction mode (PgBouncer), which runs each transaction on whichever
// of its server connections is free: so InTenant and QueryInTenant set
// the role again, locally, in each transaction they begin on such a pool.
func markRuntime(pool *pgxpool.Pool) {
	k := weak.Make(pool)
	runtimePools.Store(k, struct{}{})
	runtime.AddCleanup(pool, func(k weak.Pointer[pgxpool.Pool]) { runtimePools.Delete(k) }, k)
}

// isRuntime reports whether Open made pool.
func isRuntime(pool *pgxpool.Pool) bool {
	_, ok := runtimePools.Load(weak.Make(pool))
	return ok
}

// classifyRoleError explains why a connection could not assume the
// runtime role. Setting a role fails with a class-42 error for only two
// reasons: the role does not exist (42704), or the login may not assume it
// (42501).
func classifyRoleError(err error) error {
	switch {
	case errors.Is(err, store.ErrPermission):
		return errcode.New(errcode.DatabaseRoleMissing, "this login may not SET ROLE "+RuntimeRole, err)
	case errors.Is(err, store.ErrSchemaMismatch):
		return errcode.New(errcode.DatabaseUnmigrated, "the role "+RuntimeRole+" does not exist", err)
	}
	return fmt.Errorf("assume %s: %w", RuntimeRole, err)
}

// ClassifyConnectError turns a failure to reach or log in to Postgres into
// one line naming the server and the reason. It never includes a password.
func ClassifyConnectError(cfg *pgx.ConnConfig, err error) error {
	where := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.InvalidCatalogName:
			return errcode.New(errcode.DatabaseUnreachable,
				fmt.Sprintf("Postgres at %s has no database %q; create it (createdb %s) or name another", where, cfg.Database, cfg.Database), err)
		case pgerrcode.InvalidPassword, pgerrcode.InvalidAuthorizationSpecification:
			return errcode.New(errcode.DatabaseUnreachable,
				fmt.Sprintf("Postgres at %s refused the login of user %q: %s", where, cfg.User, pgErr.Message), err)
		}
		return errcode.New(errcode.DatabaseUnreachable,
			fmt.Sprintf("Postgres at %s refused the connection: %s", where, pgErr.Message), err)
	}
	reason := "no answer"
	var opErr *net.OpError
	var tlsErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &tlsErr):
		// Not the network: the server answered, and its certificate did
		// not verify for this host (sslmode=verify-full names it).
		return errcode.New(errcode.DatabaseUnreachable, fmt.Sprintf("Postgres at %s answered, but its TLS certificate did not verify: %v", where, tlsErr.Err), err)
	case errors.As(err, &opErr):
		reason = opErr.Err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		reason = "timed out"
	}
	return errcode.New(errcode.DatabaseUnreachable, fmt.Sprintf("cannot reach Postgres at %s: %s", where, reason), err)
}

// ClassifyCommandError codes a failure of orangerail's database met by a
// command (the CLI's) after it connected: a wait past the transaction's
// limits, or a connection that did not answer within its deadline
// (X_DATABASE_TIMEOUT), and a connection lost under the command, or one
// the pool could not make (X_DATABASE_UNREACHABLE). The driver's words
// follow: the operator's own database's, never an agent's to read. Any
// other error is returned as it is.
func ClassifyCommandError(err error) error {
	var coded *errcode.Error
	if err == nil || errors.As(err, &coded) {
		return err
	}
	var netErr net.Error
	var connect *pgconn.ConnectError
	interpreted := store.InterpretError(err)
	switch {
	case errors.As(err, &connect):
		return errcode.New(errcode.DatabaseUnreachable, "cannot reach Postgres: "+err.Error(), err)
	case errors.Is(interpreted, store.ErrTimeout):
		return errcode.New(errcode.DatabaseTimeout, "Postgres ended the transaction at its limits, and nothing it would have changed took effect: "+err.Error(), err)
	case pgconn.Timeout(err) || (errors.As(err, &netErr) && netErr.Timeout()):
		// Tested before a lost connection: a deadline met mid-message
		// closes the connection, and reads as one lost too.
		return errcode.New(errcode.DatabaseTimeout, "Postgres did not answer within the transaction's deadline"+unlessCommitSent+": "+err.Error(), err)
	case errors.Is(interpreted, store.ErrUnavailable):
		return errcode.New(errcode.DatabaseUnreachable, "the connection to Postgres was lost under the command"+unlessCommitSent+": "+err.Error(), err)
	}
	return err
}

// unlessCommitSent is what a command that lost its connection can say of
// its transaction: Postgres rolls back one whose client went, but a
// COMMIT that reached it took effect, its answer lost.
const unlessCommitSent = "; its transaction did not commit, unless its COMMIT had reached Postgres (run the command again to see which)"

// RedactURL returns where a URL or keyword/value string points, for
// display: user, host, port and database, and never a password, in
// whatever part of the string it was given.
func RedactURL(u string) string {
	cfg, err := pgconn.ParseConfig(u)
	if err != nil {
		return "(unparseable database URL)"
	}
	if strings.HasPrefix(cfg.Host, "/") { // a Unix socket directory
		q := neturl.Values{"host": {cfg.Host}, "port": {strconv.Itoa(int(cfg.Port))}}
		return fmt.Sprintf("postgres://%s@/%s?%s", cfg.User, cfg.Database, q.Encode())
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), cfg.Database)
}

// WithDatabase returns the postgres:// URL u naming the database dbname
// instead of its own.
func WithDatabase(u, dbname string) (string, error) {
	parsed, err := neturl.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return "", errcode.New(errcode.DatabaseURLInvalid, "a postgres:// URL is needed to name another database on its server", nil)
	}
	parsed.Path = "/" + dbname
	return parsed.String(), nil
}

// HasPassword reports whether a URL or keyword/value string carries a
// password of its own.
func HasPassword(u string) bool {
	parsed, err := neturl.Parse(u)
	if err == nil && parsed.Scheme != "" {
		_, inUser := parsed.User.Password()
		return inUser || parsed.Query().Has("password")
	}
	return passwordKeyword.MatchString(u)
}

// passwordKeyword is a keyword/value string's password keyword, as pgx
// reads it: spaces may stand on either side of its '='.
var passwordKeyword = regexp.MustCompile(`(?:^|[ \t\n\r\v\f])password[ \t\n\r\v\f]*=`)

// OpenDatasource returns a pool on a team's own database, logged in as its
// URL says (orangerail's schema and roles need not exist there), whose
// connections keep a bounded transaction's deadline as Open's do.
func OpenDatasource(ctx context.Context, url string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(cfg)
	}
	KeepDeadlines(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, ClassifyConnectError(cfg.ConnConfig, err)
	}
	return pool, nil
}
