package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/orangerail/orangerail/internal/ontology"
)

// The describe tools (describe_object, describe_action, list_policies)
// tell a caller what it may use, from the declaration and the live
// catalog, and nothing else: an object or action outside the caller's
// audience answers exactly as one that does not exist, so a describe
// confirms nothing tools/list does not. Nothing here reads a row, and an
// action's execute (its SQL) is never described: the effect says what it
// does, in the words an approver reads.

// FieldTypeUnknown is a field's type when the live catalog does not
// describe its column.
const FieldTypeUnknown = "unknown"

// ObjectDescription is an object as a caller who may read it is told.
type ObjectDescription struct {
	Object      string `json:"object"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Key is the field a get reads a row by.
	Key    string             `json:"key"`
	Fields []FieldDescription `json:"fields"`
	// Links are the links a get may include whose other end the caller may
	// read too.
	Links []LinkDescription `json:"links"`
	List  ListDescription   `json:"list"`
	// Tools are the object's get and list tools.
	Tools []ToolGrant `json:"tools"`
}

// FieldDescription is one field of an object.
type FieldDescription struct {
	Name string `json:"name"`
	// Type is how the live catalog classifies the field's column
	// (ontology.ValueKind: text, integer, numeric, float, boolean,
	// timestamptz, timestamp, date, uuid, other), or FieldTypeUnknown.
	Type string `json:"type"`
	// Bits is an integer's or a float's size; 0 for other types.
	Bits int `json:"bits,omitempty"`
}

// LinkDescription is a link a get of an object may include.
type LinkDescription struct {
	Name  string `json:"name"`
	Title string `json:"title,omitempty"`
	// Object is the object at the link's other end.
	Object string `json:"object"`
	From   string `json:"from"`
	To     string `json:"to"`
	// Many says that an include answers the other end's rows pointing at
	// this one (a list), not the one row this one points to.
	Many bool `json:"many"`
}

// ListDescription is what a list of an object may filter and sort by.
type ListDescription struct {
	// Filters holds each filterable field's operators.
	Filters map[string][]ontology.FilterOp `json:"filters"`
	// Sort are the fields a list may sort by (-field sorts descending).
	Sort []string `json:"sort"`
	// MaxLimit caps a page.
	MaxLimit int `json:"maxLimit"`
}

// ToolGrant is a tool and the scope, if any, a call of it needs.
type ToolGrant struct {
	Name  string     `json:"name"`
	Scope *ScopeNeed `json:"scope,omitempty"`
}

// ScopeNeed is the scope a tool's call needs, and whether the caller's
// token carries it.
type ScopeNeed struct {
	Name string `json:"name"`
	Held bool   `json:"held"`
}

// ActionDescription is an action as a caller who may call it is told.
type ActionDescription struct {
	Action      string             `json:"action"`
	Title       string             `json:"title,omitempty"`
	Description string             `json:"description,omitempty"`
	Target      *TargetDescription `json:"target,omitempty"`
	// Precondition is the action's where, a CEL expression over target,
	// input and caller that must hold for a call to run.
	Precondition string       `json:"precondition,omitempty"`
	Policy       ActionPolicy `json:"policy"`
	Effect       string       `json:"effect,omitempty"`
	Rollback     string       `json:"rollback,omitempty"`
	// Implemented is false for an action declared without an effect: a
	// call is recorded and refused.
	Implemented bool `json:"implemented"`
}

// TargetDescription is the row an action acts on.
type TargetDescription struct {
	// Object is the target's object; empty when the caller may not read
	// it, so that an action names no object the caller is not shown.
	Object string `json:"object,omitempty"`
	// KeyFrom is the input property holding the target's key; empty for
	// a target an upstream answers.
	KeyFrom string `json:"keyFrom"`
	// Upstream names the upstream whose answer to a GET is the target.
	Upstream string `json:"upstream,omitempty"`
}

// ActionPolicy is an action's policy as a caller who may call it is told:
// facts, and Summary saying them in words.
type ActionPolicy struct {
	Action  string `json:"action"`
	Title   string `json:"title,omitempty"`
	Summary string `json:"summary"`
	// Roles are the roles of which a caller holds one to call the action;
	// empty when any authenticated caller may.
	Roles []string `json:"roles"`
	// Audience says that an audience predicate also chose the callers; its
	// text is the operator's, and is not shown.
	Audience bool                `json:"audience"`
	Approval ApprovalDescription `json:"approval"`
	Scope    *ScopeNeed          `json:"scope,omitempty"`
	// Destructive says a call changes or destroys what cannot simply be
	// put back.
	Destructive bool `json:"destructive"`
	// ApprovalWaived is the written reason a destructive action runs
	// without a person's approval.
	ApprovalWaived string `json:"approvalWaived,omitempty"`
	// Idempotent says a call may carry an idempotencyKey, and a retry with
	// the same key and input gets the first call's result.
	Idempotent bool `json:"idempotent"`
	// DryRun says the server records calls and executes nothing (the
	// sandbox preset).
	DryRun bool `json:"dryRun"`
}

// ApprovalDescription is whether an action's calls wait for a person, and who
// decides.
type ApprovalDescription struct {
	Required bool `json:"required"`
	// Deciders are the roles of which a person holds one to decide.
	Deciders []string `json:"deciders,omitempty"`
	// FourEyes says the caller who asked may not decide.
	FourEyes bool `json:"fourEyes,omitempty"`
	// TTL is how long an undecided approval stays open, as Go writes a
	// duration ("24h").
	TTL string `json:"ttl,omitempty"`
}

// DescribeObject describes an object caller may read; not found (a nil
// description and no refusal) for one it may not, as for one that does not
// exist. It runs the describe_object tool's gates first, as every entry
// point runs its tool's.
func (e *Engine) DescribeObject(ctx context.Context, caller *Caller, object string) (*ObjectDescription, *Outcome) {
	if out := e.Admit(ctx, caller, ontology.DescribeObjectTool); out != nil {
		return nil, out
	}
	o, ok := e.cfg.Objects[object]
	if !ok || !e.Sees(caller, ontology.GetTool(object)) {
		return nil, nil
	}
	d := &ObjectDescription{Object: object, Title: o.Title, Description: o.Description, Key: o.Key,
		Fields: []FieldDescription{}, Links: []LinkDescription{},
		List: ListDescription{Filters: map[string][]ontology.FilterOp{}, Sort: slices.Clone(o.List.Sort), MaxLimit: o.List.MaxLimit}}
	if d.List.Sort == nil {
		d.List.Sort = []string{}
	}
	for _, f := range o.Fields {
		fd := FieldDescription{Name: f, Type: FieldTypeUnknown}
		if col, ok := e.catalog.Column(object, f); ok {
			fd.Type, fd.Bits = string(col.Kind), col.Bits
		}
		d.Fields = append(d.Fields, fd)
	}
	for field, ops := range o.List.Filters {
		d.List.Filters[field] = slices.Clone(ops)
	}
	for _, name := range slices.Sorted(maps.Keys(e.cfg.Links)) {
		l := e.cfg.Links[name]
		from, _, _ := strings.Cut(l.From, ".")
		to, _, _ := strings.Cut(l.To, ".")
		there, many := to, false
		switch {
		case from == object:
		case to == object:
			there, many = from, true
		default:
			continue
		}
		if !e.mayFollow(caller, there, many) {
			continue
		}
		d.Links = append(d.Links, LinkDescription{Name: name, Title: l.Title, Object: there, From: l.From, To: l.To, Many: many})
	}
	for _, tool := range []string{ontology.GetTool(object), ontology.ListTool(object)} {
		d.Tools = append(d.Tools, ToolGrant{Name: tool, Scope: e.scopeNeed(caller, tool)})
	}
	return d, nil
}

// DescribeAction describes an action caller may call; not found (a nil
// description and no refusal) for one outside its audience, as for one
// that does not exist. It runs the describe_action tool's gates first.
func (e *Engine) DescribeAction(ctx context.Context, caller *Caller, action string) (*ActionDescription, *Outcome) {
	return e.describeActionVia(ctx, caller, ontology.DescribeActionTool, action)
}

// DescribeResourceAction describes an action for describe_resource, as
// DescribeAction does, behind that tool's gates instead.
func (e *Engine) DescribeResourceAction(ctx context.Context, caller *Caller, action string) (*ActionDescription, *Outcome) {
	return e.describeActionVia(ctx, caller, ontology.DescribeResourceTool, action)
}

// describeActionVia describes action behind the gates of tool, the
// describe tool asked.
func (e *Engine) describeActionVia(ctx context.Context, caller *Caller, tool, action string) (*ActionDescription, *Outcome) {
	if out := e.Admit(ctx, caller, tool); out != nil {
		return nil, out
	}
	a, ok := e.cfg.Actions[action]
	if !ok || !e.Sees(caller, action) {
		return nil, nil
	}
	d := &ActionDescription{Action: action, Title: a.Title, Description: a.Description, Precondition: a.Where,
		Policy: e.policy(caller, action, a), Effect: a.Effect, Rollback: a.Rollback,
		Implemented: a.Execute.Kind() != ontology.ExecuteNotImplemented}
	if t := a.Target; t != nil {
		d.Target = &TargetDescription{KeyFrom: t.KeyFrom, Upstream: t.Upstream}
		if !t.Read() && e.Sees(caller, ontology.GetTool(t.Object)) {
			d.Target.Object = t.Object
		}
	}
	return d, nil
}

// Policies lists the policy of every action caller may call, by name. It
// runs the list_policies tool's gates first.
func (e *Engine) Policies(ctx context.Context, caller *Caller) ([]ActionPolicy, *Outcome) {
	if out := e.Admit(ctx, caller, ontology.ListPoliciesTool); out != nil {
		return nil, out
	}
	policies := []ActionPolicy{}
	for _, name := range slices.Sorted(maps.Keys(e.cfg.Actions)) {
		if e.Sees(caller, name) {
			policies = append(policies, e.policy(caller, name, e.cfg.Actions[name]))
		}
	}
	return policies, nil
}

// scopeNeed is the scope a call of tool needs and whether caller's token
// carries it; nil when the tool needs none.
func (e *Engine) scopeNeed(caller *Caller, tool string) *ScopeNeed {
	scope := e.cfg.ToolScope(tool)
	if scope == "" {
		return nil
	}
	return &ScopeNeed{Name: scope, Held: slices.Contains(caller.Scopes, scope)}
}

// policy is action's policy as caller is told it.
func (e *Engine) policy(caller *Caller, name string, a *ontology.Action) ActionPolicy {
	p := ActionPolicy{Action: name, Title: a.Title, Roles: slices.Clone(a.Policy.Roles), Audience: a.Policy.Audience != "",
		Approval: ApprovalDescription{Required: a.Policy.Approval == ontology.ApprovalRequired}, Scope: e.scopeNeed(caller, name),
		Destructive: a.DestructiveHint(), ApprovalWaived: a.ApprovalWaived, Idempotent: a.Idempotent, DryRun: e.mode == ModeDryRun}
	if p.Roles == nil {
		p.Roles = []string{}
	}
	if p.Approval.Required {
		p.Approval.Deciders = e.ApproverRoles(name)
		p.Approval.FourEyes = *e.cfg.Approvals.FourEyes
		p.Approval.TTL = shortDuration(time.Duration(e.cfg.Approvals.TTL))
	}
	p.Summary = policyWords(p)
	return p
}

// policyWords says an action's policy in words, for an agent.
func policyWords(p ActionPolicy) string {
	var w []string
	who := "Any authenticated caller"
	if len(p.Roles) > 0 {
		who = "A caller holding " + roleWords(p.Roles)
	}
	if p.Audience {
		who += " whom the operator's audience condition admits"
	}
	w = append(w, who+" may call it.")
	if p.Approval.Required {
		decide := fmt.Sprintf("Each call waits for a person's approval: a person holding %s decides it", roleWords(p.Approval.Deciders))
		if p.Approval.FourEyes {
			decide += ", never the caller who asked"
		}
		decide += fmt.Sprintf("; an approval nobody decides lapses after %s.", p.Approval.TTL)
		if !p.DryRun {
			// A sandbox stages nothing: its call answers dry_run (below).
			decide += " The call answers approval_pending with an approvalId: poll check_approval with it."
		}
		w = append(w, decide)
	} else {
		w = append(w, "It runs when called, without a person's approval.")
	}
	switch {
	case p.ApprovalWaived != "":
		w = append(w, "It is destructive, and runs without approval because: "+strings.TrimRight(p.ApprovalWaived, ".")+".")
	case p.Destructive:
		w = append(w, "It is destructive.")
	}
	if s := p.Scope; s != nil {
		held := "this connection's token carries it"
		if !s.Held {
			held = "this connection's token does not carry it: ask for a token with it"
		}
		w = append(w, fmt.Sprintf("A call needs the scope %s; %s.", s.Name, held))
	}
	if p.Idempotent {
		w = append(w, "It is idempotent: a retry with the same idempotencyKey and input gets the first call's result and runs nothing.")
	}
	if p.DryRun {
		w = append(w, "This server runs in sandbox mode: a call is recorded and nothing executes.")
	}
	return strings.Join(w, " ")
}

// roleWords names roles in a sentence: "the role support", "one of the
// roles support, approver".
func roleWords(roles []string) string {
	if len(roles) == 1 {
		return "the role " + roles[0]
	}
	return "one of the roles " + strings.Join(roles, ", ")
}

// shortDuration writes d as Go does, without trailing zero units: 24h, not
// 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
