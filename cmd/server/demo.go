package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
	DatabaseURL    string `json:"database_url"`
	DatabaseSource string `json:"database_source"`
	Config         string `json:"config"`
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
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the local demo (what `make run` starts): find or start a database and migrate it",
		Long: "Find or start a database for the demo: $DATABASE_URL if set; else the orangerail_demo\n" +
			"database on a Postgres at 127.0.0.1:5432; else a private cluster under .orangerail/ started\n" +
			"from the local Postgres binaries. Migrate it, print where it is, write .orangerail/demo.json,\n" +
			"and wait until interrupted. For a developer's machine only.",
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
			if found.StopFunc != nil {
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
			facts := demoFacts{DatabaseURL: found.URL, DatabaseSource: string(found.Source), Config: demoConfig}
			b, err := json.MarshalIndent(facts, "", "  ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(demoStateDir, 0o755); err != nil {
				return err
			}
			factsPath := filepath.Join(demoStateDir, "demo.json")
			if err := os.WriteFile(factsPath, append(b, '\n'), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(out, "orangerail demo\n  database: %s (%s), migrated\n", database.RedactURL(found.URL), found.Source)
			if found.Dir != "" {
				fmt.Fprintf(out, "  cluster:  %s (stopped when the demo stops)\n", found.Dir)
			}
			fmt.Fprintf(out, "  config:   %s (seeded: tenants acme and globex)\n  facts:    %s\n\n", demoConfig, factsPath)
			fmt.Fprintf(out, "Verify the audit log:  bin/orangerail audit verify --database-url '%s'\n", found.URL)
			fmt.Fprintln(out, "Press Ctrl-C to stop.")
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			return nil
		},
	}
}
