package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The gates a tool call passes, in order, each with its own answer:
//
//  1. Audience: who the tool exists for — its roles and audience
//     predicate. A caller outside it is not told the tool exists: the
//     tool is left out of its catalog, and a call answers as a call of
//     a tool that does not exist (StatusNotFound, X_MCP_TOOL_UNKNOWN).
//  2. Scope: what the caller's connection may do — the scope its token
//     must carry (ontology.Config.ToolScope). The caller was shown the
//     tool and can fix this, so the refusal names the scope
//     (StatusDenied, X_MCP_SCOPE_DENIED). Checked before the input is
//     read.
//  3. Input, then policy: the input is checked against its schema, and
//     the action's precondition against the target (StatusInvalidInput;
//     StatusPreconditionFailed, X_FORBIDDEN).
//
// Admit runs the first two for a transport; the engine's own entry
// points run them again, so that no transport can skip them.

// Sees reports whether caller is in the named tool's audience: whether
// the tool is in the caller's catalog at all. An unknown tool is in no
// one's.
func (e *Engine) Sees(caller *Caller, tool string) bool {
	t, ok := e.tools[tool]
	return ok && e.inAudience(caller, t)
}

// Admit runs the gates a tool call passes before its input is read:
// audience, then scope. It returns nil when the call may go on, or the
// refusal: StatusNotFound with X_MCP_TOOL_UNKNOWN for a tool the caller
// does not see (or that does not exist), StatusDenied with
// X_MCP_SCOPE_DENIED, naming the scope, for a scope the caller's token
// lacks. A scope refusal is appended to the caller's tenant's audit chain
// as a refused record, so that an agent probing what its token allows
// leaves a trace an auditor can query.
func (e *Engine) Admit(ctx context.Context, caller *Caller, tool string) *Outcome {
	if !e.Sees(caller, tool) {
		return &Outcome{Status: StatusNotFound, Code: errcode.MCPToolUnknown}
	}
	if scope := e.missingScope(caller, tool); scope != "" {
		return e.refuse(ctx, caller, tool, nil, errcode.MCPScopeDenied, scope,
			fmt.Sprintf("the caller's token does not carry the scope %q, which grants the tool %s", scope, tool))
	}
	return nil
}

// recheck runs the audience and scope gates again for the poller whose
// poll would execute an approved approval of action: the poller was
// admitted to check_approval, not necessarily to the action. A refusal is
// recorded under the approval.
func (e *Engine) recheck(ctx context.Context, caller *Caller, action string, approval *uuid.UUID) *Outcome {
	if !e.Sees(caller, action) {
		return e.refuse(ctx, caller, action, approval, errcode.Forbidden, "",
			"the poller is not among the action's callers (policy.roles, policy.audience), so its approved approval does not execute for it")
	}
	if scope := e.missingScope(caller, action); scope != "" {
		return e.refuse(ctx, caller, action, approval, errcode.MCPScopeDenied, scope,
			fmt.Sprintf("the poller's token does not carry the scope %q, which grants the action, so its approved approval does not execute for it", scope))
	}
	return nil
}

// missingScope returns the scope that grants tool when caller's token does
// not carry it; "" when the tool needs none or the token carries it.
func (e *Engine) missingScope(caller *Caller, tool string) string {
	if scope := e.cfg.ToolScope(tool); scope != "" && !slices.Contains(caller.Scopes, scope) {
		return scope
	}
	return ""
}

// inAudience reports whether caller is among those t exists for.
func (e *Engine) inAudience(caller *Caller, t ontology.Tool) bool {
	switch t.Kind {
	case ontology.ToolCheckApproval:
		return caller.Authenticated()
	case ontology.ToolDescribeObject, ontology.ToolDescribeAction, ontology.ToolListPolicies, ontology.ToolErrorsExplain:
		// Every authenticated caller may ask; what a describe answers is
		// filtered to what the caller sees (describe.go).
		return caller.Authenticated()
	case ontology.ToolSQLQuery:
		q := &e.cfg.SQLQuery
		return caller.Authenticated() && caller.HasRole(q.Roles...) && e.audience(caller, t.Name, q.AudienceProgram())
	case ontology.ToolListResources, ontology.ToolDescribeResource, ontology.ToolManageResource:
		// The meta tools exist for the callers served the meta surface;
		// each grouped tool behind them keeps its own audience.
		return e.Surface(caller) == ontology.SurfaceMeta
	case ontology.ToolGet, ontology.ToolList:
		return e.canRead(caller, e.cfg.Objects[t.Subject])
	case ontology.ToolAction:
		a := e.cfg.Actions[t.Subject]
		return caller.Authenticated() && e.among(caller, a.Policy.Roles, t.Name, a.AudienceProgram())
	}
	return false
}

// CanRead reports whether caller may read the named object: the gate of
// its get and list tools. An unknown object is readable by no one.
func (e *Engine) CanRead(caller *Caller, object string) bool {
	o, ok := e.cfg.Objects[object]
	return ok && e.canRead(caller, o)
}

// Surface returns caller's surface: that of the first surface.audiences
// rule whose roles (held by an authenticated caller) and audience
// predicate the caller matches, else the configured default.
func (e *Engine) Surface(caller *Caller) ontology.Surface {
	for i := range e.cfg.Surface.Audiences {
		r := &e.cfg.Surface.Audiences[i]
		// A predicate that fails to evaluate does not match: the next
		// rule, or the default, decides; the host log names the rule.
		if e.among(caller, r.Roles, fmt.Sprintf("surface.audiences.%d", i), r.AudienceProgram()) {
			return r.Surface
		}
	}
	return e.cfg.DefaultSurface()
}

