package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/ontology"
)

// IssuerEnv names the environment variable `login --issuer` defaults to.
const IssuerEnv = "ORANGERAIL_ISSUER"

func newLoginCmd() *cobra.Command {
	var issuer, clientID, config string
	cmd := &cobra.Command{
		Use:   "login [--issuer URL]",
		Short: "Sign in as a person at the team's OIDC issuer (device authorization grant) for the approvals commands",
		Long: "login asks the issuer for a device code, shows where to enter it, and waits while you sign in\n" +
			"there in a browser. The access token is kept in a file only you can read ($" + login.TokenFileEnv + ", else\n" +
			"orangerail/token.json in your configuration directory); `approvals … --server URL` sends it.\n" +
			"$" + login.TokenEnv + ", when set, is sent instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if issuer == "" && config != "" {
				cfg, err := loadConfig(cmd.Context(), config)
				if err != nil {
					return err
				}
				if cfg.Identity.OIDC != nil {
					issuer = cfg.Identity.OIDC.Issuer
				}
			}
			if issuer == "" {
				return errcode.New(errcode.Usage, fmt.Sprintf("--issuer is required (or $%s, or --config naming identity.oidc)", IssuerEnv), nil)
			}
			// The server takes no other issuer: signing in at one over
			// plain http off loopback would only expose the sign-in.
			switch err := ontology.CheckIssuer(issuer); {
			case errors.Is(err, ontology.ErrIssuerInsecure):
				return errcode.New(errcode.ServerInsecure, err.Error()+": signing in there would expose the sign-in and the token to the network", nil)
			case err != nil:
				return errcode.New(errcode.RequestInvalid, err.Error(), nil)
			}
			path, err := login.TokenPath()
			if err != nil {
				return errcode.New(errcode.FileUnusable, err.Error(), err)
			}
			out := cmd.OutOrStdout()
			tok, err := login.Device(cmd.Context(), login.Options{Issuer: issuer, ClientID: clientID,
				Prompt: func(uri, complete, code string) {
					// What the issuer sent: it cannot rewrite the terminal.
					fmt.Fprintf(out, "Open %s and enter the code %s\n", display.Text(uri), display.Text(code))
					if complete != "" {
						fmt.Fprintf(out, "  (or open %s)\n", display.Text(complete))
					}
					fmt.Fprintln(out, "Waiting for you to approve it there…")
				}})
			switch {
			case err == nil:
			case cmd.Context().Err() != nil: // interrupted: X_INTERRUPTED, as any command
				return err
			case errors.Is(err, login.ErrIssuerUnreachable):
				return errcode.New(errcode.IssuerUnreachable, err.Error(), err)
			case errors.Is(err, login.ErrSignInFailed):
				return errcode.New(errcode.LoginFailed, err.Error(), err)
			default:
				return err
			}
			if err := login.Save(path, issuer, tok); err != nil {
				return err
			}
			fmt.Fprintf(out, "Signed in; the token is kept in %s until %s.\n", path, tok.Expiry.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&issuer, "issuer", os.Getenv(IssuerEnv), "the OIDC issuer (default $"+IssuerEnv+")")
	cmd.Flags().StringVar(&clientID, "client-id", login.ClientIDDefault, "the command line's public client id at the issuer")
	cmd.Flags().StringVar(&config, "config", os.Getenv("ORANGERAIL_CONFIG"), "read the issuer from this config's identity.oidc")
	return cmd
}
