// Package policy compiles an API description (internal/policy/apidoc) into
// a policy manifest: one ToolPolicy per operation, every value carrying
// the place in the source it came from and the rule that produced it
// (spec 001). It is pure: no file, no network, the same bytes for the same
// input.
package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// Options are a compilation's inputs beside the document.
type Options struct {
	// Service names the upstream: the emitted upstream's name and the
	// first part of every credential variable (<SERVICE>_<SCHEME>_CREDENTIAL).
	Service string
	// File is the source's base name; SHA256 its bytes' digest, hex.
	File, SHA256 string
	// Accept maps a tool's name to a person's reason for accepting its
	// acceptable fatal findings (an unauthenticated or scopeless write):
	// the tool is then served, and the reason is recorded beside each.
	Accept map[string]string
}

// maxProblemsPerTool bounds the document problems a tool lists one by one.
const maxProblemsPerTool = 16

// ErrService is a service name that cannot name both a deployment and its
// upstream.
var ErrService = errors.New("the service name must be lower-case letters, digits and '-', beginning with a letter, at most 63")

// serviceName is what both an ontology's service and an upstream's name
// accept.
var serviceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Compile compiles doc. It fails only on a bad option: every problem in
// the document is a finding in the manifest.
func Compile(doc *apidoc.Document, opts Options) (*Manifest, error) {
	if !serviceName.MatchString(opts.Service) {
		return nil, fmt.Errorf("%w: %q", ErrService, opts.Service)
	}
	m := &Manifest{
		Format: ManifestFormat, Service: opts.Service,
		Source:  Source{File: opts.File, SHA256: opts.SHA256, Format: string(doc.Format), Version: doc.Version, Title: doc.Title, APIVersion: doc.APIVersion},
		Schemes: []SchemePolicy{}, Tools: []ToolPolicy{}, Requirements: requirements(), Problems: []Problem{},
	}
	placed := map[string]SchemePolicy{}
	byEnv := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(doc.Schemes)) {
		p := placeScheme(opts.Service, doc.Schemes[name])
		placed[name] = p
		byEnv[p.Env] = append(byEnv[p.Env], name)
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Schemes)) {
		p := placed[name]
		switch others := slices.DeleteFunc(slices.Clone(byEnv[p.Env]), func(n string) bool { return n == name }); {
		case p.Placement == "":
		case authKey(name) == "":
			p.Placement, p.Auth = "", ""
			p.Rule = fmt.Sprintf("the scheme's name %q cannot name an upstream's credential (it must begin with a letter and be at most 63 characters long): nothing is sent", name)
		case len(others) > 0:
			// Two schemes whose credential variable is one (AdminKey and
			// adminkey, Bearer-Auth and Bearer_Auth): either would be sent
			// where the other goes.
			p.Placement, p.Auth = "", ""
			p.Rule = fmt.Sprintf("its credential variable %s is also that of scheme %s: the two cannot be told apart, so neither is sent", p.Env, strings.Join(others, ", "))
		}
		placed[name] = p
		m.Schemes = append(m.Schemes, p)
	}
	for _, p := range doc.Problems {
		m.Problems = append(m.Problems, Problem(p))
	}
	names := toolNames(doc.Operations)
	judge := newJudge()
	for i, op := range doc.Operations {
		t := compileOperation(doc, op, placed, judge)
		t.Name = names[i].name
		if names[i].note != "" {
			t.Unresolved = append(t.Unresolved, Unresolved{Kind: UnresolvedRenamed, Field: "name", Source: []string{op.Source}, Detail: names[i].note})
		}
		uses := sourcesOf(op)
		// The parameters its path declares for every operation of it.
		shared := op.Source[:strings.LastIndexByte(op.Source, '/')+1] + "parameters/"
		reached := 0
		for _, p := range doc.Problems {
			// A part of the operation, or of a component it reaches (a
			// schema a $ref names, which left a property with no schema),
			// or a parameter of its path's.
			if strings.HasPrefix(p.Source, op.Source+"/") || p.Source == op.Source || strings.HasPrefix(p.Source, shared) || reaches(uses, p.Source) {
				// Each operation names a few of them, and counts the
				// rest: listed under every operation that reaches them, a
				// shared component's problems make the manifest problems
				// times operations (49 KB made 52 MB).
				if reached++; reached <= maxProblemsPerTool {
					t.Unresolved = append(t.Unresolved, Unresolved{Kind: UnresolvedDocument, Field: "operation", Source: []string{p.Source}, Detail: p.Message,
						Fatal: true, Acceptable: true})
				}
			}
		}
		if reached > maxProblemsPerTool {
			t.Unresolved = append(t.Unresolved, Unresolved{Kind: UnresolvedDocument, Field: "operation", Source: []string{op.Source},
				Detail: fmt.Sprintf("%d more parts of the description that could not be read reach this operation: see the manifest's problems", reached-maxProblemsPerTool),
				Fatal:  true, Acceptable: true})
		}
		settle(&t, opts.Accept[t.Name])
		m.Tools = append(m.Tools, t)
	}
	// In name order, so that the same options fail with the same error.
	for _, name := range slices.Sorted(maps.Keys(opts.Accept)) {
		if !slices.ContainsFunc(m.Tools, func(t ToolPolicy) bool { return t.Name == name }) {
			return nil, fmt.Errorf("--accept names %q, which is not a tool of this description", name)
		}
	}
	slices.SortFunc(m.Tools, func(a, b ToolPolicy) int { return strings.Compare(a.Name, b.Name) })
	return m, nil
}

