package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/roles"
	"github.com/orangerail/orangerail/internal/store"
)

func newAuditorCmd() *cobra.Command {
	var url, tenant, passwordEnv string
	var newTenant bool
	cmd := &cobra.Command{
		Use:   "auditor",
		Short: "Give people read-only SQL access to one tenant's audit log and approvals",
		Long: "An auditor is a Postgres LOGIN role in orangerail_auditor: it may SELECT its tenants' rows of\n" +
			"orangerail.audit, audit_heads and approvals, and run the SQL verifier, and nothing else. Which\n" +
			"tenants it sees is decided by its login name (session_user), which SQL run by the auditor\n" +
			"cannot change: set_config and SET ROLE gain nothing. Run these as the schema owner.",
	}
	databaseURLFlag(cmd.PersistentFlags(), &url)
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "", "the tenant the auditor may read (required by grant and revoke; list: only its grants)")

	grant := &cobra.Command{
		Use:   "grant NAME --tenant T [--password-env VAR] [--new-tenant]",
		Short: "Create the login NAME if needed and let it read tenant T",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var password string
			if passwordEnv != "" {
				if password = os.Getenv(passwordEnv); password == "" {
					return errcode.New(errcode.AuditorPasswordInvalid, passwordEnv+" is empty: it should hold the auditor's password", nil)
				}
			}
			if err := requireTenant(tenant); err != nil {
				return err
			}
			if err := roles.GrantAuditor(cmd.Context(), url, &roles.GrantAuditorParams{Name: args[0], Tenant: tenant, Password: password, NewTenant: newTenant}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s may read tenant %s (psql as %s, then: SELECT * FROM orangerail.audit_verify('%s'); "+
				"or, with a database URL logging in as %s: orangerail audit verify --tenant %s)\n",
				args[0], tenant, args[0], tenant, args[0], tenant)
			if passwordEnv != "" {
				// A login is the cluster's: its password is that of every
				// database it logs in to, this grant's and any other.
				fmt.Fprintf(cmd.OutOrStdout(), "%s's password is now the one in %s, for every database of this cluster it logs in to\n", args[0], passwordEnv)
			}
			return nil
		},
	}
	grant.Flags().StringVar(&passwordEnv, "password-env", "", "an environment variable holding the login's password (default: none; trust or certificate auth)")
	grant.Flags().BoolVar(&newTenant, "new-tenant", false, "grant a tenant that has no records yet (without it, one the database does not know is refused: a typo would become a tenant)")
	revoke := &cobra.Command{
		Use:   "revoke NAME --tenant T",
		Short: "Stop NAME reading tenant T (the login itself stays)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireTenant(tenant); err != nil {
				return err
			}
			if err := roles.RevokeAuditor(cmd.Context(), url, &roles.RevokeAuditorParams{Name: args[0], Tenant: tenant}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s may no longer read tenant %s\n", args[0], tenant)
			return nil
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--tenant T] [--json]",
		Short: "List which auditor logins may read which tenants (each tenant's audit log records when, and by whom)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			grants, err := roles.ListAuditors(cmd.Context(), url, tenant)
			if err != nil {
				return err
			}
			if asJSON {
				if grants == nil {
					grants = []*store.AuditorGrant{} // [], not null
				}
				return writeJSON(cmd.OutOrStdout(), grants)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TENANT\tLOGIN")
			for _, g := range grants {
				// A grant made by hand may name any login.
				fmt.Fprintf(w, "%s\t%s\n", g.Tenant, display.Text(g.Login))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(grant, revoke, list)
	return cmd
}

// requireTenant refuses a missing --tenant.
func requireTenant(tenant string) error {
	if tenant == "" {
		return errcode.New(errcode.Usage, "--tenant is required", nil)
	}
	return nil
}
