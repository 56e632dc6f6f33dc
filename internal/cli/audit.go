package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/term"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/metrics"
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Inspect and verify the hash-chained audit log",
	}
	cmd.AddCommand(newAuditVerifyCmd(), newAuditSettleCmd(), newAuditCheckpointCmd(), newAuditProveCmd(), newAuditCheckProofCmd(), newAuditCheckpointKeyCmd())
	return cmd
}

func newAuditVerifyCmd() *cobra.Command {
	var (
		url      string
		tenant   string
		asJSON   bool
		lagBound time.Duration
		// keys and keysFile are checkpoint keys the auditor holds.
		keys     []string
		keysFile string
		// requireCheckpoint makes a chain with no checkpoint a finding.
		requireCheckpoint bool
		// metricsFile receives the run's metrics for the node exporter's
		// textfile collector.
		metricsFile string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Verify each tenant's audit chain, unfinished executions and unaudited approvals",
		Long: "Verify streams each tenant's sealed audit chain and reports the first broken link\n" +
			"(changed, removed, reordered or forged records), records left unsealed longer than\n" +
			"--lag-bound (no replica sealed them), executions that started but never finished, and\n" +
			"consumed approvals with no audit record of their execution. Every signed checkpoint's note\n" +
			"must verify (with --key, under one of your keys), and the chain must still make each one's\n" +
			"root. It seals nothing.\n\n" +
			"Exit status: 0 when everything verifies, 1 when something was found, 2 when verification\n" +
			"could not run. With --metrics-file, the run's metrics (when it ended, whether it ran to the\n" +
			"end, tenants by result, findings by kind) are written there for the node exporter's textfile\n" +
			"collector, however the run ends.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			var reports []*engine.Report
			if metricsFile != "" {
				defer func() { err = writeVerifyMetrics(cmd.ErrOrStderr(), metricsFile, reports, err) }()
			}
			if tenant != "" {
				if err := database.ValidateTenantID(tenant); err != nil {
					return err
				}
			}
			var known note.Verifiers
			if len(keys) > 0 || keysFile != "" { // a keys file of no key is refused, not ignored
				if known, err = checkpointKeys(cmd.Context(), keys, keysFile); err != nil {
					return err
				}
			}
			pool, err := openToRead(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()

			if lagBound <= 0 {
				return errcode.New(errcode.AuditLagBoundInvalid, fmt.Sprintf("--lag-bound must be positive, not %s", lagBound), nil)
			}
			debug.SetGCPercent(engine.VerifyGCPercent)
			opts := engine.VerifyOptions{LagBound: lagBound, CheckpointKeys: known, RequireCheckpoint: requireCheckpoint}
			if !asJSON && isTerminal(cmd.ErrOrStderr()) {
				opts.ProgressFunc = progressPrinter(cmd.ErrOrStderr())
			}
			tenants, listing, err := engine.VerifyTenants(ctx, pool)
			if err != nil {
				return err
			}
			switch {
			case tenant != "":
				if err := readable(tenant, tenants, listing); err != nil {
					return err
				}
				tenants = []string{tenant}
			case listing == engine.ListingGranted && len(tenants) == 0:
				// Not "no records yet": this login sees nothing, whatever
				// the database holds — a scheduled run must not go green.
				return errcode.New(errcode.TenantUnknown, "this auditor login is granted no tenant, so it can verify none: "+
					"grant it one with `orangerail auditor grant <login> --tenant <tenant>` as the schema owner", nil)
			case listingNotes[listing] != "":
				fmt.Fprintln(cmd.ErrOrStderr(), "audit verify: "+listingNotes[listing])
			}
			// Tenants that could not be verified are said after the
			// reports of those that could, and the run exits 2.
			reports, incomplete := engine.VerifyEach(ctx, pool, tenants, opts)
			if incomplete != nil && len(reports) == 0 {
				return incomplete
			}
			if opts.ProgressFunc != nil {
				fmt.Fprint(cmd.ErrOrStderr(), "\r\033[K")
			}

			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), reports); err != nil {
					return err
				}
			} else {
				printReports(cmd.OutOrStdout(), reports)
			}
			if incomplete != nil {
				return incomplete
			}
			for _, r := range reports {
				if !r.OK() {
					return errFindings
				}
			}
			return nil
		},
	}
	databaseURLFlag(cmd.Flags(), &url)
	cmd.Flags().StringVar(&tenant, "tenant", "", "verify only this tenant (default: every tenant)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reports as JSON")
	cmd.Flags().DurationVar(&lagBound, "lag-bound", engine.DefaultSealLagBound,
		"how long a record may stay unsealed before it is a finding, counted from when the database wrote it (leave room for a transaction's length: it is sealed once committed)")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "a checkpoint key's public key, <name>+<hash>+<keydata> (repeat for old keys): "+
		"every stored checkpoint must be signed by one of them, not merely by the key stored with it")
	cmd.Flags().StringVar(&keysFile, "keys-file", "", "a file of checkpoint public keys, one a line (# comments)")
	cmd.Flags().BoolVar(&requireCheckpoint, "require-checkpoint", false,
		"a tenant with sealed records and no signed checkpoint is a finding (for a deployment that signs them; a new tenant has none until the first interval)")
	cmd.Flags().StringVar(&metricsFile, "metrics-file", "", "write the run's metrics to this file (name it *.prom), for the node exporter's textfile collector")
	return cmd
}

