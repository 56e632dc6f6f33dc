package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/db"
)

// AuditLink is a position in a tenant's chain: a record's seq and hash.
type AuditLink struct {
	Seq  int64
	Hash []byte
	// SeqMissing: a head whose seq was emptied (its owner dropped the
	// constraint) names no record; Seq is then 0. Only a tamperer makes
	// one, and only the verifiers read past it.
	SeqMissing bool
}

// AuditAppend appends one canonical entry, unsealed, to the chain of the
// transaction's tenant (orangerail.audit_append); a sealer gives it its
// link once the transaction commits (AuditSeal). An entry that is not a
// valid record is ErrAuditEntryInvalid (or, for bytes Postgres cannot
// read, ErrMalformedValue); one of another tenant than the transaction's,
// or in a transaction that names none, ErrTenantMismatch.
func (s *Store) AuditAppend(ctx context.Context, entry []byte) error {
	return InterpretError(s.q.AuditAppend(ctx, s.x, entry))
}

// AuditEntryExists reports whether the chain of the transaction's tenant
// holds entry, appended under correlationID: since a committed record is
// never removed, whether the transaction that appended it committed.
func (s *Store) AuditEntryExists(ctx context.Context, correlationID string, entry []byte) (bool, error) {
	present, err := s.q.AuditEntryExists(ctx, s.x, &db.AuditEntryExistsParams{CorrelationID: correlationID, Entry: entry})
	return present, InterpretError(err)
}

// AuditSeal seals up to limit of the committed unsealed records of the
// transaction's tenant, oldest first (orangerail.audit_seal), and returns
// how many it sealed. With wait false it returns 0 at once when another
// sealer holds the tenant; with wait true it waits for that one. It must
// run in a READ COMMITTED transaction of its own, scoped to the tenant.
func (s *Store) AuditSeal(ctx context.Context, limit int32, wait bool) (int, error) {
	n, err := s.q.AuditSeal(ctx, s.x, &db.AuditSealParams{RowLimit: limit, Wait: wait})
	return int(n), InterpretError(err)
}

// AuditUnsealedTenant is a tenant with unsealed records, and the time of
// its oldest.
type AuditUnsealedTenant struct {
	TenantID string
	// Oldest is when its oldest unsealed record was written, by the
	// database's clock (by its writer's, for a record from before
	// migration 00030), and Waited how long ago that was, by the
	// database's clock too.
	Oldest time.Time
	Waited time.Duration
}

// AuditUnsealedTenants lists up to limit tenants with an unsealed record,
// the longest waiting first (orangerail.audit_unsealed_tenants).
func (s *Store) AuditUnsealedTenants(ctx context.Context, limit int32) ([]*AuditUnsealedTenant, error) {
	rows, err := s.q.AuditUnsealedTenants(ctx, s.x, limit)
	return all(rows, err, func(r *db.AuditUnsealedTenantsRow) *AuditUnsealedTenant {
		return &AuditUnsealedTenant{TenantID: r.TenantID, Oldest: r.Oldest, Waited: time.Duration(r.WaitedSeconds * float64(time.Second))}
	})
}

// AuditUnsealedRecord is a record unsealed longer than a bound.
type AuditUnsealedRecord struct {
	CorrelationID string
	Phase         string
	Action        string
	At            time.Time
	UnsealedFor   time.Duration
}

// AuditListUnsealed lists the first limit of a tenant's records unsealed
// longer than bound (orangerail.audit_unsealed), in the order they were
// written, and how many there are.
func (s *Store) AuditListUnsealed(ctx context.Context, tenantID string, bound time.Duration, limit int32) ([]*AuditUnsealedRecord, int64, error) {
	rows, err := s.q.AuditUnsealed(ctx, s.x, &db.AuditUnsealedParams{TenantID: tenantID, BoundSeconds: bound.Seconds(), RowLimit: limit})
	return counted(rows, err, func(r *db.AuditUnsealedRow) int64 { return r.Total }, func(r *db.AuditUnsealedRow) *AuditUnsealedRecord {
		return &AuditUnsealedRecord{CorrelationID: r.CorrelationID, Phase: r.Phase, Action: r.Action, At: r.At,
			UnsealedFor: time.Duration(r.UnsealedSeconds * float64(time.Second))}
	})
}