// reaches reports whether a problem at source is in a part of uses: one
// of them, inside one (a facet of a type it uses), or, in a WSDL, inside
// the schema component one is part of ({urn:t}group:H, whose element an
// operation's body holds, for a problem at {urn:t}group:H/sequence/group):
// a WSDL's problems are at the component's place, its parts' too.
func reaches(uses map[string]bool, source string) bool {
	for at := source; ; {
		if uses[at] {
			return true
		}
		i := strings.LastIndexByte(at, '/')
		if i <= 0 {
			break
		}
		at = at[:i]
	}
	component, _, wsdlPlace := strings.Cut(source, "/")
	if !wsdlPlace || !strings.HasPrefix(source, "{") {
		return false
	}
	for u := range uses {
		if u == component || strings.HasPrefix(u, component+"/") {
			return true
		}
	}
	return false
}

// sourcesOf returns where every part op reaches is written: its
// parameters, body and responses and each schema under them, through
// $refs into components and a discriminator's mapping, each once (a
// cyclic schema ends there).
func sourcesOf(op *apidoc.Operation) map[string]bool {
	out := map[string]bool{}
	seen := map[*apidoc.Schema]bool{}
	var walk func(s *apidoc.Schema)
	walk = func(s *apidoc.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out[s.Source] = true
		for _, p := range s.Properties {
			walk(p.Schema)
		}
		walk(s.AdditionalProperties)
		walk(s.Items)
		for _, group := range [][]*apidoc.Schema{s.AllOf, s.AnyOf, s.OneOf, s.Mapping} {
			for _, sub := range group {
				walk(sub)
			}
		}
	}
	for _, p := range op.Parameters {
		out[p.Source] = true
		walk(p.Schema)
	}
	if op.Body != nil {
		out[op.Body.Source] = true
		walk(op.Body.Schema)
	}
	for _, r := range op.Responses {
		out[r.Source] = true
		walk(r.Schema)
	}
	return out
}

// requirements are what a compiled policy cannot give (spec 001, "What the
// compiler cannot enforce, it says so").
func requirements() []Requirement {
	const status = "required, not verified"
	return []Requirement{
		{Name: "server_side_authorization", Status: status, Detail: "The upstream must itself check that the credential orangerail presents may do what each call asks; the scopes chosen here only say what the description declares."},
		{Name: "confused_deputy", Status: status, Detail: "orangerail calls the upstream with its own credential on an agent's behalf: the upstream must not let that credential reach data the agent's tenant may not, and each action must bind its target in its input, never in a value the upstream looks up."},
		{Name: "end_user_identity", Status: status, Detail: "The upstream sees orangerail's credential, not the person or agent behind a call; orangerail's audit records name them, and nothing is propagated to the upstream."},
	}
}