// listingNotes say what a listing of tenants (engine.VerifyTenants) that
// is not whole leaves out: a run says it on stderr, and an unknown
// --tenant's error says why it may be unknown.
var listingNotes = map[engine.Listing]string{
	engine.ListingKnown: "this login cannot bypass Row Level Security, so only tenants with a tenant row or a chain head are listed: " +
		"a chain whose tenant row and head were deleted is found by a superuser or a BYPASSRLS login",
	engine.ListingGranted: "an auditor login lists the tenants granted to it (orangerail auditor grant), and no other",
}

// readable refuses a --tenant that is not among the tenants a login may
// read (engine.VerifyTenants), saying why it may not be listed.
func readable(tenant string, tenants []string, listing engine.Listing) error {
	if !slices.Contains(tenants, tenant) {
		return engine.UnknownTenant(tenant, listingNotes[listing])
	}
	return nil
}

// openToRead opens the pool the audit commands that read a chain (verify,
// checkpoint, prove) read with: the runtime role's (database.Open), or,
// for a login that may not act as it, the login's own as an auditor
// (database.OpenAuditor), which reads only the tenants granted to it.
func openToRead(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := database.Open(ctx, url)
	if errcode.Of(err) != errcode.DatabaseRoleMissing {
		return pool, err
	}
	pool, auditorErr := database.OpenAuditor(ctx, url)
	if auditorErr == nil {
		return pool, nil
	}
	if errcode.Of(auditorErr) == errcode.DatabaseRoleMissing {
		return nil, errcode.New(errcode.DatabaseRoleMissing,
			"this login may neither act as "+database.RuntimeRole+" nor read as an auditor (a member of "+database.AuditorRole+")", err)
	}
	return nil, auditorErr
}

func writeVerifyMetrics(w io.Writer, path string, reports []*engine.Report, runErr error) error {
	failed := runErr
	if errors.Is(runErr, errFindings) {
		failed = nil // it ran to the end
	}
	if err := metrics.WriteVerifyFile(path, reports, failed, time.Now()); err != nil {
		if runErr != nil {
			fmt.Fprintf(w, "orangerail: %v\n", err)
			return runErr
		}
		return err
	}
	return runErr
}

