package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
	"github.com/orangerail/orangerail/internal/webhooks"
)

func newWebhooksCmd() *cobra.Command {
	var url, tenant string
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "List the approval events queued for webhooks, and send one again",
	}
	databaseURLFlag(cmd.PersistentFlags(), &url)
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "", "the tenant whose webhook messages to read (required)")
	// open checks --tenant and opens the database, as the runtime acts.
	open := func(ctx context.Context) (*pgxpool.Pool, error) {
		if err := requireTenant(tenant); err != nil {
			return nil, err
		}
		if err := database.ValidateTenantID(tenant); err != nil {
			return nil, err
		}
		pool, err := database.Open(ctx, url)
		if err != nil {
			return nil, err
		}
		// A mistyped tenant is refused, not listed as one with nothing.
		if err := engine.TenantExists(ctx, pool, tenant); err != nil {
			pool.Close()
			return nil, err
		}
		return pool, nil
	}

	var (
		status string
		limit  int32
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's webhook messages, newest first, with where each delivery stands",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return errcode.New(errcode.Usage, fmt.Sprintf("--limit must be a whole number 1 or more, not %d", limit), nil)
			}
			pool, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			msgs, err := webhooks.List(cmd.Context(), pool, tenant, store.WebhookState(status), limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), msgs)
			}
			return printWebhookMessages(cmd.OutOrStdout(), msgs)
		},
	}
	var states []string
	for _, s := range store.WebhookStates() {
		states = append(states, string(s))
	}
	list.Flags().StringVar(&status, "status", "", "only messages in this state ("+strings.Join(states, ", ")+")")
	list.Flags().Int32Var(&limit, "limit", 50, "at most this many")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	redeliver := &cobra.Command{
		Use:   "redeliver ID",
		Short: "Queue a message again for every endpoint that serves its tenant and subscribes to its event, its attempts reset; a running server sends it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := webhooks.Redeliver(cmd.Context(), pool, tenant, args[0], time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "message %s (%s of approval %s) queued again\n", m.ID, display.Text(string(m.Event)), m.ApprovalID)
			return nil
		},
	}
	cmd.AddCommand(list, redeliver)
	return cmd
}

func printWebhookMessages(out io.Writer, msgs []*store.WebhookMessage) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tEVENT\tAPPROVAL\tSTATE\tATTEMPTS\tOCCURRED\tLAST ERROR")
	for _, m := range msgs {
		lastError := ""
		if m.LastError != nil {
			lastError = *m.LastError
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, display.Text(string(m.Event)), m.ApprovalID, display.Text(string(m.State)),
			m.Attempts, m.OccurredAt.UTC().Format(time.RFC3339), display.Text(lastError))
	}
	return w.Flush()
}
