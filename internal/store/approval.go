package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/db"
)

// ApprovalStatus is where an approval stands in its lifecycle.
type ApprovalStatus string

// The approval statuses. The CHECK constraint on orangerail.approvals.status
// (migrations/00001) allows exactly these; a test holds them equal.
const (
	// ApprovalPending waits for a person's decision.
	ApprovalPending ApprovalStatus = "pending"
	// ApprovalApproved was approved and waits to be consumed.
	ApprovalApproved ApprovalStatus = "approved"
	// ApprovalRejected was rejected; it never executes.
	ApprovalRejected ApprovalStatus = "rejected"
	// ApprovalConsumed was consumed, exactly once, by the execution it
	// allowed.
	ApprovalConsumed ApprovalStatus = "consumed"
	// ApprovalExpired lapsed before it was decided or consumed.
	ApprovalExpired ApprovalStatus = "expired"
)

// Open reports whether an approval of this status may still be decided or
// consumed: pending or approved (until it lapses).
func (s ApprovalStatus) Open() bool { return s == ApprovalPending || s == ApprovalApproved }

// ApprovalStatuses returns every approval status, in lifecycle order.
func ApprovalStatuses() []ApprovalStatus {
	return []ApprovalStatus{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalConsumed, ApprovalExpired}
}

// Approval is one staged call: what was asked, by whom, and where its
// decision stands.
type Approval struct {
	ID          uuid.UUID
	TenantID    string
	Action      string
	RequestedBy string
	// RequestedIssuer is the issuer that vouched for RequestedBy, as the
	// staged record names it: "" for a caller no issuer vouched for. The
	// approval is the caller's who has both.
	RequestedIssuer string
	// Input is the stored input: the bytes an approver reviews and the
	// bytes that execute.
	Input []byte
	// InputDigest is the keyed digest of the canonical input.
	InputDigest []byte
	// InputKeyID is the kid of the key that made InputDigest (and wrapped
	// InputDataKey); "" is the legacy key (keyring.Legacy).
	InputKeyID string
	// InputSealed, when the input was sealed (approvals.seal_inputs), is
	// the input encrypted, and Input is nil; InputDataKey is its data key,
	// wrapped, nil once shredded (InputShreddedAt).
	InputSealed     []byte
	InputDataKey    []byte
	InputShreddedAt *time.Time
	// DefinitionHash identifies the action's declaration at staging.
	DefinitionHash []byte
	Status         ApprovalStatus
	CreatedAt      time.Time
	ExpiresAt      time.Time
	DecidedBy      *string
	DecidedAt      *time.Time
	DecisionNote   *string
	ConsumedAt     *time.Time
}

func approvalOf(r *db.OrangerailApproval) *Approval {
	return &Approval{
		ID: r.ID, TenantID: r.TenantID, Action: r.Action, RequestedBy: r.RequestedBy, RequestedIssuer: r.RequestedIssuer,
		Input: r.Input, InputDigest: r.InputDigest, InputKeyID: deref(r.InputKeyID),
		InputSealed: r.InputSealed, InputDataKey: r.InputDataKey, InputShreddedAt: r.InputShreddedAt, DefinitionHash: r.DefinitionHash,
		Status: ApprovalStatus(r.Status), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, DecisionNote: r.DecisionNote, ConsumedAt: r.ConsumedAt,
	}
}

// ApprovalStageParams stage an approval.
type ApprovalStageParams struct {
	ID          uuid.UUID
	Action      string
	RequestedBy string
	Input       []byte
	InputDigest []byte
	// InputKeyID is the kid of the key that made InputDigest; "" (stored
	// NULL): the legacy key.
	InputKeyID string
	// InputSealed and InputDataKey hold a sealed input, Input nil; or
	// both are nil and Input holds it.
	InputSealed    []byte
	InputDataKey   []byte
	DefinitionHash []byte
	ExpiresAt      time.Time
	// Entry is the canonical bytes of the staged audit record.
	Entry []byte
}

