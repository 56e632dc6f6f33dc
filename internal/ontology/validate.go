package ontology

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/cel-go/cel"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/sqlguard"
	"github.com/orangerail/orangerail/internal/store"
)

// toolNamePattern is what MCP hosts accept as a tool name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// The built-in tools' names.
const (
	// CheckApprovalTool polls an approval.
	CheckApprovalTool = "check_approval"
	// DescribeObjectTool describes an object the caller may read.
	DescribeObjectTool = "describe_object"
	// DescribeActionTool describes an action the caller may call.
	DescribeActionTool = "describe_action"
	// ListPoliciesTool lists the policy of every action the caller may call.
	ListPoliciesTool = "list_policies"
	// ErrorsExplainTool explains an error code to an agent.
	ErrorsExplainTool = "errors_explain"
)

// ToolKind says what a tool does.
type ToolKind int

// The kinds of tool.
const (
	ToolCheckApproval  ToolKind = iota // polls an approval a staged call returned
	ToolSQLQuery                       // runs one read-only SELECT
	ToolGet                            // reads one row of an object
	ToolList                           // lists an object's rows
	ToolAction                         // asks to take an action
	ToolDescribeObject                 // describes an object the caller may read
	ToolDescribeAction                 // describes an action the caller may call
	ToolListPolicies                   // lists the policies of the actions the caller may call
	ToolErrorsExplain                  // explains an error code, with a fix for an agent
	// The meta surface's (surface.go).
	ToolListResources    // lists the caller's grouped tools, as plain text
	ToolDescribeResource // answers the full schemas of named resources' tools
	ToolManageResource   // calls a grouped tool through its gates
)

// Describes reports whether the kind is a describe tool: one that answers
// from the declaration what the caller may use, and reads no row.
func (k ToolKind) Describes() bool {
	switch k {
	case ToolDescribeObject, ToolDescribeAction, ToolListPolicies, ToolErrorsExplain:
		return true
	}
	return false
}

// Tool is one MCP tool the config declares, with the field that declares it.
type Tool struct {
	Name string
	Kind ToolKind
	// Subject is the object or action the tool serves; empty for the
	// built-in tools.
	Subject string
	// Path is the field path of the declaration: objects.X or actions.X.
	Path string
}

// Tools lists every tool the config declares, in a stable order:
// check_approval, sql_query when enabled, the describe tools, then each
// object's get and list, then each action. It is the one place a tool's
// name is made.
func (c *Config) Tools() []Tool {
	tools := []Tool{{Name: CheckApprovalTool, Kind: ToolCheckApproval}}
	if c.SQLQuery.Enabled {
		tools = append(tools, Tool{Name: SQLQueryTool, Kind: ToolSQLQuery, Path: "sql_query"})
	}
	tools = append(tools, Tool{Name: DescribeObjectTool, Kind: ToolDescribeObject}, Tool{Name: DescribeActionTool, Kind: ToolDescribeAction},
		Tool{Name: ListPoliciesTool, Kind: ToolListPolicies}, Tool{Name: ErrorsExplainTool, Kind: ToolErrorsExplain})
	tools = append(tools, c.metaTools()...) // the meta surface's, when served
	for _, name := range slices.Sorted(maps.Keys(c.Objects)) {
		path := "objects." + name
		tools = append(tools, Tool{Name: GetTool(name), Kind: ToolGet, Subject: name, Path: path},
			Tool{Name: ListTool(name), Kind: ToolList, Subject: name, Path: path})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		tools = append(tools, Tool{Name: name, Kind: ToolAction, Subject: name, Path: "actions." + name})
	}
	return tools
}

// GetTool is the name of the tool that reads one row of object.
func GetTool(object string) string { return object + "_get" }

// ListTool is the name of the tool that lists object's rows.
func ListTool(object string) string { return object + "_list" }