// among reports whether caller is among those a rule names: an
// authenticated caller holding one of roles, when it names any, for whom
// the audience predicate (named name in the host log) holds.
func (e *Engine) among(caller *Caller, roles []string, name string, program cel.Program) bool {
	if len(roles) > 0 && (!caller.Authenticated() || !caller.HasRole(roles...)) {
		return false
	}
	return e.audience(caller, name, program)
}

// canRead reports whether caller may read o: its read_access, then its
// audience.
func (e *Engine) canRead(caller *Caller, o *ontology.Object) bool {
	var ok bool
	switch o.ReadAccess.Kind {
	case ontology.ReadPublic:
		ok = true
	case ontology.ReadAuthenticated:
		ok = caller.Authenticated()
	case ontology.ReadRoles:
		ok = caller.Authenticated() && caller.HasRole(o.ReadAccess.Roles...)
	}
	return ok && e.audience(caller, "", o.AudienceProgram())
}

// mayFollow reports whether caller may read what a link reaches in
// object there: the one row it points to (through there's get tool) or,
// many, the rows pointing back (through its list tool). Including a link
// reads there as that tool would, so it passes that tool's gates: the
// object's read access and audience, and the scope that grants the tool —
// a token scoped to orders alone reads no customer through an order.
func (e *Engine) mayFollow(caller *Caller, there string, many bool) bool {
	return e.canRead(caller, e.cfg.Objects[there]) && e.missingScope(caller, followTool(there, many)) == ""
}

// followTool is the tool a link to there is read through: there's get for
// the one row it points to, its list, many, for the rows pointing back.
func followTool(there string, many bool) string {
	if many {
		return ontology.ListTool(there)
	}
	return ontology.GetTool(there)
}

// audience evaluates an audience predicate for caller: only a literal
// true admits. A predicate that fails to evaluate hides the tool, and
// the host log says why, for the operator whose predicate it is.
func (e *Engine) audience(caller *Caller, tool string, program cel.Program) bool {
	if program == nil {
		return true
	}
	out, _, err := program.Eval(map[string]any{"caller": callerVars(caller)})
	if err != nil {
		e.log.Warn("an audience predicate failed, so the tool is hidden", "tool", tool, "error", err.Error())
		return false
	}
	holds, _ := out.Value().(bool)
	return holds
}

// callerVars is the caller as CEL sees it, in an audience predicate or a
// precondition.
func callerVars(c *Caller) map[string]any {
	return map[string]any{
		"subject": c.Subject, "issuer": c.Issuer, "tenant": c.Tenant, "roles": c.Roles,
		"scopes": c.Scopes, "kind": string(c.Kind),
	}
}

// AudienceKey spells, unambiguously, all the gates of audience read of
// the caller: callerVars, which holds what Authenticated and HasRole read
// too. Two callers with the same key are in the same audiences — of every
// tool (Sees), prompt (SeesPrompt) and surface (Surface) — under one
// config, since an audience predicate reads nothing else, so a transport
// may answer a key once. It must name every field callerVars does.
func (c *Caller) AudienceKey() string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	list := func(l []string) {
		field(strconv.Itoa(len(l)))
		for _, s := range l {
			field(s)
		}
	}
	field(c.Subject)
	field(c.Issuer)
	field(c.Tenant)
	field(string(c.Kind))
	list(c.Roles)
	list(c.Scopes)
	return b.String()
}

// refuse answers a gate's refusal of a tool call (StatusDenied under
// code, naming scope when a scope is missing) and appends it to the
// caller's tenant's chain as a refused record, with approval when the
// refusal stops an approval executing. A caller of no tenant has no chain
// to append to; the host log's tool call line is its record. A refusal
// whose record cannot be appended still refuses: the failure goes to the
// host log under the correlation id.
func (e *Engine) refuse(ctx context.Context, caller *Caller, tool string, approval *uuid.UUID, code errcode.Code, scope, why string) *Outcome {
	correlation := uuid.NewString()
	if approval != nil {
		correlation = approval.String()
	}
	out := &Outcome{Status: StatusDenied, Code: code, Scope: scope, CorrelationID: correlation, ApprovalID: approval}
	e.recordRefusal(ctx, caller, tool, approval, correlation, code, why)
	return out
}

// recordRefusal appends a refused record of caller's call of tool: its
// code (when it has one) and why, under correlation and approval. A
// caller who names no tenant has no chain to record it in. A refusal that
// cannot be recorded is logged, and refused all the same.
func (e *Engine) recordRefusal(ctx context.Context, caller *Caller, tool string, approval *uuid.UUID, correlation string, code errcode.Code, why string) {
	if !caller.Authenticated() {
		return
	}
	if code != "" {
		why = string(code) + ": " + why
	}
	rec := &Record{Tenant: caller.Tenant, At: e.now(), CorrelationID: correlation, Phase: PhaseRefused, Action: tool,
		Actor: caller.actor(), DevMode: caller.DevMode, ApprovalID: approval, Error: why}
	if err := e.appendAlone(e.observe(ctx), caller.Tenant, rec); err != nil {
		e.log.ErrorContext(ctx, "a refusal could not be recorded in the audit log", "tool", tool, "code", string(code),
			"correlation_id", correlation, "error", err)
	}
}
