package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/door"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/sqlquery"
)

// version is orangerail's version, set at build time with -ldflags.
var version = "dev"

// SecretKeyEnv names the environment variable holding the server key.
const SecretKeyEnv = "ORANGERAIL_SECRET_KEY"

// devKeyFile is where a stdio developer's server keeps its key between
// runs, so identical calls still share an approval after a restart.
const devKeyFile = ".orangerail/secret.key"

type serveFlags struct {
	url, config, keyFile  string
	stdio                 bool
	devTenant, devSubject string
	devRoles, devScopes   []string
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--stdio]",
		Short: "Serve the ontology as governed MCP tools",
		Long: "Serve loads the config (refusing it with every problem listed), checks it against the\n" +
			"datasource's live catalog, and serves MCP: Streamable HTTP at POST /mcp, or with --stdio one\n" +
			"local developer over stdin and stdout under the development identity, every audit record\n" +
			"it causes stamped dev_mode. HTTP never runs in development mode: it needs identity.oidc.\n\n" +
			"The server key comes from $" + SecretKeyEnv + " (64 hex characters); with --stdio and no key\n" +
			"set, one is kept in " + devKeyFile + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), f) },
	}
	databaseURLFlag(cmd.Flags(), &f.url)
	cmd.Flags().StringVar(&f.config, "config", os.Getenv("ORANGERAIL_CONFIG"), "the ontology config file (default $ORANGERAIL_CONFIG)")
	cmd.Flags().BoolVar(&f.stdio, "stdio", false, "serve one local developer over stdio with the development identity")
	cmd.Flags().StringVar(&f.devTenant, "dev-tenant", "dev", "with --stdio: the development identity's tenant")
	cmd.Flags().StringVar(&f.devSubject, "dev-subject", "local-dev", "with --stdio: the development identity's subject")
	cmd.Flags().StringSliceVar(&f.devRoles, "dev-roles", nil, "with --stdio: the development identity's roles")
	cmd.Flags().StringSliceVar(&f.devScopes, "dev-scopes", nil, "with --stdio: the development identity's scopes")
	cmd.Flags().StringVar(&f.keyFile, "key-file", devKeyFile, "with --stdio and no $"+SecretKeyEnv+": where the development key is kept")
	return cmd
}

