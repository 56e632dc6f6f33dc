package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/store"
)

// What an approver's desk reads: pages of approvals, one approval for
// review, pages of the audit log and its head. Every function takes the
// verified caller and refuses, with a coded error, a caller that is not a
// person allowed to read it; another tenant's approval is not found, as an
// unknown one is.

// ApprovalQuery selects a page of approvals.
type ApprovalQuery struct {
	// Status selects one status; empty selects pending.
	Status store.ApprovalStatus
	// Action and RequestedBy select one each; empty selects all.
	Action, RequestedBy string
	// Cursor is the NextCursor of the previous page; empty starts at the
	// newest.
	Cursor string
	// Limit is the page's size, 1 to MaxApprovalPage; 0 is
	// DefaultApprovalPage.
	Limit int
}

// The sizes of a page of approvals.
const (
	DefaultApprovalPage = 50
	MaxApprovalPage     = 200
)

// PageLimitProblem says what a page's limit must be, wherever it is
// refused: by the engine, the approvals API's query and the command line.
var PageLimitProblem = fmt.Sprintf("limit must be a whole number 1 to %d", MaxApprovalPage)

// ApprovalPage is a page of approvals, newest first, and the cursor of
// the next page ("" when this is the last).
type ApprovalPage struct {
	Items      []*ApprovalView
	NextCursor string
}

// approvalCursor is where a page of approvals ended, bound to the query's
// filters. It travels signed, as list cursors do.
type approvalCursor struct {
	Query     ApprovalQuery `json:"q"`
	CreatedAt time.Time     `json:"t"`
	ID        uuid.UUID     `json:"k"`
}

// cursorObjectApprovals is the list a cursor of approvals is sealed for; no
// object of an ontology can be named so (names are identifiers).
const cursorObjectApprovals = "approvals desk"

// PageApprovals returns a page of the caller's tenant's approvals of the
// actions the caller may decide, newest first. Lapsed approvals are
// expired (and audited) first, so none is listed as pending.
func (e *Engine) PageApprovals(ctx context.Context, caller *Caller, q ApprovalQuery) (*ApprovalPage, error) {
	if !caller.person() {
		return nil, errcode.New(errcode.Forbidden, "the approvals API serves people only", nil)
	}
	q.Status = cmp.Or(q.Status, store.ApprovalPending)
	if !slices.Contains(store.ApprovalStatuses(), q.Status) {
		return nil, errcode.New(errcode.RequestInvalid, fmt.Sprintf("there is no approval status %q; the statuses are %v", q.Status, store.ApprovalStatuses()), nil)
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultApprovalPage
	case q.Limit < 1 || q.Limit > MaxApprovalPage:
		return nil, errcode.New(errcode.RequestInvalid, PageLimitProblem, nil)
	}
	params := &store.ApprovalPageParams{TenantID: caller.Tenant, Actions: e.DecidableActions(caller), Status: q.Status,
		Action: q.Action, RequestedBy: q.RequestedBy, Limit: int32(q.Limit) + 1} //nolint:gosec // G115: bounded to MaxApprovalPage above
	bound := q
	bound.Cursor = ""
	if q.Cursor != "" {
		c, err := e.openApprovalCursor(caller.Tenant, q.Cursor)
		if err != nil || c.Query != bound {
			return nil, errcode.New(errcode.RequestInvalid, "cursor is not a cursor of this list with these filters", nil)
		}
		params.AfterCreatedAt, params.AfterID = &c.CreatedAt, &c.ID
	}
	var rows []*store.Approval
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// It reads, and expires what lapsed: it may run twice.
		database.Repeatable(tx)
		if err := e.expireLapsed(ctx, tx, caller.Tenant); err != nil {
			return err
		}
		var err error
		rows, err = store.New(tx).ApprovalPage(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	page := &ApprovalPage{}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		last := rows[len(rows)-1]
		next, err := e.sealApprovalCursor(caller.Tenant, &approvalCursor{Query: bound, CreatedAt: last.CreatedAt, ID: last.ID})
		if err != nil {
			return nil, err
		}
		page.NextCursor = next
	}
	for _, a := range rows {
		page.Items = append(page.Items, e.view(a))
	}
	return page, nil
}

func (e *Engine) sealApprovalCursor(tenant string, c *approvalCursor) (string, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return e.sealCursor(tenant, cursorObjectApprovals, &cursor{Query: body})
}

func (e *Engine) openApprovalCursor(tenant, text string) (*approvalCursor, error) {
	c, err := e.openCursor(tenant, cursorObjectApprovals, text)
	if err != nil {
		return nil, err
	}
	var ac approvalCursor
	if err := json.Unmarshal(c.Query, &ac); err != nil {
		return nil, errBadCursor
	}
	return &ac, nil
}