// ApprovalStage inserts a pending approval in the transaction's tenant and
// appends its staged record, which must describe it (else
// ErrRecordMismatch). When an identical call (the same requester, action
// and input digest) has an open approval, it returns that one and stages
// nothing: its ID is not p.ID. An identical call staged by a transaction
// not yet committed is ErrConflict, once that one commits.
func (s *Store) ApprovalStage(ctx context.Context, p *ApprovalStageParams) (*Approval, error) {
	row, err := s.q.ApprovalStage(ctx, s.x, &db.ApprovalStageParams{
		ID: p.ID, Action: p.Action, RequestedBy: p.RequestedBy, Input: p.Input, InputDigest: p.InputDigest,
		InputKeyID: nonEmpty(p.InputKeyID), InputSealed: p.InputSealed, InputDataKey: p.InputDataKey,
		DefinitionHash: p.DefinitionHash, ExpiresAt: p.ExpiresAt, Entry: p.Entry,
	})
	return one(row, err, approvalOf)
}

// ApprovalGetParams name one approval of a tenant.
type ApprovalGetParams struct {
	ID       uuid.UUID
	TenantID string
}

// ApprovalGet returns one approval, or ErrNotFound.
func (s *Store) ApprovalGet(ctx context.Context, p *ApprovalGetParams) (*Approval, error) {
	row, err := s.q.ApprovalGet(ctx, s.x, &db.ApprovalGetParams{ID: p.ID, TenantID: p.TenantID})
	return one(row, err, approvalOf)
}

// ApprovalDecideParams decide an approval.
type ApprovalDecideParams struct {
	ID uuid.UUID
	// Status is ApprovalApproved or ApprovalRejected (else ErrLifecycle).
	Status       ApprovalStatus
	DecidedBy    string
	DecisionNote *string
	// Entry is the canonical bytes of the decision's audit record.
	Entry []byte
}

// ApprovalDecide decides a pending, unexpired approval of the
// transaction's tenant and appends the decision's record. ErrNotFound: it
// was decided already, or lapsed.
func (s *Store) ApprovalDecide(ctx context.Context, p *ApprovalDecideParams) (*Approval, error) {
	row, err := s.q.ApprovalDecide(ctx, s.x, &db.ApprovalDecideParams{
		ID: p.ID, Status: string(p.Status), DecidedBy: p.DecidedBy, DecisionNote: p.DecisionNote, Entry: p.Entry,
	})
	return one(row, err, approvalOf)
}

// ApprovalConsume is the consume compare-and-swap: exactly one caller gets
// the approved approval, now consumed, and whether the chain holds its
// approved record (decided), read in the same statement; tenantID is the
// transaction's tenant. ErrNotFound: someone else consumed it, it was
// never approved, or it lapsed.
func (s *Store) ApprovalConsume(ctx context.Context, tenantID string, id uuid.UUID) (*Approval, bool, error) {
	row, err := s.q.ApprovalConsume(ctx, s.x, &db.ApprovalConsumeParams{ID: &id, TenantID: tenantID})
	if err != nil {
		return nil, false, InterpretError(err)
	}
	return consumedOf(row), row.Decided, nil
}

// consumedOf is approvalOf for the consume's row, which is an approval's
// row and whether it was decided.
func consumedOf(r *db.ApprovalConsumeRow) *Approval {
	return approvalOf(&db.OrangerailApproval{
		ID: r.ID, TenantID: r.TenantID, Action: r.Action, RequestedBy: r.RequestedBy, RequestedIssuer: r.RequestedIssuer,
		Input: r.Input, InputDigest: r.InputDigest, DefinitionHash: r.DefinitionHash, Status: r.Status, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, DecisionNote: r.DecisionNote, ConsumedAt: r.ConsumedAt,
		InputKeyID: r.InputKeyID, InputSealed: r.InputSealed, InputDataKey: r.InputDataKey, InputShreddedAt: r.InputShreddedAt,
	})
}

