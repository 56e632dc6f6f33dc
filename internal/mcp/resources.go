package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The resources a caller reads: its ontology, each object it may read,
// what sql_query may read, and each approval it requested.
const (
	OntologyURI         = "orangerail://ontology"
	SQLRelationsURI     = "orangerail://sql_query/relations"
	objectURIPrefix     = "orangerail://objects/"
	approvalURIPrefix   = "orangerail://approvals/"
	approvalURITemplate = approvalURIPrefix + "{approvalId}"
	resourceMIME        = "application/json"
)

// ObjectURI is the resource of an object's schema.
func ObjectURI(object string) string { return objectURIPrefix + object }

// ApprovalURI is the resource of an approval.
func ApprovalURI(id string) string { return approvalURIPrefix + id }

// addResources adds the resources of a caller's catalog (names, the tools
// it sees): its ontology, one schema per object it may read, and, when it
// sees check_approval, the template of its approvals. An object it may not
// read is not added, so reading it answers as reading one that does not
// exist; every handler asks the engine's gate again for the request's
// caller, and answers the same when it refuses.
func (s *Server) addResources(srv *sdk.Server, names []string, fixed *engine.Caller) {
	srv.AddResource(&sdk.Resource{URI: OntologyURI, Name: "ontology", Title: "What " + s.cfg.Service + " lets you read and do",
		Description: "The objects, links and actions you may use, each action with its input schema, its policy in words, its effect and its rollback.",
		MIMEType:    resourceMIME},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			caller := resourceCaller(fixed, req)
			if caller == nil {
				return nil, resourceNotFound(req.Params.URI)
			}
			return jsonResource(req.Params.URI, s.ontologyDoc(s.usable(caller)))
		})
	for _, name := range names {
		t := s.tools[name]
		if t.kind != ontology.ToolGet {
			continue
		}
		object := t.subject
		o := s.cfg.Objects[object]
		srv.AddResource(&sdk.Resource{URI: ObjectURI(object), Name: object, Title: cmp.Or(o.Title, object),
			Description: fmt.Sprintf("The schema of one %s row, how a list of them filters, sorts and pages, and its links.", object), MIMEType: resourceMIME},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				caller := resourceCaller(fixed, req)
				if caller == nil || !s.engine.CanRead(caller, object) {
					return nil, resourceNotFound(req.Params.URI)
				}
				return jsonResource(req.Params.URI, s.objectDoc(object, s.usable(caller)))
			})
	}
	if slices.Contains(names, ontology.SQLQueryTool) && s.querier != nil {
		srv.AddResource(&sdk.Resource{URI: SQLRelationsURI, Name: "sql_query_relations", Title: "What sql_query may read",
			Description: "Every relation of sql_query's schemas that its role may read, with the columns it may read and their types; every query sees your tenant's rows only.",
			MIMEType:    resourceMIME},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				caller := resourceCaller(fixed, req)
				if caller == nil || !s.engine.Sees(caller, ontology.SQLQueryTool) {
					return nil, resourceNotFound(req.Params.URI)
				}
				return jsonResource(req.Params.URI, map[string]any{"schemas": s.querier.Schemas(), "relations": s.querier.Tables()})
			})
	}
	if slices.Contains(names, ontology.CheckApprovalTool) {
		srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: approvalURITemplate, Name: "approval", Title: "An approval you requested",
			Description: "Where one of your approvals stands: its status, action, expiry and a person's note. Reading it never executes it; check_approval does.",
			MIMEType:    resourceMIME},
			func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				caller := resourceCaller(fixed, req)
				if caller == nil {
					return nil, resourceNotFound(req.Params.URI)
				}
				if err := s.approvalGates(ctx, caller, req.Params.URI); err != nil {
					return nil, err
				}
				a, err := s.readApproval(ctx, caller, req.Params.URI)
				if err != nil {
					return nil, err
				}
				return jsonResource(req.Params.URI, approvalDoc(a))
			})
	}
}

