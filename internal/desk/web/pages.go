package web

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/store"
)

// The codes the desk refuses with, beside the engine's.
const (
	signInFailedCode   = errcode.DeskSignInFailed
	signInRequiredCode = errcode.DeskSignInRequired
	notAPersonCode     = errcode.DeskNotAPerson
	formRefusedCode    = errcode.DeskFormRefused
)

// page is what every template reads.
type page struct {
	Title     string
	Person    *engine.Caller
	FormToken string
	// A refusal: its code, what happened and the fix.
	Code, Error, Fix string
	Notice           string
	Rows             []row
	Recent           []row
	// Older is the link to the next page of pending approvals ("" on
	// the last), and Paged says this page is not the newest: it is not
	// updated live, and links back to the newest.
	Older    string
	Paged    bool
	Approval *detail
	Audit    *auditPage
}

// row is one approval in a list, every text made safe to show.
type row struct {
	ID, Action, Title, Status, RequestedBy string
	// Input is the input on one line, cut short: enough to tell two
	// approvals of one action apart in a list.
	Input                  string
	RequestedAt, ExpiresAt time.Time
}

// detail is one approval under review.
type detail struct {
	row
	Input, Target, TargetError, Digest, Effect, Rollback string
	// WouldWrite is what the action's statement sets, computed from the
	// input; empty when it is computed at run time.
	WouldWrite                 string
	Destructive                bool
	DecidedBy, DecidedAt, Note string
	// MayDecide shows the decision forms; Why says why they are not shown.
	MayDecide bool
	Why       string
	// Unshown: the input could not be shown (a sealed input this replica
	// cannot open), so it may be rejected, never approved.
	Unshown bool
	// ApproveNote and RejectNote are what the person had typed into that
	// form, when its decision was refused: shown again, not lost.
	ApproveNote, RejectNote string
}

// refusedDecision is a decision the desk did not record, shown on the
// approval's page: why, and the note the person typed, which the page
// keeps in the form it came from.
type refusedDecision struct {
	code    errcode.Code
	msg     string
	approve bool
	note    string
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		// shown is display.Text for a value that did not pass through a
		// row: a person's subject and tenant.
		"shown": display.Text,
		// noteMax is a note textarea's maxlength: a browser counts UTF-16
		// code units, one or two to a character, so a note it lets
		// through is never one the server refuses (engine.MaxNoteChars)
		// and loses with the page.
		"noteMax": func() int { return engine.MaxNoteChars },
	}
}

func (d *Desk) rowOf(v *engine.ApprovalView) row {
	title := v.Action
	if a, ok := d.c.Ontology.Actions[v.Action]; ok && a.Title != "" {
		title = a.Title
	}
	return row{ID: v.ID.String(), Action: display.Text(v.Action), Title: display.Text(title), Status: string(v.Status),
		RequestedBy: display.Text(v.RequestedBy), Input: shownInput(v, summary), RequestedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt}
}

// shownInput is v's input as show shows it, or, for a sealed input that
// cannot be shown, why.
func shownInput(v *engine.ApprovalView, show func([]byte) string) string {
	if v.InputState != "" {
		return "(the sealed input is " + string(v.InputState) + ")"
	}
	return show(v.Input)
}

// summaryRunes is how much of an input a list shows.
const summaryRunes = 80

// summary is the input as a list shows it: escaped as display.JSON
// escapes it, on one line, at most summaryRunes long.
func summary(input []byte) string {
	// With no indent, display.JSON's only line breaks are between members
	// (a newline inside a string is shown escaped).
	shown := []rune(strings.ReplaceAll(display.JSON(input, "", ""), "\n", " "))
	if len(shown) > summaryRunes {
		return string(shown[:summaryRunes-1]) + "…"
	}
	return string(shown)
}

func (d *Desk) rows(views []*engine.ApprovalView) []row {
	rows := make([]row, len(views))
	for i, v := range views {
		rows[i] = d.rowOf(v)
	}
	return rows
}

