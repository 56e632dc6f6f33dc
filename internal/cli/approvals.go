package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/desk/client"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/login"
	"github.com/orangerail/orangerail/internal/store"
)

// approvalsFlags are what every approvals command needs. A command goes
// through the deployment's API as the person signed in (--server), or, in
// an emergency, straight to the database as its owner (--break-glass).
type approvalsFlags struct {
	server              string
	plainHTTP           bool
	breakGlass          bool
	reason              string
	url, config, tenant string
}

// ServerEnv names the environment variable --server defaults to.
const ServerEnv = "ORANGERAIL_SERVER"

func (f *approvalsFlags) bind(cmd *cobra.Command) {
	flags := cmd.PersistentFlags()
	flags.StringVar(&f.server, "server", os.Getenv(ServerEnv), "the deployment's `URL`, its http.public_url (default $"+ServerEnv+"); the token comes from $"+login.TokenEnv+" or orangerail login")
	flags.BoolVar(&f.plainHTTP, "plain-http", false, "allow a --server reached over plain http off loopback, the token readable on the network (a development server only)")
	flags.BoolVar(&f.breakGlass, "break-glass", false, "go to the database as its owner, around the API (an emergency; audited as the database login, and reported by audit verify)")
	flags.StringVar(&f.reason, "reason", "", "with --break-glass: why, recorded with the decision (required)")
	databaseURLFlag(flags, &f.url)
	flags.StringVar(&f.config, "config", os.Getenv("ORANGERAIL_CONFIG"), "with --break-glass: the ontology config file (default $ORANGERAIL_CONFIG)")
	flags.StringVar(&f.tenant, "tenant", "", "with --break-glass: the tenant whose approvals to read or decide")
}

// client returns the API client of the signed-in person, or nil when the
// command goes to the database (--break-glass).
func (f *approvalsFlags) client() (*client.Client, error) {
	switch {
	case f.breakGlass && f.server != "":
		return nil, errcode.New(errcode.ApprovalsPath, "--server and --break-glass exclude each other: the API, or the database around it", nil)
	case f.breakGlass:
		if strings.TrimSpace(f.reason) == "" {
			return nil, errcode.New(errcode.ApprovalsPath, "--break-glass needs --reason TEXT: the decision records why the API was bypassed", nil)
		}
		return nil, nil
	case f.tenant != "":
		return nil, errcode.New(errcode.ApprovalsPath, "--tenant is for --break-glass: through the API, the tenant is the one your token names", nil)
	case f.reason != "":
		return nil, errcode.New(errcode.ApprovalsPath, "--reason is for --break-glass: through the API, a decision's words are its --note", nil)
	case f.server == "":
		return nil, errcode.New(errcode.ApprovalsPath, "pass --server URL (the deployment's http.public_url, or set $"+ServerEnv+
			"); only in an emergency, --break-glass --reason TEXT with the database owner's --database-url", nil)
	}
	var path string
	if os.Getenv(login.TokenEnv) == "" {
		var err error
		if path, err = login.TokenPath(); err != nil {
			return nil, errcode.New(errcode.FileUnusable, err.Error(), err)
		}
	}
	token, issuer, err := login.Token(path, time.Now())
	switch {
	case errors.Is(err, login.ErrNoToken):
		return nil, errcode.New(errcode.MCPUnauthorized, err.Error(), nil)
	case err != nil:
		// The kept token's file: readable by others, unreadable, or none
		// orangerail wrote.
		return nil, errcode.New(errcode.FileUnusable, err.Error(), err)
	}
	return client.New(f.server, token, client.Options{Issuer: issuer, PlainHTTP: f.plainHTTP})
}