// printReports writes a summary a person reads after an incident.
func printReports(w io.Writer, reports []*engine.Report) {
	if len(reports) == 0 {
		fmt.Fprintln(w, "no tenants have audit records yet")
		return
	}
	for _, r := range reports {
		status := "OK"
		if !r.OK() {
			status = "FAILED"
		}
		fmt.Fprintf(w, "tenant %s: %s — %d records, head at seq %d", r.Tenant, status, r.Records, r.HeadSeq)
		if r.Pending > 0 {
			fmt.Fprintf(w, ", %d awaiting their seal", r.Pending)
		}
		if r.Checkpoints > 0 && r.CheckpointFindingsTotal == 0 {
			fmt.Fprintf(w, ", %d signed checkpoint(s) checked (the latest of size %d)", r.Checkpoints, r.CheckpointSize)
		}
		fmt.Fprintln(w)
		if r.NothingVisible {
			fmt.Fprintln(w, "  nothing to verify: the tenant has no chain head and no sealed record — an id mistyped, or a chain deleted whole [nothing_visible]")
		}
		if b := r.Break; b != nil {
			fmt.Fprintf(w, "  chain broken at seq %d: %s\n    expected hash %s\n    found hash    %s\n", b.Seq, describeProblem(b.Problem), b.Expected, b.Found)
		}
		for _, c := range r.CheckpointFindings {
			if c.Problem == engine.CheckpointMissing {
				fmt.Fprintf(w, "  no signed checkpoint: %s [%s]\n", checkpointText[c.Problem], c.Problem)
				continue
			}
			fmt.Fprintf(w, "  the signed checkpoint of size %d disagrees: %s [%s]\n    signed root %s\n", c.Size, checkpointText[c.Problem], c.Problem, c.Expected)
			if c.Reason != "" {
				fmt.Fprintf(w, "    the note: %s\n", noteText[c.Reason])
			}
			if c.Found != nil {
				fmt.Fprintf(w, "    chain makes %s\n", c.Found)
			}
		}
		if more := r.CheckpointFindingsTotal - int64(len(r.CheckpointFindings)); more > 0 {
			fmt.Fprintf(w, "  … and %d more checkpoint finding(s) (the first %d are listed, here and in --json)\n", more, len(r.CheckpointFindings))
		}
		listFindings(w, r.Unsealed, r.UnsealedTotal, "record(s) unsealed past the bound (no replica sealed them: is any running?)", func(u engine.UnsealedRecord) string {
			return fmt.Sprintf("%s  %s  action %q  correlation %q  unsealed for %s", u.At.UTC().Format(time.RFC3339), u.Phase, u.Action,
				u.CorrelationID, u.UnsealedFor.Round(time.Second))
		})
		listFindings(w, r.Unfinished, r.UnfinishedTotal, "execution(s) started but never finished: an effect that may have acted with no recorded end (an upstream write unanswered, a commit unconfirmed, an answer the record could not hold) or a server that stopped mid-call; find out what it did, then settle it with `orangerail audit settle`", func(u engine.UnfinishedExecution) string {
			return fmt.Sprintf("seq %d  %s  action %q  correlation %q", u.Seq, u.At.UTC().Format(time.RFC3339), u.Action, u.CorrelationID)
		})
		listFindings(w, r.Unaudited, r.UnauditedTotal, "consumed approval(s) with no audit record of their execution", func(u engine.UnauditedApproval) string {
			return fmt.Sprintf("approval %s  action %q  consumed %s", u.ApprovalID, u.Action, u.ConsumedAt.UTC().Format(time.RFC3339))
		})
		listFindings(w, r.UnexplainedApprovals, r.UnexplainedApprovalsTotal, "approval(s) whose status the chain does not explain (written around orangerail)", func(u engine.UnexplainedApproval) string {
			return fmt.Sprintf("approval %s  action %q  status %s  missing %v", u.ApprovalID, u.Action, u.Status, u.Missing)
		})
		listFindings(w, r.UnexplainedExecutions, r.UnexplainedExecutionsTotal, "execution record(s) of an approval the chain does not show staged and approved", func(u engine.UnexplainedExecution) string {
			return fmt.Sprintf("seq %d  %s  approval %s  action %q  missing %v", u.Seq, u.Phase, u.ApprovalID, u.Action, u.Missing)
		})
		listFindings(w, r.BreakGlass, r.BreakGlassTotal, "operator record(s) by the database owner — break-glass decisions, settled executions, auditors granted or revoked or their passwords set (reported, not a failure)", func(b engine.BreakGlassDecision) string {
			line := fmt.Sprintf("seq %d  %s  %s", b.Seq, b.At.UTC().Format(time.RFC3339), b.Phase)
			if b.Phase.OfAuditor() {
				// Of an access, not of an approval, and given no reason.
				return line + fmt.Sprintf("  auditor %q  operator %q", b.Auditor, b.Operator)
			}
			approval := "none"
			if b.ApprovalID != nil {
				approval = b.ApprovalID.String()
			}
			line += fmt.Sprintf("  approval %s  operator %q  reason %q", approval, b.Operator, b.Reason)
			if b.Phase == engine.PhaseExecutionSettled {
				line += fmt.Sprintf("  outcome %q", b.SettledOutcome)
			}
			return line
		})
	}
}

