package engine

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// Decision is a person's verdict on an approval.
type Decision struct {
	ApprovalID string
	Approve    bool
	// Digest is the input digest the approver was shown (hex); approving
	// requires it to be the approval's.
	Digest string
	Note   string
}

// Decided is what a decision made of an approval.
type Decided struct {
	ID        uuid.UUID
	Status    store.ApprovalStatus
	DecidedBy string
	DecidedAt time.Time
}

// Decide is DecideApproval for a caller that needs only the outcome.
func (e *Engine) Decide(ctx context.Context, decider *Caller, d Decision) *Outcome {
	out, _ := e.DecideApproval(ctx, decider, d)
	return out
}

// DecideApproval approves or rejects a pending approval. The decider must be a
// person holding one of the action's approver roles (policy.approver_roles)
// in the approval's tenant and, when four_eyes is on, not its requester:
// not the same subject of the same issuer. An approval is decided once; a
// lapsed one is never decided. On success the outcome is StatusOK and
// decided says what was recorded.
func (e *Engine) DecideApproval(ctx context.Context, decider *Caller, d Decision) (result *Outcome, decided *Decided) {
	ctx = e.observe(ctx)
	ctx = e.begin(ctx, OpDecide, d.ApprovalID)
	defer e.settle(ctx, OpDecide, d.ApprovalID, decider, time.Now(), &result)
	if !decider.person() {
		return refuse(StatusDenied, errcode.Forbidden), nil
	}
	if out := noteRefused(d); out != nil {
		return out, nil
	}
	if out, decided := e.decideQuickly(ctx, decider, d); out != nil {
		return out, decided
	}
	return e.decide(ctx, e.store, decider.Tenant, d, decisionRules{
		who:      func(context.Context, *store.Store) (*Caller, *Outcome, error) { return decider, nil, nil },
		may:      func(a *store.Approval) bool { return e.MayDecide(decider, a.Action) },
		fourEyes: func(a *store.Approval) bool { return e.FourEyesBars(decider, a.RequestedBy, a.RequestedIssuer) },
	})
}

func refuse(status Status, code errcode.Code) *Outcome { return &Outcome{Status: status, Code: code} }

// noteRefused refuses a decision whose note is not one a note may be
// (NoteProblem), before anything is read; nil when it is.
func noteRefused(d Decision) *Outcome {
	if p := NoteProblem(d.Note); p != "" {
		return &Outcome{Status: StatusInvalidInput, Code: errcode.RequestInvalid, Issues: []Issue{{Path: "/note", Message: p}}}
	}
	return nil
}

// decisionRules are what differs between a person's decision and an
// operator's: who decides, whether they may decide the approval's action,
// and whether four-eyes refuses them.
type decisionRules struct {
	// who names the decider from inside the decision's transaction, or
	// refuses.
	who      func(ctx context.Context, st *store.Store) (*Caller, *Outcome, error)
	may      func(a *store.Approval) bool
	fourEyes func(a *store.Approval) bool
	// extra are members the decision's record carries in its result beside
	// the note.
	extra map[string]string
}

