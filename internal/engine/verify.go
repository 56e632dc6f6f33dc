package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// Problem names how a chain is broken. orangerail.audit_verify reports the
// same problems under the same names, checked in the same order.
type Problem string

// The problems, in the order they are checked for each row.
const (
	ProblemSeqGap       Problem = "seq_gap"            // seq does not follow the previous row's
	ProblemPrevHash     Problem = "prev_hash_mismatch" // prev_hash is not the previous row's hash
	ProblemHash         Problem = "hash_mismatch"      // hash is not ChainHash of the row
	ProblemColumns      Problem = "column_mismatch"    // queryable columns are not the entry's
	ProblemHeadMismatch Problem = "head_mismatch"      // the head does not name the last row
)

// ChainBreak is the first broken link of a chain. Expected is the hash the
// row must have given the previous row's stored hash; Found is the hash
// stored. For ProblemHeadMismatch, Seq is the head's seq, Expected the last
// row's hash and Found the head's.
type ChainBreak struct {
	Seq      int64   `json:"seq"`
	Problem  Problem `json:"problem"`
	Expected Hash    `json:"expected_hash"`
	Found    Hash    `json:"found_hash"`
}

// UnfinishedExecution is an execution_started record that no later
// execution_succeeded or execution_failed record of its correlation id closes.
type UnfinishedExecution struct {
	// Seq is 0 while the record awaits its seal.
	Seq           int64     `json:"seq"`
	CorrelationID string    `json:"correlation_id"`
	Action        string    `json:"action,omitempty"`
	At            time.Time `json:"at"`
	written       int64     // the order the checker met it in
}

// UnauditedApproval is a consumed approval with no audit record of its
// execution: a crash between the consume and the audit append.
type UnauditedApproval struct {
	ApprovalID uuid.UUID `json:"approval_id"`
	Action     string    `json:"action"`
	ConsumedAt time.Time `json:"consumed_at"`
}

// UnexplainedApproval is an approval whose status the chain does not
// explain: Missing are the records its status needs (RequiredPhases) that
// the chain lacks. Approvals change only through functions that append
// those records, so one is a row written around orangerail.
type UnexplainedApproval struct {
	ApprovalID uuid.UUID            `json:"approval_id"`
	Action     string               `json:"action"`
	Status     store.ApprovalStatus `json:"status"`
	Missing    []Phase              `json:"missing"`
}

// UnexplainedExecution is a record that follows the consume of an approval
// (FollowsConsume) but is not preceded in the chain by that approval's
// staged and approved records: nobody can be shown to have approved what
// ran.
type UnexplainedExecution struct {
	Seq        int64     `json:"seq"`
	ApprovalID uuid.UUID `json:"approval_id"`
	Phase      Phase     `json:"phase"`
	Action     string    `json:"action,omitempty"`
	Missing    []Phase   `json:"missing"`
}

// BreakGlassDecision is a record an operator made around the API
// (DecideBreakGlass, SettleExecution): who, when, on which approval, the
// reason given and, of an execution settled, the outcome found.
type BreakGlassDecision struct {
	Seq            int64          `json:"seq"`
	ApprovalID     *uuid.UUID     `json:"approval_id,omitempty"`
	Phase          Phase          `json:"phase"`
	Operator       string         `json:"operator"`
	At             time.Time      `json:"at"`
	Reason         string         `json:"reason"`
	SettledOutcome SettledOutcome `json:"settled_outcome,omitempty"`
	// Auditor is the login a record of an auditor names (Phase.OfAuditor:
	// its AuditorMember).
	Auditor string `json:"auditor,omitempty"`
}

// UnsealedRecord is a record no sealer sealed within the bound: while any
// replica runs, none should be. Until sealed it has no place in the chain,
// and nothing proves it was not changed since it was written.
type UnsealedRecord struct {
	CorrelationID string        `json:"correlation_id"`
	Phase         Phase         `json:"phase"`
	Action        string        `json:"action,omitempty"`
	At            time.Time     `json:"at"`
	UnsealedFor   time.Duration `json:"unsealed_for_ns"`
}

