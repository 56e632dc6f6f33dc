package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/db"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
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
	Seq           int64     `json:"seq"`
	CorrelationID string    `json:"correlation_id"`
	Action        string    `json:"action,omitempty"`
	At            time.Time `json:"at"`
}

// UnauditedApproval is a consumed approval with no audit record of its
// execution: a crash between the consume and the audit append.
type UnauditedApproval struct {
	ApprovalID uuid.UUID `json:"approval_id"`
	Action     string    `json:"action"`
	ConsumedAt time.Time `json:"consumed_at"`
}

// Report is what verifying one tenant found.
type Report struct {
	Tenant     string                `json:"tenant"`
	Records    int64                 `json:"records"`
	HeadSeq    int64                 `json:"head_seq"`
	HeadHash   Hash                  `json:"head_hash"`
	Break      *ChainBreak           `json:"chain_break,omitempty"`
	Unfinished []UnfinishedExecution `json:"unfinished_executions"`
	Unaudited  []UnauditedApproval   `json:"unaudited_approvals"`
}

// OK reports whether the tenant's audit verified without a finding.
func (r *Report) OK() bool {
	return r.Break == nil && len(r.Unfinished) == 0 && len(r.Unaudited) == 0
}

// VerifyOptions tunes verification. The zero value is ready to use.
type VerifyOptions struct {
	// PageSize is how many records are read per round trip; memory use is
	// bounded by it. Defaults to VerifyPageSizeDefault.
	PageSize int32
	// ProgressFunc, when set, is called after each page with the records
	// read so far and the chain's length.
	ProgressFunc func(done, total int64)
}

// VerifyPageSizeDefault is the default VerifyOptions.PageSize.
const VerifyPageSizeDefault = 10_000

