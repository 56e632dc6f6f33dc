package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// operatorFlags are what every approvals command needs.
type operatorFlags struct {
	url, config, tenant string
}

func (f *operatorFlags) bind(cmd *cobra.Command) {
	databaseURLFlag(cmd.PersistentFlags(), &f.url)
	cmd.PersistentFlags().StringVar(&f.config, "config", os.Getenv("ORANGERAIL_CONFIG"), "the ontology config file (default $ORANGERAIL_CONFIG)")
	cmd.PersistentFlags().StringVar(&f.tenant, "tenant", "", "the tenant whose approvals to read or decide (required)")
}

// engine opens what an operator command needs; closeFunc releases it.
// These commands review and decide approvals; they never stage a call or
// page a list, so the runtime signs with a key of its own.
func (f *operatorFlags) engine(ctx context.Context) (e *engine.Engine, closeFunc func(), err error) {
	if f.tenant == "" {
		return nil, nil, errcode.New(errcode.TenantInvalid, "--tenant is required", nil)
	}
	if err := database.ValidateTenantID(f.tenant); err != nil {
		return nil, nil, err
	}
	if f.config == "" {
		return nil, nil, fmt.Errorf("--config is required: the ontology config names each action's effect and target")
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, nil, err
	}
	rt, err := app.Open(ctx, app.Settings{Config: cfg, DatabaseURL: f.url})
	if err != nil {
		return nil, nil, err
	}
	return rt.Engine, rt.Close, nil
}

func newApprovalsCmd() *cobra.Command {
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, review and decide the approvals agents staged",
	}
	f.bind(cmd)
	cmd.AddCommand(newApprovalsListCmd(f), newApprovalsShowCmd(f))
	cmd.AddCommand(newApprovalsDecideCmds(f)...)
	return cmd
}

func newApprovalsListCmd(f *operatorFlags) *cobra.Command {
	var (
		status string
		limit  int32
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's approvals, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, closeAll, err := f.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			views, err := e.ListApprovals(cmd.Context(), f.tenant, store.ApprovalStatus(status), limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), views)
			}
			return printApprovals(cmd.OutOrStdout(), views)
		},
	}
	list.Flags().StringVar(&status, "status", "", "only approvals of this status ("+approvalStatusList()+")")
	list.Flags().Int32Var(&limit, "limit", 50, "at most this many")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return list
}