// decide records a decision through conn, in tenant, under rules: the
// approval must exist, be the decider's to decide, be pending and
// unexpired, pass four-eyes, and when approved the digest shown must be
// its input's. The record is appended by approval_decide in the same
// transaction that changes the approval.
func (e *Engine) decide(ctx context.Context, conn database.TxBeginner, tenant string, d Decision, rules decisionRules) (*Outcome, *Decided) {
	id, err := uuid.Parse(d.ApprovalID)
	if err != nil {
		return refuse(StatusNotFound, errcode.ApprovalNotFound), nil
	}
	var out *Outcome
	var decided *Decided
	err = database.InTenant(ctx, conn, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		st := store.New(tx)
		decider, refused, err := rules.who(ctx, st)
		if err != nil || refused != nil {
			out = refused
			return err
		}
		a, err := st.ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: tenant})
		if errors.Is(err, store.ErrNotFound) {
			out = refuse(StatusNotFound, errcode.ApprovalNotFound)
			return nil
		}
		if err != nil {
			return err
		}
		if !rules.may(a) {
			out = refuse(StatusDenied, errcode.Forbidden)
			return nil
		}
		switch _, state := e.openInput(a); {
		case state == InputShredded:
			out = refuse(StatusDenied, errcode.ApprovalInputShredded)
			return nil
		case state == InputUnreadable && d.Approve:
			// Whoever approves must have been shown what executes: an
			// input this replica cannot open was shown to nobody here,
			// and another replica that holds the key would run it. It may
			// still be rejected.
			out = refuse(StatusDenied, errcode.ApprovalInputUnreadable)
			return nil
		}
		if a, err = e.expireIfLapsed(ctx, tx, tenant, a); err != nil {
			return err
		}
		switch {
		case a.Status == store.ApprovalExpired:
			out = refuse(StatusExpired, errcode.ApprovalExpired)
			return nil
		case a.Status != store.ApprovalPending:
			out = refuse(StatusDenied, errcode.ApprovalDecided)
			return nil
		}
		if rules.fourEyes(a) {
			out = refuse(StatusDenied, errcode.ApprovalFourEyes)
			return nil
		}
		if d.Approve && !digestIs(d.Digest, a.InputDigest) {
			out = refuse(StatusInvalidInput, errcode.ApprovalArgumentsMismatch)
			return nil
		}
		m, err := e.decisionOf(tenant, a, decider, d, rules.extra)
		if err != nil {
			return err
		}
		row, err := st.ApprovalDecide(ctx, m.params)
		if errors.Is(err, store.ErrNotFound) { // lapsed or decided this instant
			// Lapsed by the database's clock, which the engine's had not
			// yet reached: expired, and said so.
			expired, err := e.expire(ctx, tx, tenant, id, a.Action)
			if err != nil {
				return err
			}
			out = refuse(StatusDenied, errcode.ApprovalDecided)
			if expired {
				out = refuse(StatusExpired, errcode.ApprovalExpired)
			}
			return nil
		}
		if err != nil {
			return changeError(err)
		}
		out, decided = m.made(ctx, tx, a, row)
		return nil
	})
	if err != nil {
		return e.storeFailure(ctx, "decide approval", d.ApprovalID, err), nil
	}
	return out, decided
}

// decideQuickly is a person's decision of an approval plainly theirs to
// make, in two round trips instead of four: the approval read alone, then
// the decision sent with its scope and committed with it (a person's desk
// waits on each). It answers nil, nil when decide must: the approval is
// not found, not the person's to decide, not pending, shredded or
// unreadable, lapsed by the engine's clock, barred by four-eyes, or the
// digest shown is not its input's — each of which decide reads again and
// answers — or it changed between the read and the decision (decided
// meanwhile, lapsed by the database's clock: the decision finds no
// pending row and writes nothing). A store that fails the read fails the
// decision, as it would fail decide's.
func (e *Engine) decideQuickly(ctx context.Context, decider *Caller, d Decision) (*Outcome, *Decided) {
	id, err := uuid.Parse(d.ApprovalID)
	if err != nil {
		return nil, nil
	}
	tenant := decider.Tenant
	reader := store.New(database.RowReader(e.store, tenant))
	a, err := reader.ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: tenant})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return e.storeFailure(ctx, "decide approval", d.ApprovalID, err), nil
	}
	if a.Status != store.ApprovalPending || e.lapsed(a) || !e.MayDecide(decider, a.Action) ||
		e.FourEyesBars(decider, a.RequestedBy, a.RequestedIssuer) || (d.Approve && !digestIs(d.Digest, a.InputDigest)) {
		return nil, nil
	}
	if _, state := e.openInput(a); state != InputOpen {
		return nil, nil // shredded or unreadable: decide refuses or records it
	}
	m, err := e.decisionOf(tenant, a, decider, d, nil)
	if err != nil {
		return nil, nil // decide fails it, as it would here
	}
	if e.beforeDecide != nil {
		e.beforeDecide(m.params)
	}
	row, err := store.New(database.RowWriter(e.store, tenant)).ApprovalDecide(ctx, m.params)
	if errors.Is(err, store.ErrNotFound) {
		// No pending row: the approval changed since the read, or this
		// very decision committed on a connection that died before its
		// answer came, and RowWriter sent it again. Its record tells
		// which: a second send answers as the first.
		var made bool
		if made, err = reader.AuditEntryExists(ctx, m.rec.CorrelationID, m.params.Entry); err == nil {
			if !made {
				return nil, nil
			}
			row, err = reader.ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: tenant})
		}
	}
	if err != nil {
		return e.storeFailure(ctx, "decide approval", d.ApprovalID, changeError(err)), nil
	}
	return m.made(ctx, nil, a, row)
}

