package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
)

// devKeyFile is where a stdio developer's server keeps its key between
// runs, so identical calls still share an approval after a restart.
const devKeyFile = ".orangerail/secret.key"

type serveFlags struct {
	url, config, keyFile  string
	stdio                 bool
	tokenEnv              string
	devTenant, devSubject string
	devRoles, devScopes   []string
	// stdioOnly are the flags given that only --stdio takes.
	stdioOnly []string
}

// stdioOnlyFlags are serve's flags that mean something with --stdio only:
// over HTTP each request's token names its caller and the key is
// $ORANGERAIL_SECRET_KEY's.
var stdioOnlyFlags = []string{"dev-tenant", "dev-subject", "dev-roles", "dev-scopes", "key-file", "token-env"}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--stdio [--token-env VAR]]",
		Short: "Serve the ontology as governed MCP tools",
		Long: "Serve loads the config (refusing it with every problem listed), checks it against the\n" +
			"datasource's live catalog, and serves MCP: Streamable HTTP at POST /mcp, or with --stdio one\n" +
			"local developer over stdin and stdout under the development identity, every audit record\n" +
			"it causes stamped dev_mode. HTTP never runs in development mode: it needs identity.oidc.\n" +
			"With --stdio --token-env VAR, stdio serves the caller of the token in $VAR instead, verified\n" +
			"as HTTP verifies one (identity.oidc), re-verified before every request: once it expires, every\n" +
			"request is refused X_STDIO_TOKEN_REFUSED. A token refused at start exits before serving.\n\n" +
			"The server key comes from $" + app.SecretKeyEnv + " (64 hex characters); with --stdio and no key\n" +
			"set, one is kept in " + devKeyFile + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range stdioOnlyFlags {
				if cmd.Flags().Changed(name) {
					f.stdioOnly = append(f.stdioOnly, "--"+name)
				}
			}
			return serve(cmd.Context(), f)
		},
	}
	databaseURLFlag(cmd.Flags(), &f.url)
	cmd.Flags().StringVar(&f.config, "config", os.Getenv("ORANGERAIL_CONFIG"), "the ontology config file (default $ORANGERAIL_CONFIG)")
	cmd.Flags().BoolVar(&f.stdio, "stdio", false, "serve one local developer over stdio with the development identity")
	cmd.Flags().StringVar(&f.devTenant, "dev-tenant", "dev", "with --stdio: the development identity's tenant")
	cmd.Flags().StringVar(&f.devSubject, "dev-subject", "local-dev", "with --stdio: the development identity's subject")
	cmd.Flags().StringSliceVar(&f.devRoles, "dev-roles", nil, "with --stdio: the development identity's roles")
	cmd.Flags().StringSliceVar(&f.devScopes, "dev-scopes", nil, "with --stdio: the development identity's scopes")
	cmd.Flags().StringVar(&f.tokenEnv, "token-env", "", "with --stdio: serve the caller of the access token in this environment variable, verified by identity.oidc")
	for _, dev := range []string{"dev-tenant", "dev-subject", "dev-roles", "dev-scopes"} {
		cmd.MarkFlagsMutuallyExclusive("token-env", dev) // the token names the caller
	}
	cmd.Flags().StringVar(&f.keyFile, "key-file", devKeyFile, "with --stdio and no $"+app.SecretKeyEnv+": where the development key is kept")
	return cmd
}

func serve(ctx context.Context, f serveFlags) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)) // stdout is the stdio JSON-RPC channel
	if !f.stdio && len(f.stdioOnly) > 0 {
		// Over HTTP they would be ignored: no development identity, no
		// token but each request's, no key file.
		return errcode.New(errcode.Usage, strings.Join(f.stdioOnly, ", ")+" is for --stdio: over HTTP each request carries its own token, and no development identity is served", nil)
	}
	if f.config == "" {
		return errcode.New(errcode.Usage, "--config is required: the ontology config file to serve (or set $ORANGERAIL_CONFIG)", nil)
	}
	cfg, err := loadConfig(ctx, f.config)
	if err != nil {
		return err
	}
	if !f.stdio && cfg.Identity.OIDC == nil {
		return errcode.New(errcode.IdentityRequired, "serving HTTP needs identity.oidc in the config", nil)
	}
	var real *app.StdioIdentity
	if f.tokenEnv != "" {
		// Verified before anything is opened: a refused token serves nothing.
		if real, err = app.VerifyStdioToken(ctx, cfg, os.Getenv(f.tokenEnv)); err != nil {
			return err
		}
	}
	var ring *keyring.Ring
	if f.stdio {
		ring, err = app.DevSecretKey(f.keyFile)
	} else {
		ring, err = app.SecretKey()
	}
	if err != nil {
		return err
	}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: f.url, Ring: ring, Logger: log, Version: readBuildFacts().Version, Serve: true})
	if err != nil {
		return err
	}
	defer rt.Close()
	stopMetrics, err := rt.StartMetrics(ctx, nil) // metrics.listen, when set
	if err != nil {
		return err
	}
	defer stopMetrics()
	if !f.stdio {
		return rt.ServeHTTP(ctx, nil)
	}
	var (
		caller *engine.Caller
		check  func(context.Context) error
	)
	if real != nil {
		caller, check = &real.Caller.Caller, real.Check
		log.Info("serving over stdio as the token's caller", "service", cfg.Service, "tenant", caller.Tenant, "subject", caller.Subject,
			"expires", real.Caller.Expires, "preset", string(cfg.Preset), "tools", strings.Join(rt.MCP.ToolNames(caller), ","))
	} else {
		if err := database.ValidateTenantID(f.devTenant); err != nil {
			return err
		}
		caller = &engine.Caller{Subject: f.devSubject, Tenant: f.devTenant, Roles: f.devRoles, Scopes: f.devScopes, Kind: engine.ActorAgent, DevMode: true}
		log.Info("serving over stdio with the development identity", "service", cfg.Service, "tenant", caller.Tenant, "subject", caller.Subject,
			"preset", string(cfg.Preset), "tools", strings.Join(rt.MCP.ToolNames(caller), ","))
	}
	err = rt.ServeStdio(ctx, caller, check)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// loadConfig reads and checks the config file at path (readConfig): its
// problems are X_CONFIG_INVALID, listing every one.
func loadConfig(ctx context.Context, path string) (*ontology.Config, error) {
	cfg, err := readConfig(ctx, path)
	var problems ontology.Problems
	if errors.As(err, &problems) {
		return nil, errcode.New(errcode.ConfigInvalid, problems.Error(), nil)
	}
	return cfg, err
}

// readConfig reads the config file at path (readFile) and checks it
// (ontology.Parse): on any problem it returns ontology.Problems.
func readConfig(ctx context.Context, path string) (*ontology.Config, error) {
	data, err := readFile(ctx, path, ontology.MaxConfigBytes, "config")
	if err != nil {
		return nil, err
	}
	return ontology.Parse(data)
}

// readConfigFrom reads and parses a config from r, named name in a
// refusal, as readConfig reads a file: to its end, bounded, until ctx
// ends.
func readConfigFrom(ctx context.Context, r io.Reader, name string) (*ontology.Config, error) {
	data, err := readFrom(ctx, r, name, ontology.MaxConfigBytes, "config")
	if err != nil {
		return nil, err
	}
	return ontology.Parse(data)
}
