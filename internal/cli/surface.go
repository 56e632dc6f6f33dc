package cli

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
)

func newSurfaceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "surface",
		Short: "Measure what each audience's tool catalog costs an agent",
	}
	var url string
	measure := &cobra.Command{
		Use:   "measure [FILE]",
		Short: "Print the tokens each audience's tools/list costs, flat and meta, and hold it to the budget",
		Long: "Measure prints, for each audience the config names (anonymous when an object is public,\n" +
			"authenticated without a role, and each role set a roles: list names), the tokens its tools/list\n" +
			"costs on the flat and the meta surface, estimated as ceil(bytes/4) of the JSON, and the surface\n" +
			"it is served. With a database (the datasource's url_env, else --database-url), read schemas are\n" +
			"typed from the live catalog, as served; without one they are measured untyped.\n\n" +
			"FILE defaults to $ORANGERAIL_CONFIG.\n\n" +
			"Exit status: 0 within surface.budget.max_tokens (or with no budget), 1 when an audience's served\n" +
			"tools/list is over it (X_MCP_SURFACE_OVER_BUDGET), 2 when the measure could not run.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := os.Getenv("ORANGERAIL_CONFIG")
			if len(args) == 1 {
				path = args[0]
			}
			if path == "" {
				return errors.New("name the config file: orangerail surface measure FILE, or set ORANGERAIL_CONFIG")
			}
			cfg, err := readConfig(cmd.Context(), path)
			if err != nil {
				return err
			}
			dsURL := url
			if cfg.Datasource.URLEnv != "" {
				dsURL = os.Getenv(cfg.Datasource.URLEnv)
			}
			report, err := app.MeasureSurface(cmd.Context(), cfg, dsURL)
			if err != nil {
				return err
			}
			over, err := report.Write(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if len(over) > 0 {
				return errFindings
			}
			return nil
		},
	}
	databaseURLFlag(measure.Flags(), &url)
	cmd.AddCommand(measure)
	return cmd
}