// Report is what verifying one tenant found.
type Report struct {
	Tenant string `json:"tenant"`
	// Records is how many sealed records the chain holds.
	Records int64 `json:"records"`
	// Pending is how many committed records await their seal: not in the
	// chain yet, and a finding only once unsealed past the bound
	// (Unsealed).
	Pending int64 `json:"pending_records"`
	// Each list of findings holds the first ReportListMax of its kind,
	// and its Total counts them all: a report's size stays bounded however
	// many there are (the SQL function named in each list's comment lists
	// them all).
	//
	// Unsealed: orangerail.audit_unsealed.
	Unsealed      []UnsealedRecord `json:"unsealed_records"`
	UnsealedTotal int64            `json:"unsealed_records_total"`
	HeadSeq       int64            `json:"head_seq"`
	HeadHash      Hash             `json:"head_hash"`
	// NothingVisible: the tenant has no head and no sealed record, so
	// nothing was checked (orangerail.audit_verify's nothing_visible) —
	// an id mistyped, or a chain deleted whole. A tenant made before its
	// first record has a head, and an empty chain that is whole.
	NothingVisible bool        `json:"nothing_visible"`
	Break          *ChainBreak `json:"chain_break,omitempty"`
	// Checkpoints is how many signed checkpoints the chain was held to,
	// CheckpointSize the latest's size (0: the tenant has none), and
	// CheckpointFindings what they say of the chain where they disagree,
	// the first maxCheckpointFindings by size (CheckpointFindingsTotal
	// counts them all).
	Checkpoints             int64               `json:"checkpoints"`
	CheckpointSize          int64               `json:"checkpoint_size"`
	CheckpointFindings      []CheckpointFinding `json:"checkpoint_findings"`
	CheckpointFindingsTotal int64               `json:"checkpoint_findings_total"`
	// Unfinished: orangerail.audit_unfinished.
	Unfinished      []UnfinishedExecution `json:"unfinished_executions"`
	UnfinishedTotal int64                 `json:"unfinished_executions_total"`
	// Unaudited: orangerail.approvals_unaudited.
	Unaudited      []UnauditedApproval `json:"unaudited_approvals"`
	UnauditedTotal int64               `json:"unaudited_approvals_total"`
	// UnexplainedApprovals: orangerail.approvals_unexplained.
	UnexplainedApprovals      []UnexplainedApproval `json:"unexplained_approvals"`
	UnexplainedApprovalsTotal int64                 `json:"unexplained_approvals_total"`
	// UnexplainedExecutions: orangerail.audit_unexplained_executions.
	UnexplainedExecutions      []UnexplainedExecution `json:"unexplained_executions"`
	UnexplainedExecutionsTotal int64                  `json:"unexplained_executions_total"`
	// BreakGlass lists the records an operator made, in the order they were
	// written (orangerail.audit_break_glass lists them all).
	BreakGlass      []BreakGlassDecision `json:"break_glass"`
	BreakGlassTotal int64                `json:"break_glass_total"`
}

// ReportListMax is how many findings of one kind a Report lists.
const ReportListMax = 1000

// OK reports whether the tenant's audit verified without a finding.
// Break-glass decisions are reported, not findings: they are legitimate,
// made by the database's owner, and visible in the report; a forged one
// would have to be appended around audit_append, which breaks the chain.
func (r *Report) OK() bool {
	return !r.NothingVisible && r.Break == nil && r.CheckpointFindingsTotal == 0 && r.UnsealedTotal == 0 && r.UnfinishedTotal == 0 && r.UnauditedTotal == 0 &&
		r.UnexplainedApprovalsTotal == 0 && r.UnexplainedExecutionsTotal == 0
}

// VerifyOptions tunes verification. The zero value is ready to use.
type VerifyOptions struct {
	// PageSize is how many records a batch holds at most: the chain
	// streams in batches, a few per CPU in flight, so memory use is
	// bounded by it (and by VerifyBatchBytes). Defaults to
	// VerifyPageSizeDefault.
	PageSize int32
	// ProgressFunc, when set, is called after each batch with the records
	// checked so far and the chain's length, from one goroutine at a time.
	ProgressFunc func(done, total int64)
	// LagBound is how long a record may stay unsealed before it is a
	// finding. Defaults to DefaultSealLagBound.
	LagBound time.Duration
	// CheckpointKeys, when set, are the checkpoint keys the auditor holds:
	// every stored checkpoint's note must be signed by one of them. Unset,
	// each is checked under the key stored with it, which tells a note
	// changed since it was signed but not a checkpoint the database's
	// owner signed with a key of their own.
	CheckpointKeys note.Verifiers
	// RequireCheckpoint makes a chain of sealed records with no stored
	// checkpoint a finding (CheckpointMissing): for a deployment that signs
	// them, where none means they were never signed or were removed.
	RequireCheckpoint bool

	// checkpointPage is how many checkpoints are read at a time (notePage
	// when 0): the tests' lever on the pages and the chain's segments.
	checkpointPage int32
	// listMax is how many findings of a kind the report lists
	// (ReportListMax when 0): the tests' lever.
	listMax int32
}