// AuditPending is a committed record not sealed yet: no seq, no link.
type AuditPending struct {
	// ID is the order it was written in.
	ID int64
	// Entry is an operator's record's entry; nil for any other's.
	Entry         []byte
	At            time.Time
	CorrelationID string
	Phase         string
	Action        *string
	Actor         string
	ActorKind     string
	ApprovalID    *uuid.UUID
}

// AuditPendingPage returns up to limit of a tenant's unsealed records
// written after afterID, in the order they were written.
func (s *Store) AuditPendingPage(ctx context.Context, tenantID string, afterID int64, limit int32) ([]*AuditPending, error) {
	rows, err := s.q.AuditUnsealedPage(ctx, s.x, &db.AuditUnsealedPageParams{TenantID: tenantID, AfterID: afterID, RowLimit: limit})
	return all(rows, err, func(r *db.AuditUnsealedPageRow) *AuditPending {
		return &AuditPending{ID: r.ID, Entry: r.Entry, At: r.At, CorrelationID: r.CorrelationID, Phase: r.Phase, Action: r.Action,
			Actor: r.Actor, ActorKind: r.ActorKind, ApprovalID: r.ApprovalID}
	})
}

// AuditHead returns the last link of a tenant's chain, or ErrNotFound when
// the tenant has no chain yet.
func (s *Store) AuditHead(ctx context.Context, tenantID string) (*AuditLink, error) {
	row, err := s.q.AuditHead(ctx, s.x, tenantID)
	return one(row, err, func(r *db.AuditHeadRow) *AuditLink {
		return &AuditLink{Seq: r.Seq, Hash: r.Hash, SeqMissing: r.SeqMissing}
	})
}

// AuditRecord is one stored record of a chain: its exact entry bytes, the
// queryable columns filled from them, and its link.
type AuditRecord struct {
	Seq           int64
	Entry         []byte
	At            time.Time
	CorrelationID string
	Phase         string
	Action        *string
	Actor         string
	ActorKind     string
	DevMode       bool
	ApprovalID    *uuid.UUID
	PrevHash      []byte
	Hash          []byte
}

// The columns AuditChainCopy streams, in this order.
const (
	AuditChainSeq = iota
	AuditChainEntry
	AuditChainAt
	AuditChainCorrelationID
	AuditChainPhase
	AuditChainAction
	AuditChainActor
	AuditChainActorKind
	AuditChainDevMode
	AuditChainApprovalID
	AuditChainPrevHash
	AuditChainHash
	// AuditChainWidth is the number of columns.
	AuditChainWidth
)

// auditChainCopy streams the chain of the transaction's tenant. The tenant
// is the transaction's setting, not a literal: COPY takes no parameters,
// and Row Level Security holds every role to the same rows anyway.
const auditChainCopy = `COPY (
	SELECT seq, entry, at, correlation_id, phase, action, actor, actor_kind, dev_mode, approval_id, prev_hash, hash
	FROM orangerail.audit
	WHERE tenant_id = current_setting('orangerail.tenant_id', true) AND seq IS NOT NULL%s
	ORDER BY seq
) TO STDOUT (FORMAT binary)`

// auditChainCopyRange is auditChainCopy of the records of seq after+1 to
// upto (0: to the end). The bounds are numbers formatted into the text,
// since COPY takes no parameters.
func auditChainCopyRange(after, upto int64) string {
	var bounds string
	if after > 0 {
		bounds += " AND seq > " + strconv.FormatInt(after, 10)
	}
	if upto > 0 {
		bounds += " AND seq <= " + strconv.FormatInt(upto, 10)
	}
	return fmt.Sprintf(auditChainCopy, bounds)
}

// AuditChainCopy writes the sealed chain of the transaction's tenant to w
// in seq order, in PostgreSQL's binary COPY format (package pgcopy reads
// it), one row of the AuditChain* columns per tuple: the records of seq
// after+1 to upto (0: to the end, so 0, 0 is the whole chain), in one
// statement, at the speed Postgres can send it. The
// Store must run on a transaction (or a connection) scoped to the tenant
// by database.InTenant. An error w returns ends the copy, and closes the
// connection, since Postgres cannot be told to stop sending.
func (s *Store) AuditChainCopy(ctx context.Context, w io.Writer, after, upto int64) error {
	var conn *pgx.Conn
	switch x := s.x.(type) {
	case interface{ Conn() *pgx.Conn }:
		conn = x.Conn()
	case *pgx.Conn:
		conn = x
	default:
		return errors.New("AuditChainCopy runs on a transaction or a connection, not a pool")
	}
	_, err := conn.PgConn().CopyTo(ctx, w, auditChainCopyRange(after, upto))
	return InterpretError(err)
}