// decision is a decision about to be made of an approval: its statement's
// parameters, with its record's entry, and the record.
type decision struct {
	params *store.ApprovalDecideParams
	rec    *Record
	d      Decision
}

// decisionOf prepares decider's decision d of a, in tenant; extra are
// members its record carries in its result beside the note.
func (e *Engine) decisionOf(tenant string, a *store.Approval, decider *Caller, d Decision, extra map[string]string) (*decision, error) {
	status, phase := store.ApprovalRejected, PhaseRejected
	if d.Approve {
		status, phase = store.ApprovalApproved, PhaseApproved
	}
	var note *string
	rec := &Record{Tenant: tenant, At: e.now(), CorrelationID: a.ID.String(), Phase: phase, Action: a.Action,
		Actor: decider.actor(), DevMode: decider.DevMode, ApprovalID: &a.ID}
	result := map[string]string{}
	for k, v := range extra {
		result[k] = v
	}
	if d.Note != "" {
		note = &d.Note
		result["note"] = d.Note
	}
	if len(result) > 0 {
		rec.Result, _ = json.Marshal(result)
	}
	entry, err := encodeEntry(rec)
	if err != nil {
		return nil, &auditAppendError{err}
	}
	return &decision{rec: rec, d: d,
		params: &store.ApprovalDecideParams{ID: a.ID, Status: status, DecidedBy: rec.Actor.Subject, DecisionNote: note, Entry: entry}}, nil
}

// made answers the decision m, which made row of a, and registers its
// event on tx (nil: it committed).
func (m *decision) made(ctx context.Context, tx pgx.Tx, a *store.Approval, row *store.Approval) (*Outcome, *Decided) {
	transition := TransitionRejected
	if m.d.Approve {
		transition = TransitionApproved
	}
	approvalChanged(ctx, tx, ApprovalChanged{ApprovalID: a.ID, Transition: transition, Action: a.Action,
		Tenant: m.rec.Tenant, Actor: m.rec.Actor.Subject, Age: m.rec.At.Sub(a.CreatedAt)})
	out := &Outcome{Status: StatusOK, ApprovalID: &a.ID, CorrelationID: a.ID.String(), ExpiresAt: &row.ExpiresAt}
	decided := &Decided{ID: a.ID, Status: row.Status, DecidedBy: m.rec.Actor.Subject, DecidedAt: m.rec.At.UTC().Truncate(time.Microsecond)}
	if row.DecidedAt != nil {
		decided.DecidedAt = *row.DecidedAt
	}
	return out, decided
}

// FourEyesBars reports whether four-eyes, when on, keeps person from
// deciding an approval requested by the given subject of the given issuer:
// the person asked for it — the same subject of the same issuer. An issuer
// either side does not know (a staged record that named none: written
// before issuers were kept, or by a caller no issuer vouched for) counts
// as the same, so four-eyes then compares subjects alone. An issuer the
// config re-spelled since is the same one (ontology.SameIssuer).
func (e *Engine) FourEyesBars(person *Caller, requestedBy, requestedIssuer string) bool {
	return *e.cfg.Approvals.FourEyes && requestedBy == person.Subject &&
		(requestedIssuer == "" || person.Issuer == "" || ontology.SameIssuer(requestedIssuer, person.Issuer))
}