// VerifyPageSizeDefault is the default VerifyOptions.PageSize.
const VerifyPageSizeDefault = 4096

// VerifyBatchBytes bounds the bytes of one batch of records (a record
// longer than that makes a batch of its own).
const VerifyBatchBytes = 2 << 20

// VerifyGCPercent is the garbage-collection target `orangerail audit verify`
// sets for its process. Verifying allocates a little for every record, and
// its live heap is a few batches, so a higher target trades a bounded
// amount of memory (tens of MiB) for more records per second.
const VerifyGCPercent = 400

// VerifyTenant verifies one tenant's audit: the sealed chain's integrity
// (the first broken link), records left unsealed past the bound,
// executions started but never finished, and consumed approvals with no
// post-consume record, and the chain against every signed checkpoint. It
// streams the chain with COPY (one, or one a page of the tenant's
// checkpoints) inside one read-only snapshot, so it never holds the chain
// in memory and sees the chain, its head and its checkpoints as of one
// instant while appends go on. It seals nothing:
// what it finds unsealed is reported as it is. The relations between
// records (an execution's finish after its start) count the committed
// records awaiting their seal too, in the order they were written.
func VerifyTenant(ctx context.Context, conn database.TxBeginner, tenant string, opts VerifyOptions) (*Report, error) {
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = VerifyPageSizeDefault
	}
	lagBound := cmp.Or(opts.LagBound, DefaultSealLagBound)
	listMax := cmp.Or(opts.listMax, ReportListMax)
	report := &Report{Tenant: tenant, Unsealed: []UnsealedRecord{}, Unfinished: []UnfinishedExecution{}, Unaudited: []UnauditedApproval{},
		UnexplainedApprovals: []UnexplainedApproval{}, UnexplainedExecutions: []UnexplainedExecution{}, BreakGlass: []BreakGlassDecision{}}
	txOpts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := database.InTenant(ctx, conn, tenant, txOpts, func(tx pgx.Tx) error {
		st := store.New(tx)
		report.HeadSeq, report.HeadHash = 0, Genesis()
		head, err := st.AuditHead(ctx, tenant)
		headless := errors.Is(err, store.ErrNotFound)
		var headSeqMissing bool
		switch {
		case err == nil:
			report.HeadSeq, report.HeadHash, headSeqMissing = head.Seq, head.Hash, head.SeqMissing
		case !headless:
			return fmt.Errorf("read audit head: %w", err)
		}

		// The signed checkpoints, read in the chain's snapshot, a page at a
		// time: the chain is streamed up to each page's last size, then
		// the next page is read, so that the check holds a few pages of
		// them at most however many there are.
		signed := newCheckpointCheck(opts.CheckpointKeys, defaultWorkers(), cmp.Or(opts.checkpointPage, notePage))
		upto, more, err := signed.read(ctx, st, tenant, 0)
		if err != nil {
			return err
		}
		chain := newChainChecker(tenant, int(listMax))
		anySigned := upto > 0
		cfg := streamConfig{tenant: tenant, rows: int(pageSize), bytes: VerifyBatchBytes, workers: defaultWorkers(), leaves: anySigned,
			check: func(b *batch) {
				chain.checkBatch(b)
				if anySigned {
					for i := range b.res {
						signed.add(b.res[i].seq, b.res[i].leaf)
					}
				}
				report.Records += int64(len(b.rows))
				if opts.ProgressFunc != nil {
					opts.ProgressFunc(report.Records, max(report.HeadSeq, report.Records))
				}
			}}
		copyChain := func(w chainSink) error {
			copied := int64(0)
			for more {
				if err := st.AuditChainCopy(ctx, w, copied, upto); err != nil {
					return err
				}
				if err := w.EndSegment(); err != nil {
					return err
				}
				copied = upto
				if upto, more, err = signed.read(ctx, st, tenant, upto); err != nil {
					return err
				}
			}
			return st.AuditChainCopy(ctx, w, copied, 0)
		}
		if _, err := streamChain(ctx, cfg, copyChain); err != nil {
			return err
		}
		// As orangerail.audit_verify judges it: records awaiting their
		// seal are not in the chain, and do not make it visible.
		report.NothingVisible = headless && report.Records == 0
		if err := chain.confirm(ctx, st, tenant); err != nil {
			return err
		}
		if err := chain.pending(ctx, st, report); err != nil {
			return err
		}
		chain.finish(report, headSeqMissing)
		signed.finish(report, opts.RequireCheckpoint)
		unsealed, total, err := st.AuditListUnsealed(ctx, tenant, lagBound, listMax)
		if err != nil {
			return fmt.Errorf("read unsealed records: %w", err)
		}
		for _, u := range unsealed {
			report.Unsealed = append(report.Unsealed, UnsealedRecord{CorrelationID: u.CorrelationID, Phase: Phase(u.Phase),
				Action: u.Action, At: u.At, UnsealedFor: u.UnsealedFor})
		}
		report.UnsealedTotal = total

		unaudited, total, err := st.ApprovalListUnaudited(ctx, tenant, listMax)
		if err != nil {
			return fmt.Errorf("read consumed approvals: %w", err)
		}
		for _, u := range unaudited {
			report.Unaudited = append(report.Unaudited, UnauditedApproval{ApprovalID: u.ApprovalID, Action: u.Action, ConsumedAt: u.ConsumedAt})
		}
		report.UnauditedTotal = total
		return explain(ctx, st, report, listMax)
	})
	if err != nil {
		return nil, err
	}
	return report, nil
}

