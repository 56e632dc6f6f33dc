package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/ontology"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check an ontology config, or print its JSON Schema",
	}
	var (
		url    string
		asJSON bool
	)
	check := &cobra.Command{
		Use:   "check FILE|-",
		Short: "Print every problem in a config file, and check it against the live datasource",
		Long: "Check prints every problem in the config file, each at its field path. When a database is\n" +
			"reachable (the datasource's url_env, else --database-url), it also checks that every table,\n" +
			"column and action statement exists there. FILE - reads the config from standard input.\n\n" +
			"Exit status: 0 when the config is sound, 1 when it has problems, 2 when the check could not run.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			var problems, warnings ontology.Problems
			catalog := "not checked: no database URL (set the datasource's url_env, --database-url or DATABASE_URL)"
			name := args[0]
			var (
				cfg *ontology.Config
				err error
			)
			if name == "-" {
				name = "standard input"
				cfg, err = readConfigFrom(cmd.Context(), cmd.InOrStdin(), name)
			} else {
				cfg, err = readConfig(cmd.Context(), name)
			}
			switch {
			case errors.As(err, &problems):
				catalog = "not checked: the config has problems; fix them, and check again"
			case err != nil:
				return err
			default:
				problems = append(problems, app.SecretProblems(cfg)...)
				warnings = app.Warnings(cfg)
				// The datasource's variable, as serve reads it; unset (a
				// problem above), the URL given here is checked.
				dsURL := url
				if v := cfg.Datasource.URLEnv; v != "" && os.Getenv(v) != "" {
					dsURL = os.Getenv(v)
				}
				if dsURL != "" {
					_, found, unchecked, err := app.CheckCatalog(cmd.Context(), cfg, dsURL)
					if err != nil {
						return err
					}
					problems = append(problems, found...)
					warnings = append(warnings, unchecked...)
					catalog = "checked against " + database.RedactURL(dsURL)
				}
			}
			waivers := approvalWaivers(cfg)
			credentials := app.CredentialStates(cfg)
			for _, c := range credentials {
				if c.Problem != "" {
					// serve would refuse it: a scheme that cannot be
					// placed is never guessed at.
					problems = append(problems, ontology.Problem{Path: c.Path, Message: c.Problem})
				}
			}
			if asJSON {
				if err := writeJSON(out, map[string]any{"problems": append(ontology.Problems{}, problems...), "catalog": catalog, "waivers": waivers,
					"credentials": credentials, "unserved": unservedOf(cfg), "warnings": append(ontology.Problems{}, warnings...)}); err != nil {
					return err
				}
			} else {
				for _, c := range credentials {
					switch {
					case c.Problem != "": // listed with the problems
					case c.Set && len(c.PresentedBy) == 0:
						fmt.Fprintf(out, "%s: %s credential from %s (or %s_FILE): set, presented by no call\n", c.Path, c.Type, c.Env, c.Env)
					case c.Set:
						fmt.Fprintf(out, "%s: %s credential from %s (or %s_FILE): set, presented by %s\n", c.Path, c.Type, c.Env, c.Env, strings.Join(c.PresentedBy, ", "))
					default:
						fmt.Fprintf(out, "%s: %s credential from %s (or %s_FILE): unset, so the scheme is omitted from every request\n", c.Path, c.Type, c.Env, c.Env)
					}
				}
				for _, p := range problems {
					fmt.Fprintln(out, p)
				}
				// What serve would warn of: no problem, so not counted.
				for _, w := range warnings {
					fmt.Fprintf(out, "warning: %s\n", w)
				}
				// An action withdrawn here is no problem, but a reviewer
				// should see what this deployment leaves out.
				for _, u := range unservedOf(cfg) {
					fmt.Fprintf(out, "%s: not served in environment %s; served in %v\n", u.Path, strconv.Quote(cfg.Environment), u.Environments)
				}
				// A waiver loads, but a reviewer should see every
				// destructive action that runs without a person.
				for _, w := range waivers {
					fmt.Fprintf(out, "%s: destructive, runs without approval; waived: %q\n", w.Path, w.Reason)
				}
				fmt.Fprintf(out, "%s: %d problem(s); catalog %s\n", name, len(problems), catalog)
			}
			if len(problems) > 0 {
				return errFindings
			}
			return nil
		},
	}
	databaseURLFlag(check.Flags(), &url)
	check.Flags().BoolVar(&asJSON, "json", false, "print the problems as JSON")

	schema := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the config file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(ontology.Schema())
			return err
		},
	}
	cmd.AddCommand(check, schema)
	return cmd
}

// waiver is a destructive action that runs without approval, and the
// reason the config writes for it.
type waiver struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// approvalWaivers lists the config's waivers by action name; none for a
// config that did not load.
func approvalWaivers(cfg *ontology.Config) []waiver {
	waivers := []waiver{}
	if cfg == nil {
		return waivers
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Actions)) {
		if reason := cfg.Actions[name].ApprovalWaived; reason != "" {
			waivers = append(waivers, waiver{Path: "actions." + name + ".approval_waived", Reason: reason})
		}
	}
	return waivers
}

// unservedOf lists the actions cfg withdrew in its environment, as config
// check --json reports them; none for a config that did not load.
func unservedOf(cfg *ontology.Config) []ontology.UnservedAction {
	if cfg == nil {
		return []ontology.UnservedAction{}
	}
	return cfg.Unserved()
}
