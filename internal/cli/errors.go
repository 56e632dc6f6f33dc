package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/errcode"
)

func newErrorsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "errors",
		Short: "Explain orangerail's error codes",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "explain [CODE]",
		Short: "Print the cause and fix of a code, or of every code",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			print := func(e errcode.Entry) {
				fmt.Fprintf(out, "%s\n  cause: %s\n  fix:   %s\n", e.Code, e.Cause, e.Fix)
			}
			if len(args) == 0 {
				for _, e := range errcode.All() {
					print(e)
				}
				return nil
			}
			e, ok := errcode.Explain(args[0])
			if !ok {
				return errcode.New(errcode.Usage, fmt.Sprintf("no error code %q; `orangerail errors explain` lists them all", strings.ToUpper(args[0])), nil)
			}
			print(e)
			return nil
		},
	})
	return cmd
}