// explain adds to report the approvals and executions the chain does not
// explain. Postgres answers both from its indexes on the snapshot the
// chain was read in, so memory stays bounded however many approvals a
// tenant has.
func explain(ctx context.Context, st *store.Store, report *Report, listMax int32) error {
	approvals, total, err := st.ApprovalListUnexplained(ctx, report.Tenant, listMax)
	if err != nil {
		return fmt.Errorf("read unexplained approvals: %w", err)
	}
	for _, a := range approvals {
		report.UnexplainedApprovals = append(report.UnexplainedApprovals,
			UnexplainedApproval{ApprovalID: a.ApprovalID, Action: a.Action, Status: a.Status, Missing: phasesOf(a.Missing)})
	}
	report.UnexplainedApprovalsTotal = total
	executions, total, err := st.AuditListUnexplainedExecutions(ctx, report.Tenant, listMax)
	if err != nil {
		return fmt.Errorf("read unexplained executions: %w", err)
	}
	for _, x := range executions {
		report.UnexplainedExecutions = append(report.UnexplainedExecutions, UnexplainedExecution{
			Seq: x.Seq, ApprovalID: x.ApprovalID, Phase: Phase(x.Phase), Action: x.Action, Missing: phasesOf(x.Missing)})
	}
	report.UnexplainedExecutionsTotal = total
	return nil
}

func phasesOf(names []string) []Phase {
	phases := make([]Phase, len(names))
	for i, n := range names {
		phases[i] = Phase(n)
	}
	return phases
}

// VerifyAll verifies every tenant VerifyTenants lists (VerifyEach).
func VerifyAll(ctx context.Context, conn database.TxBeginner, opts VerifyOptions) ([]*Report, error) {
	tenants, _, err := VerifyTenants(ctx, conn)
	if err != nil {
		return nil, err
	}
	return VerifyEach(ctx, conn, tenants, opts)
}

