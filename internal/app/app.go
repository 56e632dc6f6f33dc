// Package app is orangerail's composition root: Open builds, once, what a
// process runs — the database pools, the engine, the MCP server, the HTTP
// front and the background workers — and Close tears it down in order.
// Every command (serve, demo, approvals, audit) and the bench open their
// runtime here; nothing else assembles one.
package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/metrics"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/periodic"
	"github.com/orangerail/orangerail/internal/sqlquery"
	"github.com/orangerail/orangerail/internal/tracing"
	"github.com/orangerail/orangerail/internal/webhooks"
)

// Settings say what to open.
type Settings struct {
	// Config is the loaded ontology. Required.
	Config *ontology.Config
	// DatabaseURL is orangerail's own database. Required.
	DatabaseURL string
	// Ring holds the keys that sign input digests and list cursors (its
	// active key signs; each key verifies what it signed). Nil: a ring of
	// Key.
	Ring *keyring.Ring
	// Key, when Ring is nil, is a ring of one under the legacy kid. Nil
	// too: a random key, for a process that stages nothing and pages no
	// list (an operator reviewing approvals).
	Key []byte
	// Logger receives the host log. Nil: discarded.
	Logger *slog.Logger
	// Version is the build's version, told to MCP clients.
	Version string
	// Serve opens what serving needs besides the engine: the config
	// checked against the datasource's live catalog (any problem refuses
	// to open), the MCP server with the read-only SQL tool, and what
	// readiness reads. Without it the catalog is read, not judged.
	Serve bool
	// Tracing makes the runtime's spans. Nil: opened from the config's
	// tracing section (off unless tracing.enabled), and shut down, its
	// last spans exported, by Close.
	Tracing *tracing.Tracing
	// SweepEvery is how often a serving runtime expires lapsed approvals
	// (engine.Sweep), so that no list shows one as pending. Zero:
	// DefaultSweepEvery.
	SweepEvery time.Duration
}

// DefaultSweepEvery is how often a serving runtime sweeps by default.
const DefaultSweepEvery = 15 * time.Second

// Runtime is what one process holds open. Its fields are set by Open and
// never change.
type Runtime struct {
	Config *ontology.Config
	// Store is orangerail's database, acting as orangerail_runtime.
	Store *pgxpool.Pool
	// Datasource is the team's data when it lives apart (nil: the Store).
	Datasource *pgxpool.Pool
	Engine     *engine.Engine
	// MCP is the MCP server; nil unless Settings.Serve.
	MCP *mcp.Server
	// Hooks carries the events of the engine, the MCP server and the HTTP
	// front to their subscribers; the host log is the first. A subscriber
	// (metrics, an auditor of refusals) subscribes here.
	Hooks *engine.Hooks
	// Metrics are fed from Hooks and served by StartMetrics; nil unless
	// the config sets metrics.listen.
	Metrics *metrics.Metrics

	url      string
	migrator *database.Migrator
	// checking lets one readiness check run at a time: /readyz answers
	// anyone, and the migrator's connections are not bounded (one is what
	// the sizing counts), nor is a probe's share of the runtime pool.
	checking chan struct{}
	log      *slog.Logger
	// webhooks delivers the outbox while serving with webhooks configured.
	webhooks *webhooks.Worker
	// stopSweep stops the sweeper and waits for it; nil when none runs.
	stopSweep func()
	// sealer seals the audit records committed on any replica; nil until
	// the engine is built.
	sealer *engine.Sealer
	// checkpointer signs audit checkpoints while serving with
	// audit.checkpoint; nil otherwise.
	checkpointer *engine.Checkpointer
	// tracing makes the runtime's spans (nil: off); ownTracing says Close
	// shuts it down.
	tracing    *tracing.Tracing
	ownTracing bool
	// limits is the HTTP front's rate limiter on the service database,
	// once ServeHTTP made it; Close flushes it.
	limits *front.BatchLimiter
}