func serve(ctx context.Context, f serveFlags) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)) // stdout is the stdio JSON-RPC channel
	if f.config == "" {
		return errors.New("--config is required")
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	if !f.stdio && cfg.Identity.OIDC == nil {
		return errcode.New(errcode.IdentityRequired, "serving HTTP needs identity.oidc in the config", nil)
	}
	key, err := secretKey(f.stdio, f.keyFile)
	if err != nil {
		return err
	}
	rt, err := openRuntime(ctx, cfg, f.url, key, log)
	if err != nil {
		return err
	}
	defer rt.close()
	if !f.stdio {
		return rt.serveHTTP(ctx, nil)
	}
	if err := database.ValidateTenantID(f.devTenant); err != nil {
		return err
	}
	dev := &engine.Caller{Subject: f.devSubject, Tenant: f.devTenant, Roles: f.devRoles, Scopes: f.devScopes, Kind: engine.ActorAgent, DevMode: true}
	log.Info("serving over stdio with the development identity", "service", cfg.Service, "tenant", dev.Tenant, "subject", dev.Subject,
		"preset", string(cfg.Preset), "tools", strings.Join(rt.mcp.ToolNames(dev), ","))
	err = rt.mcp.ServeStdio(ctx, dev)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func loadConfig(path string) (*ontology.Config, error) {
	cfg, err := ontology.Load(path)
	var problems ontology.Problems
	if errors.As(err, &problems) {
		return nil, errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	return cfg, err
}

// runtime is everything a serving process holds open.
type runtime struct {
	cfg      *ontology.Config
	url      string
	store    *pgxpool.Pool
	data     *pgxpool.Pool
	engine   *engine.Engine
	mcp      *mcp.Server
	migrator *database.Migrator
	log      *slog.Logger
}

// openRuntime opens the databases, checks the config against the
// datasource, and builds the engine and the MCP server.
func openRuntime(ctx context.Context, cfg *ontology.Config, url string, key []byte, log *slog.Logger) (_ *runtime, err error) {
	rt := &runtime{cfg: cfg, url: url, log: log}
	defer func() {
		if err != nil {
			rt.close()
		}
	}()
	if rt.store, err = database.Open(ctx, url); err != nil {
		return nil, err
	}
	if cfg.Datasource.URLEnv != "" {
		if rt.data, err = database.OpenDatasource(ctx, os.Getenv(cfg.Datasource.URLEnv)); err != nil {
			return nil, fmt.Errorf("datasource (%s): %w", cfg.Datasource.URLEnv, err)
		}
	}
	catalog, err := checkCatalogOn(ctx, cfg, rt.data, url)
	if err != nil {
		return nil, err
	}
	if rt.migrator, err = database.NewMigrator(ctx, url); err != nil {
		return nil, err
	}
	rt.engine, err = engine.New(engine.Config{Ontology: cfg, Store: rt.store, Datasource: rt.data, Catalog: catalog, Key: key, Mode: engine.ModeOf(cfg.Preset), Logger: log})
	if err != nil {
		return nil, err
	}
	var querier *sqlquery.Querier
	if q := cfg.SQLQuery; q.Enabled {
		queryURL := os.Getenv(q.URLEnv)
		if q.URLEnv == "" {
			if queryURL, err = withUser(url, sqlquery.QueryRole); err != nil {
				return nil, err
			}
		}
		if querier, err = sqlquery.New(sqlquery.Config{URL: queryURL, Store: rt.store, Schemas: q.Schemas}); err != nil {
			return nil, fmt.Errorf("sql_query: %w", err)
		}
	}
	rt.mcp, err = mcp.New(mcp.Options{Engine: rt.engine, Ontology: cfg, Querier: querier, Version: version, Logger: log})
	return rt, err
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

func (rt *runtime) close() {
	for _, p := range []*pgxpool.Pool{rt.store, rt.data} {
		if p != nil {
			p.Close()
		}
	}
	if rt.migrator != nil {
		_ = rt.migrator.Close()
	}
}

// serveHTTP serves the door on ln, or when ln is nil on cfg.HTTP.Listen,
// until ctx ends, then shuts down gracefully.
func (rt *runtime) serveHTTP(ctx context.Context, ln net.Listener) error {
	cfg := rt.cfg
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		return errcode.New(errcode.IdentityRequired, err.Error(), nil)
	}
	var limiter door.Limiter = door.NewPostgresLimiter(rt.store)
	if cfg.HTTP.RateLimits.Store == "memory" {
		limiter = door.NewMemoryLimiter()
	}
	mcpHandler := rt.mcp.HTTPHandler(func(_ context.Context, _ string, r *http.Request) (*engine.Caller, error) {
		c := door.CallerFrom(r.Context())
		if c == nil {
			return nil, identity.ErrInvalidToken
		}
		return &c.Caller, nil
	})
	handler := door.New(door.Config{
		Ontology: cfg, Resolver: resolver, Limiter: limiter, MCP: mcpHandler, Logger: rt.log,
		ToolClass: func(tool string) door.Class {
			if rt.mcp.ReadOnly(tool) {
				return door.ClassRead
			}
			return door.ClassWrite
		},
		ReadyFunc: func(ctx context.Context) error {
			if err := rt.store.Ping(ctx); err != nil {
				return err
			}
			if err := rt.migrator.Check(ctx); err != nil {
				return err
			}
			return resolver.Ready(ctx)
		},
	})
	if err := resolver.Ready(ctx); err != nil {
		rt.log.Warn("OIDC discovery failed; /readyz reports not ready until it succeeds", "error", err)
	}
	if ln == nil {
		if ln, err = listen(cfg.HTTP.Listen); err != nil {
			return err
		}
	}
	// A body is at most http.max_body_bytes and an answer takes at most a
	// query's timeout: these bound what a slow or stalled client can hold.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	rt.log.Info("serving MCP over Streamable HTTP", "service", cfg.Service, "address", ln.Addr().String(), "path", door.Path,
		"public_url", cfg.HTTP.PublicURL, "preset", string(cfg.Preset))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// listen binds the HTTP address; a busy one says how to move.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w (set http.listen, or for the demo `make run LISTEN=127.0.0.1:8081`)", err)
	}
	return ln, nil
}

// checkCatalogOn checks the config against the datasource it will serve
// (its own pool, or the service database) and returns the catalog it read.
func checkCatalogOn(ctx context.Context, cfg *ontology.Config, data *pgxpool.Pool, serviceURL string) (*ontology.Catalog, error) {
	var catalog *ontology.Catalog
	var problems ontology.Problems
	var err error
	if data != nil {
		err = data.AcquireFunc(ctx, func(c *pgxpool.Conn) (err error) {
			catalog, problems, err = cfg.CheckCatalog(ctx, c.Conn())
			return err
		})
	} else {
		catalog, problems, err = checkCatalog(ctx, cfg, serviceURL)
	}
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	return catalog, nil
}

// secretKey reads the server key from the environment; a stdio developer
// without one gets a key kept in keyFile.
func secretKey(stdio bool, keyFile string) ([]byte, error) {
	if text := os.Getenv(SecretKeyEnv); text != "" {
		return parseKey(text, SecretKeyEnv)
	}
	if !stdio {
		return nil, errcode.New(errcode.SecretKeyMissing, SecretKeyEnv+" is not set", nil)
	}
	if text, err := os.ReadFile(keyFile); err == nil {
		return parseKey(string(text), keyFile)
	}
	key := make([]byte, engine.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o755); err != nil {
		return nil, err
	}
	return key, os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600)
}

// parseKey decodes a server key written as hex; source names where the
// text came from, for the error.
func parseKey(text, source string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) != engine.KeySize {
		return nil, errcode.New(errcode.SecretKeyMissing, source+" is not 64 hex characters", nil)
	}
	return key, nil
}