// settle decides a tool's status: it fails closed while a fatal finding
// stands. A person's reason accepts the acceptable ones.
func settle(t *ToolPolicy, accepted string) {
	var fatal, refused []string
	lifted := false
	for i := range t.Unresolved {
		u := &t.Unresolved[i]
		if !u.Fatal {
			continue
		}
		if u.Acceptable && accepted != "" {
			u.Accepted = accepted
			lifted = true
			continue
		}
		if !slices.Contains(fatal, string(u.Kind)) {
			fatal = append(fatal, string(u.Kind))
		}
		if !u.Acceptable && !slices.Contains(refused, string(u.Kind)) {
			refused = append(refused, string(u.Kind))
		}
	}
	switch {
	// The status names a person's reason only where it lifted a finding
	// (spec 001: provenance for how every value was reached): a reason
	// given for a tool with nothing to accept is not how it came to be
	// served.
	case len(fatal) == 0 && lifted:
		t.Status = derive(StatusServable, fmt.Sprintf("served: a person accepted its findings: %q", accepted), t.Operation.Source)
	case len(fatal) == 0:
		t.Status = derive(StatusServable, "served: nothing fatal is unresolved", t.Operation.Source)
	case len(refused) > 0:
		t.Status = derive(StatusFailsClosed, fmt.Sprintf("fails closed: %s cannot be accepted; no action is written for it", strings.Join(refused, ", ")), t.Operation.Source)
	default:
		t.Status = derive(StatusFailsClosed, fmt.Sprintf("fails closed: %s stands until a person accepts it (policy compile --accept %s=REASON)", strings.Join(fatal, ", "), t.Name), t.Operation.Source)
	}
}

// compileOperation derives one operation's policy; its name and status are
// settled by the caller.
func compileOperation(doc *apidoc.Document, op *apidoc.Operation, schemes map[string]SchemePolicy, judge *judge) ToolPolicy {
	src := op.Source
	t := ToolPolicy{Operation: Operation{ID: op.ID, Method: op.Method, Path: op.Path, Source: src}, Unresolved: []Unresolved{}}
	if b := op.SOAP; b != nil {
		t.Operation.SOAP = &SOAPOperation{Version: b.Version, Style: b.Style, Use: b.Use, Action: b.Action, Namespace: b.Namespace, Element: b.Element, Binding: b.Binding}
	}
	c := classify(op)
	t.Risk = c.risk
	t.Unresolved = append(t.Unresolved, c.unresolved...)
	risk := c.risk.Value
	changesState := risk != ontology.RiskRead

	r := decideRetry(op, c)
	t.Retry, t.IdempotencyKeyRequired, t.IdempotencyHeader = r.retry, r.keyRequired, r.keyHeader
	t.Unresolved = append(t.Unresolved, r.unresolved...)

	if changesState {
		t.Approval = derive(ontology.ApprovalRequired, fmt.Sprintf("a %s changes state: a person approves each call before it runs", risk), src)
	} else {
		t.Approval = derive(ontology.ApprovalNone, "a read changes nothing: it runs without a person", src)
	}
	b := ontology.RiskBudget(risk)
	t.Rate = derive(Rate{CallsPerMinute: b.PerMinute, MaxConcurrent: b.MaxConcurrent, DailyCallBudget: b.PerDay},
		fmt.Sprintf("the %s risk class's budget: %s; over it a call is refused, never queued", risk, b), src)

	acc := chooseAccess(doc, op, schemes, changesState)
	t.RequiredScopes, t.RequiredSchemes = acc.scopes, acc.schemes
	t.Unresolved = append(t.Unresolved, acc.unresolved...)
	t.Unresolved = append(t.Unresolved, credentialParameters(doc, op, acc)...)
	t.Unresolved = append(t.Unresolved, unsupported(op)...)

	s := judgeSensitivity(op, judge)
	t.Sensitivity, t.RedactFields, t.LogClass = s.sensitivity, s.redact, s.logClass
	t.Unresolved = append(t.Unresolved, s.unresolved...)

	t.Output.MaxBytes = derive(int64(ontology.HTTPMaxBytesDefault), "orangerail's default ceiling on an answer: the description declares no size", src)
	if risk == ontology.RiskDestructive {
		t.AllowedEnvironments = derive([]string{"development", "staging"}, "a destructive operation is kept out of production until a person adds it there, having reviewed this policy", src)
	} else {
		t.AllowedEnvironments = derive([]string{"development", "staging", "production"}, fmt.Sprintf("a %s may run in every environment", risk), src)
	}
	t.Effect = effect(doc, op)
	rollback, reversible := rollbackOf(doc, op, risk)
	t.Rollback = rollback

	t.Annotations = Annotations{
		ReadOnlyHint:    derive(risk == ontology.RiskRead, "from the risk class, which the approval gate acts on: "+string(risk), c.risk.Source...),
		DestructiveHint: derive(risk == ontology.RiskDestructive, "from the risk class, so the hint cannot disagree with the gate: "+string(risk), c.risk.Source...),
		IdempotentHint:  derive(r.retry.Value == ontology.RetrySafe, "from the idempotency the description shows (retry "+string(r.retry.Value)+")", r.retry.Source...),
	}
	if s.sensitivity.Value == nil {
		t.Annotations.SensitiveHint = derive[*bool](nil, "null, not false: no sensitivity could be established, and false would be a claim", s.sensitivity.Source...)
	} else {
		v := *s.sensitivity.Value != SensitivityNone
		t.Annotations.SensitiveHint = derive(&v, "from the sensitivity classification: "+string(*s.sensitivity.Value), s.sensitivity.Source...)
	}
	if !reversible {
		h := derive(false, "the rollback guidance says the effect cannot be undone", rollback.Source...)
		t.Annotations.ReversibleHint = &h
	}
	return t
}