// AuditBreak is a broken link the SQL verifier found.
type AuditBreak struct {
	Seq          int64
	Problem      string
	ExpectedHash []byte
	FoundHash    []byte
}

// AuditVerify runs the SQL-only verifier (orangerail.audit_verify) on a
// tenant's chain: no row when it is whole, else its first broken link, or
// one nothing_visible (seq 0) when the transaction sees nothing of it.
func (s *Store) AuditVerify(ctx context.Context, tenantID string) ([]*AuditBreak, error) {
	rows, err := s.q.AuditVerifySQL(ctx, s.x, tenantID)
	return all(rows, err, func(r *db.AuditVerifySQLRow) *AuditBreak {
		return &AuditBreak{Seq: r.Seq, Problem: r.Problem, ExpectedHash: r.ExpectedHash, FoundHash: r.FoundHash}
	})
}

// AuditUnfinished is an execution_started record no later record of its
// correlation id finishes.
type AuditUnfinished struct {
	Seq           int64
	CorrelationID string
	Action        string
	At            time.Time
}

// AuditListUnfinished lists a tenant's unfinished executions as SQL sees
// them (orangerail.audit_unfinished).
func (s *Store) AuditListUnfinished(ctx context.Context, tenantID string) ([]*AuditUnfinished, error) {
	rows, err := s.q.AuditUnfinished(ctx, s.x, tenantID)
	return all(rows, err, func(r *db.AuditUnfinishedRow) *AuditUnfinished {
		return &AuditUnfinished{Seq: r.Seq, CorrelationID: r.CorrelationID, Action: r.Action, At: r.At}
	})
}

// AuditUnexplainedExecution is a record that follows the consume of an
// approval the chain does not show staged and approved before it, and the
// phases of the records missing.
type AuditUnexplainedExecution struct {
	Seq        int64
	ApprovalID uuid.UUID
	Phase      string
	Action     string
	Missing    []string
}

// AuditListUnexplainedExecutions lists the first limit of a tenant's
// execution records nobody can be shown to have approved
// (orangerail.audit_unexplained_executions), and how many there are.
func (s *Store) AuditListUnexplainedExecutions(ctx context.Context, tenantID string, limit int32) ([]*AuditUnexplainedExecution, int64, error) {
	rows, err := s.q.AuditUnexplainedExecutions(ctx, s.x, &db.AuditUnexplainedExecutionsParams{TenantID: tenantID, RowLimit: limit})
	return counted(rows, err, func(r *db.AuditUnexplainedExecutionsRow) int64 { return r.Total }, func(r *db.AuditUnexplainedExecutionsRow) *AuditUnexplainedExecution {
		return &AuditUnexplainedExecution{Seq: r.Seq, ApprovalID: r.ApprovalID, Phase: r.Phase, Action: r.Action, Missing: r.Missing}
	})
}

// AuditBreakGlassRecord is a record an operator made around the API (a
// break-glass decision, an execution settled), with the reason it gives.
type AuditBreakGlassRecord struct {
	Seq            int64
	ApprovalID     *uuid.UUID // nil when the record names none
	Phase          string
	Operator       string
	At             time.Time
	Reason         string
	SettledOutcome string // an execution_settled record's; else ""
	Auditor        string // an auditor_granted, auditor_revoked or auditor_password_set record's; else ""
}

// AuditListBreakGlass lists a tenant's operator records in seq order
// (orangerail.audit_break_glass).
func (s *Store) AuditListBreakGlass(ctx context.Context, tenantID string) ([]*AuditBreakGlassRecord, error) {
	rows, err := s.q.AuditBreakGlass(ctx, s.x, tenantID)
	return all(rows, err, func(r *db.AuditBreakGlassRow) *AuditBreakGlassRecord {
		rec := &AuditBreakGlassRecord{Seq: r.Seq, Phase: r.Phase, Operator: r.Operator, At: r.At, Reason: r.Reason, SettledOutcome: r.SettledOutcome, Auditor: r.Auditor}
		if id, err := uuid.Parse(r.ApprovalID); err == nil {
			rec.ApprovalID = &id
		}
		return rec
	})
}