// engine opens what the database path needs; closeFunc releases it. These
// commands review and decide approvals; they never stage a call or page a
// list, so the runtime signs with a key of its own, unless inputs are
// sealed: then it needs the server's ring to open them.
func (f *approvalsFlags) engine(ctx context.Context) (e *engine.Engine, closeFunc func(), err error) {
	if f.tenant == "" {
		return nil, nil, errcode.New(errcode.Usage, "--tenant is required with --break-glass", nil)
	}
	if err := database.ValidateTenantID(f.tenant); err != nil {
		return nil, nil, err
	}
	if f.config == "" {
		return nil, nil, errcode.New(errcode.Usage, "--config is required with --break-glass: the ontology config names each action's effect and target", nil)
	}
	cfg, err := loadConfig(ctx, f.config)
	if err != nil {
		return nil, nil, err
	}
	s := app.Settings{Config: cfg, DatabaseURL: f.url}
	if cfg.Approvals.SealInputs {
		// A sealed input opens only with the server's key ring: a person
		// approving in an emergency still sees what they approve.
		if s.Ring, err = app.SecretKey(); err != nil {
			return nil, nil, err
		}
	}
	rt, err := app.Open(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	// A mistyped tenant is refused, not listed as one with nothing.
	if err := engine.TenantExists(ctx, rt.Store, f.tenant); err != nil {
		rt.Close()
		return nil, nil, err
	}
	return rt.Engine, rt.Close, nil
}

// approveCommand is the command that approves v's exact input the way this
// one reached it, runnable as printed (the binary's own path, no hidden
// flag); a break-glass one needs its reason written in.
func (f *approvalsFlags) approveCommand(v *engine.ApprovalView) string {
	self, err := os.Executable()
	if err != nil {
		self = "orangerail"
	}
	if f.breakGlass {
		// The URL this command was given, never printed (it may hold a
		// password): $DATABASE_URL when it came from there, else a
		// placeholder to fill in as WHY is.
		url := ` --database-url "$DATABASE_URL"`
		if f.url != os.Getenv("DATABASE_URL") {
			url = " --database-url OWNER_URL"
		}
		return shellJoin([]string{self, "approvals", "approve", v.ID.String(), "--break-glass", "--reason", "WHY",
			"--tenant", v.Tenant, "--config", f.config, "--digest", v.Digest}) + url
	}
	args := []string{self, "approvals", "approve", v.ID.String(), "--server", f.server, "--digest", v.Digest}
	if f.plainHTTP {
		args = append(args, "--plain-http")
	}
	return shellJoin(args)
}

func newApprovalsCmd() *cobra.Command {
	f := &approvalsFlags{}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, review and decide the approvals agents staged, as the person signed in",
	}
	f.bind(cmd)
	cmd.AddCommand(newApprovalsListCmd(f), newApprovalsShowCmd(f))
	cmd.AddCommand(newApprovalsDecideCmds(f)...)
	return cmd
}

func newApprovalsListCmd(f *approvalsFlags) *cobra.Command {
	var (
		status string
		limit  int32
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's approvals, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || int(limit) > engine.MaxApprovalPage {
				// As the API says of its limit: 0 read as "the default" there, and
				// as "none" breaking glass.
				return errcode.New(errcode.RequestInvalid, "--"+engine.PageLimitProblem, nil)
			}
			views, more, err := f.list(cmd.Context(), store.ApprovalStatus(status), limit)
			if err != nil {
				return err
			}
			if more {
				// Said beside the list, never in it: --json stays the list.
				fmt.Fprintf(cmd.ErrOrStderr(), "approvals list: more approvals match than --limit %d shows; the oldest, which lapse first, are left out: "+
					"raise --limit, narrow --status, or open the desk\n", limit)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), views)
			}
			return printApprovals(cmd.OutOrStdout(), views)
		},
	}
	list.Flags().StringVar(&status, "status", "", "only approvals of this status ("+approvalStatusList()+"); the API's default is pending")
	list.Flags().Int32Var(&limit, "limit", 50, "at most this many")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return list
}