// Open builds a runtime. On failure it closes what it opened.
func Open(ctx context.Context, s Settings) (_ *Runtime, err error) {
	if s.Config == nil {
		return nil, fmt.Errorf("app: Settings.Config is required")
	}
	rt := &Runtime{Config: s.Config, url: s.DatabaseURL, log: cmp.Or(s.Logger, slog.New(slog.DiscardHandler)), Hooks: engine.NewHooks(),
		checking: make(chan struct{}, 1)}
	rt.Hooks.Subscribe(0, engine.HostLog(rt.log))
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	cfg := s.Config
	if err := rt.openTracing(ctx, s); err != nil {
		return nil, err
	}
	if rt.Store, err = database.Open(ctx, s.DatabaseURL, database.WithQueryTracer(rt.tracing.SQL("store"))); err != nil {
		return nil, err
	}
	if cfg.Datasource.URLEnv != "" {
		if rt.Datasource, err = database.OpenDatasource(ctx, os.Getenv(cfg.Datasource.URLEnv), database.WithQueryTracer(rt.tracing.SQL("datasource"))); err != nil {
			return nil, fmt.Errorf("datasource (%s): %w", cfg.Datasource.URLEnv, err)
		}
	}
	rt.openMetrics(s.Version)
	var catalog *ontology.Catalog
	if s.Serve {
		catalog, err = rt.checkCatalog(ctx)
	} else {
		catalog, err = cfg.ReadCatalog(ctx, cmp.Or(rt.Datasource, rt.Store))
	}
	if err != nil {
		return nil, err
	}
	key := s.Key
	if key == nil {
		key = make([]byte, engine.KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	rt.Engine, err = engine.New(engine.Config{Ontology: cfg, Store: rt.Store, Datasource: rt.Datasource, Effects: effects.Factories(), TargetReaders: effects.TargetReader, Catalog: catalog,
		Ring: s.Ring, Key: key, Mode: engine.ModeOf(cfg.Preset), Logger: rt.log, Hooks: rt.Hooks, Tracer: rt.tracing.Tracer()})
	if err != nil {
		return nil, err
	}
	// Every runtime seals: what it appends is sealed while it runs, and
	// what is left when it closes (a CLI decision) before it exits.
	rt.sealer = engine.StartSealer(rt.Engine.Store(), periodic.Config{Interval: time.Duration(cfg.Audit.SealInterval), Log: rt.log})
	if !s.Serve {
		return rt, nil
	}
	for _, w := range cfg.Warnings() {
		rt.log.Warn(w.Message, "path", w.Path)
	}
	for _, c := range CredentialStates(cfg) {
		// Unset is omitted, never sent empty: the upstream then refuses
		// the call as unauthenticated.
		rt.log.Info("upstream credential", "scheme", c.Path, "type", string(c.Type), "env", c.Env, "set", c.Set)
	}
	if rt.migrator, err = database.NewMigrator(ctx, s.DatabaseURL); err != nil {
		return nil, err
	}
	querier, err := rt.querier(ctx)
	if err != nil {
		return nil, err
	}
	rt.MCP, err = mcp.New(mcp.Options{Engine: rt.Engine, Ontology: cfg, Querier: querier, Version: s.Version, Logger: rt.log, Hooks: rt.Hooks,
		Tracer: rt.tracing.Tracer()})
	if err != nil {
		return nil, err
	}
	if err := rt.startWebhooks(); err != nil {
		return nil, err
	}
	rt.startSweeper(cmp.Or(s.SweepEvery, DefaultSweepEvery))
	if err := rt.startCheckpointer(); err != nil {
		return nil, err
	}
	return rt, nil
}

// startWebhooks starts the outbox's delivery worker when the config names
// endpoints. Without any, the engine queues no message (migrations/00044).
func (rt *Runtime) startWebhooks() error {
	if len(rt.Config.Webhooks) == 0 {
		return nil
	}
	endpoints, err := webhooks.Endpoints(rt.Config.Webhooks, os.Getenv)
	if err != nil {
		return err
	}
	var deskOrigin string // a payload links to the desk only where one is served
	if rt.Config.Desk != nil {
		deskOrigin = rt.Config.HTTP.PublicURL
	}
	// On the engine's store, as the sealer: its transactions are bounded by
	// the config's limits, so a session holding a message's row waits the
	// worker lock_timeout, not as long as it holds it.
	rt.webhooks, err = webhooks.New(webhooks.Config{Pool: rt.Engine.Store(), Endpoints: endpoints, PublicURL: deskOrigin,
		Retention: webhookRetention(rt.Config), Logger: rt.log})
	if err != nil {
		return err
	}
	rt.webhooks.Start()
	return nil
}

// webhookRetention is the config's webhook_retention, or zero — the
// worker's default, webhooks.RetentionDefault — when it sets none.
func webhookRetention(c *ontology.Config) time.Duration {
	if c.WebhookRetention == nil {
		return 0
	}
	return time.Duration(*c.WebhookRetention)
}

// startSweeper expires lapsed approvals every interval until Close. Every
// replica sweeps; the engine lets one sweep a tenant at a time.
func (rt *Runtime) startSweeper(every time.Duration) {
	loop := periodic.Start(periodic.Config{Interval: every, Immediately: true, Log: rt.log, What: "approval sweep"}, func(ctx context.Context) error {
		n, err := rt.Engine.Sweep(ctx)
		if n > 0 {
			rt.log.Info("expired lapsed approvals", "count", n)
		}
		return err
	})
	rt.stopSweep = loop.Stop
}

// Close releases what Open opened. It is safe to call on a runtime Open
// left half-built.
func (rt *Runtime) Close() {
	// First: the sweeper and a delivery in flight finish on the pools they need.
	if rt.stopSweep != nil {
		rt.stopSweep()
	}
	if rt.webhooks != nil {
		rt.webhooks.Stop()
	}
	if rt.checkpointer != nil {
		rt.checkpointer.Stop()
	}
	if rt.sealer != nil {
		// What this runtime appended is sealed before its pool closes.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := rt.sealer.Stop(ctx); err != nil {
			rt.log.Warn("the last audit records were not sealed; another replica seals them", "error", err)
		}
		cancel()
	}
	if rt.limits != nil {
		// The counts admitted since the last flush reach the other replicas.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := rt.limits.Close(ctx); err != nil {
			rt.log.Warn("the last rate-limit counts were not flushed", "error", err)
		}
		cancel()
	}
	for _, p := range []*pgxpool.Pool{rt.Store, rt.Datasource} {
		if p != nil {
			p.Close()
		}
	}
	if rt.migrator != nil {
		_ = rt.migrator.Close()
	}
	// Last: what the runtime emitted until now reaches its subscribers,
	// and its last spans their collector.
	rt.Hooks.Close()
	rt.closeTracing()
}

