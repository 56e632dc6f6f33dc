package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
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
	cfg, err := ontology.Load(f.config)
	var problems ontology.Problems
	if errors.As(err, &problems) {
		return errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	if err != nil {
		return err
	}
	if !f.stdio && cfg.Identity.OIDC == nil {
		return errcode.New(errcode.IdentityRequired, "serving HTTP needs identity.oidc in the config", nil)
	}
	if !f.stdio {
		return errcode.New(errcode.IdentityRequired, "OIDC verification of HTTP callers is not built yet (the Identity issue); serve a local developer with --stdio", nil)
	}
	key, err := secretKey(f.stdio, f.keyFile)
	if err != nil {
		return err
	}

	store, err := database.Open(ctx, f.url)
	if err != nil {
		return err
	}
	defer store.Close()
	var data *pgxpool.Pool
	if cfg.Datasource.URLEnv != "" {
		if data, err = database.OpenDatasource(ctx, os.Getenv(cfg.Datasource.URLEnv)); err != nil {
			return fmt.Errorf("datasource (%s): %w", cfg.Datasource.URLEnv, err)
		}
		defer data.Close()
	}
	if err := checkCatalogOn(ctx, cfg, data, f.url); err != nil {
		return err
	}

	e, err := engine.New(engine.Config{Ontology: cfg, Store: store, Datasource: data, Key: key, Mode: engine.ModeOf(cfg.Preset), Logger: log})
	if err != nil {
		return err
	}
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Version: version, Logger: log})
	if err != nil {
		return err
	}
	if err := database.ValidateTenantID(f.devTenant); err != nil {
		return err
	}
	dev := &engine.Caller{Subject: f.devSubject, Tenant: f.devTenant, Roles: f.devRoles, Scopes: f.devScopes, Kind: engine.ActorAgent, DevMode: true}
	log.Info("serving over stdio with the development identity", "service", cfg.Service, "tenant", dev.Tenant, "subject", dev.Subject,
		"preset", string(cfg.Preset), "tools", strings.Join(s.ToolNames(dev), ","))
	err = s.ServeStdio(ctx, dev)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// checkCatalogOn checks the config against the datasource it will serve:
// its own pool, or the service database.
func checkCatalogOn(ctx context.Context, cfg *ontology.Config, data *pgxpool.Pool, serviceURL string) error {
	var conn *pgx.Conn
	if data != nil {
		c, err := data.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		conn = c.Conn()
	} else {
		connCfg, err := database.ParseURL(serviceURL)
		if err != nil {
			return err
		}
		if conn, err = pgx.ConnectConfig(ctx, connCfg.ConnConfig); err != nil {
			return database.ClassifyConnectError(connCfg.ConnConfig, err)
		}
		defer conn.Close(ctx)
	}
	problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	return nil
}

// secretKey reads the server key from the environment; a stdio developer
// without one gets a key kept in keyFile.
func secretKey(stdio bool, keyFile string) ([]byte, error) {
	if text := os.Getenv(SecretKeyEnv); text != "" {
		key, err := hex.DecodeString(strings.TrimSpace(text))
		if err != nil || len(key) != engine.KeySize {
			return nil, errcode.New(errcode.SecretKeyMissing, SecretKeyEnv+" is not 64 hex characters", nil)
		}
		return key, nil
	}
	if !stdio {
		return nil, errcode.New(errcode.SecretKeyMissing, SecretKeyEnv+" is not set", nil)
	}
	if text, err := os.ReadFile(keyFile); err == nil {
		if key, err := hex.DecodeString(strings.TrimSpace(string(text))); err == nil && len(key) == engine.KeySize {
			return key, nil
		}
		return nil, errcode.New(errcode.SecretKeyMissing, keyFile+" is not 64 hex characters", nil)
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