// VerifyEach verifies each of tenants, in order. A tenant that could not
// be verified does not stop the others: their reports are returned with
// the joined errors of those that could not, so that one unreadable chain
// hides no other tenant's findings.
func VerifyEach(ctx context.Context, conn database.TxBeginner, tenants []string, opts VerifyOptions) ([]*Report, error) {
	reports := make([]*Report, 0, len(tenants))
	var errs []error
	for _, t := range tenants {
		r, err := VerifyTenant(ctx, conn, t, opts)
		if err != nil {
			if ctx.Err() != nil {
				return reports, err
			}
			errs = append(errs, fmt.Errorf("verify tenant %q: %w", t, err))
			continue
		}
		reports = append(reports, r)
	}
	return reports, errors.Join(errs...)
}

// Listing says which tenants VerifyTenants could list.
type Listing int

const (
	// ListingWhole is every tenant with a row, a chain head or a record:
	// the login bypasses Row Level Security (a superuser, or BYPASSRLS).
	ListingWhole Listing = iota
	// ListingKnown is every tenant with a row or a chain head: the login
	// sees records only within a tenant's scope, so a chain whose tenant
	// row and head were deleted is not found.
	ListingKnown
	// ListingGranted is the tenants granted to an auditor login
	// (database.OpenAuditor), which may read no other.
	ListingGranted
)

// VerifyTenants lists the tenants a verification reads, in id order, and
// says which they are. On a pool of the runtime role it is every tenant
// with a row or a chain head (Tenants) and, when the login may bypass Row
// Level Security (a superuser, or BYPASSRLS), every tenant with a record,
// read with the login's own rights rather than the runtime role's: a chain
// whose tenant row and head were deleted is listed, and verified, only
// then (ListingWhole). Any other such login sees records only within a
// tenant's scope, so it cannot find a tenant it does not already know
// (ListingKnown). An auditor login's are the tenants granted to it
// (ListingGranted).
func VerifyTenants(ctx context.Context, conn database.TxBeginner) (tenants []string, listing Listing, err error) {
	tenants, err = readOnly(ctx, conn, func(st *store.Store) ([]string, error) {
		auditor, err := st.SessionActsAsAuditor(ctx)
		switch {
		case err != nil:
			return nil, err
		case auditor:
			listing = ListingGranted
			return st.AuditorGrantedTenants(ctx)
		}
		whole, err := st.SessionActAsLoginBypassingRLS(ctx)
		if err != nil {
			return nil, err
		}
		if listing = ListingKnown; whole {
			listing = ListingWhole
		}
		return st.TenantList(ctx)
	})
	return tenants, listing, err
}

// Tenants lists the database's tenants in id order.
func Tenants(ctx context.Context, conn database.TxBeginner) ([]string, error) {
	return readOnly(ctx, conn, func(st *store.Store) ([]string, error) { return st.TenantList(ctx) })
}

// readOnly runs read in a read-only transaction of conn that names no
// tenant, for what reads across tenants (their ids, never their rows).
func readOnly[T any](ctx context.Context, conn database.TxBeginner, read func(*store.Store) (T, error)) (T, error) {
	var v T
	err := database.Tenantless(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		v, err = read(store.New(tx))
		return err
	})
	return v, err
}

// TenantExists reports whether a tenant of that id exists.
func TenantExists(ctx context.Context, conn database.TxBeginner, tenant string) error {
	tenants, err := Tenants(ctx, conn)
	if err != nil {
		return err
	}
	if !slices.Contains(tenants, tenant) {
		return UnknownTenant(tenant, "")
	}
	return nil
}

// UnknownTenant is the error of a tenant a listing does not hold, with why
// it may not, when the listing is not whole.
func UnknownTenant(tenant, why string) error {
	msg := fmt.Sprintf("no tenant %q in this database", tenant)
	if why != "" {
		msg += " (" + why + ")"
	}
	return errcode.New(errcode.TenantUnknown, msg, nil)
}

// chainChecker walks one chain in seq order and keeps the first break and
// the executions still open.
type chainChecker struct {
	tenant   string
	prevSeq  int64
	prevHash Hash // a copy: the rows' bytes go back to the stream
	brk      *ChainBreak
	// open are the executions started and not finished yet, by
	// correlation id. It holds every one: a later record may finish any.
	open map[string][]UnfinishedExecution
	// breakGlass are the first listMax operators' records, in the order
	// written, of breakGlassTotal.
	breakGlass      []BreakGlassDecision
	breakGlassTotal int64
	listMax         int
	// written counts the records related so far: their order.
	written int64
	// judgedFirst and judgedLast span the records before the first break
	// whose columns match as their entries read here, and whose entries
	// the server must say it reads (rowResult.askServer): confirm asks it.
	// Two numbers, not a list, so that memory stays bounded whatever a
	// chain holds.
	judgedFirst, judgedLast int64
}