// credentialParameters finds parameters that carry a credential the
// description does not declare as a scheme. A required one is fatal: an
// agent would have to hold it, and orangerail places credentials only from
// its environment. An optional one is left out of the tool's input (Slack's
// token parameter beside slackAuth, which carries the credential; Google's
// key on a public read). A parameter a declared apiKey scheme places is
// the scheme's, not the agent's.
func credentialParameters(doc *apidoc.Document, op *apidoc.Operation, acc access) []Unresolved {
	var out []Unresolved
	placed := ""
	for _, s := range acc.schemes.Value {
		if s.Placement != "" {
			placed = s.Scheme
			break
		}
	}
	params := op.Parameters
	if b := op.Body; b != nil && b.Schema != nil && (op.SOAP != nil || !jsonMedia(b.MediaType)) {
		// A SOAP body's elements and a form's fields are the call's
		// parameters: WSDL declares no security, so its credentials
		// travel there (TaxCloud's apiKey, Crowd's in0 token), as
		// Swagger's formData token does.
		params = append(slices.Clone(params), bodyParameters(b)...)
	}
	for _, p := range params {
		if placedByScheme(doc, acc.schemes.Value, p) {
			continue
		}
		j := judgeName(p.Name, p.Schema)
		if j.sensitivity != SensitivitySecret {
			continue
		}
		if !p.Required {
			carried := "the call is made without it"
			if placed != "" {
				carried = "the chosen scheme " + placed + " carries the credential"
			}
			out = append(out, Unresolved{Kind: UnresolvedCredentialParameter, Field: "required_schemes", Source: []string{p.Source},
				Detail: fmt.Sprintf("the optional %s parameter %q carries a credential (%s), which no agent may hold: it is left out of the tool's input, and %s", p.In, p.Name, j.rule, carried)})
			continue
		}
		out = append(out, Unresolved{Kind: UnresolvedCredentialParameter, Field: "required_schemes", Source: []string{p.Source},
			Detail: fmt.Sprintf("the %s parameter %q carries a credential (%s), but no security scheme orangerail places declares it: an agent would have to hold it, and orangerail places credentials only from its environment", p.In, p.Name, j.rule),
			Fatal:  true})
	}
	return out
}