// render writes a page; a template failure is the desk's own defect.
func (d *Desk) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	var b bytes.Buffer
	if err := d.pages.ExecuteTemplate(&b, name, p); err != nil {
		d.log.ErrorContext(r.Context(), "desk: a page did not render", "page", name, "error", err)
		http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// Refuse shows a refusal page, as the desk's own refusals are shown: the
// front mounts it as the desk's (front.Policy.Refuse), so that what it
// refuses (a body over the bound, a handler's panic) is a page too, under
// the desk's Content-Security-Policy, with the correlation id the host
// log holds its cause under.
func (d *Desk) Refuse(w http.ResponseWriter, r *http.Request, x front.Refusal) {
	d.setHeaders(w)
	p := refusalPage(nil, x.Code, x.Message)
	switch {
	case x.Code == errcode.RequestTooLarge:
		// The code's fix speaks of the API's JSON too; a person sent a form.
		p.Error, p.Fix = "The form is larger than the desk takes.", "Shorten the note and send the decision again."
	case x.CorrelationID != "":
		p.Fix = "Try again shortly. If it persists, give the operator this correlation id: " + x.CorrelationID + "."
	}
	d.render(w, r, x.Status, "refused.html", p)
}

// refuse shows a refusal page with its code and fix.
func (d *Desk) refuse(w http.ResponseWriter, r *http.Request, status int, code errcode.Code, msg string) {
	d.refuseIn(w, r, nil, status, code, msg)
}

// refuseIn shows a refusal page to a signed-in person, with the page's
// header (and its sign-out button).
func (d *Desk) refuseIn(w http.ResponseWriter, r *http.Request, s *session, status int, code errcode.Code, msg string) {
	d.render(w, r, status, "refused.html", refusalPage(s, code, msg))
}

// refusalPage is the refusal page of code and msg, with the code's fix,
// for the person signed in as s (nil: no one).
func refusalPage(s *session, code errcode.Code, msg string) *page {
	p := &page{Title: "Refused", Code: string(code), Error: msg}
	if s != nil {
		p.Person, p.FormToken = s.caller, s.formToken
	}
	if e, ok := errcode.Explain(string(code)); ok {
		p.Fix = e.Fix
	}
	return p
}

// failed answers a failure of the desk's own (the database, a template):
// the details go to the host log, never to the page.
func (d *Desk) failed(w http.ResponseWriter, r *http.Request, what string, err error) {
	d.log.ErrorContext(r.Context(), "desk: could not "+what, "error", err)
	d.refuse(w, r, http.StatusInternalServerError, errcode.InternalError, "The desk could not "+what+"; try again shortly.")
}

func (d *Desk) pageFor(s *session, title string) *page {
	return &page{Title: title, Person: s.caller, FormToken: s.formToken}
}

func (d *Desk) list(w http.ResponseWriter, r *http.Request, s *session) {
	cursor := r.URL.Query().Get("older")
	pending, err := d.pending(r.Context(), s.caller, cursor)
	if errcode.Of(err) == errcode.RequestInvalid {
		d.refuseIn(w, r, s, http.StatusBadRequest, errcode.RequestInvalid, "That link to older approvals is not one this desk made for you, or it lapsed: start from the newest.")
		return
	}
	if err != nil {
		d.failed(w, r, "list the approvals", err)
		return
	}
	p := d.pageFor(s, "Pending approvals")
	p.Rows, p.Paged = d.rows(pending.Items), cursor != ""
	if pending.NextCursor != "" {
		p.Older = Path + "?older=" + url.QueryEscape(pending.NextCursor)
	}
	if !p.Paged {
		recent, err := d.recent(r.Context(), s.caller, 20)
		if err != nil {
			d.failed(w, r, "list the approvals", err)
			return
		}
		for _, v := range recent {
			p.Recent = append(p.Recent, d.rowOf(v))
		}
	}
	d.render(w, r, http.StatusOK, "list.html", p)
}

func (d *Desk) detail(w http.ResponseWriter, r *http.Request, s *session) {
	d.showDetail(w, r, s, http.StatusOK, nil)
}

// showDetail renders one approval; refused, when set, is a decision the
// engine just refused.
func (d *Desk) showDetail(w http.ResponseWriter, r *http.Request, s *session, status int, refused *refusedDecision) {
	v, err := d.show(r.Context(), s.caller, r.PathValue("id"))
	switch errcode.Of(err) {
	case errcode.ApprovalNotFound:
		// Another tenant's approval and no approval look the same.
		d.refuseIn(w, r, s, http.StatusNotFound, errcode.ApprovalNotFound, "There is no such approval in your tenant.")
		return
	case errcode.Forbidden:
		// Another action's approvals are its own approvers' to read.
		d.refuseIn(w, r, s, http.StatusForbidden, errcode.Forbidden, "You may not review approvals of this action: its approvers decide it.")
		return
	}
	if err != nil {
		d.failed(w, r, "read the approval", err)
		return
	}
	p := d.pageFor(s, "Approval "+v.ID.String())
	dt := &detail{row: d.rowOf(v), Input: shownInput(v, func(b []byte) string { return display.JSON(b, "", "  ") }), Digest: v.Digest, Effect: display.Text(v.Effect),
		Rollback: display.Text(v.Rollback), Destructive: v.Destructive, MayDecide: d.mayDecide(s.caller, v), Unshown: v.InputState != ""}
	if len(v.WouldWrite) > 0 {
		dt.WouldWrite = display.JSON(v.WouldWrite, "", "  ")
	}
	if len(v.Target) > 0 {
		dt.Target = display.JSON(v.Target, "", "  ")
	}
	if v.TargetError != "" {
		dt.TargetError = "The target could not be read now."
		d.log.WarnContext(r.Context(), "desk: the approval's target could not be read", "approval_id", v.ID, "error", v.TargetError)
	}
	if v.DecidedBy != nil {
		dt.DecidedBy = display.Text(*v.DecidedBy)
	}
	if v.DecidedAt != nil {
		dt.DecidedAt = v.DecidedAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if v.DecisionNote != nil {
		dt.Note = display.Text(*v.DecisionNote)
	}
	switch {
	case dt.MayDecide:
	case v.Status != store.ApprovalPending:
		dt.Why = "This approval is " + string(v.Status) + "; there is nothing left to decide."
	case !d.c.Engine.MayDecide(s.caller, v.Action):
		// The action's approver roles, which may not be the global one.
		dt.Why = "You do not hold an approver role of this action, so you cannot decide this approval."
	default:
		dt.Why = "You requested this approval; another approver must decide it (four-eyes)."
	}
	p.Approval = dt
	// ?decided=1 is where a decision sends its decider; anyone can link it,
	// so it says the decision is recorded only to the person who decided.
	if r.URL.Query().Get("decided") != "" && v.Status != store.ApprovalPending && v.DecidedBy != nil && *v.DecidedBy == s.caller.Subject {
		p.Notice = "Your decision is recorded: this approval is " + string(v.Status) + "."
	}
	if refused != nil {
		p.Code, p.Error = string(refused.code), refused.msg
		if e, ok := errcode.Explain(string(refused.code)); ok {
			p.Fix = e.Fix
		}
		if refused.approve {
			dt.ApproveNote = refused.note
		} else {
			dt.RejectNote = refused.note
		}
	}
	d.render(w, r, status, "detail.html", p)
}

// refusalText says in plain words why a decision was refused.
func refusalText(code errcode.Code) string {
	switch code {
	case errcode.ApprovalArgumentsMismatch:
		return "The input shown to you is not the input stored: nothing was decided. Review the approval again."
	case errcode.ApprovalDecided:
		return "This approval was decided before your decision arrived."
	case errcode.ApprovalExpired:
		return "This approval lapsed before your decision arrived: nothing was decided."
	case errcode.ApprovalInputShredded:
		return "This approval was decided long ago, and its sealed input has been shredded: nothing was decided."
	case errcode.ApprovalInputUnreadable:
		return "This approval's sealed input cannot be opened here, so it cannot be shown to you and may not be approved: nothing was decided."
	case errcode.ApprovalFourEyes:
		return "You requested this approval; another approver must decide it."
	case errcode.Forbidden:
		return "You may not decide approvals."
	default:
		return "Your decision was not recorded."
	}
}

func (d *Desk) decide(w http.ResponseWriter, r *http.Request, s *session) {
	if d.bill != nil && !d.bill(w, r, s.caller) {
		return
	}
	var approve bool
	switch r.PostFormValue("decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		d.refuseIn(w, r, s, http.StatusBadRequest, formRefusedCode, "The form named no decision; use the Approve or Reject button.")
		return
	}
	// A form submits a textarea's line breaks as CRLF, while its maxlength
	// counted each as one character: the note is read back as the person
	// typed it (the textarea's value), so one the textarea took is taken.
	id, note := r.PathValue("id"), strings.ReplaceAll(r.PostFormValue("note"), "\r\n", "\n")
	if p := engine.NoteProblem(note); p != "" {
		d.showDetail(w, r, s, http.StatusBadRequest, &refusedDecision{code: errcode.RequestInvalid,
			msg: "Your decision was not recorded: its " + p + ". Your note is below, to mend.", approve: approve, note: note})
		return
	}
	out := d.decideApproval(r.Context(), s.caller, id, approve, r.PostFormValue("digest"), note)
	if out.Status == engine.StatusOK {
		http.Redirect(w, r, Path+"/"+url.PathEscape(id)+"?decided=1", http.StatusSeeOther)
		return
	}
	status := http.StatusForbidden
	switch out.Code {
	case errcode.ApprovalNotFound:
		d.refuseIn(w, r, s, http.StatusNotFound, errcode.ApprovalNotFound, "There is no such approval in your tenant.")
		return
	case errcode.ApprovalDecided, errcode.ApprovalExpired, errcode.ApprovalInputShredded, errcode.ApprovalInputUnreadable:
		status = http.StatusConflict
	case errcode.ApprovalArgumentsMismatch:
		status = http.StatusUnprocessableEntity
	case "":
		d.failed(w, r, "record the decision", errors.New(string(out.Status)))
		return
	}
	d.showDetail(w, r, s, status, &refusedDecision{code: out.Code, msg: refusalText(out.Code), approve: approve, note: note})
}

// auditPage is the audit view: the chain head and a page of records.
type auditPage struct {
	HeadSeq                             int64
	HeadHash                            string
	Action, Actor, CorrelationID, Phase string
	Records                             []auditRow
	Older                               string // the next page's query, if any
}

type auditRow struct {
	Seq                                          int64
	At                                           time.Time
	Phase, Action, Actor, ActorKind, Correlation string
	ApprovalID                                   string
}

const auditPageSize = 50

// audit shows the tenant's audit log through the engine's PageAudit, as
// the API does: the same filters, the same who-may-read, the same cursor.
func (d *Desk) audit(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	a := &auditPage{Action: q.Get("action"), Actor: q.Get("actor"), CorrelationID: q.Get("correlation_id"), Phase: q.Get("phase")}
	query := engine.AuditQuery{CorrelationID: a.CorrelationID, Action: a.Action, Actor: a.Actor, Phase: engine.Phase(a.Phase),
		Cursor: q.Get("cursor"), Limit: auditPageSize, WithoutEntries: true}
	if p := query.Problem(); p != "" {
		d.refuseIn(w, r, s, http.StatusBadRequest, errcode.RequestInvalid, "The audit log cannot be searched so: "+p+".")
		return
	}
	// The page first: it seals what committed before it, so the head read
	// after it is at or past its newest record.
	page, err := d.c.Engine.PageAudit(r.Context(), s.caller, query)
	if errcode.Of(err) == errcode.RequestInvalid {
		d.refuseIn(w, r, s, http.StatusBadRequest, errcode.RequestInvalid, "This page of the audit log cannot be shown: its link is not one of this search. Start from the newest records.")
		return
	}
	if err != nil {
		d.failed(w, r, "read the audit log", err)
		return
	}
	head, err := d.c.Engine.AuditHeadOf(r.Context(), s.caller)
	if err != nil {
		d.failed(w, r, "read the audit log", err)
		return
	}
	if head != nil {
		a.HeadSeq, a.HeadHash = head.Seq, fmt.Sprintf("%x", head.Hash)
	}
	for _, rec := range page.Items {
		ar := auditRow{Seq: rec.Seq, At: rec.At, Phase: display.Text(rec.Phase), Actor: display.Text(rec.Actor),
			ActorKind: display.Text(rec.ActorKind), Correlation: display.Text(rec.CorrelationID)}
		if rec.Action != nil {
			ar.Action = display.Text(*rec.Action)
		}
		if rec.ApprovalID != nil && *rec.ApprovalID != uuid.Nil {
			ar.ApprovalID = rec.ApprovalID.String()
		}
		a.Records = append(a.Records, ar)
	}
	if page.NextCursor != "" {
		older := url.Values{}
		for k, v := range map[string]string{"action": a.Action, "actor": a.Actor, "correlation_id": a.CorrelationID, "phase": a.Phase, "cursor": page.NextCursor} {
			if v != "" {
				older.Set(k, v)
			}
		}
		a.Older = Path + "/audit?" + older.Encode()
	}
	p := d.pageFor(s, "Audit log")
	p.Audit = a
	d.render(w, r, http.StatusOK, "audit.html", p)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