// ReviewApproval returns one approval of the caller's tenant as its
// approver reviews it: ShowApproval's view, the target re-read now, and
// what the action's statement would write where the input tells it. The
// caller must be a person who may decide the action's approvals.
func (e *Engine) ReviewApproval(ctx context.Context, caller *Caller, approvalID string) (*ApprovalView, error) {
	if !caller.person() {
		return nil, errcode.New(errcode.Forbidden, "the approvals API serves people only", nil)
	}
	id, err := uuid.Parse(approvalID)
	if err != nil {
		return nil, errcode.New(errcode.ApprovalNotFound, noSuchApproval, nil)
	}
	var a *store.Approval
	err = database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		database.Repeatable(tx) // as a page's
		if err := e.expireLapsed(ctx, tx, caller.Tenant); err != nil {
			return err
		}
		a, err = store.New(tx).ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: caller.Tenant})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errcode.New(errcode.ApprovalNotFound, noSuchApproval, nil)
	}
	if err != nil {
		return nil, err
	}
	if !e.MayDecide(caller, a.Action) {
		return nil, errcode.New(errcode.Forbidden, "deciding "+a.Action+" needs one of the roles "+fmt.Sprint(e.ApproverRoles(a.Action)), nil)
	}
	v := e.view(a)
	if action, ok := e.cfg.Actions[a.Action]; ok && v.InputState == "" {
		e.review(ctx, caller.Tenant, action, v.Input, v)
	}
	return v, nil
}

// review fills in what the approver is shown beside the input: what the
// statement would write, and the target re-read now (or why it could not
// be: a name for what went wrong, never the datasource's own words).
func (e *Engine) review(ctx context.Context, tenant string, action *ontology.Action, input []byte, v *ApprovalView) {
	var values map[string]any
	if json.Unmarshal(input, &values) != nil {
		v.TargetError = "the input could not be read"
		return
	}
	if p, ok := e.writes[action]; ok {
		v.WouldWrite = p.wouldWrite(values)
	}
	if action.Target == nil {
		return
	}
	var err error
	v.Target, err = e.resolveTarget(ctx, nil, tenant, action, &call{action: action, values: values}, false)
	if err != nil {
		v.TargetError = "the target could not be read now"
		if d := classify(err); d != DiagnosticNone {
			v.TargetError += " (" + string(d) + ")"
		}
	}
}

// noSuchApproval is the one answer for an approval unknown and one of
// another tenant: which of the two is not told.
const noSuchApproval = "no such approval in your tenant"

// writePlan is what an action's SQL statement sets when every column it
// sets is known before it runs: each to a parameter, by name, or to a
// constant. Parsing the statement is most of a review's own work, so it is
// done once, by New (planWrites).
type writePlan struct {
	assigned []sqlguard.Assignment
	names    []string
}

// planWrites returns the writePlan of each action whose SQL statement's
// every assigned column is known before it runs.
func planWrites(actions map[string]*ontology.Action) map[*ontology.Action]writePlan {
	plans := map[*ontology.Action]writePlan{}
	for _, a := range actions {
		if a.Execute.Kind() != ontology.ExecuteSQL {
			continue
		}
		bound, names, err := ontology.BindSQL(a.Execute.SQL)
		if err != nil {
			continue
		}
		assigned, ok := sqlguard.Assignments(bound)
		if !ok || slices.ContainsFunc(assigned, func(as sqlguard.Assignment) bool { return as.Param > len(names) }) {
			continue
		}
		plans[a] = writePlan{assigned: assigned, names: names}
	}
	return plans
}