// bodyParameters lists a SOAP body's or a form's fields as parameters:
// its members, and the members of a member that is itself a structure
// (Crowd's in0, an AuthenticatedToken, carries the token), each required
// when it and every structure above it are.
func bodyParameters(b *apidoc.Body) []*apidoc.Parameter {
	in := "body"
	var out []*apidoc.Parameter
	for _, p := range b.Schema.Members(false) {
		required := b.Required && slices.Contains(b.Schema.Required, p.Name)
		out = append(out, &apidoc.Parameter{Name: p.Name, In: in, Required: required, Schema: p.Schema, Source: sourceOf(p.Schema, b.Schema)})
		if p.Schema == nil {
			continue
		}
		for _, c := range p.Schema.Members(false) {
			out = append(out, &apidoc.Parameter{Name: p.Name + "." + c.Name, In: in, Schema: c.Schema, Source: sourceOf(c.Schema, p.Schema),
				Required: required && slices.Contains(p.Schema.Required, c.Name)})
		}
	}
	return out
}

// placedByScheme reports whether p is the credential of a scheme the call
// presents: a declared apiKey scheme, of the chosen ones orangerail
// places, that places p. Another scheme's parameter — one of a
// requirement not chosen, or of none the operation names — is no one's to
// send: it is judged as any parameter is (a required credential the
// agent would hold fails closed).
func placedByScheme(doc *apidoc.Document, chosen []SchemeRef, p *apidoc.Parameter) bool {
	for _, ref := range chosen {
		s := doc.Schemes[ref.Scheme]
		if ref.Placement != "" && s != nil && s.Type == apidoc.SchemeAPIKey && s.In == p.In && strings.EqualFold(s.ParamName, p.Name) {
			return true
		}
	}
	return false
}

// unsupported lists what orangerail's effects cannot send as declared.
func unsupported(op *apidoc.Operation) []Unresolved {
	var out []Unresolved
	add := func(source, detail string) {
		out = append(out, Unresolved{Kind: UnresolvedUnsupported, Field: "operation", Source: []string{source}, Detail: detail, Fatal: true})
	}
	if b := op.SOAP; b != nil {
		if b.Style != "document" || b.Use != "literal" {
			add(op.Source, fmt.Sprintf("the binding is %s/%s; orangerail's soap effect sends document/literal only", b.Style, b.Use))
		}
		return out
	}
	if b := op.Body; b != nil && !jsonMedia(b.MediaType) {
		add(b.Source, fmt.Sprintf("the body is %s; orangerail's http effect sends application/json only", b.MediaType))
	}
	return out
}