// approvalGates runs check_approval's gates for a read of (or a
// subscription to) an approval resource, which is that tool's read: a
// caller who does not see the tool is answered as for a URI naming
// nothing, and one whose token lacks the scope granting it is refused
// naming the scope, as the tool refuses it (and recorded as its refusal).
func (s *Server) approvalGates(ctx context.Context, caller *engine.Caller, uri string) error {
	out := s.engine.Admit(ctx, caller, ontology.CheckApprovalTool)
	switch {
	case out == nil:
		return nil
	case out.Code == errcode.MCPScopeDenied:
		return scopeDenied(ontology.CheckApprovalTool, out)
	}
	return resourceNotFound(uri)
}

// resourceCaller is the caller of a resource request: the session's, or
// the one its HTTP request's token verified.
func resourceCaller(fixed *engine.Caller, req *sdk.ReadResourceRequest) *engine.Caller {
	if fixed != nil {
		return fixed
	}
	if req.Extra == nil {
		return nil
	}
	return callerOfInfo(req.Extra.TokenInfo)
}

// readApproval reads the approval a URI names for caller: not found, as
// for a URI naming nothing, unless it is the caller's (check_approval's
// rule); a failure to read is internal, its text in the host log only.
func (s *Server) readApproval(ctx context.Context, caller *engine.Caller, uri string) (*engine.AgentApproval, error) {
	id, ok := strings.CutPrefix(uri, approvalURIPrefix)
	if !ok || !canonicalUUID(id) {
		// A resource has one URI: the one a subscription's notifications
		// name (ApprovalURI of the id as the approval spells it). Another
		// spelling of the id — upper case, braces, urn:uuid:, no hyphens —
		// would read the approval but hear of no change.
		return nil, resourceNotFound(uri)
	}
	a, err := s.engine.ReadApproval(ctx, caller, id)
	switch {
	case errors.Is(err, engine.ErrApprovalUnseen):
		return nil, resourceNotFound(uri)
	case err != nil:
		correlation := uuid.NewString()
		s.log.ErrorContext(ctx, "an approval resource could not be read", "correlation_id", correlation, "error", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("the approval could not be read; an operator can read why in the host log under correlationId %q", correlation)}
	}
	return a, nil
}

// canonicalUUID reports whether s is a UUID in its one canonical spelling:
// 36 characters, lower-case hexadecimal, hyphenated 8-4-4-4-12.
func canonicalUUID(s string) bool {
	id, err := uuid.Parse(s)
	return err == nil && id.String() == s
}

// jsonResource is a resource's content: v as indented JSON, its < > &
// written as themselves (a model reads it, not a browser).
func jsonResource(uri string, v any) (*sdk.ReadResourceResult, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: resourceMIME, Text: b.String()}}}, nil
}

// ontologyDoc is the ontology as a caller with the catalog names may see
// it: the objects it may read, the links between two of them, and the
// actions it may call — what each is and its policy in words. It holds no
// table, column of tenancy, statement, datasource or audience rule: what
// the agent may use, never how orangerail reaches the data.
func (s *Server) ontologyDoc(names []string) map[string]any {
	readable := map[string]bool{}
	objects := map[string]any{}
	actions := map[string]any{}
	governed := false
	for _, name := range names {
		t := s.tools[name]
		switch t.kind {
		case ontology.ToolGet:
			readable[t.subject] = true
		case ontology.ToolAction:
			governed = governed || s.cfg.Actions[t.subject].Policy.Approval == ontology.ApprovalRequired
		}
	}
	for object := range readable {
		o := s.cfg.Objects[object]
		doc := map[string]any{"title": cmp.Or(o.Title, object), "key": o.Key, "fields": o.Fields,
			"readAccess": readAccessWords(o), "tools": []string{ontology.GetTool(object), ontology.ListTool(object)},
			"schema": ObjectURI(object)}
		if o.Description != "" {
			doc["description"] = o.Description
		}
		objects[object] = doc
	}
	// Action targets are named only for objects the caller reads: done
	// after every object is known.
	for _, name := range names {
		if t := s.tools[name]; t.kind == ontology.ToolAction {
			actions[t.subject] = s.actionDoc(t, readable)
		}
	}
	doc := map[string]any{"service": s.cfg.Service, "preset": string(s.cfg.Preset), "objects": objects,
		"links": s.visibleLinks(readable, ""), "actions": actions}
	if governed && s.cfg.Preset != ontology.PresetSandbox { // a sandbox stages nothing
		doc["approvals"] = map[string]any{
			"ttl":      time.Duration(s.cfg.Approvals.TTL).String(),
			"fourEyes": *s.cfg.Approvals.FourEyes,
			"how": "A call of an action that needs approval answers approval_pending with an approvalId. A person decides it at the approvals desk " +
				"before ttl passes. Poll check_approval with the approvalId: an approved approval executes on that poll, once; " +
				"orangerail://approvals/{approvalId} tells its status without executing it.",
		}
	}
	return doc
}