// Ready reports whether the runtime can serve: its database answers and
// its schema is current.
func (rt *Runtime) Ready(ctx context.Context) error {
	// Probes that come together wait for one another, each within its own
	// context: a flood of them holds one connection, not one each.
	select {
	case rt.checking <- struct{}{}:
		defer func() { <-rt.checking }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := rt.Store.Ping(ctx); err != nil {
		return err
	}
	if rt.migrator == nil {
		return nil
	}
	return rt.migrator.Check(ctx)
}

// querier is the read-only SQL tool's, when the config enables it.
func (rt *Runtime) querier(ctx context.Context) (*sqlquery.Querier, error) {
	q := rt.Config.SQLQuery
	if !q.Enabled {
		return nil, nil
	}
	queryURL, err := queryURL(q, rt.url)
	if err != nil {
		return nil, err
	}
	querier, err := sqlquery.New(ctx, sqlquery.Config{URL: queryURL, Store: rt.Store, Schemas: q.Schemas})
	if err != nil {
		return nil, fmt.Errorf("sql_query: %w", err)
	}
	return querier, nil
}

// queryURL is the URL sql_query logs in with: sql_query.url_env's, or the
// service database's URL with the query role as its user.
func queryURL(q ontology.SQLQuery, serviceURL string) (string, error) {
	if q.URLEnv != "" {
		return os.Getenv(q.URLEnv), nil
	}
	return withUser(serviceURL, sqlquery.QueryRole)
}

// withUser returns a Postgres URL logging in as user, without a password.
func withUser(serviceURL, user string) (string, error) {
	u, err := neturl.Parse(serviceURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errcode.New(errcode.DatabaseURLInvalid, "sql_query needs a postgres:// URL to derive its login from, or sql_query.url_env", nil)
	}
	u.User = neturl.User(user)
	return u.String(), nil
}

// checkCatalog checks the config against the datasource it will serve (its
// own pool, or the service database) and returns the catalog it read.
func (rt *Runtime) checkCatalog(ctx context.Context) (*ontology.Catalog, error) {
	var catalog *ontology.Catalog
	var problems, warnings ontology.Problems
	check := func(asRuntime bool) func(pgx.Tx) error {
		return func(tx pgx.Tx) (err error) {
			catalog, problems, warnings, err = checkCatalogIn(ctx, rt.Config, tx, asRuntime)
			return err
		}
	}
	readOnly := pgx.TxOptions{AccessMode: pgx.ReadOnly}
	var err error
	if rt.Datasource != nil {
		err = pgx.BeginTxFunc(ctx, rt.Datasource, readOnly, check(false))
	} else {
		// On the service database the role is set in a transaction of
		// the check's own, as each read's is: behind a pooler in
		// transaction mode the session's SET ROLE stays on whichever
		// server connection it ran on.
		err = database.Tenantless(ctx, rt.Store, readOnly, check(true))
	}
	if err != nil {
		return nil, err
	}
	// The Store acts as orangerail_runtime, so it is never unchecked: a
	// warning here is a refusal.
	if problems = append(problems, warnings...); len(problems) > 0 {
		return nil, errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	return catalog, nil
}

// checkCatalogIn is the check serve's start and config check both make:
// the config against the database its reads and actions run on, in tx, a
// read-only transaction there, as the role they run as: orangerail_runtime
// on the service database (asRuntime), whose privileges a superuser or
// the tables' owner does not share, else the datasource's login. A login
// that may not act as the runtime is checked as itself, with a warning
// that says so (DiagnosticRuntimeUnchecked), never as though it were the
// runtime.
func checkCatalogIn(ctx context.Context, cfg *ontology.Config, tx pgx.Tx, asRuntime bool) (_ *ontology.Catalog, problems, warnings ontology.Problems, err error) {
	if asRuntime {
		as, err := tx.Begin(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		var refused *pgconn.PgError
		_, err = as.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{database.RuntimeRole}.Sanitize())
		switch {
		case errors.As(err, &refused):
			// Not a member, or no such role (a database orangerail
			// never migrated).
			if err := as.Rollback(ctx); err != nil {
				return nil, nil, nil, err
			}
			var login string
			if err := tx.QueryRow(ctx, "SELECT current_user::text").Scan(&login); err != nil {
				return nil, nil, nil, err
			}
			warnings = append(warnings, ontology.Problem{Path: "datasource", Message: fmt.Sprintf(
				"%s: role %s may not act as %s (%s), which serve's reads and actions on the service database run as: they were checked as %s instead; check with a login that is a member of %s",
				ontology.DiagnosticRuntimeUnchecked, pgx.Identifier{login}.Sanitize(), database.RuntimeRole, refused.Message, pgx.Identifier{login}.Sanitize(), database.RuntimeRole)})
		case err != nil:
			return nil, nil, nil, err
		default:
			if err := as.Commit(ctx); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	catalog, problems, err := cfg.CheckCatalog(ctx, savepointConn{tx})
	return catalog, problems, warnings, err
}

// savepointConn is a transaction as the catalog check's connection: a
// statement that cannot be prepared is rolled back to a savepoint, so the
// transaction and the checks after it go on.
type savepointConn struct{ pgx.Tx }

func (c savepointConn) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if _, err := c.Exec(ctx, "SAVEPOINT orangerail_catalog_check"); err != nil {
		return nil, err
	}
	sd, err := c.Tx.Prepare(ctx, name, sql)
	if err != nil {
		if _, rerr := c.Exec(ctx, "ROLLBACK TO SAVEPOINT orangerail_catalog_check"); rerr != nil {
			return nil, rerr
		}
		return nil, err
	}
	_, err = c.Exec(ctx, "RELEASE SAVEPOINT orangerail_catalog_check")
	return sd, err
}

func (c savepointConn) Deallocate(ctx context.Context, name string) error {
	return c.Conn().Deallocate(ctx, name)
}

// CheckCatalog connects to the database at url, reads its catalog and
// lists where cfg disagrees with it, as serve's start does
// (checkCatalogIn): as orangerail_runtime where cfg names no datasource
// of its own (url is the service database), else as url's login. The
// warnings say what could not be checked so.
func CheckCatalog(ctx context.Context, cfg *ontology.Config, url string) (_ *ontology.Catalog, problems, warnings ontology.Problems, _ error) {
	connCfg, err := database.ParseURL(url)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, connCfg.ConnConfig)
	if err != nil {
		return nil, nil, nil, database.ClassifyConnectError(connCfg.ConnConfig, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var catalog *ontology.Catalog
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		catalog, problems, warnings, err = checkCatalogIn(ctx, cfg, tx, cfg.Datasource.URLEnv == "")
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return catalog, problems, warnings, nil
}