// list reads approvals through the API or, breaking glass, the database,
// and says whether more match than limit.
func (f *approvalsFlags) list(ctx context.Context, status store.ApprovalStatus, limit int32) (views []*engine.ApprovalView, more bool, err error) {
	c, err := f.client()
	if err != nil {
		return nil, false, err
	}
	if c == nil {
		e, closeAll, err := f.engine(ctx)
		if err != nil {
			return nil, false, err
		}
		defer closeAll()
		// One past the limit (at most the API's page, checked): whether more match.
		if views, err = e.ListApprovals(ctx, f.tenant, status, limit+1); err != nil || len(views) <= int(limit) {
			return views, false, err
		}
		return views[:limit], true, nil
	}
	page, err := c.List(ctx, client.ListQuery{Status: string(status), Limit: int(limit)})
	if err != nil {
		return nil, false, err
	}
	views = make([]*engine.ApprovalView, len(page.Items))
	for i, it := range page.Items {
		views[i] = &engine.ApprovalView{ID: it.ID, Action: it.Action, Title: it.Title, Status: it.Status, RequestedBy: it.RequestedBy,
			Digest: it.Digest, CreatedAt: it.RequestedAt, ExpiresAt: it.ExpiresAt}
	}
	return views, page.NextCursor != nil && *page.NextCursor != "", nil
}

func newApprovalsShowCmd(f *approvalsFlags) *cobra.Command {
	var asJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show what an approval would execute: the input (canonical: the bytes its digest covers), its digest, the effect, the rollback, the target now and what would be written",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.show(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			printApproval(cmd.OutOrStdout(), v, f.approveCommand(v))
			return nil
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON (the digest under \"digest\")")
	return show
}