// wouldWrite returns the columns p sets, each to values' value of its
// parameter or to its constant.
func (p writePlan) wouldWrite(values map[string]any) json.RawMessage {
	out := make(map[string]json.RawMessage, len(p.assigned))
	for _, as := range p.assigned {
		if as.Param == 0 {
			out[as.Column] = as.Const
			continue
		}
		v, present := values[p.names[as.Param-1]]
		if !present {
			v = nil // an absent optional parameter binds NULL
		}
		out[as.Column] = mustJSON(v)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// AuditQuery selects a page of audit records.
type AuditQuery struct {
	// The filters; empty selects every record.
	CorrelationID, Action, Actor string
	Phase                        Phase
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// Limit is the page's size, 1 to MaxApprovalPage; 0 is
	// DefaultApprovalPage.
	Limit int
	// WithoutEntries leaves every record's entry out (nil), for a reader
	// that shows the columns alone: entries can be long.
	WithoutEntries bool
}

// Problem says what is wrong with q's filters, or "": one that is no
// text or too long (FilterProblem), or a phase there is none of.
func (q AuditQuery) Problem() string {
	for _, f := range []struct{ name, value string }{{"correlation_id", q.CorrelationID}, {"action", q.Action}, {"actor", q.Actor}} {
		if p := FilterProblem(f.name, f.value); p != "" {
			return p
		}
	}
	if q.Phase != "" && !slices.Contains(Phases(), q.Phase) {
		return fmt.Sprintf("there is no phase %q; the phases are %v", q.Phase, Phases())
	}
	return ""
}

// AuditItem is one audit record as the desk shows it: its queryable
// columns, its link, and its entry verbatim to one who may read entries
// (nil to others: Engine.MayReadEntries).
type AuditItem struct {
	Seq           int64           `json:"seq"`
	At            time.Time       `json:"at"`
	CorrelationID string          `json:"correlation_id"`
	Phase         string          `json:"phase"`
	Action        *string         `json:"action"`
	Actor         string          `json:"actor"`
	ActorKind     string          `json:"actor_kind"`
	DevMode       bool            `json:"dev_mode"`
	ApprovalID    *uuid.UUID      `json:"approval_id"`
	Entry         json.RawMessage `json:"entry"`
	Hash          Hash            `json:"hash"`
	PrevHash      Hash            `json:"prev_hash"`
}

// AuditPage is a page of audit records, newest first.
type AuditPage struct {
	Items      []*AuditItem
	NextCursor string
}

type auditCursor struct {
	Query AuditQuery `json:"q"`
	Seq   int64      `json:"s"`
}

const cursorObjectAudit = "audit desk"

// mayAudit refuses a caller who may not read the audit log, saying why:
// not a verified person (an agent's token, whatever roles it claims), or a
// person without the role.
func (e *Engine) mayAudit(caller *Caller) error {
	switch {
	case !caller.person():
		return errcode.New(errcode.Forbidden, "reading the audit log here is for a verified person, and this token is not a person's "+
			"(identity.oidc.human); an agent with the role "+e.cfg.Approvals.AuditorRole+" reads it through the sql_query tool, where enabled", nil)
	case !e.MayAudit(caller):
		return errcode.New(errcode.Forbidden, "reading the audit log needs the role "+e.cfg.Approvals.AuditorRole+" or an approver role", nil)
	}
	return nil
}

// PageAudit returns a page of the caller's tenant's sealed audit records,
// newest first. The caller must be a person who may read the audit log;
// each record's entry is given only to one who may read it
// (MayReadEntries), and is nil otherwise.
func (e *Engine) PageAudit(ctx context.Context, caller *Caller, q AuditQuery) (*AuditPage, error) {
	if err := e.mayAudit(caller); err != nil {
		return nil, err
	}
	if p := q.Problem(); p != "" {
		return nil, errcode.New(errcode.RequestInvalid, p, nil)
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultApprovalPage
	case q.Limit < 1 || q.Limit > MaxApprovalPage:
		return nil, errcode.New(errcode.RequestInvalid, PageLimitProblem, nil)
	}
	bound := q
	bound.Cursor = ""
	whole := e.MayReadEntries(caller) && !q.WithoutEntries
	params := &store.AuditPageParams{TenantID: caller.Tenant, CorrelationID: q.CorrelationID, Action: q.Action, Actor: q.Actor,
		Phase: string(q.Phase), Limit: int32(q.Limit) + 1, WithEntry: whole} //nolint:gosec // G115: bounded to MaxApprovalPage above
	if q.Cursor != "" {
		c, err := e.openCursor(caller.Tenant, cursorObjectAudit, q.Cursor)
		var ac auditCursor
		if err != nil || json.Unmarshal(c.Query, &ac) != nil || ac.Query != bound || ac.Seq < 1 {
			return nil, errcode.New(errcode.RequestInvalid, "cursor is not a cursor of this list with these filters", nil)
		}
		params.BeforeSeq = ac.Seq
	}
	// The page lists sealed records, in seq order: what committed before
	// this call is sealed first.
	if _, err := SealTenant(ctx, e.store, caller.Tenant); err != nil {
		return nil, err
	}
	var rows []store.AuditRecord
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		rows, err = store.New(tx).AuditPage(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	page := &AuditPage{Items: []*AuditItem{}}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		body, err := json.Marshal(auditCursor{Query: bound, Seq: rows[len(rows)-1].Seq})
		if err != nil {
			return nil, err
		}
		if page.NextCursor, err = e.sealCursor(caller.Tenant, cursorObjectAudit, &cursor{Query: body}); err != nil {
			return nil, err
		}
	}
	for _, r := range rows {
		it := &AuditItem{Seq: r.Seq, At: r.At, CorrelationID: r.CorrelationID, Phase: r.Phase, Action: r.Action,
			Actor: r.Actor, ActorKind: r.ActorKind, DevMode: r.DevMode, ApprovalID: r.ApprovalID, Hash: r.Hash, PrevHash: r.PrevHash}
		if whole {
			it.Entry = r.Entry
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

// AuditHeadOf returns the last link of the caller's tenant's chain; nil
// when the tenant has no record yet.
func (e *Engine) AuditHeadOf(ctx context.Context, caller *Caller) (*store.AuditLink, error) {
	if err := e.mayAudit(caller); err != nil {
		return nil, err
	}
	var head *store.AuditLink
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		database.Repeatable(tx)
		head, err = store.New(tx).AuditHead(ctx, caller.Tenant)
		if err == nil && head.SeqMissing {
			return errHeadSeqMissing
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return head, err
}
