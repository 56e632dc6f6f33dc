package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/examples/orders"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/ontology"
)

// demoStateDir holds the demo's private cluster and demo.json.
const demoStateDir = ".orangerail"

// demoConfig is the example ontology the demo serves.
const demoConfig = "examples/orders/orangerail.yaml"

// demoFacts is what the demo writes to .orangerail/demo.json for scripts.
type demoFacts struct {
	// MCPURL is the Streamable HTTP endpoint; empty until HTTP serves
	// verified callers (the Identity issue).
	MCPURL         *string  `json:"mcp_url"`
	DatabaseURL    string   `json:"database_url"`
	DatabaseSource string   `json:"database_source"`
	Config         string   `json:"config"`
	StdioCommand   []string `json:"stdio_command"`
	Self           string   `json:"orangerail"`
}

// seedExample creates and fills the example's tables, then checks the
// example config against them.
func seedExample(ctx context.Context, url string) error {
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, orders.Seed); err != nil {
		return err
	}
	problems, err := cfg.CheckCatalog(ctx, conn)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

func newDemoCmd() *cobra.Command {
	var prepareOnly bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the local demo (what `make run` starts): a database, the example, and how to connect",
		Long: "Find or start a database for the demo: $DATABASE_URL if set; else the orangerail_demo\n" +
			"database on a Postgres at 127.0.0.1:5432; else a private cluster under .orangerail/ started\n" +
			"from the local Postgres binaries. Migrate it, seed the orders example, print how an MCP client\n" +
			"connects and how to approve, write the same facts to .orangerail/demo.json, and wait until\n" +
			"interrupted. For a developer's machine only.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			found, err := devdb.Find(ctx, devdb.Options{
				Env: os.Getenv("DATABASE_URL"),
				Dir: filepath.Join(demoStateDir, "postgres"),
				Logf: func(format string, args ...any) {
					fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
				},
			})
			if err != nil {
				return err
			}
			if found.StopFunc != nil && !prepareOnly {
				defer func() {
					if err := found.StopFunc(); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "stopping the private cluster: %v\n", err)
					}
				}()
			}
			if err := database.MigrateUp(ctx, found.URL); err != nil {
				return err
			}
			if err := seedExample(ctx, found.URL); err != nil {
				return fmt.Errorf("seed the example: %w", err)
			}
			facts, err := newDemoFacts(found)
			if err != nil {
				return err
			}
			factsPath := filepath.Join(demoStateDir, "demo.json")
			if err := writeFacts(factsPath, facts); err != nil {
				return err
			}
			printDemo(out, found, facts, factsPath)
			if prepareOnly {
				return nil
			}
			fmt.Fprintln(out, "Press Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			return nil
		},
	}
	cmd.Flags().BoolVar(&prepareOnly, "prepare-only", false, "prepare the database and the facts, then exit (for scripts)")
	return cmd
}

// The demo's development identity: an agent of tenant acme who may call
// every action of the example.
var demoIdentity = []string{"--dev-tenant", "acme", "--dev-subject", "demo-agent", "--dev-roles", "support", "--dev-scopes", "orders:write"}

func newDemoFacts(found *devdb.Database) (*demoFacts, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The repository's copy when run from a checkout; else the embedded one,
	// written beside the demo's other state.
	config := demoConfig
	if _, err := os.Stat(config); err != nil {
		config = filepath.Join(demoStateDir, "orangerail.yaml")
		if err := os.MkdirAll(demoStateDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(config, orders.Config, 0o644); err != nil {
			return nil, err
		}
	}
	if config, err = filepath.Abs(config); err != nil {
		return nil, err
	}
	keyFile, err := filepath.Abs(filepath.Join(demoStateDir, "secret.key"))
	if err != nil {
		return nil, err
	}
	stdio := append([]string{self, "serve", "--stdio", "--config", config, "--database-url", found.URL, "--key-file", keyFile}, demoIdentity...)
	return &demoFacts{DatabaseURL: found.URL, DatabaseSource: string(found.Source), Config: config, StdioCommand: stdio, Self: self}, nil
}

func writeFacts(path string, facts *demoFacts) error {
	b, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

func printDemo(out io.Writer, found *devdb.Database, facts *demoFacts, factsPath string) {
	fmt.Fprintf(out, "orangerail demo\n  database: %s (%s), migrated\n", database.RedactURL(found.URL), found.Source)
	if found.Dir != "" {
		fmt.Fprintf(out, "  cluster:  %s (stopped when the demo stops)\n", found.Dir)
	}
	fmt.Fprintf(out, "  config:   %s (seeded: tenants acme and globex)\n  facts:    %s\n\n", facts.Config, factsPath)
	fmt.Fprintf(out, "Connect an MCP client over stdio (HTTP opens with OIDC, in a later release):\n  %s\n\n", shellJoin(facts.StdioCommand))
	fmt.Fprintf(out, "With Claude Code:\n  claude mcp add orangerail -- %s\n\n", shellJoin(facts.StdioCommand))
	common := fmt.Sprintf("--tenant acme --config %s --database-url '%s'", facts.Config, facts.DatabaseURL)
	fmt.Fprintf(out, "Approve what the agent stages:\n  %s approvals list %s\n  %s approvals show ID %s\n  %s approvals approve ID --as YOUR_NAME --digest DIGEST %s\n\n",
		facts.Self, common, facts.Self, common, facts.Self, common)
	fmt.Fprintf(out, "Verify the audit log:\n  %s audit verify --database-url '%s'\n\n", facts.Self, facts.DatabaseURL)
}

// shellJoin quotes arguments for a POSIX shell.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '@' ||
				(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
		}) < 0 {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