// jsonMedia reports whether a media type is JSON.
func jsonMedia(mt string) bool {
	mt = strings.ToLower(strings.TrimSpace(strings.SplitN(mt, ";", 2)[0]))
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// effect is the summary a person confirming the call reads.
func effect(doc *apidoc.Document, op *apidoc.Operation) Derived[string] {
	call := op.Method + " " + op.Path
	if op.SOAP != nil {
		call = "the SOAP operation " + op.ID
	}
	if doc.Title != "" {
		call += " at " + doc.Title
	}
	switch {
	case strings.TrimSpace(op.Summary) != "":
		return derive(clause(op.Summary)+" ("+call+").", "the operation's summary, and the call it makes", op.Source)
	case strings.TrimSpace(op.Description) != "":
		return derive(clause(firstSentence(op.Description))+" ("+call+").", "the first sentence of the operation's description, and the call it makes", op.Source)
	}
	return derive("Calls "+call+".", "the description gives no summary: the call it makes", op.Source)
}

// clause trims s to one line without its closing full stop.
func clause(s string) string {
	return strings.TrimRight(strings.Join(strings.Fields(s), " "), ".")
}

// firstSentence is text up to its first full stop followed by a space.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// rollbackOf writes the rollback guidance, plain about when no automated
// compensation exists, and says whether the effect can be undone at all.
func rollbackOf(doc *apidoc.Document, op *apidoc.Operation, risk ontology.Risk) (Derived[string], bool) {
	if risk == ontology.RiskRead {
		return derive("Nothing to undo: the operation only reads.", "a read has no effect", op.Source), true
	}
	if inv := inverse(doc, op); inv != nil {
		return derive(fmt.Sprintf("No automated compensation exists. To undo it by hand, call %s (%s %s) on what it made.", inv.ID, inv.Method, inv.Path),
			fmt.Sprintf("%s %s creates under %s, and %s removes what it names there", op.Method, op.Path, op.Path, inv.Source), op.Source, inv.Source), true
	}
	if op.Method == "PUT" || op.Method == "PATCH" {
		return derive("No automated compensation exists. To undo it by hand, read the prior state first and write it back with the same operation.",
			fmt.Sprintf("%s replaces or changes state that the same call can write back", op.Method), op.Source), true
	}
	return derive("No automated compensation exists, and the description declares no operation that undoes it: treat the effect as permanent.",
		"no inverse operation is declared", op.Source), false
}

// inverse finds the DELETE that removes what a POST creates: a DELETE on
// the POST's path followed by one {parameter}.
func inverse(doc *apidoc.Document, op *apidoc.Operation) *apidoc.Operation {
	if op.Method != "POST" {
		return nil
	}
	for _, d := range doc.Operations {
		if d.Method != "DELETE" || !strings.HasPrefix(d.Path, strings.TrimSuffix(op.Path, "/")+"/{") {
			continue
		}
		rest := strings.TrimPrefix(d.Path, strings.TrimSuffix(op.Path, "/")+"/")
		if strings.HasSuffix(rest, "}") && !strings.Contains(rest, "/") {
			return d
		}
	}
	return nil
}

// toolName is the name given an operation, and why it differs from its id.
type toolName struct{ name, note string }

var (
	toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	notToolChar     = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)
)

// toolNames names each operation's tool: its id where that is a tool name
// (^[a-zA-Z0-9_-]{1,64}$), else the id with every other character an
// underscore, else method and path; a name taken by an earlier operation
// gets _2, _3 …; one longer than 64 keeps 55 characters and a digest. An
// id that is a tool name is the first such operation's before any name is
// made: a made name never takes another operation's id (get_pet_2 for a
// second get_pet, while an operation's id is get_pet_2), which would move
// --include and --accept onto the wrong operation.
func toolNames(ops []*apidoc.Operation) []toolName {
	out := make([]toolName, len(ops))
	owner := map[string]int{} // an id that is a tool name → its first operation
	for i, op := range ops {
		base, note := op.ID, ""
		if base == "" {
			base = strings.ToLower(op.Method) + "_" + op.Path
			note = "the operation has no id: named from its method and path"
		}
		if !toolNamePattern.MatchString(base) {
			clean := strings.Trim(notToolChar.ReplaceAllString(base, "_"), "_")
			if len(clean) > 64 {
				sum := sha256.Sum256([]byte(base))
				clean = clean[:55] + "_" + hex.EncodeToString(sum[:4])
			}
			if clean == "" {
				clean = "operation"
			}
			note = cmp.Or(note, fmt.Sprintf("the id %q is not a tool name (letters, digits, '_' and '-', at most 64)", op.ID))
			base = clean
		} else if _, ok := owner[base]; !ok && note == "" {
			owner[base] = i
		}
		out[i] = toolName{base, note}
	}
	taken := map[string]bool{}
	for i := range out {
		base, note := out[i].name, out[i].note
		anothers := func(name string) bool { j, ok := owner[name]; return ok && j != i }
		name := base
		for n := 2; taken[name] || anothers(name); n++ {
			// The suffix fits within a tool name's 64 characters: the base
			// is cut to make room.
			suffix := fmt.Sprintf("_%d", n)
			name = base[:min(len(base), 64-len(suffix))] + suffix
			note = fmt.Sprintf("%q is another operation's", base)
		}
		taken[name] = true
		if note != "" {
			note += fmt.Sprintf(": named %q", name)
		}
		out[i] = toolName{name, note}
	}
	return out
}