func newChainChecker(tenant string, listMax int) *chainChecker {
	return &chainChecker{tenant: tenant, prevHash: Genesis(), open: map[string][]UnfinishedExecution{}, listMax: listMax}
}

// checkBatch checks a batch of rows that follows the rows already checked;
// the workers have done each row's own part.
func (c *chainChecker) checkBatch(b *batch) {
	for i := range b.rows {
		row, res := &b.rows[i], &b.res[i]
		if i == 0 {
			res.expected = linkSum(c.prevHash, res.seq, res.entryHash)
			res.hashOK = bytes.Equal(row[store.AuditChainHash], res.expected[:])
		}
		c.check(row, res)
	}
}

func (c *chainChecker) check(row *chainRow, res *rowResult) {
	hash := row[store.AuditChainHash]
	if c.brk == nil {
		problem := Problem("")
		switch {
		case res.seq != c.prevSeq+1:
			problem = ProblemSeqGap
		case !bytes.Equal(row[store.AuditChainPrevHash], c.prevHash):
			problem = ProblemPrevHash
		case !res.hashOK:
			problem = ProblemHash
		case !res.columnsOK:
			problem = ProblemColumns
		}
		switch {
		case problem != "":
			c.brk = &ChainBreak{Seq: res.seq, Problem: problem, Expected: bytes.Clone(res.expected[:]), Found: bytes.Clone(hash)}
		case res.askServer:
			if c.judgedFirst == 0 {
				c.judgedFirst = res.seq
			}
			c.judgedLast = res.seq
		}
	}
	c.prevSeq, c.prevHash = res.seq, append(c.prevHash[:0], hash...)
	// The relations read a row's columns only where they need them: this
	// runs once per record of the chain.
	c.written++
	if string(row[store.AuditChainActorKind]) == string(ActorOperator) && c.listBreakGlass() {
		at, _ := timestamptz(row[store.AuditChainAt])
		var approval *uuid.UUID
		if id, err := uuid.FromBytes(row[store.AuditChainApprovalID]); err == nil {
			approval = &id
		}
		c.breakGlass = append(c.breakGlass, operatorRecord(BreakGlassDecision{Seq: res.seq, ApprovalID: approval,
			Phase: Phase(row[store.AuditChainPhase]), Operator: string(row[store.AuditChainActor]), At: at}, row[store.AuditChainEntry]))
	}
	switch phase := Phase(string(row[store.AuditChainPhase])); {
	case phase == PhaseExecutionStarted:
		var action string
		if a := row[store.AuditChainAction]; a != nil {
			action = string(a)
		}
		at, _ := timestamptz(row[store.AuditChainAt])
		c.started(UnfinishedExecution{Seq: res.seq, CorrelationID: string(row[store.AuditChainCorrelationID]), Action: action, At: at})
	case phase.Finishes():
		delete(c.open, string(row[store.AuditChainCorrelationID]))
	}
}

// relatePending follows a record awaiting its seal, after the sealed
// chain, in the relations check follows a sealed one in.
func (c *chainChecker) relatePending(r *store.AuditPending) {
	c.written++
	if r.ActorKind == string(ActorOperator) && c.listBreakGlass() {
		c.breakGlass = append(c.breakGlass, operatorRecord(BreakGlassDecision{ApprovalID: r.ApprovalID, Phase: Phase(r.Phase), Operator: r.Actor,
			At: r.At}, r.Entry))
	}
	switch phase := Phase(r.Phase); {
	case phase == PhaseExecutionStarted:
		c.started(UnfinishedExecution{CorrelationID: r.CorrelationID, Action: deref(r.Action), At: r.At})
	case phase.Finishes():
		delete(c.open, r.CorrelationID)
	}
}

// listBreakGlass counts an operator's record and reports whether it is
// among the first listMax, to be listed.
func (c *chainChecker) listBreakGlass() bool {
	c.breakGlassTotal++
	return c.breakGlassTotal <= int64(c.listMax)
}

