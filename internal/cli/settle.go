package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

func newAuditSettleCmd() *cobra.Command {
	var url, tenant, outcome, reason, config string
	cmd := &cobra.Command{
		Use:   "settle CORRELATION_ID",
		Short: "Record how an execution left unfinished (outcome_unknown) ended, as the database owner",
		Long: "Settle records, in the tenant's audit chain, how an execution that started and never\n" +
			"finished ended — an upstream write sent and never answered, a server gone mid-call — once\n" +
			"you have found out (the upstream's own records, its support): --outcome succeeded (the effect\n" +
			"took place) or failed (it did not), and --reason, what you found and where. The record is\n" +
			"the operator's, made as the database login (the owner's URL, the one `orangerail migrate`\n" +
			"runs with); both verifiers then count the execution finished, and list the record, with its\n" +
			"reason, among the operator's. It runs nothing and changes no approval. `audit verify` lists\n" +
			"each unfinished execution with its correlation id. One that started too recently to be over\n" +
			"(the config's limits: statement_timeout twice, lock_timeout and a few seconds) is refused: it\n" +
			"may still be running.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if tenant == "" {
				return errcode.New(errcode.Usage, "--tenant is required: the tenant whose execution to settle", nil)
			}
			if err := database.ValidateTenantID(tenant); err != nil {
				return err
			}
			if config == "" {
				return errcode.New(errcode.Usage, "--config is required: its limits say how long an execution can still be running", nil)
			}
			cfg, err := loadConfig(cmd.Context(), config)
			if err != nil {
				return err
			}
			owner, err := database.OpenDatasource(ctx, url)
			if err != nil {
				return err
			}
			defer owner.Close()
			s, err := engine.SettleExecution(ctx, database.Bound(owner, engine.StoreLimits(cfg.Limits)), tenant, args[0], engine.SettledOutcome(outcome), reason,
				engine.ExecutionBound(cfg.Limits), time.Now())
			if err != nil {
				return err
			}
			approval := "none"
			if s.ApprovalID != nil {
				approval = s.ApprovalID.String()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "settled: execution %s of %q in tenant %s, approval %s: %s, recorded as operator %q at %s\n",
				s.CorrelationID, s.Action, s.Tenant, approval, s.Outcome, s.Operator, s.At.Format(time.RFC3339))
			return nil
		},
	}
	databaseURLFlag(cmd.Flags(), &url)
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose execution to settle")
	cmd.Flags().StringVar(&outcome, "outcome", "", fmt.Sprintf("what the execution did: %q", engine.SettledOutcomes()))
	cmd.Flags().StringVar(&reason, "reason", "", "what you found, and where (required; recorded)")
	cmd.Flags().StringVar(&config, "config", os.Getenv("ORANGERAIL_CONFIG"), "the ontology config the deployment serves (default $ORANGERAIL_CONFIG): its limits say how long an execution can still be running")
	return cmd
}