// ApprovalRef names an approval and its action.
type ApprovalRef struct {
	ID     uuid.UUID
	Action string
	// DevMode: the development identity staged it.
	DevMode bool
}

// ApprovalListLapsed lists the first limit of a tenant's open approvals
// past their expiry, the longest lapsed first.
func (s *Store) ApprovalListLapsed(ctx context.Context, tenantID string, limit int32) ([]*ApprovalRef, error) {
	rows, err := s.q.ApprovalLapsed(ctx, s.x, &db.ApprovalLapsedParams{TenantID: tenantID, RowLimit: limit})
	return all(rows, err, func(r *db.ApprovalLapsedRow) *ApprovalRef {
		return &ApprovalRef{ID: r.ID, Action: r.Action, DevMode: r.DevMode}
	})
}

// ApprovalStagedDevMode reports whether the tenant's approval id was
// staged by the development identity (its staged record is dev_mode).
func (s *Store) ApprovalStagedDevMode(ctx context.Context, tenantID string, id uuid.UUID) (bool, error) {
	return s.q.ApprovalStagedDevMode(ctx, s.x, &db.ApprovalStagedDevModeParams{TenantID: tenantID, ApprovalID: id})
}

// ApprovalExpireParams expire one approval.
type ApprovalExpireParams struct {
	ID uuid.UUID
	// Entry is the canonical bytes of the expired audit record.
	Entry []byte
}

// ApprovalExpire expires one lapsed approval of the transaction's tenant
// and appends its expired record. ErrNotFound: it was expired, decided or
// consumed meanwhile.
func (s *Store) ApprovalExpire(ctx context.Context, p *ApprovalExpireParams) (*Approval, error) {
	row, err := s.q.ApprovalExpire(ctx, s.x, &db.ApprovalExpireParams{ID: p.ID, Entry: p.Entry})
	return one(row, err, approvalOf)
}

// ApprovalListParams select a tenant's approvals.
type ApprovalListParams struct {
	TenantID string
	// Status selects one status; empty selects every status.
	Status ApprovalStatus
	Limit  int32
}

// ApprovalList lists a tenant's approvals, newest first.
func (s *Store) ApprovalList(ctx context.Context, p *ApprovalListParams) ([]*Approval, error) {
	rows, err := s.q.ApprovalList(ctx, s.x, &db.ApprovalListParams{TenantID: p.TenantID, Status: string(p.Status), RowLimit: p.Limit})
	return all(rows, err, approvalOf)
}

// ApprovalRecentlySettled lists up to limit of a tenant's approvals of
// the given actions that are no longer pending, the most recently
// settled first: by consumed_at, expires_at of one lapsed, or decided_at
// (orangerail.approval_settled_at).
func (s *Store) ApprovalRecentlySettled(ctx context.Context, tenantID string, actions []string, limit int32) ([]*Approval, error) {
	rows, err := s.q.ApprovalRecentlySettled(ctx, s.x, &db.ApprovalRecentlySettledParams{TenantID: tenantID, Actions: actions, RowLimit: limit})
	return all(rows, err, approvalOf)
}

// ApprovalUnaudited is a consumed approval with no audit record of what
// followed its consume.
type ApprovalUnaudited struct {
	ApprovalID uuid.UUID
	Action     string
	ConsumedAt time.Time
}

// ApprovalListUnaudited lists the first limit of a tenant's consumed
// approvals the chain holds no post-consume record of
// (orangerail.approvals_unaudited), and how many there are.
func (s *Store) ApprovalListUnaudited(ctx context.Context, tenantID string, limit int32) ([]*ApprovalUnaudited, int64, error) {
	rows, err := s.q.ApprovalsUnaudited(ctx, s.x, &db.ApprovalsUnauditedParams{TenantID: tenantID, RowLimit: limit})
	return counted(rows, err, func(r *db.ApprovalsUnauditedRow) int64 { return r.Total }, func(r *db.ApprovalsUnauditedRow) *ApprovalUnaudited {
		return &ApprovalUnaudited{ApprovalID: r.ApprovalID, Action: r.Action, ConsumedAt: r.ConsumedAt}
	})
}

