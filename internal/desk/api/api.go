// Package api is the approvals API: the one door through which a verified
// person lists approvals, reviews one as it will execute, and approves or
// rejects it, and reads the tenant's audit log. It serves JSON under
// /api/v1 on the HTTP front (bearer tokens, people only), calls the engine
// for every read and decision, and answers every refusal as
// {"error": {"code", "message", "fix"}} with a stable code. Its OpenAPI
// 3.1 document is served at /api/v1/openapi.json.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/store"
)

// Prefix is where the API is served, and the protected resource its
// tokens are for (RFC 9728).
const Prefix = "/api/v1"

// MetadataPath is where the API's protected-resource metadata (RFC 9728)
// is served: a client reads there which issuers' tokens the API takes
// before it sends one.
var MetadataPath = front.MetadataPath(Prefix)

// MaxBodyBytes caps a request's body: a decision is a few hundred bytes.
const MaxBodyBytes = 64 << 10

// MaxFilterChars caps a list's filter, in characters:
// engine.MaxFilterChars.
const MaxFilterChars = engine.MaxFilterChars

// filters refuses a list's filter parameters that are no text, or longer
// than MaxFilterChars (engine.FilterProblem).
func filters(q url.Values, names ...string) error {
	for _, name := range names {
		if problem := engine.FilterProblem(name, q.Get(name)); problem != "" {
			return errcode.New(errcode.RequestInvalid, problem, nil)
		}
	}
	return nil
}

// API serves the approvals API.
type API struct {
	eng *engine.Engine
	log *slog.Logger
}

// New returns the API over eng; log receives the host log (nil: the
// default).
func New(eng *engine.Engine, log *slog.Logger) *API {
	if log == nil {
		log = slog.Default()
	}
	return &API{eng: eng, log: log}
}

// Mount mounts every route of the API on f, with its policy: bearer
// tokens checked by the front (401 with the RFC 9728 challenge), browser
// origins checked, bodies capped, reads and decisions billed to the
// caller's allowances, and the front's refusals answered as this API's.
// The protected-resource metadata of Prefix is mounted too.
func (a *API) Mount(f *front.Front) {
	bill := func(r *http.Request, _ []byte) front.Class {
		// A GET route serves HEAD too: a monitor's HEAD reads, and must
		// not spend the person's decisions.
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return front.ClassRead
		}
		return front.ClassWrite
	}
	p := front.Policy{Auth: front.AuthBearer, Resource: Prefix, CheckOrigin: true, MaxBodyBytes: MaxBodyBytes, Rate: bill, PlainErrors: true}
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{http.MethodGet, "/approvals", a.list},
		{http.MethodGet, "/approvals/{id}", a.show},
		{http.MethodPost, "/approvals/{id}/decision", a.decide},
		{http.MethodGet, "/audit", a.audit},
		{http.MethodGet, "/audit/head", a.auditHead},
		{http.MethodGet, "/audit/checkpoint", a.auditCheckpoint},
		{http.MethodGet, "/audit/proof/inclusion", a.inclusionProof},
		{http.MethodGet, "/audit/proof/consistency", a.consistencyProof},
	}
	// paths holds every route's path whatever the method, and method its
	// one method: what the answer to another method names in Allow.
	paths, method := http.NewServeMux(), map[string]string{}
	for _, rt := range routes {
		f.Mount(rt.method+" "+Prefix+rt.path, rt.h, p)
		paths.Handle(Prefix+rt.path, http.NotFoundHandler())
		method[Prefix+rt.path] = rt.method
	}
	f.Mount("GET "+Prefix+"/openapi.json", http.HandlerFunc(serveDocument), front.Policy{})
	f.Mount("GET "+MetadataPath, f.IssuerMetadata(Prefix), front.Policy{})
	// Any other path or method under the prefix is refused as the rest
	// are, in JSON with a code — not the mux's plain text — to a caller
	// that presents a token.
	f.Mount(Prefix+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if front.Unclean(r) {
			front.WriteError(w, http.StatusNotFound, errcode.APIRouteUnknown, fmt.Sprintf("the approvals API has no path %q: paths are served as written, never cleaned", r.URL.Path))
			return
		}
		if _, pattern := paths.Handler(r); pattern != "" {
			w.Header().Set("Allow", method[pattern])
			front.WriteError(w, http.StatusMethodNotAllowed, errcode.APIRouteUnknown, fmt.Sprintf("%s takes %s, not %s", pattern, method[pattern], r.Method))
			return
		}
		front.WriteError(w, http.StatusNotFound, errcode.APIRouteUnknown, fmt.Sprintf("the approvals API has no path %q", r.URL.Path))
	}), p)
}

// caller is the verified caller the front put in the request.
func caller(r *http.Request) *engine.Caller {
	c := front.CallerFrom(r.Context())
	return &c.Caller
}

// ListItem is one approval of a list.
type ListItem struct {
	ID          uuid.UUID            `json:"id"`
	Action      string               `json:"action"`
	Title       string               `json:"title"`
	Status      store.ApprovalStatus `json:"status"`
	RequestedBy string               `json:"requested_by"`
	RequestedAt time.Time            `json:"requested_at"`
	ExpiresAt   time.Time            `json:"expires_at"`
	Digest      string               `json:"digest"`
}