// AuditPageParams select one page of a tenant's records.
type AuditPageParams struct {
	TenantID string
	// BeforeSeq is the last seq of the previous page; 0 starts at the head.
	BeforeSeq int64
	// The filters; empty selects every record.
	CorrelationID, Action, Actor, Phase string
	Limit                               int32
	// WithEntry reads each record's entry; without, Entry is empty.
	WithEntry bool
}

// AuditPage returns one page of a tenant's records, newest first.
func (s *Store) AuditPage(ctx context.Context, p *AuditPageParams) ([]AuditRecord, error) {
	rows, err := s.q.AuditPage(ctx, s.x, &db.AuditPageParams{TenantID: p.TenantID, BeforeSeq: p.BeforeSeq, CorrelationID: p.CorrelationID,
		Action: p.Action, Actor: p.Actor, Phase: p.Phase, RowLimit: p.Limit, WithEntry: p.WithEntry})
	if err != nil {
		return nil, InterpretError(err)
	}
	page := make([]AuditRecord, len(rows))
	for i, r := range rows {
		page[i] = AuditRecord{
			Seq: r.Seq, Entry: r.Entry, At: r.At, CorrelationID: r.CorrelationID, Phase: r.Phase, Action: r.Action,
			Actor: r.Actor, ActorKind: r.ActorKind, DevMode: r.DevMode, ApprovalID: r.ApprovalID, PrevHash: r.PrevHash, Hash: r.Hash,
		}
	}
	return page, nil
}

// UnfinishedExecution is an execution started and not finished, as
// settling it reads it.
type UnfinishedExecution struct {
	Action string
	// ApprovalID is nil for a call that ran without one.
	ApprovalID *uuid.UUID
	// Age is how long ago the database wrote its execution_started.
	Age time.Duration
}

// AuditUnfinishedExecutionGet returns the tenant's unfinished execution of
// correlationID, locking it against a second settle until the transaction
// ends; ErrNotFound when no execution of it is unfinished.
func (s *Store) AuditUnfinishedExecutionGet(ctx context.Context, tenantID, correlationID string) (*UnfinishedExecution, error) {
	if err := s.q.AuditSettleLock(ctx, s.x, &db.AuditSettleLockParams{TenantID: tenantID, CorrelationID: correlationID}); err != nil {
		return nil, InterpretError(err)
	}
	row, err := s.q.AuditUnfinishedExecution(ctx, s.x, &db.AuditUnfinishedExecutionParams{TenantID: tenantID, CorrelationID: correlationID})
	if err != nil {
		return nil, InterpretError(err)
	}
	u := &UnfinishedExecution{Action: row.Action, Age: time.Duration(row.AgeUs) * time.Microsecond}
	if row.ApprovalID != "" {
		id, err := uuid.Parse(row.ApprovalID)
		if err != nil {
			return nil, err
		}
		u.ApprovalID = &id
	}
	return u, nil
}

// CorrelationProgress is how far a correlation id's calls have come.
type CorrelationProgress struct {
	// Phases are the phases of its records, in chain order.
	Phases []string
	// Leased reports that an execution of it holds a budget slot whose
	// lease has not expired: it runs, or its replica stopped within the
	// lease's time.
	Leased bool
}

// AuditCorrelationProgress returns how far the tenant's calls of
// correlationID have come.
func (s *Store) AuditCorrelationProgress(ctx context.Context, tenantID, correlationID string) (*CorrelationProgress, error) {
	row, err := s.q.AuditCorrelationProgress(ctx, s.x, &db.AuditCorrelationProgressParams{TenantID: tenantID, CorrelationID: correlationID})
	if err != nil {
		return nil, InterpretError(err)
	}
	return &CorrelationProgress{Phases: row.Phases, Leased: row.Leased}, nil
}

// AuditFirstUnmatched returns the first of the tenant's records from seq
// first to last whose columns the server does not read in its entry
// (orangerail.audit_columns_match), with its hash; ErrNotFound when there
// is none.
func (s *Store) AuditFirstUnmatched(ctx context.Context, tenantID string, first, last int64) (int64, []byte, error) {
	row, err := s.q.AuditFirstUnmatched(ctx, s.x, &db.AuditFirstUnmatchedParams{TenantID: tenantID, First: first, Last: last})
	if err != nil {
		return 0, nil, InterpretError(err)
	}
	return row.Seq, row.Hash, nil
}
