package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/keyring"
)

// newKeysCmd is the key ring's commands. Each reads the ring from
// $ORANGERAIL_SECRET_KEY, never from a flag (a flag shows in the process
// list), and the ones that change it print the new ring on stdout alone,
// so that it can be captured into the secret store; what changed goes to
// stderr. No command prints a key otherwise.
func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List and rotate the server's key ring ($" + app.SecretKeyEnv + ")",
		Long: "The server's keys sign input digests and list cursors. $" + app.SecretKeyEnv + " holds them as a ring:\n" +
			"kid:key entries (the key as 64 hex characters) separated by commas, the first the active key.\n" +
			"A bare 64-hex value is a ring of one under the kid legacy. The README's key rotation section\n" +
			"gives the procedure: keys add, then keys activate, then, after the longest approval TTL and\n" +
			"cursor lifetime, keys drop.",
	}
	var inactive bool
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Print the ring with a fresh key added as the active key (--inactive: added last, not yet active)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return addKey(cmd, !inactive)
		},
	}
	rotate.Flags().BoolVar(&inactive, "inactive", false, "add the fresh key last, inactive (the first step of a rotation across replicas)")
	cmd.AddCommand(rotate,
		&cobra.Command{
			Use:   "add",
			Short: "Print the ring with a fresh key added last, inactive (the same as rotate --inactive)",
			Args:  cobra.NoArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return addKey(cmd, false) },
		},
		&cobra.Command{
			Use:   "activate KID",
			Short: "Print the ring with the key KID made the active key (moved first)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return changeRing(cmd, func(r *keyring.Ring) (*keyring.Ring, error) { return r.Activate(keyring.KID(args[0])) },
					"activated "+args[0])
			},
		},
		&cobra.Command{
			Use:   "drop KID",
			Short: "Print the ring without the key KID (never the active key)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return changeRing(cmd, func(r *keyring.Ring) (*keyring.Ring, error) { return r.Drop(keyring.KID(args[0])) },
					"dropped "+args[0]+": what it signed no longer verifies")
			},
		},
		&cobra.Command{
			Use:   "list",
			Short: "List the ring's kids, the active one marked (never a key)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ring, err := app.SecretKey()
				if err != nil {
					return err
				}
				for i, id := range ring.IDs() {
					state := "inactive"
					if i == 0 {
						state = "active"
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", id, state)
				}
				return nil
			},
		})
	return cmd
}

// addKey prints the ring with a fresh key, active or last. With no ring
// set it prints a ring of the fresh key alone: a new deployment's first.
func addKey(cmd *cobra.Command, active bool) error {
	k, err := keyring.Generate(time.Now())
	if err != nil {
		return err
	}
	ring := new(keyring.Ring)
	if os.Getenv(app.SecretKeyEnv) != "" {
		if ring, err = app.SecretKey(); err != nil {
			return err
		}
	} else {
		// Stored where the replicas' ring was meant to be read from (the
		// variable left unexported), it would drop every key they have.
		fmt.Fprintf(cmd.ErrOrStderr(), "%s is not set: this is a first ring, of the new key alone; "+
			"if your replicas have a ring, export it and run this again: stored in its place, this one drops their keys\n", app.SecretKeyEnv)
	}
	if ring, err = ring.With(k, active); err != nil {
		return err
	}
	state := "inactive: make it active on every replica only once every replica has it (keys activate " + string(k.ID) + ")"
	if ring.Active().ID == k.ID {
		state = "active"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "added %s, %s\n", k.ID, state)
	fmt.Fprintln(cmd.OutOrStdout(), ring.Encode())
	return nil
}

// changeRing prints the ring from the environment as change leaves it.
func changeRing(cmd *cobra.Command, change func(*keyring.Ring) (*keyring.Ring, error), what string) error {
	ring, err := app.SecretKey()
	if err != nil {
		return err
	}
	if ring, err = change(ring); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", what)
	fmt.Fprintln(cmd.OutOrStdout(), ring.Encode())
	return nil
}
