package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

func newDeskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "desk",
		Short: "Manage the approvers' web desk",
	}
	var url, issuer, subject string
	revoke := &cobra.Command{
		Use:   "revoke --issuer URL --subject SUB",
		Short: "Sign a person out of the desk everywhere, at once",
		Long: "Revoke ends every live desk session of the person the issuer names SUB, on every replica:\n" +
			"their next page asks them to sign in again. Use it when an account is compromised or an\n" +
			"approver leaves; take the role away at the identity provider too, or the next sign-in\n" +
			"gets it back.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if issuer == "" || subject == "" {
				return errcode.New(errcode.Usage, "--issuer and --subject are required: the issuer URL and the person's sub claim", nil)
			}
			pool, err := database.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			n, err := store.New(pool).DeskSessionRevokeSubject(cmd.Context(), issuer, subject)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ended %d desk session(s) of %s at %s\n", n, display.Text(subject), display.Text(issuer))
			if n == 0 {
				// Issuer and subject are matched exactly: a trailing
				// slash or a username for the sub claim ends nothing, and
				// must not read as "nobody was signed in".
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: no live desk session matched. The issuer must be exactly identity.oidc.issuer (mind a trailing slash) "+
					"and the subject exactly the person's sub claim; if both are right, the person has no live session.")
			}
			return nil
		},
	}
	databaseURLFlag(revoke.Flags(), &url)
	revoke.Flags().StringVar(&issuer, "issuer", "", "the issuer URL, as identity.oidc.issuer names it (required)")
	revoke.Flags().StringVar(&subject, "subject", "", "the person's sub claim (required)")
	cmd.AddCommand(revoke)
	return cmd
}