// objectDoc is one object's schema resource.
func (s *Server) objectDoc(object string, names []string) map[string]any {
	o := s.cfg.Objects[object]
	readable := map[string]bool{}
	for _, name := range names {
		if t := s.tools[name]; t.kind == ontology.ToolGet {
			readable[t.subject] = true
		}
	}
	filters := map[string]any{}
	for field, ops := range o.List.Filters {
		filters[field] = ops
	}
	doc := map[string]any{"name": object, "title": cmp.Or(o.Title, object), "key": o.Key,
		"readAccess": readAccessWords(o),
		"tools":      map[string]string{"get": ontology.GetTool(object), "list": ontology.ListTool(object)},
		"list":       map[string]any{"filters": filters, "sort": o.List.Sort, "maxLimit": o.List.MaxLimit},
		"links":      s.visibleLinks(readable, object)}
	if o.Description != "" {
		doc["description"] = o.Description
	}
	if t, ok := s.tools[ontology.GetTool(object)]; ok {
		doc["schema"] = rowSchema(t.def)
	}
	return doc
}

// rowSchema is the schema of one row as the object's get tool declares
// it (its output's item): one declaration, so that the resource and the
// tool cannot disagree.
func rowSchema(def *sdk.Tool) any {
	b, err := json.Marshal(def.OutputSchema)
	if err != nil {
		return nil
	}
	var out struct {
		Properties struct {
			Item json.RawMessage `json:"item"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &out) != nil || out.Properties.Item == nil {
		return nil
	}
	return out.Properties.Item
}

// visibleLinks are the links both of whose objects are readable; when
// object is set, only those touching it.
func (s *Server) visibleLinks(readable map[string]bool, object string) map[string]any {
	links := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Links)) {
		l := s.cfg.Links[name]
		from, _, _ := strings.Cut(l.From, ".")
		to, _, _ := strings.Cut(l.To, ".")
		if !readable[from] || !readable[to] || (object != "" && from != object && to != object) {
			continue
		}
		link := map[string]any{"from": l.From, "to": l.To}
		if l.Title != "" {
			link["title"] = l.Title
		}
		if l.Description != "" {
			link["description"] = l.Description
		}
		links[name] = link
	}
	return links
}

// actionDoc is one action as its caller may see it.
func (s *Server) actionDoc(t *tool, readable map[string]bool) map[string]any {
	a := s.cfg.Actions[t.subject]
	doc := map[string]any{"title": cmp.Or(a.Title, t.subject), "description": a.Description, "tool": t.def.Name,
		"input": t.def.InputSchema, "approval": string(a.Policy.Approval), "destructive": a.DestructiveHint(), "idempotent": a.Idempotent,
		"policy": s.policyWords(t.def.Name, a)}
	if a.Target != nil {
		target := map[string]any{"keyFrom": a.Target.KeyFrom}
		switch {
		case a.Target.Read():
			target = map[string]any{"upstream": a.Target.Upstream}
		case readable[a.Target.Object]:
			target["object"] = a.Target.Object
		}
		doc["target"] = target
	}
	if a.Effect != "" {
		doc["effect"] = a.Effect
	}
	if a.Rollback != "" {
		doc["rollback"] = a.Rollback
	}
	if scope := s.cfg.ToolScope(t.def.Name); scope != "" {
		doc["scope"] = scope
	}
	return doc
}

// policyWords says an action's policy as sentences: who may call it, what
// the token needs, whether a person approves, when it is refused.
func (s *Server) policyWords(tool string, a *ontology.Action) string {
	var parts []string
	if len(a.Policy.Roles) > 0 {
		parts = append(parts, fmt.Sprintf("Offered to callers with %s.", roleWords(a.Policy.Roles)))
	}
	if scope := s.cfg.ToolScope(tool); scope != "" {
		parts = append(parts, fmt.Sprintf("A call needs a token carrying the scope %s.", scope))
	}
	switch {
	case a.Policy.Approval == ontology.ApprovalRequired:
		who := fmt.Sprintf("A person with %s approves each call before it runs", roleWords(a.Policy.ApproverRoles))
		if *s.cfg.Approvals.FourEyes {
			who += ", never the caller who requested it"
		}
		parts = append(parts, who+".")
	case a.ApprovalWaived != "":
		parts = append(parts, "Destructive, and runs without approval: "+strings.TrimRight(a.ApprovalWaived, ".")+".")
	default:
		parts = append(parts, "Runs when called, without approval.")
	}
	if a.Where != "" {
		parts = append(parts, fmt.Sprintf("Refused unless this holds when it runs (CEL over target, input and caller): %s", a.Where))
	}
	if s.cfg.Preset == ontology.PresetSandbox {
		parts = append(parts, "This deployment is a sandbox: a call is recorded and nothing executes.")
	}
	return strings.Join(parts, " ")
}

// readAccessWords says who may read an object.
func readAccessWords(o *ontology.Object) string {
	switch o.ReadAccess.Kind {
	case ontology.ReadPublic:
		return "anyone"
	case ontology.ReadRoles:
		return "callers with " + roleWords(o.ReadAccess.Roles)
	}
	return "any signed-in caller"
}

// roleWords names roles as a sentence does.
func roleWords(roles []string) string {
	if len(roles) == 1 {
		return "the role " + roles[0]
	}
	return "one of the roles " + strings.Join(roles, ", ")
}

// approvalDoc is an approval resource's content: the approval, and what
// its status means for the agent.
func approvalDoc(a *engine.AgentApproval) map[string]any {
	b, _ := json.Marshal(a)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	doc["message"] = approvalWords[string(a.Status)]
	return doc
}

// approvalWords say what each status means for the agent that reads it.
var approvalWords = map[string]string{
	"pending":  "Waiting for a person to decide. Poll check_approval with the approvalId later.",
	"approved": "A person approved it. Poll check_approval with the approvalId to execute it, once, and get its result.",
	"rejected": "A person rejected it; it will not run.",
	"expired":  "It lapsed before it executed; it will not run. Stage the call again if it is still wanted.",
	"consumed": "It was used: its one execution ran, or was refused when it came to run. Nothing more runs.",
}

// ApprovalPollDefault is Options.ApprovalPoll's default.
const ApprovalPollDefault = 2 * time.Second

// subscribe takes a session's resources/subscribe: an approval must be
// the caller's (or it answers as not found), and from now on a change of
// its status is sent to the session as notifications/resources/updated.
// The other resources never change while a session lasts; subscribing to
// one the session lists is accepted and sends nothing.
func (s *Server) subscribe(ctx context.Context, srv *sdk.Server, caller *engine.Caller, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	if !strings.HasPrefix(uri, approvalURIPrefix) {
		object, isObject := strings.CutPrefix(uri, objectURIPrefix)
		if uri == OntologyURI || (isObject && s.engine.CanRead(caller, object)) {
			return nil
		}
		return resourceNotFound(uri)
	}
	if err := s.approvalGates(ctx, caller, uri); err != nil {
		return err
	}
	a, err := s.readApproval(ctx, caller, uri)
	if err != nil {
		return err
	}
	s.watch.add(req.Session, srv, caller, a)
	return nil
}

// unsubscribe ends a session's subscription to an approval.
func (s *Server) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	if id, ok := strings.CutPrefix(req.Params.URI, approvalURIPrefix); ok && canonicalUUID(id) {
		s.watch.remove(uuid.MustParse(id), req.Session)
	}
	return nil
}

// watcher tells subscribed sessions when an approval's status changes. It
// learns of a change two ways: this process's engine emits
// ApprovalChanged after each commit (at once), and a poll re-reads every
// watched approval each interval (changes other processes made: the desk
// of another replica, the command line). Each read is the subscriber's
// own (ReadApproval), so a session never learns of an approval it could
// not read; a final approval is watched no more.
type watcher struct {
	engine *engine.Engine
	log    *slog.Logger
	every  time.Duration

	mu        sync.Mutex
	approvals map[uuid.UUID]*watched
	polling   bool
}

// watched is one approval some sessions subscribed to.
type watched struct {
	caller   *engine.Caller // its requester, as whom it is read
	rank     int            // of the status last told
	sessions map[*sdk.ServerSession]*sdk.Server
}

func newWatcher(e *engine.Engine, log *slog.Logger, every time.Duration) *watcher {
	if every == 0 {
		every = ApprovalPollDefault
	}
	return &watcher{engine: e, log: log, every: every, approvals: map[uuid.UUID]*watched{}}
}

// statusRank orders statuses as an approval moves through them; a read
// older than the last one told is never sent.
func statusRank(status string) int {
	switch status {
	case "pending":
		return 0
	case "approved":
		return 1
	}
	return 2 // rejected, expired, consumed: final
}

func (w *watcher) add(ss *sdk.ServerSession, srv *sdk.Server, caller *engine.Caller, a *engine.AgentApproval) {
	if a.Final() {
		return // nothing will change
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wa := w.approvals[a.ID]
	if wa == nil {
		wa = &watched{caller: caller, rank: statusRank(string(a.Status)), sessions: map[*sdk.ServerSession]*sdk.Server{}}
		w.approvals[a.ID] = wa
	}
	wa.sessions[ss] = srv
	if !w.polling && w.every > 0 {
		w.polling = true
		go w.poll()
	}
}

func (w *watcher) remove(id uuid.UUID, ss *sdk.ServerSession) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wa := w.approvals[id]; wa != nil {
		delete(wa.sessions, ss)
		if len(wa.sessions) == 0 {
			delete(w.approvals, id)
		}
	}
}

// drop forgets a session that ended.
func (w *watcher) drop(ss *sdk.ServerSession) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, wa := range w.approvals {
		delete(wa.sessions, ss)
		if len(wa.sessions) == 0 {
			delete(w.approvals, id)
		}
	}
}

// observe is the Hooks subscriber: an approval this process changed is
// re-read at once for its watchers.
func (w *watcher) observe(ev engine.Event) {
	if ch, ok := ev.(engine.ApprovalChanged); ok {
		w.refresh(ch.ApprovalID)
	}
}

// poll re-reads every watched approval each interval while any is
// watched.
func (w *watcher) poll() {
	ticker := time.NewTicker(w.every)
	defer ticker.Stop()
	for range ticker.C {
		w.mu.Lock()
		ids := slices.Collect(maps.Keys(w.approvals))
		if len(ids) == 0 {
			w.polling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for _, id := range ids {
			w.refresh(id)
		}
	}
}

// refresh reads a watched approval as its requester and, when its status
// moved on, tells every session watching it.
func (w *watcher) refresh(id uuid.UUID) {
	w.mu.Lock()
	wa := w.approvals[id]
	var caller *engine.Caller
	if wa != nil {
		caller = wa.caller
	}
	w.mu.Unlock()
	if caller == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := w.engine.ReadApproval(ctx, caller, id.String())
	if err != nil {
		if !errors.Is(err, engine.ErrApprovalUnseen) {
			w.log.WarnContext(ctx, "a subscribed approval could not be re-read", "approval_id", id.String(), "error", err)
		}
		return
	}
	rank := statusRank(string(a.Status))
	w.mu.Lock()
	wa = w.approvals[id]
	if wa == nil || rank <= wa.rank {
		w.mu.Unlock()
		return
	}
	wa.rank = rank
	servers := slices.Collect(maps.Values(wa.sessions))
	if a.Final() {
		delete(w.approvals, id)
	}
	w.mu.Unlock()
	for _, srv := range servers { // one per session: a session's server is its own
		_ = srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: ApprovalURI(id.String())})
	}
}