// VerifyTenant verifies one tenant's audit: the chain's integrity (the first
// broken link), executions started but never finished, and consumed
// approvals with no post-consume record. It streams the chain in pages
// inside one read-only snapshot, so it never holds the chain in memory and
// sees the chain and head as of one instant while appends go on.
func VerifyTenant(ctx context.Context, conn database.TxBeginner, tenant string, opts VerifyOptions) (*Report, error) {
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = VerifyPageSizeDefault
	}
	report := &Report{Tenant: tenant, Unfinished: []UnfinishedExecution{}, Unaudited: []UnauditedApproval{}}
	q := db.New()
	txOpts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := database.InTenant(ctx, conn, tenant, txOpts, func(tx pgx.Tx) error {
		report.HeadSeq, report.HeadHash = 0, GenesisHash
		head, err := q.AuditHead(ctx, tx, tenant)
		switch {
		case err == nil:
			report.HeadSeq, report.HeadHash = head.Seq, head.Hash
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read audit head: %w", err)
		}

		chain := chainChecker{tenant: tenant, prevHash: GenesisHash, open: map[string]UnfinishedExecution{}}
		for {
			rows, err := q.AuditChainPage(ctx, tx, &db.AuditChainPageParams{
				TenantID: tenant, AfterSeq: chain.prevSeq, PageSize: pageSize,
			})
			if err != nil {
				return fmt.Errorf("read audit chain: %w", err)
			}
			for _, row := range rows {
				chain.check(row)
			}
			report.Records += int64(len(rows))
			if opts.ProgressFunc != nil {
				opts.ProgressFunc(report.Records, max(report.HeadSeq, report.Records))
			}
			if len(rows) < int(pageSize) {
				break
			}
		}
		report.Break = chain.brk
		if report.Break == nil && (report.HeadSeq != chain.prevSeq || !bytes.Equal(report.HeadHash, chain.prevHash)) {
			report.Break = &ChainBreak{Seq: report.HeadSeq, Problem: ProblemHeadMismatch, Expected: chain.prevHash, Found: report.HeadHash}
		}
		for _, u := range chain.open {
			report.Unfinished = append(report.Unfinished, u)
		}
		slices.SortFunc(report.Unfinished, func(a, b UnfinishedExecution) int { return int(a.Seq - b.Seq) })

		unaudited, err := q.ApprovalsUnaudited(ctx, tx, tenant)
		if err != nil {
			return fmt.Errorf("read consumed approvals: %w", err)
		}
		for _, u := range unaudited {
			report.Unaudited = append(report.Unaudited, UnauditedApproval{ApprovalID: u.ApprovalID, Action: u.Action, ConsumedAt: u.ConsumedAt})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return report, nil
}

// VerifyAll verifies every tenant of the database, in id order.
func VerifyAll(ctx context.Context, conn database.TxBeginner, opts VerifyOptions) ([]*Report, error) {
	tenants, err := Tenants(ctx, conn)
	if err != nil {
		return nil, err
	}
	reports := make([]*Report, 0, len(tenants))
	for _, t := range tenants {
		r, err := VerifyTenant(ctx, conn, t, opts)
		if err != nil {
			return reports, fmt.Errorf("verify tenant %q: %w", t, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// Tenants lists the database's tenants in id order.
func Tenants(ctx context.Context, conn database.TxBeginner) ([]string, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return db.New().TenantList(ctx, tx)
}

// TenantExists reports whether a tenant of that id exists.
func TenantExists(ctx context.Context, conn database.TxBeginner, tenant string) error {
	tenants, err := Tenants(ctx, conn)
	if err != nil {
		return err
	}
	if !slices.Contains(tenants, tenant) {
		return errcode.New(errcode.TenantUnknown, fmt.Sprintf("no tenant %q in this database", tenant), nil)
	}
	return nil
}

// chainChecker walks one chain in seq order and keeps the first break and
// the executions still open.
type chainChecker struct {
	tenant   string
	prevSeq  int64
	prevHash Hash
	brk      *ChainBreak
	open     map[string]UnfinishedExecution
}

func (c *chainChecker) check(row *db.AuditChainPageRow) {
	if c.brk == nil {
		expected := ChainHash(c.prevHash, row.Seq, row.Entry)
		problem := Problem("")
		switch {
		case row.Seq != c.prevSeq+1:
			problem = ProblemSeqGap
		case !bytes.Equal(row.PrevHash, c.prevHash):
			problem = ProblemPrevHash
		case !bytes.Equal(row.Hash, expected):
			problem = ProblemHash
		case !columnsMatch(c.tenant, row):
			problem = ProblemColumns
		}
		if problem != "" {
			c.brk = &ChainBreak{Seq: row.Seq, Problem: problem, Expected: expected, Found: row.Hash}
		}
	}
	c.prevSeq, c.prevHash = row.Seq, row.Hash

	switch phase := Phase(row.Phase); {
	case phase == PhaseExecutionStarted:
		c.open[row.CorrelationID] = UnfinishedExecution{Seq: row.Seq, CorrelationID: row.CorrelationID, Action: deref(row.Action), At: row.At}
	case phase.Finishes():
		delete(c.open, row.CorrelationID)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var (
	atPattern    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$`)
	phasePattern = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)
	uuidPattern  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// columnsMatch reports whether a row's queryable columns are exactly those
// its entry holds, under the rules of orangerail.audit_entry_columns.
func columnsMatch(tenant string, row *db.AuditChainPageRow) bool {
	v, err := jcs.Parse(row.Entry)
	if err != nil {
		return false
	}
	e, ok := v.(map[string]any)
	if !ok || e["v"] != jcs.Number("1") {
		return false
	}
	str := func(m map[string]any, k string) (string, bool) {
		s, ok := m[k].(string)
		return s, ok
	}
	entryTenant, ok1 := str(e, "tenant")
	at, ok2 := str(e, "at")
	corr, ok3 := str(e, "correlation_id")
	phase, ok4 := str(e, "phase")
	actor, ok5 := e["actor"].(map[string]any)
	devMode, ok6 := e["dev_mode"].(bool)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		!atPattern.MatchString(at) || !phasePattern.MatchString(phase) ||
		utf8.RuneCountInString(corr) < 1 || utf8.RuneCountInString(corr) > 128 {
		return false
	}
	subject, okS := str(actor, "subject")
	kind, okK := str(actor, "kind")
	if !okS || !okK || subject == "" || !slices.Contains([]ActorKind{ActorAgent, ActorHuman, ActorSystem}, ActorKind(kind)) {
		return false
	}
	var action *string
	if raw, present := e["action"]; present {
		s, ok := raw.(string)
		if !ok {
			return false
		}
		action = &s
	}
	var approvalID *uuid.UUID
	if raw, present := e["approval_id"]; present {
		s, ok := raw.(string)
		if !ok || !uuidPattern.MatchString(s) {
			return false
		}
		id := uuid.MustParse(s)
		approvalID = &id
	}
	atTime, err := time.Parse(atLayout, at)
	if err != nil {
		return false
	}
	return entryTenant == tenant && atTime.Equal(row.At) && corr == row.CorrelationID &&
		phase == row.Phase && equalPtr(action, row.Action) && subject == row.Actor &&
		kind == row.ActorKind && devMode == row.DevMode && equalPtr(approvalID, row.ApprovalID)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