func newApprovalsShowCmd(f *operatorFlags) *cobra.Command {
	var asJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show what an approval would execute: the input (canonical: the bytes its digest covers), its digest, the effect, the rollback and the target now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, closeAll, err := f.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			v, err := e.ShowApproval(cmd.Context(), f.tenant, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			printApproval(cmd.OutOrStdout(), v)
			return nil
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON (the digest under \"digest\")")
	return show
}

// newApprovalsDecideCmds returns approve and reject.
func newApprovalsDecideCmds(f *operatorFlags) []*cobra.Command {
	var as, digest, note string
	decide := func(approve bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if as == "" {
				return fmt.Errorf("--as is required: the decision is recorded under that name")
			}
			e, closeAll, err := f.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			decider := &engine.Caller{Subject: as, Tenant: f.tenant, Roles: []string{e.ApproverRole()}, Kind: engine.ActorHuman}
			out := e.Decide(cmd.Context(), decider, engine.Decision{ApprovalID: args[0], Approve: approve, Digest: digest, Note: note})
			if !out.OK() {
				if out.Code != "" {
					return errcode.New(out.Code, fmt.Sprintf("approval %s: %s", args[0], out.Status), out.Err)
				}
				return fmt.Errorf("approval %s: %s (correlation %s): %w", args[0], out.Status, out.CorrelationID, out.Err)
			}
			verb := "rejected"
			if approve {
				verb = "approved"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s as %s\n", verb, args[0], as)
			return nil
		}
	}
	approve := &cobra.Command{
		Use:   "approve ID --as NAME --digest DIGEST",
		Short: "Approve exactly the input whose digest `show` printed",
		Args:  cobra.ExactArgs(1),
		RunE:  decide(true),
	}
	approve.Flags().StringVar(&as, "as", "", "who decides (recorded in the audit log)")
	approve.Flags().StringVar(&digest, "digest", "", "the digest `approvals show` printed for the input you reviewed")
	approve.Flags().StringVar(&note, "note", "", "a note kept with the decision")
	reject := &cobra.Command{
		Use:   "reject ID --as NAME [--note TEXT]",
		Short: "Reject an approval",
		Args:  cobra.ExactArgs(1),
		RunE:  decide(false),
	}
	reject.Flags().StringVar(&as, "as", "", "who decides (recorded in the audit log)")
	reject.Flags().StringVar(&note, "note", "", "why, kept with the decision")
	return []*cobra.Command{approve, reject}
}

// printApprovals prints approvals as a table. Every text that came from an
// agent or the database goes through display.Text: a tab, a line break or
// an escape sequence cannot break the table or rewrite the terminal.
func printApprovals(out io.Writer, views []*engine.ApprovalView) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tACTION\tREQUESTED BY\tCREATED\tEXPIRES")
	for _, v := range views {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, display.Text(string(v.Status)), display.Text(v.Action), display.Text(v.RequestedBy),
			v.CreatedAt.UTC().Format(time.RFC3339), v.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

// printApproval prints one approval for review. Every text that came from
// an agent, the database or the config goes through display: the input
// and the target are indented JSON whose unsafe characters are escaped, so
// what the approver reads is what executes, however the agent spaced or
// spelled it.
func printApproval(w io.Writer, v *engine.ApprovalView) {
	fmt.Fprintf(w, "approval %s (%s)\n  action:       %s", v.ID, display.Text(string(v.Status)), display.Text(v.Action))
	if v.Destructive {
		fmt.Fprint(w, " (destructive)")
	}
	fmt.Fprintf(w, "\n  requested by: %s at %s\n  expires:      %s\n", display.Text(v.RequestedBy), v.CreatedAt.UTC().Format(time.RFC3339), v.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  input (what executes, indented to read):\n    %s\n  digest:       %s\n", display.JSON(v.Input, "    ", "  "), display.Text(v.Digest))
	if v.Effect != "" {
		fmt.Fprintf(w, "  effect:       %s\n", display.Text(v.Effect))
	}
	if v.Rollback != "" {
		fmt.Fprintf(w, "  rollback:     %s\n", display.Text(v.Rollback))
	}
	switch {
	case v.TargetError != "":
		fmt.Fprintf(w, "  target now:   could not be read: %s\n", display.Text(v.TargetError))
	case v.Target != nil:
		fmt.Fprintf(w, "  target now:\n    %s\n", display.JSON(v.Target, "    ", "  "))
	}
	if v.DecidedBy != nil {
		fmt.Fprintf(w, "  decided by:   %s at %s", display.Text(*v.DecidedBy), v.DecidedAt.UTC().Format(time.RFC3339))
		if v.DecisionNote != nil {
			fmt.Fprintf(w, " (%s)", display.Text(*v.DecisionNote))
		}
		fmt.Fprintln(w)
	}
	if v.Status == store.ApprovalPending {
		fmt.Fprintf(w, "\nTo approve this exact input:\n  orangerail approvals approve %s --tenant %s --as YOUR_NAME --digest %s\n", v.ID, display.Text(v.Tenant), display.Text(v.Digest))
	}
}

// writeJSON prints v as indented JSON whose strings show no unsafe
// character raw (display.JSON): encoding/json leaves C1 controls,
// bidirectional overrides and zero-width characters as they are, in its
// own strings and in raw JSON such as an approval's input.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, display.JSON(b, "", "  "))
	return err
}

// approvalStatusList names every approval status, for help text.
func approvalStatusList() string {
	names := make([]string, 0, len(store.ApprovalStatuses()))
	for _, s := range store.ApprovalStatuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}