// listFindings prints how many findings of one kind there are (total)
// and the first few of those the report lists, one a line.
func listFindings[T any](w io.Writer, findings []T, total int64, what string, line func(T) string) {
	const listed = 10
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "  %d %s:\n", total, what)
	for _, f := range findings[:min(len(findings), listed)] {
		fmt.Fprintf(w, "    %s\n", line(f))
	}
	if more := total - int64(min(len(findings), listed)); more > 0 {
		fmt.Fprintf(w, "    … and %d more (--json lists the first %d)\n", more, len(findings))
	}
}

var problemText = map[engine.Problem]string{
	engine.ProblemSeqGap:       "a record is missing before this one (seq does not follow)",
	engine.ProblemPrevHash:     "this record does not link to the one before it (records removed, reordered or replaced)",
	engine.ProblemHash:         "this record's bytes do not match its hash (the record was changed)",
	engine.ProblemColumns:      "this record's queryable columns disagree with its hashed bytes",
	engine.ProblemHeadMismatch: "the chain head does not name the last record: records were removed from the end, or the head row was rewritten or deleted (a head at seq 0 over records is a deleted one)",
}

var noteText = map[engine.NoteReason]string{
	engine.NoteKeyInvalid: "the public key stored with it is not a signed-note key",
	engine.NoteNotSigned:  "none of the keys it was checked under signed it (--key, else the key stored with it), or it is not a signed note",
	engine.NoteOtherTree:  "it is signed, and names another size or root than its row",
	engine.NoteOtherLog:   "it is signed, and is a checkpoint of another log: its origin is not its row's, or not of its row's tenant",
}

var checkpointText = map[engine.CheckpointProblem]string{
	engine.CheckpointNoteInvalid:    "its stored note does not verify under your --key (else the key stored with it), or names another tree",
	engine.CheckpointRecordsMissing: "the chain holds fewer sealed records than it covers (records removed since it was signed)",
	engine.CheckpointRootMismatch:   "the chain no longer makes its root (a record it covers was rewritten since it was signed)",
	engine.CheckpointMissing:        "the chain holds sealed records and none was signed, or every checkpoint was removed (--require-checkpoint)",
}

func describeProblem(p engine.Problem) string {
	if s, ok := problemText[p]; ok {
		return fmt.Sprintf("%s [%s]", s, p)
	}
	return string(p)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressPrinter redraws one status line at most ten times a second.
func progressPrinter(w io.Writer) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		if now := time.Now(); now.Sub(last) >= 100*time.Millisecond || done == total {
			last = now
			fmt.Fprintf(w, "\r\033[Kverifying: %d / %d records (%.0f%%)", done, total, 100*float64(done)/float64(max(total, 1)))
		}
	}
}
