package policy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// EmitOptions are the choices an actions file needs beside the manifest.
type EmitOptions struct {
	// BaseURL is where the upstream is served; empty: the description's
	// first server that orangerail may call (https, or http on loopback).
	BaseURL string
	// Environment is the config's environment. Defaults to production.
	Environment string
	// Roles, when set, are the roles that may call every written action;
	// each action also needs its scope, <service>:read or <service>:write.
	Roles []string
}

// Emitted is an actions file and what it left out.
type Emitted struct {
	// YAML is an ontology config holding the upstream and the actions,
	// which config check accepts.
	YAML []byte
	// Written names the actions written, sorted.
	Written []string
	// Skipped are the selected tools not written, each with why.
	Skipped []Skipped
	// Notes are what a written action could not keep of its operation
	// (a pattern that is not RE2, a dropped optional parameter).
	Notes []Skipped
}

// Skipped is a selected tool that was not written, or a note on one that
// was.
type Skipped struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// ErrBaseURL is an upstream with no URL orangerail may call.
var ErrBaseURL = errors.New("no base URL")

// ErrTooLarge is an actions file larger than config check reads.
var ErrTooLarge = errors.New("the actions file would be too large")

// Emit writes the ontology actions for the tools the selectors pick: the
// upstream (its credentials by the schemes the picked tools present) and
// an action per servable tool, its input from the operation's parameters
// and body, its policy from the manifest. An operation not picked is not
// served; a picked one that fails closed is skipped and named.
func Emit(m *Manifest, doc *apidoc.Document, selectors []Selector, opts EmitOptions) (*Emitted, error) {
	if len(selectors) == 0 {
		return nil, fmt.Errorf("%w is required: say which operations to serve (tag:NAME, operation:ID, method:METHOD, or * for all)", ErrSelector)
	}
	ops := map[string]*apidoc.Operation{}
	for _, op := range doc.Operations {
		ops[op.Source] = op
	}
	out := &Emitted{}
	picked := map[string]bool{}
	for _, s := range selectors {
		n := 0
		for i := range m.Tools {
			t := &m.Tools[i]
			if op := ops[t.Operation.Source]; op != nil && s.matches(t, op) {
				picked[t.Name] = true
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%w %q picks no operation of this description", ErrSelector, s.Spelled)
		}
	}
	base, basePath, err := baseURL(doc, opts.BaseURL)
	if err != nil {
		return nil, err
	}
	e := &emitter{m: m, doc: doc, ops: ops, opts: opts, base: base, basePath: basePath, out: out, schemes: map[string]bool{}}
	actions := map[string]any{}
	nodes := 0
	for _, t := range m.Tools {
		if !picked[t.Name] {
			continue
		}
		if t.Status.Value != StatusServable {
			out.Skipped = append(out.Skipped, Skipped{t.Name, t.Status.Rule})
			continue
		}
		if builtIn(t.Name) {
			out.Skipped = append(out.Skipped, Skipped{t.Name, "the name is one of orangerail's built-in tools'"})
			continue
		}
		if where := e.servedElsewhere(ops[t.Operation.Source]); where != "" {
			out.Skipped = append(out.Skipped, Skipped{t.Name, where})
			continue
		}
		a, err := e.action(&t, ops[t.Operation.Source])
		if err != nil {
			out.Skipped = append(out.Skipped, Skipped{t.Name, err.Error()})
			continue
		}
		// Counted as built: each action copies every definition its input
		// reaches, so a large one shared by many operations multiplies,
		// and the file would be one config check refuses.
		if nodes += yamlNodes(a); nodes > ontology.MaxConfigNodes {
			return nil, fmt.Errorf("%w: the actions picked would hold more than %d YAML nodes (at %s), more than config check reads", ErrTooLarge, ontology.MaxConfigNodes, t.Name)
		}
		actions[t.Name] = a
		out.Written = append(out.Written, t.Name)
	}
	cfg := map[string]any{
		"service":     m.Service,
		"environment": cmp.Or(opts.Environment, "production"),
		"actions":     actions,
		"upstreams":   map[string]any{m.Service: e.upstream()},
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Compiled by orangerail policy compile from %s (sha256 %s).\n", oneLine(m.Source.File), m.Source.SHA256)
	fmt.Fprintf(&buf, "# Each action's policy is explained by: orangerail policy explain TOOL --manifest MANIFEST\n")
	fmt.Fprintf(&buf, "# Credentials come from the environment, never from this file:\n")
	for _, s := range m.Schemes {
		if e.schemes[s.Name] {
			fmt.Fprintf(&buf, "#   %s (%s): %s\n", s.Name, s.Placement, s.Env)
		}
	}
	for _, s := range out.Skipped {
		fmt.Fprintf(&buf, "# Not served: %s: %s\n", s.Tool, oneLine(s.Reason))
	}
	for _, n := range out.Notes {
		fmt.Fprintf(&buf, "# Note: %s: %s\n", n.Tool, oneLine(n.Reason))
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > ontology.MaxConfigBytes {
		return nil, fmt.Errorf("%w: the actions picked make %d bytes, more than the %d config check reads", ErrTooLarge, buf.Len(), ontology.MaxConfigBytes)
	}
	out.YAML = buf.Bytes()
	return out, nil
}

// yamlNodes counts the YAML nodes v encodes to, as ontology.Parse counts
// a file's: a mapping or a sequence, each key, each value; whatever the
// map's or the slice's type.
func yamlNodes(v any) int {
	r := reflect.ValueOf(v)
	for r.Kind() == reflect.Pointer || r.Kind() == reflect.Interface {
		if r.IsNil() {
			return 1
		}
		r = r.Elem()
	}
	switch r.Kind() {
	case reflect.Map:
		n := 1
		for it := r.MapRange(); it.Next(); {
			n += 1 + yamlNodes(it.Value().Interface())
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 1
		for i := range r.Len() {
			n += yamlNodes(r.Index(i).Interface())
		}
		return n
	}
	return 1
}

// oneLine keeps a reason to one comment line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// builtIn reports whether name is one of orangerail's own tools'.
func builtIn(name string) bool {
	return slices.Contains([]string{ontology.CheckApprovalTool, ontology.DescribeObjectTool, ontology.DescribeActionTool,
		ontology.ListPoliciesTool, ontology.ErrorsExplainTool, ontology.SQLQueryTool}, name)
}

// baseURL decides the upstream's URL: the option, else the description's
// first server orangerail may call. It returns the URL's root (scheme and
// host, and for HTTP its path) and, for SOAP, the path each endpoint adds.
func baseURL(doc *apidoc.Document, option string) (string, string, error) {
	candidates := []string{option}
	if option == "" {
		candidates = nil
		for _, s := range doc.Servers {
			candidates = append(candidates, s.URL)
		}
	}
	var refused []string
	for _, c := range candidates {
		if strings.Contains(c, "{") {
			refused = append(refused, c+" (it has variables)")
			continue
		}
		if err := ontology.CheckUpstreamURL(c); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		if doc.Format == apidoc.WSDL {
			u, _ := url.Parse(c)
			return u.Scheme + "://" + u.Host, u.EscapedPath(), nil
		}
		return strings.TrimSuffix(c, "/"), "", nil
	}
	if option != "" {
		return "", "", fmt.Errorf("%w: --base-url %s", ErrBaseURL, strings.Join(refused, "; "))
	}
	return "", "", fmt.Errorf("%w: the description names no server orangerail may call (https, or http on loopback)%s; pass --base-url",
		ErrBaseURL, map[bool]string{true: ": " + strings.Join(refused, "; ")}[len(refused) > 0])
}

// servedElsewhere says why an operation that names its own servers, none
// of them the upstream's base, is not written (its call, and the
// upstream's credential, would go to the description's first server, a
// host the operation is not served at), or "". A --base-url is the
// operator's choice of where every call goes, and is taken as it is.
func (e *emitter) servedElsewhere(op *apidoc.Operation) string {
	if op == nil || e.opts.BaseURL != "" {
		return ""
	}
	if op.SOAP != nil {
		// WSDL serves each binding at its port's address: a service's
		// ports may be on hosts of their own (orders at one, payments at
		// another), and the endpoint's path was sent to the upstream's.
		u, err := url.Parse(op.SOAP.Address)
		base, _ := url.Parse(e.base)
		if err != nil || base == nil || u.Host == "" || strings.EqualFold(u.Host, base.Host) {
			return ""
		}
		return fmt.Sprintf("the description serves it at %s (port %s), not at the upstream's %s: its call would go to a host it is not served at; "+
			"compile it with --base-url naming its server", op.SOAP.Address, op.SOAP.Port, e.base)
	}
	if len(op.Servers) == 0 {
		return ""
	}
	var urls []string
	for _, s := range op.Servers {
		if strings.TrimSuffix(s.URL, "/") == e.base {
			return ""
		}
		urls = append(urls, s.URL)
	}
	return fmt.Sprintf("the description serves it at %s, not at the upstream's %s: its call, and the upstream's credential, would go to a host it is not served at; "+
		"compile it with --base-url naming its server", strings.Join(urls, ", "), e.base)
}

// emitter writes one actions file.
type emitter struct {
	m              *Manifest
	doc            *apidoc.Document
	ops            map[string]*apidoc.Operation // by Source
	opts           EmitOptions
	base, basePath string
	out            *Emitted
	// schemes are the schemes written actions present.
	schemes           map[string]bool
	idempotencyHeader string
}

// authKey is the name an actions file gives a scheme in its upstream's
// auth, which takes a letter, then letters, digits and _: the document's
// name with every other character as _, which reads the credential from
// the same variable (ontology.CredentialEnv). "" when no such name can be
// made: the name does not begin with a letter, or is longer than 63.
func authKey(name string) string {
	if name == "" || utf8.RuneCountInString(name) > 63 || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
		return ""
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// upstream is the upstream's declaration: its URL and the credentials of
// the schemes the written actions present.
func (e *emitter) upstream() map[string]any {
	u := map[string]any{"base_url": e.base}
	auth := map[string]any{}
	for _, s := range e.m.Schemes {
		if !e.schemes[s.Name] || s.Auth == "" {
			continue
		}
		a := map[string]any{"type": string(s.Auth)}
		src := e.doc.Schemes[s.Name]
		switch s.Auth {
		case ontology.AuthAPIKey:
			a["in"], a["name"] = src.In, src.ParamName
		case ontology.AuthOAuth2ClientCredentials:
			f := clientCredentials(src)
			a["token_url"] = f.TokenURL
			var scopes []string
			for _, t := range e.m.Tools {
				for _, r := range t.RequiredSchemes.Value {
					if r.Scheme == s.Name && slices.Contains(e.out.Written, t.Name) {
						scopes = append(scopes, schemeScopes(e.ops[t.Operation.Source], &t, s.Name)...)
					}
				}
			}
			slices.Sort(scopes)
			if scopes = slices.Compact(scopes); len(scopes) > 0 {
				a["scopes"] = scopes
			}
		}
		auth[authKey(s.Name)] = a
	}
	if len(auth) > 0 {
		u["auth"] = auth
	}
	if e.idempotencyHeader != "" && !strings.EqualFold(e.idempotencyHeader, ontology.IdempotencyHeaderDefault) {
		u["idempotency_header"] = e.idempotencyHeader
	}
	return u
}

// action writes one tool's action.
func (e *emitter) action(t *ToolPolicy, op *apidoc.Operation) (map[string]any, error) {
	note := func(format string, args ...any) {
		e.out.Notes = append(e.out.Notes, Skipped{t.Name, fmt.Sprintf(format, args...)})
	}
	in := newInput(note)
	var execute map[string]any
	var resultBase string
	var err error
	if op.SOAP != nil {
		execute, err = e.soap(t, op, in)
		// The answer's result holds the output element by its name: the
		// definition the response names, else document/literal's
		// convention, the operation's element and Response.
		resultBase = "/body/" + op.SOAP.Element + "Response"
		if ok := successes(op); len(ok) > 0 && ok[0].Schema != nil && ok[0].Schema.Ref != "" {
			resultBase = "/body/" + lastToken(ok[0].Schema.Ref)
		}
	} else {
		execute, err = e.http(t, op, in)
		resultBase = "/body"
	}
	if err != nil {
		return nil, err
	}
	schema := in.schema()
	if depth := nesting(schema); depth > maxInputNesting {
		// Each level is written indented under the one before: a deeper
		// schema makes an actions file quadratic in its depth (a 45 KB
		// description made 8.7 MB of YAML, and minutes of config check).
		return nil, fmt.Errorf("its input nests %d levels deep, more than %d", depth, maxInputNesting)
	}
	if _, err := ontology.CompileSchema("urn:orangerail:compiled:"+t.Name, schema); err != nil {
		return nil, fmt.Errorf("its input schema does not compile: %w", err)
	}
	a := map[string]any{
		"title":       title(t, op),
		"description": description(op),
		"input":       schema,
		"execute":     execute,
		"effect":      t.Effect.Value,
		"rollback":    t.Rollback.Value,
		"destructive": t.Risk.Value == ontology.RiskDestructive,
		"budget": map[string]any{"per_minute": t.Rate.Value.CallsPerMinute, "max_concurrent": t.Rate.Value.MaxConcurrent,
			"per_day": t.Rate.Value.DailyCallBudget},
	}
	policy := map[string]any{"approval": string(t.Approval.Value)}
	scope := e.m.Service + ":write"
	if t.Risk.Value == ontology.RiskRead {
		scope = e.m.Service + ":read"
	}
	policy["scope"] = scope
	if len(e.opts.Roles) > 0 {
		policy["roles"] = e.opts.Roles
	}
	a["policy"] = policy
	if envs := t.AllowedEnvironments.Value; len(envs) < 3 {
		a["environments"] = envs
	}
	var audit, result []string
	if t.LogClass.Value == LogMetadataOnly {
		audit = in.topLevel()
		result = []string{"/body"}
	} else {
		for _, f := range t.RedactFields {
			switch f.Value.In {
			case FieldParameter, FieldBody:
				audit = append(audit, in.masks(f.Value)...)
			case FieldResponse:
				result = append(result, resultMasks(resultBase, f.Value.Pointer, op.SOAP != nil)...)
			}
		}
	}
	slices.Sort(audit)
	if audit = slices.Compact(audit); len(audit) > 0 {
		a["redact_audit"] = audit
	}
	slices.Sort(result)
	if result = slices.Compact(result); len(result) > 0 {
		a["redact_result"] = result
	}
	return a, nil
}

// resultMasks maps a response field onto the result an execution keeps.
// A SOAP answer holds a repeated element as an array only when it
// repeats: an element that may repeat is masked both ways.
func resultMasks(base, pointer string, soap bool) []string {
	out := []string{base + pointer}
	if soap && strings.Contains(pointer, "/*") {
		out = append(out, base+strings.ReplaceAll(pointer, "/*", ""))
	}
	return out
}

// lastToken is the local name a source ends on: "{ns}element:Name" and
// "#/definitions/Name" end on Name.
func lastToken(ref string) string { return ref[strings.LastIndexAny(ref, "/}:")+1:] }

// title is the action's title: the summary, else the tool's name.
func title(t *ToolPolicy, op *apidoc.Operation) string {
	if s := clause(op.Summary); s != "" && len(s) <= 120 {
		return s
	}
	return t.Name
}

// description is what an agent reads: the operation's description, else
// its summary, at most 1000 characters.
func description(op *apidoc.Operation) string {
	d := strings.Join(strings.Fields(cmp.Or(op.Description, op.Summary)), " ")
	if d == "" {
		d = "Calls " + cmp.Or(strings.TrimSpace(op.Method+" "+op.Path), op.ID) + "." // a SOAP operation has neither
	}
	if r := []rune(d); len(r) > 1000 {
		d = string(r[:999]) + "…"
	}
	return d
}

// http writes an HTTP operation's execute, binding its parameters and body
// to the input.
func (e *emitter) http(t *ToolPolicy, op *apidoc.Operation, in *input) (map[string]any, error) {
	query, headers := map[string]any{}, map[string]any{}
	keyHeader := t.IdempotencyHeader.Value
	pathProps := map[string]string{} // a path parameter's name → its property
	for _, p := range op.Parameters {
		switch {
		case keyHeader != "" && p.In == apidoc.InHeader && strings.EqualFold(p.Name, keyHeader):
			continue // orangerail sends the key
		case placedByScheme(e.doc, t.RequiredSchemes.Value, p):
			continue // the scheme's credential
		case judgeName(p.Name, p.Schema).sensitivity == SensitivitySecret && !p.Required:
			continue // an optional credential no agent may hold (the manifest says so)
		case p.In == apidoc.InCookie:
			if p.Required {
				return nil, fmt.Errorf("it needs the cookie %q, which orangerail's http effect cannot send", p.Name)
			}
			in.note("the optional cookie %q is left out: orangerail's http effect sends no cookie", p.Name)
			continue
		case p.In == apidoc.InHeader && ontology.ReservedHeader(p.Name):
			if p.Required {
				return nil, fmt.Errorf("it needs the header %q, which orangerail sets itself", p.Name)
			}
			continue
		}
		if why := unplaceable(p); why != "" {
			if p.Required {
				return nil, fmt.Errorf("its %s parameter %q %s", p.In, p.Name, why)
			}
			in.note("the optional %s parameter %q is left out: it %s", p.In, p.Name, why)
			continue
		}
		prop := in.param(p)
		switch p.In {
		case apidoc.InPath:
			pathProps[p.Name] = prop
		case apidoc.InQuery:
			query[p.Name] = ":" + prop
		case apidoc.InHeader:
			headers[p.Name] = ":" + prop
		}
	}
	path, err := bindPath(op.Path, pathProps)
	if err != nil {
		return nil, err
	}
	h := map[string]any{
		"upstream":  e.m.Service,
		"method":    op.Method,
		"path":      path,
		"retry":     string(t.Retry.Value),
		"max_bytes": t.Output.MaxBytes.Value,
	}
	if len(query) > 0 {
		h["query"] = query
	}
	if len(headers) > 0 {
		h["headers"] = headers
	}
	switch b := op.Body; {
	case b != nil && b.Schema != nil:
		h["body"] = ":" + in.body(b)
	case b != nil && b.Required:
		// What an agent would send could not be checked, and the
		// effect would send nothing the upstream requires.
		return nil, fmt.Errorf("the description gives its required %s body no schema: what an agent sends could not be checked", b.MediaType)
	case b != nil:
		in.note("its optional %s body, to which the description gives no schema, is never sent", b.MediaType)
	}
	var success []int
	for _, r := range successes(op) {
		if n, err := strconv.Atoi(r.Status); err == nil {
			success = append(success, n)
		}
	}
	if len(success) > 0 && !slices.ContainsFunc(successes(op), func(r *apidoc.Response) bool { _, err := strconv.Atoi(r.Status); return err != nil }) {
		h["success"] = success
	}
	scopes, err := e.tokenScopes(t, op)
	if err != nil {
		return nil, err
	}
	if keyHeader != "" {
		if e.idempotencyHeader != "" && !strings.EqualFold(e.idempotencyHeader, keyHeader) {
			return nil, fmt.Errorf("it takes its idempotency key in %s, and another written action in %s: an upstream has one idempotency header", keyHeader, e.idempotencyHeader)
		}
		e.idempotencyHeader = keyHeader
	}
	h["auth"] = e.present(t)
	if scopes != nil {
		h["scopes"] = scopes
	}
	return map[string]any{"http": h}, nil
}

// unplaceable says why a parameter's value cannot be sent as its
// description writes it, or "": orangerail's http effect sends a scalar
// as its text and an array in a query as the parameter repeated, and
// places no object, nor an array in a path or header.
func unplaceable(p *apidoc.Parameter) string {
	s := p.Schema
	if s == nil {
		return ""
	}
	object := slices.Contains(s.Types, "object") || len(s.Members(false)) > 0
	array := slices.Contains(s.Types, "array") || s.Items != nil
	switch {
	case object:
		return fmt.Sprintf("is an object (%s), which orangerail's http effect cannot place", p.Style)
	case array && p.In != apidoc.InQuery:
		return fmt.Sprintf("is an array (%s), which orangerail's http effect cannot place in a %s", p.Style, p.In)
	case array && !p.Repeated:
		return fmt.Sprintf("is an array the description writes as %s, where orangerail's http effect repeats the parameter", p.Style)
	}
	return ""
}

// present lists the schemes a call presents, and marks them for the
// upstream's declaration.
func (e *emitter) present(t *ToolPolicy) []string {
	out := []string{}
	for _, s := range t.RequiredSchemes.Value {
		if s.Placement == "" {
			continue
		}
		e.schemes[s.Scheme] = true
		out = append(out, authKey(s.Scheme))
	}
	return out
}

// tokenScopes are the scopes the token of a call that presents an
// oauth2_client_credentials scheme is requested with: those its operation's
// chosen security alternative needs of that scheme (its own security, else
// the document's), so that a read's token does not carry a write's scopes.
// Not the alternative's every scope: one that also needs another scheme
// (an apiKey's roles, an openIdConnect scheme's scopes, a second oauth2
// scheme's) needs those of that scheme, which this token endpoint is not
// asked to grant. nil when it presents no such scheme (no scopes are
// written). Empty, not nil, when it needs the scheme but no scope of it
// (security: [{oauth: []}], or only the other scheme of an AND scoped):
// written scopes: [], its token is requested with no scope parameter (the
// server's default, RFC 6749 §3.3) — absent, it would ask for the
// scheme's list, every written action's, and a read's token would carry
// a write's scopes. The upstream's scheme lists
// every written action's (upstream), so each call's are a subset of them,
// as the loader requires. A scope no token request can carry (RFC 6749
// §3.3, ontology.CheckScope) is an error: the tool is skipped and named,
// rather than written into a file the loader refuses whole.
func (e *emitter) tokenScopes(t *ToolPolicy, op *apidoc.Operation) ([]string, error) {
	for _, s := range t.RequiredSchemes.Value {
		if s.Placement == "" {
			continue
		}
		if i := slices.IndexFunc(e.m.Schemes, func(p SchemePolicy) bool { return p.Name == s.Scheme }); i >= 0 && e.m.Schemes[i].Auth == ontology.AuthOAuth2ClientCredentials {
			scopes := schemeScopes(op, t, s.Scheme)
			for _, sc := range scopes {
				if err := ontology.CheckScope(sc); err != nil {
					return nil, fmt.Errorf("the scheme %s's scope %w: a token request cannot carry it", s.Scheme, err)
				}
			}
			if scopes == nil {
				scopes = []string{}
			}
			return scopes, nil
		}
	}
	return nil, nil
}

// schemeScopes are the scopes the tool's chosen security alternative
// (the first source of its RequiredSchemes) needs of one scheme, sorted
// and each once, the pseudo-scope none left out. Where the alternative
// is not found in the operation (a manifest of another description), the
// tool's RequiredScopes, as before scopes were told apart by scheme.
func schemeScopes(op *apidoc.Operation, t *ToolPolicy, scheme string) []string {
	if op != nil && op.Security != nil && len(t.RequiredSchemes.Source) > 0 {
		for _, r := range op.Security.Alternatives {
			if r.Source != t.RequiredSchemes.Source[0] {
				continue
			}
			own := apidoc.Requirement{}
			for _, u := range r.Schemes {
				if u.Name == scheme {
					own.Schemes = append(own.Schemes, u)
				}
			}
			return scopesOf(own)
		}
	}
	return slices.Clone(t.RequiredScopes.Value)
}

// soap writes a SOAP operation's execute: each leaf element of its input
// an input property, the body template in the elements' order.
func (e *emitter) soap(t *ToolPolicy, op *apidoc.Operation, in *input) (map[string]any, error) {
	b := op.SOAP
	var body []any
	if op.Body != nil && op.Body.Schema != nil {
		var err error
		if body, err = in.soapElements(op.Body.Schema, nil, 0); err != nil {
			return nil, err
		}
	}
	scopes, err := e.tokenScopes(t, op)
	if err != nil {
		return nil, err
	}
	endpoint := e.basePath
	if e.opts.BaseURL == "" || endpoint == "" {
		if u, err := url.Parse(b.Address); err == nil {
			endpoint = u.EscapedPath()
		}
	}
	s := map[string]any{
		"upstream":  e.m.Service,
		"version":   b.Version,
		"action":    b.Action,
		"operation": map[string]any{"namespace": b.Namespace, "name": b.Element},
		"max_bytes": t.Output.MaxBytes.Value,
		"auth":      e.present(t),
	}
	if scopes != nil {
		s["scopes"] = scopes
	}
	if endpoint != "" && endpoint != "/" {
		s["path"] = endpoint
	}
	if len(body) > 0 {
		s["body"] = body
	}
	return map[string]any{"soap": s}, nil
}

// input builds an action's input schema and remembers where each part of
// the call landed in it.
type input struct {
	props    map[string]any
	required []string
	conv     *converter
	// params maps a parameter (in, name) to its property; bodyProp is
	// the body's; soapLeaves maps an element path to its property.
	params     map[[2]string]string
	bodyProp   string
	soapLeaves map[string]string
	note       func(format string, args ...any)
}

func newInput(note func(format string, args ...any)) *input {
	return &input{props: map[string]any{}, conv: newConverter(note), params: map[[2]string]string{}, soapLeaves: map[string]string{}, note: note}
}

var notProp = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// name turns a parameter's or element's name into an input property's
// (a :name reference's letters, digits and '_'), unique.
func (in *input) name(raw string) string {
	n := strings.Trim(notProp.ReplaceAllString(raw, "_"), "_")
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		n = "p_" + n
	}
	name := n
	for i := 2; in.props[name] != nil || name == ontology.IdempotencyKeyArg; i++ {
		name = fmt.Sprintf("%s_%d", n, i)
	}
	return name
}

func (in *input) add(prop string, schema map[string]any, required bool) {
	in.props[prop] = schema
	if required {
		in.required = append(in.required, prop)
	}
}

// param binds a parameter to a property.
func (in *input) param(p *apidoc.Parameter) string {
	prop := in.name(p.Name)
	s := in.conv.convert(p.Schema, true)
	if p.Description != "" {
		s = withDescription(s, p.Description)
	}
	in.add(prop, s, p.Required)
	in.params[[2]string{p.In, p.Name}] = prop
	return prop
}

// body binds a request body to a property.
func (in *input) body(b *apidoc.Body) string {
	prop := in.name("body")
	in.add(prop, in.conv.convert(b.Schema, true), b.Required)
	in.bodyProp = prop
	return prop
}

// soapElements binds each leaf element under s to a property, and returns
// the body template.
func (in *input) soapElements(s *apidoc.Schema, path []string, depth int) ([]any, error) {
	if depth > 8 {
		return nil, fmt.Errorf("its input nests deeper than 8 elements")
	}
	var out []any
	for _, p := range s.Members(false) {
		at := append(slices.Clone(path), p.Name)
		c := p.Schema
		required := slices.Contains(s.Required, p.Name)
		switch {
		case c != nil && isObject(c):
			children, err := in.soapElements(c, at, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{p.Name: children})
		case c != nil && c.Items != nil && isObject(c.Items):
			return nil, fmt.Errorf("its element %s repeats a structure, which a SOAP body template cannot bind", strings.Join(at, "/"))
		case c != nil && !c.XMLList && c.Items != nil && xmlList(c.Items):
			return nil, fmt.Errorf("its element %s repeats a list (xs:list), which a SOAP body template cannot bind", strings.Join(at, "/"))
		case !required && judgeName(p.Name, c).sensitivity == SensitivitySecret:
			continue // an optional credential no agent may hold (the manifest says so)
		default:
			prop := in.name(strings.Join(at, "_"))
			in.add(prop, in.conv.convert(c, true), required && depth == 0)
			in.soapLeaves[apidoc.Pointer("", at...)] = prop
			var value any = ":" + prop
			if xmlList(c) {
				// One element, its text the items joined by spaces
				// (ontology.SOAPTextList), not one element per item.
				value = map[string]any{"list": value}
			}
			out = append(out, map[string]any{p.Name: value})
		}
	}
	return out, nil
}

// xmlList reports whether s is an XML Schema list type's, itself or, when
// the element is nillable, the alternative to null.
func xmlList(s *apidoc.Schema) bool {
	return s != nil && (s.XMLList || slices.ContainsFunc(s.AnyOf, func(a *apidoc.Schema) bool { return a.XMLList }))
}

// isObject reports whether s has members, its own or through allOf.
func isObject(s *apidoc.Schema) bool {
	return len(s.Members(false)) > 0
}

// maxInputNesting bounds how deep a written input schema's values nest
// (each object, array and map a level; $defs are referred to, not
// nested): about 30 levels of properties, more than an API's body has.
const maxInputNesting = 64

// nesting returns how deep v's maps and arrays nest.
func nesting(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			deepest = max(deepest, nesting(x))
		}
	case []any:
		for _, x := range v {
			deepest = max(deepest, nesting(x))
		}
	default:
		return 0
	}
	return deepest + 1
}

// bindPath is an operation's path with each {name} bound to its
// parameter's property, props[name], rewritten in one pass (one at a time,
// a property named as another parameter, {thing_id} for {thing-id}, was
// rewritten again by that one's turn), and checked as config check checks
// it: a path naming a parameter the operation does not declare, or that
// holds what a URL path cannot (a query, a space), is refused here, not
// written for config check to refuse.
func bindPath(path string, props map[string]string) (string, error) {
	var b strings.Builder
	for rest := path; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return "", fmt.Errorf("its path %q has a { without its }", path)
		}
		name := rest[open+1 : open+end]
		prop, ok := props[name]
		if !ok {
			return "", fmt.Errorf("its path names {%s}, which no path parameter of the operation declares", name)
		}
		b.WriteString(rest[:open] + "{" + prop + "}")
		rest = rest[open+end+1:]
	}
	bound := b.String()
	if _, err := ontology.ParsePath(bound); err != nil {
		return "", fmt.Errorf("its path cannot be bound: %w", err)
	}
	return bound, nil
}

