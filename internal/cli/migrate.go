package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
)

// printHardeningGaps says on stderr what of the database's hardening is
// missing (orangerail.hardening_gaps), each with its fix: the SQL tool's
// database-level layer, which a migration run by an owner that is no
// superuser could not put, and the powers a role orangerail relies on
// should not hold.
func printHardeningGaps(cmd *cobra.Command, m *database.Migrator) error {
	gaps, err := m.HardeningGaps(cmd.Context())
	if err != nil || len(gaps) == 0 {
		return err
	}
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "migrate: %d part(s) of the database's hardening (the read-only SQL tool's layer, the roles' powers) are missing (they need a superuser); run these as one:\n", len(gaps))
	for _, g := range gaps {
		fmt.Fprintf(w, "  %s: %s\n", g.Gap, g.Fix)
	}
	return nil
}

func newMigrateCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, roll back or list the database migrations embedded in this binary",
		Long: "Apply, roll back or list the migrations embedded in this binary. Run them as the owner of\n" +
			"orangerail's schema (a role that may create schemas and roles); the server itself runs as\n" +
			"orangerail_runtime. Migrations of one database are serialized across processes.",
	}
	databaseURLFlag(cmd.PersistentFlags(), &url)

	withMigrator := func(run func(cmd *cobra.Command, m *database.Migrator) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			m, err := database.NewMigrator(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer m.Close()
			return run(cmd, m)
		}
	}

	cmd.AddCommand(&cobra.Command{
		Use: "up",
		Long: "Up applies every pending migration (a no-op on a current database). Run it as a superuser:\n" +
			"taking side-effect built-ins from PUBLIC and bounding the SQL tool's login need one. What a\n" +
			"run by another owner could not do is listed on stderr, with the statement a superuser runs.",
		Short: "Apply every pending migration (a no-op on a current database)",
		Args:  cobra.NoArgs,
		RunE: withMigrator(func(cmd *cobra.Command, m *database.Migrator) error {
			results, err := m.Up(cmd.Context())
			if err != nil {
				return err
			}
			for _, r := range results {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "database is at schema version %d\n", m.Latest())
			return printHardeningGaps(cmd, m)
		}),
	}, &cobra.Command{
		Use:   "down",
		Short: "Roll back the most recent migration",
		Args:  cobra.NoArgs,
		RunE: withMigrator(func(cmd *cobra.Command, m *database.Migrator) error {
			r, err := m.Down(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rolled back %s\n", r.Source.Path)
			return nil
		}),
	}, &cobra.Command{
		Use:   "status",
		Short: "List every migration and whether it is applied",
		Args:  cobra.NoArgs,
		RunE: withMigrator(func(cmd *cobra.Command, m *database.Migrator) error {
			statuses, err := m.Status(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tSTATE\tAPPLIED AT\tFILE")
			for _, s := range statuses {
				at := "-"
				if !s.AppliedAt.IsZero() {
					at = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, at, s.Source.Path)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			// A newer binary's migrations are not in this list: say so,
			// and exit as up and down do, rather than show it current.
			if err := m.Check(cmd.Context()); errcode.Of(err) == errcode.DatabaseTooNew {
				return err
			}
			return printHardeningGaps(cmd, m)
		}),
	})
	return cmd
}