// ApproverRoles returns the roles of which a person needs one to decide
// the action's approvals; none for an action not declared.
func (e *Engine) ApproverRoles(action string) []string {
	if a, ok := e.cfg.Actions[action]; ok {
		return a.Policy.ApproverRoles
	}
	return nil
}

// MayDecide reports whether caller is a verified person holding one of the
// action's approver roles.
func (e *Engine) MayDecide(caller *Caller, action string) bool {
	return caller.person() && caller.HasRole(e.ApproverRoles(action)...)
}

// DecidableActions returns, sorted, the actions whose approvals caller may
// decide.
func (e *Engine) DecidableActions(caller *Caller) []string {
	var names []string
	for name := range e.cfg.Actions {
		if e.MayDecide(caller, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// MayAudit reports whether caller is a verified person who may read the
// tenant's audit log: one holding approvals.auditor_role or any action's
// approver role.
func (e *Engine) MayAudit(caller *Caller) bool {
	if !caller.person() {
		return false
	}
	return caller.HasRole(e.cfg.Approvals.AuditorRole) || len(e.DecidableActions(caller)) > 0
}

// MayReadEntries reports whether caller may read the audit log's records
// whole: their entries, which hold each call's input, the target's state
// before an effect and an effect's error as the datasource gave it. Only a
// verified person holding approvals.auditor_role may: an approver reads
// the records' columns (who did what, and when) and, through the
// approvals they may decide, what those ask.
func (e *Engine) MayReadEntries(caller *Caller) bool {
	return caller.person() && caller.HasRole(e.cfg.Approvals.AuditorRole)
}

// digestIs reports whether shown, as hex, is digest. A digest that is not
// hex is not any digest.
func digestIs(shown string, digest []byte) bool {
	b, err := hex.DecodeString(shown)
	return err == nil && hmac.Equal(b, digest)
}

// ApprovalView is an approval as an approver reviews it: the verbatim input
// that will execute, its digest, what the action does and how to undo it,
// and the target's state now.
type ApprovalView struct {
	ID          uuid.UUID            `json:"id"`
	Tenant      string               `json:"tenant"`
	Action      string               `json:"action"`
	Title       string               `json:"title,omitempty"`
	Status      store.ApprovalStatus `json:"status"`
	RequestedBy string               `json:"requested_by"`
	// RequestedIssuer is the issuer that vouched for RequestedBy; "" for
	// a caller none did.
	RequestedIssuer string          `json:"requested_issuer,omitempty"`
	Input           json.RawMessage `json:"input"`
	// InputState, when set, says why Input is null: the sealed input was
	// shredded or does not open.
	InputState  InputState      `json:"input_state,omitempty"`
	Digest      string          `json:"digest"`
	Effect      string          `json:"effect,omitempty"`
	Rollback    string          `json:"rollback,omitempty"`
	Destructive bool            `json:"destructive"`
	Target      json.RawMessage `json:"target,omitempty"`
	TargetError string          `json:"target_error,omitempty"`
	// WouldWrite is what the action's statement sets, column by column,
	// when the input tells it all (ReviewApproval); nil otherwise.
	WouldWrite   json.RawMessage `json:"would_write,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	DecidedBy    *string         `json:"decided_by,omitempty"`
	DecidedAt    *time.Time      `json:"decided_at,omitempty"`
	DecisionNote *string         `json:"decision_note,omitempty"`
	ConsumedAt   *time.Time      `json:"consumed_at,omitempty"`
}

// ShowApproval returns one approval of a tenant for review, with the
// target's current state.
func (e *Engine) ShowApproval(ctx context.Context, tenant, approvalID string) (*ApprovalView, error) {
	id, err := uuid.Parse(approvalID)
	if err != nil {
		return nil, errcode.New(errcode.ApprovalNotFound, "not an approval id", nil)
	}
	a, err := store.New(database.RowReader(e.store, tenant)).ApprovalGet(ctx, &store.ApprovalGetParams{ID: id, TenantID: tenant})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errcode.New(errcode.ApprovalNotFound, "no approval "+approvalID+" in tenant "+tenant, nil)
	}
	if err != nil {
		return nil, err
	}
	v := e.view(a)
	if action, ok := e.cfg.Actions[a.Action]; ok && v.InputState == "" {
		// What the desk and the API show: the target now, and what the
		// statement would write.
		e.review(ctx, tenant, action, v.Input, v)
	}
	return v, nil
}

// ListApprovals lists a tenant's approvals, newest first, of one status or,
// when status is empty, of every status.
func (e *Engine) ListApprovals(ctx context.Context, tenant string, status store.ApprovalStatus, limit int32) ([]*ApprovalView, error) {
	if status != "" && !slices.Contains(store.ApprovalStatuses(), status) {
		return nil, fmt.Errorf("there is no approval status %q; the statuses are %v", status, store.ApprovalStatuses())
	}
	return e.readViews(ctx, tenant, func(tx pgx.Tx) ([]*store.Approval, error) {
		database.Repeatable(tx)
		return store.New(tx).ApprovalList(ctx, &store.ApprovalListParams{TenantID: tenant, Status: status, Limit: limit})
	})
}

// RecentlySettled lists up to limit of the tenant's approvals that are no
// longer pending, of the actions the person may decide, the most recently
// settled (consumed, lapsed, or else decided) first — never crowded out by
// pending approvals or by other actions' however many there are.
func (e *Engine) RecentlySettled(ctx context.Context, person *Caller, limit int32) ([]*ApprovalView, error) {
	actions := e.DecidableActions(person)
	if len(actions) == 0 {
		return nil, nil
	}
	return e.readViews(ctx, person.Tenant, func(tx pgx.Tx) ([]*store.Approval, error) {
		return store.New(tx).ApprovalRecentlySettled(ctx, person.Tenant, actions, limit)
	})
}

// readViews reads a tenant's approvals with read, in a read-only
// transaction of the tenant, as approvers see them.
func (e *Engine) readViews(ctx context.Context, tenant string, read func(pgx.Tx) ([]*store.Approval, error)) ([]*ApprovalView, error) {
	var rows []*store.Approval
	err := database.InTenant(ctx, e.store, tenant, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		rows, err = read(tx)
		return err
	})
	views := make([]*ApprovalView, len(rows))
	for i, a := range rows {
		views[i] = e.view(a)
	}
	return views, err
}

func (e *Engine) view(a *store.Approval) *ApprovalView {
	input, state := e.openInput(a)
	v := &ApprovalView{
		ID: a.ID, Tenant: a.TenantID, Action: a.Action, Status: a.Status, RequestedBy: a.RequestedBy, RequestedIssuer: a.RequestedIssuer,
		Input: input, Digest: DigestHex(a.InputDigest), CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt, DecisionNote: a.DecisionNote, ConsumedAt: a.ConsumedAt,
	}
	if state != InputOpen {
		v.InputState = state
		return e.describe(a, v)
	}
	// An approval staged before inputs were stored canonical is shown
	// canonical too: the form its digest covers, free of layout that could
	// mislead a reader.
	if canonical, err := jcs.Canonicalize(input); err == nil {
		v.Input = canonical
	}
	return e.describe(a, v)
}

// describe fills in what the action's declaration says of an approval.
func (e *Engine) describe(a *store.Approval, v *ApprovalView) *ApprovalView {
	if action, ok := e.cfg.Actions[a.Action]; ok {
		v.Title, v.Effect, v.Rollback, v.Destructive = action.Title, action.Effect, action.Rollback, action.DeclaredDestructive()
	}
	return v
}