// List is a page of approvals.
type List struct {
	Items      []ListItem `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := filters(q, "action", "requested_by"); err != nil {
		a.fail(w, r, err)
		return
	}
	query := engine.ApprovalQuery{Status: store.ApprovalStatus(q.Get("status")), Action: q.Get("action"),
		RequestedBy: q.Get("requested_by"), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			a.fail(w, r, errcode.New(errcode.RequestInvalid, engine.PageLimitProblem, nil))
			return
		}
		query.Limit = n
		if n == 0 {
			query.Limit = -1 // explicit 0 is out of range, not the default
		}
	}
	page, err := a.eng.PageApprovals(r.Context(), caller(r), query)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := List{Items: make([]ListItem, 0, len(page.Items))}
	for _, v := range page.Items {
		out.Items = append(out.Items, ListItem{ID: v.ID, Action: v.Action, Title: v.Title, Status: v.Status,
			RequestedBy: v.RequestedBy, RequestedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt, Digest: v.Digest})
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
}

// Detail is one approval as its approver reviews it.
type Detail struct {
	ID     uuid.UUID            `json:"id"`
	Action string               `json:"action"`
	Title  string               `json:"title"`
	Status store.ApprovalStatus `json:"status"`
	Input  json.RawMessage      `json:"input"`
	// InputState is set only when a sealed input cannot be shown.
	InputState  engine.InputState `json:"input_state,omitempty"`
	Digest      string            `json:"digest"`
	Effect      string            `json:"effect"`
	Rollback    string            `json:"rollback"`
	Destructive bool              `json:"destructive"`
	TargetNow   json.RawMessage   `json:"target_now"`
	TargetError *string           `json:"target_error"`
	WouldWrite  json.RawMessage   `json:"would_write"`
	RequestedBy string            `json:"requested_by"`
	RequestedAt time.Time         `json:"requested_at"`
	ExpiresAt   time.Time         `json:"expires_at"`
	DecidedBy   *string           `json:"decided_by"`
	DecidedAt   *time.Time        `json:"decided_at"`
	Note        *string           `json:"note"`
}

func (a *API) show(w http.ResponseWriter, r *http.Request) {
	v, err := a.eng.ReviewApproval(r.Context(), caller(r), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d := Detail{ID: v.ID, Action: v.Action, Title: v.Title, Status: v.Status, Input: v.Input, InputState: v.InputState, Digest: v.Digest,
		Effect: v.Effect, Rollback: v.Rollback, Destructive: v.Destructive, TargetNow: orNull(v.Target), WouldWrite: orNull(v.WouldWrite),
		RequestedBy: v.RequestedBy, RequestedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt, DecidedBy: v.DecidedBy,
		DecidedAt: v.DecidedAt, Note: v.DecisionNote}
	if v.TargetError != "" {
		d.TargetError = &v.TargetError
	}
	writeJSON(w, http.StatusOK, d)
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// DecisionRequest is a person's decision.
type DecisionRequest struct {
	Decision string `json:"decision"`
	// Digest is the digest the person was shown; approving needs it.
	Digest string `json:"digest"`
	Note   string `json:"note"`
}

// DecisionResult is what a decision recorded.
type DecisionResult struct {
	ID        uuid.UUID            `json:"id"`
	Status    store.ApprovalStatus `json:"status"`
	DecidedBy string               `json:"decided_by"`
	DecidedAt time.Time            `json:"decided_at"`
}

func (a *API) decide(w http.ResponseWriter, r *http.Request) {
	var req DecisionRequest
	body, err := io.ReadAll(r.Body) // bounded by the front's body limit
	if err != nil || json.Unmarshal(body, &req) != nil || !jsonmember.New(body).IsObject() {
		a.fail(w, r, errcode.New(errcode.RequestInvalid, `the body must be one JSON object {"decision": "approve"|"reject", "digest": "…", "note": "…"}`, nil))
		return
	}
	problem := decisionMembers(body)
	switch {
	case problem != "":
	case req.Decision != "approve" && req.Decision != "reject":
		problem = `decision must be "approve" or "reject"`
	case req.Decision == "approve" && req.Digest == "":
		problem = "approving needs the digest the approval was shown with"
	default:
		problem = engine.NoteProblem(req.Note)
	}
	if problem != "" {
		a.fail(w, r, errcode.New(errcode.RequestInvalid, problem, nil))
		return
	}
	out, decided := a.eng.DecideApproval(r.Context(), caller(r),
		engine.Decision{ApprovalID: r.PathValue("id"), Approve: req.Decision == "approve", Digest: req.Digest, Note: req.Note})
	switch {
	case decided != nil:
		writeJSON(w, http.StatusOK, DecisionResult{ID: decided.ID, Status: decided.Status, DecidedBy: decided.DecidedBy, DecidedAt: decided.DecidedAt})
	case out.Code != "":
		a.fail(w, r, errcode.New(out.Code, refusalMessage(out.Code), nil))
	default:
		a.internal(w, r, out.CorrelationID, fmt.Errorf("decide: %s: %w", out.Status, out.Err))
	}
}

// decisionMembers is what is wrong with the members of a decision's body,
// which decoding into DecisionRequest would read otherwise than they were
// sent: a name not exactly one of its members' (encoding/json matches
// names whatever their case), or a member given twice (it keeps the last,
// where a proxy or a log may read the first: {"decision": "reject",
// "decision": "approve"} would approve). "" when there is none.
func decisionMembers(body []byte) string {
	seen := map[string]bool{}
	members := jsonmember.New(body)
	for members.Scan() {
		switch name := members.Name(); {
		case name != "decision" && name != "digest" && name != "note":
			return fmt.Sprintf(`%q is not a member of a decision: it takes "decision", "digest" and "note", named exactly`, display.Echo(name))
		case seen[name]:
			return fmt.Sprintf("%q is given twice", name)
		default:
			seen[name] = true
		}
	}
	return ""
}

// refusalMessage says what a decision's refusal means.
func refusalMessage(code errcode.Code) string {
	switch code {
	case errcode.Forbidden:
		return "deciding this approval needs a person holding one of its action's approver roles"
	case errcode.ApprovalNotFound:
		return "no such approval in your tenant"
	case errcode.ApprovalFourEyes:
		return "you requested this approval; another person must decide it"
	case errcode.ApprovalDecided:
		return "the approval was decided already"
	case errcode.ApprovalExpired:
		return "the approval lapsed before it was decided"
	case errcode.ApprovalInputShredded:
		return "the approval was decided long ago and its sealed input shredded"
	case errcode.ApprovalInputUnreadable:
		return "the approval's sealed input does not open on this server, so it may not be approved here (it may be rejected)"
	case errcode.ApprovalArgumentsMismatch:
		return "the digest is not the digest of the approval's input: review it again"
	}
	return "the decision was refused"
}

// AuditList is a page of audit records.
type AuditList struct {
	Items      []*engine.AuditItem `json:"items"`
	NextCursor *string             `json:"next_cursor"`
}

func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := filters(q, "correlation_id", "action", "actor"); err != nil {
		a.fail(w, r, err)
		return
	}
	query := engine.AuditQuery{CorrelationID: q.Get("correlation_id"), Action: q.Get("action"), Actor: q.Get("actor"),
		Phase: engine.Phase(q.Get("phase")), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n == 0 {
			a.fail(w, r, errcode.New(errcode.RequestInvalid, engine.PageLimitProblem, nil))
			return
		}
		query.Limit = n
	}
	page, err := a.eng.PageAudit(r.Context(), caller(r), query)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := AuditList{Items: page.Items}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
}

// AuditHead is the last link of the tenant's chain: seq 0 and no hash
// before the first record.
type AuditHead struct {
	Seq  int64   `json:"seq"`
	Hash *string `json:"hash"`
}

func (a *API) auditHead(w http.ResponseWriter, r *http.Request) {
	head, err := a.eng.AuditHeadOf(r.Context(), caller(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := AuditHead{}
	if head != nil {
		hash := engine.Hash(head.Hash).String()
		out = AuditHead{Seq: head.Seq, Hash: &hash}
	}
	writeJSON(w, http.StatusOK, out)
}

// statusOf is the HTTP status of each refusal the API answers.
var statusOf = map[errcode.Code]int{
	errcode.RequestInvalid:            http.StatusBadRequest,
	errcode.Forbidden:                 http.StatusForbidden,
	errcode.ApprovalFourEyes:          http.StatusForbidden,
	errcode.ApprovalNotFound:          http.StatusNotFound,
	errcode.ApprovalDecided:           http.StatusConflict,
	errcode.ApprovalExpired:           http.StatusConflict,
	errcode.ApprovalInputShredded:     http.StatusConflict,
	errcode.ApprovalInputUnreadable:   http.StatusConflict,
	errcode.ApprovalArgumentsMismatch: http.StatusUnprocessableEntity,
	errcode.AuditCheckpointMissing:    http.StatusNotFound,
	errcode.AuditProofRange:           http.StatusBadRequest,
	errcode.AuditChainBroken:          http.StatusConflict,
}

// fail answers err: a coded refusal with its status, anything else as an
// internal error whose details stay in the host log.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var coded *errcode.Error
	if errors.As(err, &coded) {
		if status, ok := statusOf[coded.Code]; ok {
			front.WriteError(w, status, coded.Code, coded.Msg)
			return
		}
	}
	a.internal(w, r, uuid.NewString(), err)
}

// internal answers 500 X_INTERNAL_ERROR under a correlation id the host
// log carries with the error.
func (a *API) internal(w http.ResponseWriter, r *http.Request, correlation string, err error) {
	a.log.ErrorContext(r.Context(), "approvals API request failed", "path", r.URL.Path, "correlation_id", correlation, "error", err)
	front.WriteError(w, http.StatusInternalServerError, errcode.InternalError, "the request failed; correlation id "+correlation)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