// ApprovalUnexplained is an approval whose status the chain does not
// explain, and the phases of the records it lacks.
type ApprovalUnexplained struct {
	ApprovalID uuid.UUID
	Action     string
	Status     ApprovalStatus
	Missing    []string
}

// ApprovalListUnexplained lists the first limit of a tenant's approvals
// whose status the chain does not explain
// (orangerail.approvals_unexplained), and how many there are.
func (s *Store) ApprovalListUnexplained(ctx context.Context, tenantID string, limit int32) ([]*ApprovalUnexplained, int64, error) {
	rows, err := s.q.ApprovalsUnexplained(ctx, s.x, &db.ApprovalsUnexplainedParams{TenantID: tenantID, RowLimit: limit})
	return counted(rows, err, func(r *db.ApprovalsUnexplainedRow) int64 { return r.Total }, func(r *db.ApprovalsUnexplainedRow) *ApprovalUnexplained {
		return &ApprovalUnexplained{ApprovalID: r.ApprovalID, Action: r.Action, Status: ApprovalStatus(r.Status), Missing: r.Missing}
	})
}

// ApprovalPageParams select one page of a tenant's approvals.
type ApprovalPageParams struct {
	TenantID string
	// Actions are the actions whose approvals may be listed; none lists
	// nothing.
	Actions []string
	// Status, Action and RequestedBy select one each; empty selects all.
	Status      ApprovalStatus
	Action      string
	RequestedBy string
	// AfterCreatedAt and AfterID are the previous page's last row; nil
	// starts at the newest.
	AfterCreatedAt *time.Time
	AfterID        *uuid.UUID
	Limit          int32
}

// ApprovalPage returns one page of a tenant's approvals, newest first.
func (s *Store) ApprovalPage(ctx context.Context, p *ApprovalPageParams) ([]*Approval, error) {
	rows, err := s.q.ApprovalPage(ctx, s.x, &db.ApprovalPageParams{TenantID: p.TenantID, Actions: p.Actions, Status: string(p.Status),
		Action: p.Action, RequestedBy: p.RequestedBy, AfterCreatedAt: p.AfterCreatedAt, AfterID: p.AfterID, RowLimit: p.Limit})
	return all(rows, err, approvalOf)
}

// ApprovalSweepLock takes the tenant's sweep lock for the transaction and
// reports true, or reports false when another transaction holds it.
func (s *Store) ApprovalSweepLock(ctx context.Context, tenantID string) (bool, error) {
	locked, err := s.q.ApprovalSweepLock(ctx, s.x, tenantID)
	if err != nil {
		return false, InterpretError(err)
	}
	return locked, nil
}

// ApprovalShredInputs deletes the data keys of at most limit of the
// transaction's tenant's sealed inputs whose approvals ended (consumed,
// rejected, expired) at or before endedBefore, and returns how many: those
// inputs can never be read again.
func (s *Store) ApprovalShredInputs(ctx context.Context, endedBefore time.Time, limit int32) (int64, error) {
	n, err := s.q.ApprovalShredInputs(ctx, s.x, &db.ApprovalShredInputsParams{EndedBefore: endedBefore, RowLimit: limit})
	if err != nil {
		return 0, InterpretError(err)
	}
	return n, nil
}

// deref is s, or "" for NULL.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nonEmpty is s, or NULL for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ApprovalsWaiting is how many approvals of every tenant wait for a person
// now, and how long the oldest of them has waited (zero when none does).
func (s *Store) ApprovalsWaiting(ctx context.Context) (int, time.Duration, error) {
	r, err := s.q.ApprovalsPending(ctx, s.x)
	if err != nil {
		return 0, 0, InterpretError(err)
	}
	return int(r.Pending), max(r.Now.Sub(r.Oldest), 0), nil
}