// started opens an execution until a record of its correlation id
// finishes it.
func (c *chainChecker) started(u UnfinishedExecution) {
	u.written = c.written
	c.open[u.CorrelationID] = append(c.open[u.CorrelationID], u)
}

// pendingPage is how many unsealed records pending reads at once.
const pendingPage = 4096

// pending follows, after the sealed chain, the tenant's records awaiting
// their seal, in the order they were written, and counts them. A record
// is sealed only after every record written before it and visible to its
// sealer, so none of them precedes a sealed record it relates to.
func (c *chainChecker) pending(ctx context.Context, st *store.Store, report *Report) error {
	var after int64
	for {
		page, err := st.AuditPendingPage(ctx, c.tenant, after, pendingPage)
		if err != nil {
			return fmt.Errorf("read unsealed records: %w", err)
		}
		for _, r := range page {
			c.relatePending(r)
			after = r.ID
		}
		report.Pending += int64(len(page))
		if len(page) < pendingPage {
			return nil
		}
	}
}

// confirm asks the server, in st's snapshot, whether it reads the records
// whose entries it must judge as their columns say, by the SQL verifier's
// own test (orangerail.audit_columns_match): the first it does not is the
// chain's first break, since each comes before any break found. The
// records between them read alike here and there, so the first record of
// the span it does not read is that one. orangerail writes no such entry:
// a chain it kept asks nothing.
func (c *chainChecker) confirm(ctx context.Context, st *store.Store, tenant string) error {
	if c.judgedFirst == 0 {
		return nil
	}
	seq, hash, err := st.AuditFirstUnmatched(ctx, tenant, c.judgedFirst, c.judgedLast)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("ask the server to read the entries of records %d to %d: %w", c.judgedFirst, c.judgedLast, err)
	}
	c.brk = &ChainBreak{Seq: seq, Problem: ProblemColumns, Expected: hash, Found: hash}
	return nil
}

// finish puts into report what the walk found: the first break, or a head
// that does not name the last row (or, its seq emptied, names none), the
// operators' records and the open executions.
func (c *chainChecker) finish(report *Report, headSeqMissing bool) {
	report.Break = c.brk
	report.BreakGlass, report.BreakGlassTotal = append(report.BreakGlass, c.breakGlass...), c.breakGlassTotal
	if report.Break == nil && (headSeqMissing || report.HeadSeq != c.prevSeq || !bytes.Equal(report.HeadHash, c.prevHash)) {
		report.Break = &ChainBreak{Seq: report.HeadSeq, Problem: ProblemHeadMismatch, Expected: c.prevHash, Found: report.HeadHash}
	}
	for _, starts := range c.open {
		report.Unfinished = append(report.Unfinished, starts...)
	}
	// In the order they were written, as orangerail.audit_unfinished lists
	// them: the sealed by seq, then those awaiting their seal.
	slices.SortFunc(report.Unfinished, func(a, b UnfinishedExecution) int { return cmp.Compare(a.written, b.written) })
	report.UnfinishedTotal = int64(len(report.Unfinished))
	report.Unfinished = slices.Clone(report.Unfinished[:min(len(report.Unfinished), c.listMax)])
}

// operatorRecord completes d, an operator's record, from its entry as
// orangerail.audit_break_glass reads it: the reason, the text of the
// result's BreakGlassReasonMember (empty when there is none); of an
// execution settled, the outcome, its SettledOutcomeMember; of an
// auditor's grant or revoke, the login, its AuditorMember.
func operatorRecord(d BreakGlassDecision, entry []byte) BreakGlassDecision {
	var e struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if json.Unmarshal(entry, &e) != nil {
		return d
	}
	d.Reason = resultText(e.Result, BreakGlassReasonMember)
	switch {
	case d.Phase == PhaseExecutionSettled:
		d.SettledOutcome = SettledOutcome(resultText(e.Result, SettledOutcomeMember))
	case d.Phase.OfAuditor():
		d.Auditor = resultText(e.Result, AuditorMember)
	}
	return d
}

// resultText is a result member's text as SQL's ->> reads it: a string's
// own, another value's JSON, "" for none or null.
func resultText(result map[string]json.RawMessage, member string) string {
	raw, ok := result[member]
	if !ok || string(raw) == "null" {
		return ""
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return string(raw)
	}
	return text
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