// ToolScope returns the scope a caller's token must carry to call the
// named tool: the scopes map's, or, without a map, an action's
// policy.scope; "" when the tool needs none.
func (c *Config) ToolScope(tool string) string {
	if c.Scopes != nil {
		return c.toolScopes[tool]
	}
	if a, ok := c.Actions[tool]; ok {
		return a.Policy.Scope
	}
	return ""
}

// ScopeNames lists every scope the config names, sorted: the scopes map's
// and every action's policy.scope.
func (c *Config) ScopeNames() []string {
	set := map[string]bool{}
	for s := range c.Scopes {
		set[s] = true
	}
	for _, a := range c.Actions {
		if a.Policy.Scope != "" {
			set[a.Policy.Scope] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// validate checks every rule the schema cannot express, and returns all
// the problems it finds.
func (c *Config) validate() Problems {
	var ps Problems
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}

	claimed := map[string]Tool{}
	for _, t := range c.Tools() {
		if !toolNamePattern.MatchString(t.Name) {
			add(t.Path, "makes the tool name %q, which is not 1 to 64 of [a-zA-Z0-9_-]", t.Name)
			continue
		}
		if prev, ok := claimed[t.Name]; ok && isMetaTool(prev) {
			add(t.Path, "%s: makes the tool name %q, which the meta surface declares (surface)", errcode.MCPToolDuplicate, t.Name)
			continue
		} else if ok {
			what := "the built-in tool"
			if prev.Path != "" {
				what = prev.Path
			}
			add(t.Path, "makes the tool name %q, which %s makes too", t.Name, what)
			continue
		}
		claimed[t.Name] = t
	}
	c.validateScopes(claimed, add)
	c.validateSurface(claimed, add)

	if c.SQLQuery.Enabled && len(c.SQLQuery.Roles) == 0 {
		add("sql_query.roles", "name the roles that may query: the tool is for auditors, never for every caller")
	}
	c.SQLQuery.audience = audienceProgram(c.SQLQuery.Audience, "sql_query.audience", add)
	for i, schema := range c.SQLQuery.Schemas {
		if sqlguard.SystemSchema(schema) {
			add(fmt.Sprintf("sql_query.schemas.%d", i), "%s is a system schema, which no query may read: name the schemas of your own tables", schema)
		}
	}
	lock, statement := c.Limits.Timeouts()
	for _, l := range []struct {
		key string
		d   time.Duration
	}{{"lock_timeout", lock}, {"statement_timeout", statement}} {
		if l.d < time.Millisecond || l.d > TimeoutMax {
			add("limits."+l.key, "%s is not between 1ms and %s: Postgres counts whole milliseconds and reads 0 as no limit at all", l.d, TimeoutMax)
		}
	}
	if d := time.Duration(c.Approvals.TTL); d < ApprovalTTLMin {
		add("approvals.ttl", "%s is shorter than %s: every approval would lapse before a person could decide it", d, ApprovalTTLMin)
	}
	if d := time.Duration(c.Audit.SealInterval); d < time.Millisecond || d > SealIntervalMax {
		add("audit.seal_interval", "%s is not between 1ms and %s: records wait about that long for their place in the chain", d, SealIntervalMax)
	}
	// A retention without seal_inputs keeps shredding the inputs sealed
	// while sealing was on: turning sealing off must not keep them for
	// ever. Inputs stored in the clear are never shredded.
	if r := c.Approvals.Retention; r != nil && *r < 0 {
		add("approvals.retention", "%s is not a positive duration", time.Duration(*r))
	}
	if r := c.WebhookRetention; r != nil && time.Duration(*r) < WebhookRetentionMin {
		add("webhook_retention", "%s is shorter than %s: a finished message would be deleted before anyone could list or redeliver it", time.Duration(*r), WebhookRetentionMin)
	}
	if cp := c.Audit.Checkpoint; cp != nil {
		if (cp.KeyFile == "") == (cp.KeyEnv == "") {
			add("audit.checkpoint", "name the signing key in exactly one of key_file and key_env")
		}
		if d := time.Duration(cp.Interval); d < time.Second || d > 24*time.Hour {
			add("audit.checkpoint.interval", "%s is not between 1s and 24h", d)
		}
		if strings.ContainsFunc(cp.Origin, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) || !utf8.ValidString(cp.Origin) || len(cp.Origin) > 255 {
			add("audit.checkpoint.origin", "%q is not one line of printable text without spaces, at most 255 bytes", cp.Origin)
		}
	}
	if ttl := c.Limits.IdempotencyKeyTTL(); ttl < time.Second {
		add("limits.idempotency_ttl", "%s is under a second: a key must outlive the retries it answers", ttl)
	}
	if o := c.Identity.OIDC; o != nil {
		if err := CheckIssuer(o.Issuer); err != nil {
			path := "identity.oidc.issuer"
			if o.IssuerEnv != "" {
				path = "identity.oidc.issuer_env"
				err = fmt.Errorf("$%s: %w", o.IssuerEnv, err)
			}
			add(path, "%v", err)
		}
		for i, server := range o.AuthorizationServers {
			if err := CheckIssuerURL("the authorization server", server); err != nil {
				add(fmt.Sprintf("identity.oidc.authorization_servers.%d", i), "%v", err)
			}
		}
		if d := time.Duration(o.ClockSkew); d > ClockSkewMax {
			add("identity.oidc.clock_skew", "%s is longer than %s: a token that long expired would still be taken", d, ClockSkewMax)
		}
	}
	for i, n := range c.Identity.AllowedNetworks {
		if _, err := ParseNetwork(n); err != nil {
			add(fmt.Sprintf("identity.allowed_networks.%d", i), "%v", err)
		}
	}
	for i, n := range c.HTTP.TrustedProxies {
		if _, err := ParseNetwork(n); err != nil {
			add(fmt.Sprintf("http.trusted_proxies.%d", i), "%v", err)
		}
	}
	if len(c.HTTP.TrustedProxies) > 0 && c.HTTP.TrustedProxyHops == 0 {
		add("http.trusted_proxies", "is set while http.trusted_proxy_hops is 0, so no X-Forwarded-For is read: set the hops, or remove it")
	}
	for i, o := range c.HTTP.AllowedOrigins {
		if err := CheckOrigin(o); err != nil {
			add(fmt.Sprintf("http.allowed_origins.%d", i), "%v", err)
		}
	}
	for i, t := range c.HTTP.TranslationPrefixes {
		if _, err := ParseTranslationPrefix(t); err != nil {
			add(fmt.Sprintf("http.translation_prefixes.%d", i), "%v", err)
		}
	}
	if d := c.Desk; d != nil && c.Identity.OIDC == nil {
		add("desk", "needs identity.oidc: the desk signs people in at that issuer")
	} else if d != nil && c.Identity.OIDC.Human == nil {
		// Without the rule every caller is an agent: no one could sign in
		// to the desk, and no approval could be decided there.
		add("identity.oidc.human", "is needed by the desk, which signs in only a person: say which callers are people (a claim and the values that make one)")
	}
	if r := c.HTTP.RateLimits; !slices.Contains(RateLimitStores(), r.Store) {
		add("http.rate_limits.store", "is %q; it must be one of %v", r.Store, RateLimitStores())
	}
	if r := c.HTTP.RateLimits; !slices.Contains(FailureModes(), r.OnStoreError) {
		add("http.rate_limits.on_store_error", "is %q; it must be one of %v", r.OnStoreError, FailureModes())
	}
	if r := c.HTTP.RateLimits; r.FlushInterval < Duration(10*time.Millisecond) || r.FlushInterval > Duration(10*time.Second) {
		add("http.rate_limits.flush_interval", "is %v; it must be from 10ms to 10s", time.Duration(r.FlushInterval))
	}
	if r := c.HTTP.RateLimits; r.LocalSharePercent != nil && (*r.LocalSharePercent < 0 || *r.LocalSharePercent > 100) {
		add("http.rate_limits.local_share_percent", "is %d; it must be from 0 to 100", *r.LocalSharePercent)
	}
	if h := c.HTTP; h.PublicURL == "" {
		add("http.public_url", "is required when http.listen (%q) is not a loopback address: set the URL clients reach this server at, such as https://mcp.example.com", h.Listen)
	} else if err := CheckPublicURL(h.PublicURL); err != nil {
		add("http.public_url", "%v", err)
	} else if u, _ := url.Parse(h.PublicURL); c.Desk != nil && PlainOffLoopback(u) {
		// A session cookie sent over plain http is anyone's on the path,
		// and the browser would not keep a Secure one.
		add("http.public_url", "is %q, plain http off loopback: the desk signs people in with a session cookie, which must travel over https; name the https URL people reach the desk at (a TLS proxy in front of orangerail is fine)", h.PublicURL)
	}
	c.validateObservability(add)
	c.validateWebhooks(add)
	c.validatePrompts(add)
	c.validateUpstreams(add)
	for _, name := range slices.Sorted(maps.Keys(c.Objects)) {
		o, path := c.Objects[name], "objects."+name
		o.validate(path, add)
		o.audience = audienceProgram(o.Audience, path+".audience", add)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Links)) {
		l, path := c.Links[name], "links."+name
		for _, end := range []struct{ field, ref string }{{"from", l.From}, {"to", l.To}} {
			if msg := c.fieldRefProblem(end.ref); msg != "" {
				add(path+"."+end.field, "%s", msg)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		c.validateAction(name, add)
	}
	return ps.sorted()
}

func (o *Object) validate(path string, add func(path, format string, args ...any)) {
	// The key is returned with every row; the tenant column need not be.
	if !slices.Contains(o.Fields, o.Key) {
		add(path+".key", "%q is not one of the object's fields", o.Key)
	}
	for _, field := range slices.Sorted(maps.Keys(o.List.Filters)) {
		if !slices.Contains(o.Fields, field) {
			add(path+".list.filters."+field, "%q is not one of the object's fields", field)
		}
	}
	for i, field := range o.List.Sort {
		if !slices.Contains(o.Fields, field) {
			add(fmt.Sprintf("%s.list.sort.%d", path, i), "%q is not one of the object's fields", field)
		}
	}
}

// fieldRefProblem checks an object.field reference.
func (c *Config) fieldRefProblem(ref string) string {
	objName, field, _ := strings.Cut(ref, ".")
	o, ok := c.Objects[objName]
	if !ok {
		return fmt.Sprintf("names the object %q, which is not declared", objName)
	}
	if !slices.Contains(o.Fields, field) {
		return fmt.Sprintf("names the field %q, which is not one of object %s's fields", field, objName)
	}
	return ""
}

func (c *Config) validateAction(name string, add func(path, format string, args ...any)) {
	a, path := c.Actions[name], "actions."+name
	schema, err := compileInput(a.Input)
	var bad *defaultError
	switch {
	case errors.As(err, &bad):
		add(path+".input."+bad.path, "%s", bad.message)
	case err != nil:
		add(path+".input", "%v", err)
	}
	a.inputSchema = schema
	properties := inputProperties(a.Input)
	envs := c.callEnvironments(a, path, add)
	validatePolicy(a, path, c.Scopes != nil && c.toolScopes[name] != "", add)
	a.audience = audienceProgram(a.Policy.Audience, path+".policy.audience", add)
	if a.Idempotent && slices.Contains(properties, IdempotencyKeyArg) {
		// The tool's arguments carry the key beside the input: an input
		// property of the same name could never be told from it.
		add(path+".input.properties."+IdempotencyKeyArg, "%s: %s is the argument an idempotent action's retries send their key in; "+
			"rename the property or drop idempotent: true", errcode.MCPIdempotencyShadowed, IdempotencyKeyArg)
	}

	switch {
	case a.Target.Read():
		c.validateTargetRead(a.Target, path+".target", envs, properties, add)
	case a.Target != nil:
		if _, ok := c.Objects[a.Target.Object]; !ok {
			add(path+".target.object", "names the object %q, which is not declared", a.Target.Object)
		}
		if !slices.Contains(properties, a.Target.KeyFrom) {
			add(path+".target.key_from", "%q is not a property of the action's input", a.Target.KeyFrom)
		}
	}
	if a.Where != "" {
		program, err := compileWhere(a.Where, a.Target != nil)
		if err != nil {
			add(path+".where", "%v", err)
		}
		a.where = program
	}
	c.validateExecute(a.Execute, path+".execute", envs, properties, add)
	validateBudget(a, path, add)
	a.auditMasks = nil
	for i, f := range a.RedactAudit {
		at := fmt.Sprintf("%s.redact_audit.%d", path, i)
		p, err := ParsePointer(f)
		if err == nil {
			err = checkInputPointer(a.Input, p)
		}
		if err != nil {
			add(at, "%v", err)
			continue
		}
		a.auditMasks = append(a.auditMasks, p)
	}
	a.priorMasks = nil
	for i, f := range a.RedactPrior {
		at := fmt.Sprintf("%s.redact_prior.%d", path, i)
		if a.Target == nil {
			add(at, "the action has no target, so no prior state to mask")
			continue
		}
		p, err := ParsePointer(f)
		if err != nil {
			add(at, "%v", err)
			continue
		}
		// A row's fields are known; what a json column holds, or an
		// upstream answers, is not.
		if o, ok := c.Objects[a.Target.Object]; ok && !a.Target.Read() && !slices.Contains(o.Fields, p[0]) {
			add(at, "%q is not one of object %s's fields", p[0], a.Target.Object)
			continue
		}
		a.priorMasks = append(a.priorMasks, p)
	}
	a.resultMasks = nil
	for i, f := range a.RedactResult {
		// A result has no declared shape: only the path's spelling can be
		// checked.
		p, err := ParsePointer(f)
		if err != nil {
			add(fmt.Sprintf("%s.redact_result.%d", path, i), "%v", err)
			continue
		}
		a.resultMasks = append(a.resultMasks, p)
	}
}

// validatePolicy holds an action to deny by default: with no policy an
// action would be open to every authenticated caller, so it must name who
// may call it (roles, an audience, or a scope: its own policy.scope or the
// scopes map's, when mapScoped) or send every call to a person. approval:
// none alone names nobody, and so does not count. A destructive action
// waits for a person unless the config writes down why it need not.
func validatePolicy(a *Action, path string, mapScoped bool, add func(path, format string, args ...any)) {
	p := a.Policy
	if len(p.Roles) == 0 && p.Scope == "" && p.Audience == "" && !mapScoped && p.Approval != ApprovalRequired {
		add(path+".policy", "%s: the action names no roles, no audience, no scope and no approval, so nobody was chosen to call it: "+
			"set policy: {roles: [...]}, policy: {scope: ...}, policy: {audience: ...} or policy: {approval: required}", errcode.PolicyMissing)
	}
	if p.approverRolesWritten && p.Approval != ApprovalRequired {
		add(path+".policy.approver_roles", "names who decides the action's approvals, but its calls never wait for a person: "+
			"set policy: {approval: required}, or remove approver_roles")
	}
	switch {
	case a.DeclaredDestructive() && p.Approval != ApprovalRequired && a.ApprovalWaived == "":
		add(path+".policy.approval", "the action is destructive, so a person must approve each call: "+
			"set policy: {approval: required}, or write why not in approval_waived: \"reason\"")
	case a.ApprovalWaived != "" && strings.TrimSpace(a.ApprovalWaived) == "":
		add(path+".approval_waived", "is blank: write why a person need not approve each call, or set policy: {approval: required}")
	case a.ApprovalWaived != "" && (!a.DeclaredDestructive() || p.Approval == ApprovalRequired):
		add(path+".approval_waived", "waives nothing: it is for a destructive action without policy.approval: required; remove it")
	}
}

// audienceProgram compiles an audience predicate, reporting a problem at
// path; nil when expr is empty or does not compile.
func audienceProgram(expr, path string, add func(path, format string, args ...any)) cel.Program {
	if expr == "" {
		return nil
	}
	program, err := compileAudience(expr)
	if err != nil {
		add(path, "%v", err)
		return nil
	}
	return program
}

// validateScopes checks the scopes map against the tools the config
// makes (claimed, by name) and records which scope grants each tool. A
// tool is granted by exactly one scope, and by the one its action's
// policy.scope names, if any; given at all, the map grants every tool.
func (c *Config) validateScopes(claimed map[string]Tool, add func(path, format string, args ...any)) {
	c.toolScopes = nil
	if c.Scopes == nil {
		return
	}
	c.toolScopes = map[string]string{}
	listed := map[string]bool{} // conflicting or not: uncovered is for a tool never listed
	for _, scope := range slices.Sorted(maps.Keys(c.Scopes)) {
		for i, name := range c.Scopes[scope] {
			at := fmt.Sprintf("scopes.%s.%d", scope, i)
			t, ok := claimed[name]
			listed[name] = true
			switch {
			case !ok:
				add(at, "%s: no tool is named %q: name one of this config's tools (%s)", errcode.MCPScopeUnknown, name, toolList(claimed))
				continue
			case c.toolScopes[name] != "":
				add(at, "%s: the tool %s is granted by scopes.%s already; a tool is granted by one scope", errcode.MCPScopeConflict, name, c.toolScopes[name])
				continue
			}
			if t.Kind == ToolAction {
				if own := c.Actions[t.Subject].Policy.Scope; own != "" && own != scope {
					add(at, "%s: the tool %s's policy.scope is %q, not %q: list it under %s, or drop its policy.scope",
						errcode.MCPScopeConflict, name, own, scope, own)
					continue
				}
			}
			c.toolScopes[name] = scope
		}
	}
	for _, name := range slices.Sorted(maps.Keys(claimed)) {
		if listed[name] {
			continue
		}
		hint := "list it under the scope a token must carry to call it"
		if t := claimed[name]; t.Kind == ToolAction && c.Actions[t.Subject].Policy.Scope != "" {
			hint = fmt.Sprintf("list it under %s, its policy.scope", c.Actions[t.Subject].Policy.Scope)
		}
		add("scopes", "%s: no scope grants the tool %s: %s", errcode.MCPScopeUncovered, name, hint)
	}
}

// toolList names the tools, sorted, for a problem's message.
func toolList(tools map[string]Tool) string {
	return strings.Join(slices.Sorted(maps.Keys(tools)), ", ")
}

// validateExecute checks an action's execute, by its kind: the one place a
// kind's rules beyond the schema live. properties are the input's.
func (c *Config) validateExecute(x Execute, path string, envs []string, properties []string, add func(path, format string, args ...any)) {
	switch x.Kind() {
	case ExecuteSQL:
		params, err := SQLParams(x.SQL)
		if err != nil {
			add(path+".sql", "%v", err)
		}
		for _, p := range params {
			if !slices.Contains(properties, p) {
				add(path+".sql", "the parameter :%s is not a property of the action's input", p)
			}
		}
	case ExecuteNotImplemented:
	case ExecuteHTTP:
		c.validateHTTPExecute(x.HTTP, path+".http", envs, properties, add)
	// --- soap (issue 14 item 6) ---
	case ExecuteSOAP:
		c.validateSOAPExecute(x.SOAP, path+".soap", envs, properties, add)
	// --- end soap ---
	default:
		// The schema admits one member; this is a bug if reached.
		add(path, "names no effect: set one of %v", ExecuteKinds())
	}
}

// inputProperties lists the property names an input schema declares.
func inputProperties(schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}

// validateWebhooks checks each endpoint: its URL, that its secret's
// variable is named, that its events are known, and that no two share a
// URL (the outbox records delivery per URL).
func (c *Config) validateWebhooks(add func(path, format string, args ...any)) {
	seen := map[string]int{}
	for i, w := range c.Webhooks {
		path := fmt.Sprintf("webhooks.%d", i)
		if err := CheckWebhookURL(w.URL); err != nil {
			add(path+".url", "%v", err)
		} else if j, ok := seen[w.URL]; ok {
			add(path+".url", "webhooks.%d sends to the same URL: list an endpoint once, with every event it takes", j)
		} else {
			seen[w.URL] = i
		}
		if w.IncludeInput && c.Approvals.SealInputs {
			add(path+".include_input", "cannot be true with approvals.seal_inputs: a sealed input is opened only for the approver's view and for execution")
		}
		if !envNamePattern.MatchString(w.SecretEnv) {
			add(path+".secret_env", "name the environment variable holding the endpoint's signing secret (whsec_ and base64), such as ORDERS_WEBHOOK_SECRET")
		}
		for k, ev := range w.Events {
			if !slices.Contains(WebhookEvents(), ev) {
				add(fmt.Sprintf("%s.events.%d", path, k), "is %q; it must be one of %v", ev, WebhookEvents())
			}
		}
		for k, t := range w.Tenants {
			if !store.TenantIDPattern.MatchString(t) {
				add(fmt.Sprintf("%s.tenants.%d", path, k), "is %q, which is no tenant's id: letters, digits, '.', '_' and '-', beginning with a letter or a digit, at most 128", t)
			} else if slices.Index(w.Tenants, t) < k {
				add(fmt.Sprintf("%s.tenants.%d", path, k), "names %q twice", t)
			}
		}
	}
}

// envNamePattern is the form of an environment variable's name, as the
// schema spells it for every *_env key.
var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Warnings are what the config says that may well be a mistake but is not
// refused: an action's SQL statement that never reads the caller's tenant
// (current_setting('orangerail.tenant_id')), which, on a table the tenants
// share, changes every tenant's rows — a statement kept to its tenant
// another way (a view or a function that reads it, a table of one tenant)
// is warned of all the same; and proxies trusted by their hops alone,
// whose X-Forwarded-For any peer may write. serve logs them as it opens;
// config check prints them.
func (c *Config) Warnings() Problems {
	var ws Problems
	for _, name := range slices.Sorted(maps.Keys(c.Actions)) {
		a := c.Actions[name]
		if a == nil || a.Execute.Kind() != ExecuteSQL || strings.Contains(a.Execute.SQL, store.TenantSetting) {
			continue
		}
		ws = append(ws, Problem{Path: "actions." + name + ".execute.sql", Message: "the statement never reads the caller's tenant " +
			"(current_setting('" + store.TenantSetting + "')): on a table the tenants share it changes every tenant's rows; " +
			"add the tenant column's condition, as the example's statements do"})
	}
	for i, w := range c.Webhooks {
		if w.IncludeInput && len(w.Tenants) == 0 {
			ws = append(ws, Problem{Path: fmt.Sprintf("webhooks.%d.include_input", i), Message: "the endpoint is sent every tenant's inputs: " +
				"list the tenants whose inputs it may see in webhooks." + strconv.Itoa(i) + ".tenants"})
		}
	}
	if c.HTTP.TrustedProxyHops > 0 && len(c.HTTP.TrustedProxies) == 0 {
		ws = append(ws, Problem{Path: "http.trusted_proxy_hops", Message: "X-Forwarded-For is read from every peer: a client that reaches the server " +
			"around its proxies names its own address, past identity.allowed_networks and the failed-auth throttle; " +
			"list the networks the proxies connect from in http.trusted_proxies"})
	}
	return ws
}