// masks maps a redacted parameter or body field onto input pointers.
func (in *input) masks(f RedactField) []string {
	switch f.In {
	case FieldParameter:
		// The field names a parameter by name alone: one of that name in
		// each place (a query's email, a header's) is masked, every one.
		var out []string
		for k, prop := range in.params {
			if apidoc.Pointer("", k[1]) == f.Pointer {
				out = append(out, "/"+prop)
			}
		}
		slices.Sort(out)
		return out // none: a parameter not in the input (a credential left out)
	case FieldBody:
		if in.bodyProp != "" {
			return []string{"/" + in.bodyProp + f.Pointer}
		}
		// SOAP: the field's leaf, or every leaf under it.
		var out []string
		for path, prop := range in.soapLeaves {
			if path == f.Pointer || strings.HasPrefix(path, f.Pointer+"/") || strings.HasPrefix(f.Pointer, path+"/") {
				out = append(out, "/"+prop)
			}
		}
		return out
	}
	return nil
}

// topLevel lists every input property's pointer.
func (in *input) topLevel() []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(in.props)) {
		out = append(out, "/"+p)
	}
	return out
}

// schema is the input's JSON Schema.
func (in *input) schema() map[string]any {
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": in.props}
	if len(in.required) > 0 {
		slices.Sort(in.required)
		s["required"] = in.required
	}
	if len(in.conv.defs) > 0 {
		s["$defs"] = in.conv.defs
	}
	return s
}

func withDescription(s map[string]any, d string) map[string]any {
	if _, ref := s["$ref"]; ref {
		return map[string]any{"allOf": []any{s}, "description": d}
	}
	s["description"] = d
	return s
}
