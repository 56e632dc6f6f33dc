package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/scaffold"
)

func newInitCmd() *cobra.Command {
	var (
		url, service, output string
		tables               []string
	)
	cmd := &cobra.Command{
		Use:   "init --database-url URL [--tables t1,schema.t2] [--service NAME] [-o FILE]",
		Short: "Draft an ontology config from a datasource's live catalog",
		Long: "init reads the datasource's catalog in a read-only transaction and writes a draft config:\n" +
			"an object per table with a single-column primary key and a tenant column, links from\n" +
			"single-column foreign keys, and no actions. Guesses are marked REVIEW; tables left out are\n" +
			"listed with the reason. `orangerail config check FILE --database-url URL` accepts the draft.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A name given is the operator's: refused when it is none, as
			// policy compile refuses one, not silently made another. The
			// database's name, the default, is made to fit.
			if fit := scaffold.ServiceName(service); service != "" && fit != service {
				return errcode.New(errcode.Usage, fmt.Sprintf("--service %q is not a service name: lower-case letters, digits and '-', at most 63 (say %q)", service, fit), nil)
			}
			data, err := scaffold.Generate(cmd.Context(), url, scaffold.Options{Tables: tables, Service: service})
			if err != nil {
				return err
			}
			if output == "" || output == "-" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeFile(output, data); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s from %s; review the lines marked REVIEW, then run %s\n",
				output, database.RedactURL(url), shellJoin([]string{invokedAs(), "config", "check", output}))
			return nil
		},
	}
	fl := cmd.Flags()
	secretDefault(fl, &url, "database-url", "DATABASE_URL", "Postgres URL of the datasource whose catalog is read (default $DATABASE_URL)")
	fl.StringSliceVar(&tables, "tables", nil, "scaffold only these tables: table in public, else schema.table (default: every table)")
	fl.StringVar(&service, "service", "", "the config's service name (default: the database's name)")
	fl.StringVarP(&output, "output", "o", "", "write the config to this file (default: standard output)")
	return cmd
}