// show reads one approval through the API or, breaking glass, the database.
func (f *approvalsFlags) show(ctx context.Context, id string) (*engine.ApprovalView, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	if c == nil {
		e, closeAll, err := f.engine(ctx)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		return e.ShowApproval(ctx, f.tenant, id)
	}
	d, err := c.Show(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &engine.ApprovalView{ID: d.ID, Action: d.Action, Title: d.Title, Status: d.Status, RequestedBy: d.RequestedBy,
		Input: d.Input, InputState: d.InputState, Digest: d.Digest, Effect: d.Effect, Rollback: d.Rollback, Destructive: d.Destructive, CreatedAt: d.RequestedAt, ExpiresAt: d.ExpiresAt,
		DecidedBy: d.DecidedBy, DecidedAt: d.DecidedAt, DecisionNote: d.Note}
	if string(d.TargetNow) != "null" {
		v.Target = d.TargetNow
	}
	if string(d.WouldWrite) != "null" {
		v.WouldWrite = d.WouldWrite
	}
	if d.TargetError != nil {
		v.TargetError = *d.TargetError
	}
	return v, nil
}

// newApprovalsDecideCmds returns approve and reject.
func newApprovalsDecideCmds(f *approvalsFlags) []*cobra.Command {
	var digest, note string
	decide := func(approve bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			by, err := f.decide(cmd.Context(), args[0], approve, digest, note)
			if err != nil {
				return err
			}
			verb := "rejected"
			if approve {
				verb = "approved"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s as %s\n", verb, args[0], display.Text(by))
			return nil
		}
	}
	approve := &cobra.Command{
		Use:   "approve ID --digest DIGEST",
		Short: "Approve exactly the input whose digest `show` printed",
		Args:  cobra.ExactArgs(1),
		RunE:  decide(true),
	}
	approve.Flags().StringVar(&digest, "digest", "", "the `DIGEST` approvals show printed for the input you reviewed")
	approve.Flags().StringVar(&note, "note", "", "a note kept with the decision")
	reject := &cobra.Command{
		Use:   "reject ID [--note TEXT]",
		Short: "Reject an approval; the note reaches the agent",
		Args:  cobra.ExactArgs(1),
		RunE:  decide(false),
	}
	reject.Flags().StringVar(&note, "note", "", "why, kept with the decision and told to the agent")
	return []*cobra.Command{approve, reject}
}

// decide records a decision through the API as the signed-in person and
// returns who the record names.
func (f *approvalsFlags) decide(ctx context.Context, id string, approve bool, digest, note string) (string, error) {
	c, err := f.client()
	if err != nil {
		return "", err
	}
	if c == nil {
		return f.decideBreakingGlass(ctx, id, approve, digest, note)
	}
	d := api.DecisionRequest{Decision: "reject", Digest: digest, Note: note}
	if approve {
		d.Decision = "approve"
	}
	res, err := c.Decide(ctx, id, d)
	if err != nil {
		return "", err
	}
	return res.DecidedBy, nil
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

// printApproval prints v as its approver reviews it; approve is the
// command that approves its exact input, printed for a pending one whose
// input could be shown. Every text that came from an agent, the database
// or the config goes through display: the input and the target are
// indented JSON whose unsafe characters are escaped, so what the approver
// reads is what executes, however the agent spaced or spelled it.
func printApproval(w io.Writer, v *engine.ApprovalView, approve string) {
	fmt.Fprintf(w, "approval %s (%s)\n  action:       %s", v.ID, display.Text(string(v.Status)), display.Text(v.Action))
	if v.Destructive {
		fmt.Fprint(w, " (destructive)")
	}
	fmt.Fprintf(w, "\n  requested by: %s at %s\n  expires:      %s\n", display.Text(v.RequestedBy), v.CreatedAt.UTC().Format(time.RFC3339), v.ExpiresAt.UTC().Format(time.RFC3339))
	if v.InputState != "" {
		fmt.Fprintf(w, "  input:        cannot be shown (the sealed input is %s)\n  digest:       %s\n", display.Text(string(v.InputState)), display.Text(v.Digest))
	} else {
		fmt.Fprintf(w, "  input (what executes, indented to read):\n    %s\n  digest:       %s\n", display.JSON(v.Input, "    ", "  "), display.Text(v.Digest))
	}
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
	if len(v.WouldWrite) > 0 {
		fmt.Fprintf(w, "  would write:\n    %s\n", display.JSON(v.WouldWrite, "    ", "  "))
	}
	if v.DecidedBy != nil {
		fmt.Fprintf(w, "  decided by:   %s at %s", display.Text(*v.DecidedBy), v.DecidedAt.UTC().Format(time.RFC3339))
		if v.DecisionNote != nil {
			fmt.Fprintf(w, " (%s)", display.Text(*v.DecisionNote))
		}
		fmt.Fprintln(w)
	}
	switch {
	case v.Status != store.ApprovalPending:
	case v.InputState != "":
		// Nobody may approve what they were not shown (X_APPROVAL_INPUT_UNREADABLE).
		fmt.Fprintf(w, "\nIts input cannot be shown here, so it cannot be approved here; it may be rejected.\n")
	default:
		fmt.Fprintf(w, "\nTo approve this exact input:\n  %s\n", display.Text(approve))
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

// decideBreakingGlass decides straight in the database, as its owner,
// around the API: an emergency path, recorded as the database login with
// the reason, and reported by `audit verify`. The engine refuses a login
// that is not the owner.
func (f *approvalsFlags) decideBreakingGlass(ctx context.Context, id string, approve bool, digest, note string) (string, error) {
	e, closeAll, err := f.engine(ctx)
	if err != nil {
		return "", err
	}
	defer closeAll()
	// The owner's own connection: not the engine's pool, whose connections
	// act as orangerail_runtime.
	owner, err := database.OpenDatasource(ctx, f.url)
	if err != nil {
		return "", err
	}
	defer owner.Close()
	// Under the deployment's limits, as every transaction the server runs:
	// a row another session holds locked is waited on lock_timeout, not
	// until someone kills the command.
	out, decided := e.DecideBreakGlassApproval(ctx, e.BoundAsStore(owner), f.tenant, f.reason,
		engine.Decision{ApprovalID: id, Approve: approve, Digest: digest, Note: note})
	if decided == nil {
		if out.Code != "" {
			return "", errcode.New(out.Code, fmt.Sprintf("approval %s: %s", id, out.Status), out.Err)
		}
		return "", fmt.Errorf("approval %s: %s (correlation %s): %w", id, out.Status, out.CorrelationID, out.Err)
	}
	return decided.DecidedBy, nil
}
