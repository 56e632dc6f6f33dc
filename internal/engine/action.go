package engine

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// redacted replaces a masked value in audit records.
const redacted = "[redacted]"

// call is one checked action call.
type call struct {
	name      string
	action    *ontology.Action
	input     []byte         // verbatim, as the caller sent it
	canonical []byte         // RFC 8785 form, what the digest covers
	values    map[string]any // decoded input, for the precondition and parameters
	digest    []byte
	// digestKey is the kid the digest carries: the key that made it ("":
	// the legacy key).
	digestKey keyring.KID
	// sealed: the call is an approval's whose input was stored sealed,
	// whatever approvals.seal_inputs says now (sealing turned off since):
	// its records carry the digest, and its errors are masked, as sealing
	// would have them.
	sealed bool
}

// inputJSON is c's input as JSON: its canonical form, or, for a call an
// approval's review builds from its values alone, those values written.
func (c *call) inputJSON() json.RawMessage {
	if c.canonical != nil {
		return c.canonical
	}
	return mustJSON(c.values)
}

// sealing reports whether c's input is kept out of the audit chain: inputs
// are sealed now, or c's was when it was staged.
func (e *Engine) sealing(c *call) bool {
	return e.cfg.Approvals.SealInputs || c.sealed
}

// Call is an agent's call of an action: it validates the input, resolves
// the target, checks the precondition, and then, as the action's policy
// says, stages an approval or executes at once. args is the raw tool input.
func (e *Engine) Call(ctx context.Context, caller *Caller, action string, args json.RawMessage) (out *Outcome) {
	ctx = e.observe(ctx)
	ctx = e.begin(ctx, OpCall, action)
	defer e.settle(ctx, OpCall, action, caller, time.Now(), &out)
	a, ok := e.cfg.Actions[action]
	if !ok {
		return &Outcome{Status: StatusNotFound, Code: errcode.MCPToolUnknown}
	}
	if out := e.Admit(ctx, caller, action); out != nil {
		return out
	}
	correlation := uuid.NewString()
	// Before any record of the call: a refusal of its input is one. A
	// tenant that cannot be opened cannot be audited, and nothing ran:
	// audit_blocked, as a failed first append says.
	if err := e.openTenant(ctx, caller.Tenant); err != nil {
		return e.auditBlocked(ctx, "open tenant", correlation, err)
	}
	if limit := e.cfg.Limits.MaxInputBytes; len(args) > limit {
		return e.refuseInput(ctx, caller, action, correlation, errcode.InputTooLarge, []Issue{{
			Path: "", Message: fmt.Sprintf("the input is %d bytes; at most %d are accepted (limits.max_input_bytes)", len(args), limit)}})
	}
	key, args, issue := takeIdempotencyKey(a, args)
	if issue != nil {
		return e.refuseInput(ctx, caller, action, correlation, errcode.InputInvalid, []Issue{*issue})
	}
	c, issues := e.checkInput(action, a, caller.Tenant, args)
	if issues != nil {
		return e.refuseInput(ctx, caller, action, correlation, errcode.InputInvalid, issues)
	}
	if key != "" {
		return e.idempotent(ctx, caller, c, key, correlation, func(ctx context.Context) *Outcome { return e.run(ctx, caller, c, correlation) })
	}
	return e.run(ctx, caller, c, correlation)
}

// run carries a checked call on: it resolves the target, checks the
// precondition, and stages or executes as the action's policy says.
func (e *Engine) run(ctx context.Context, caller *Caller, c *call, correlation string) *Outcome {
	a := c.action
	// Resolve and check before anything is staged: a call that cannot run
	// now is refused now.
	target, err := e.resolveTarget(ctx, nil, caller.Tenant, a, c, false)
	if keyErr := (*targetKeyError)(nil); errors.As(err, &keyErr) {
		return e.refuseInput(ctx, caller, c.name, correlation, errcode.InputInvalid, []Issue{keyErr.issue})
	}
	if err != nil {
		return e.auditFailure(ctx, caller, c, nil, correlation, PhaseResolveError, StatusResolveError, err)
	}
	if a.Target != nil && target == nil {
		return &Outcome{Status: StatusNotFound}
	}
	if ok, err := e.where(a, target, c.values, caller); !ok {
		return e.auditRefusal(ctx, caller, c, nil, correlation, PhasePreconditionFailed, StatusPreconditionFailed, err)
	}

	switch {
	case e.mode == ModeDryRun:
		return e.auditRefusal(ctx, caller, c, nil, correlation, PhaseDryRun, StatusDryRun, nil)
	case a.Execute.NotImplemented:
		return e.auditRefusal(ctx, caller, c, nil, correlation, PhaseNotImplemented, StatusNotImplemented, nil)
	case a.Policy.Approval == ontology.ApprovalRequired:
		return e.stage(ctx, caller, c)
	}
	return e.execute(ctx, caller, c, nil, correlation)
}

// checkInput validates an input against the action's schema and returns
// the call, or every issue at its JSON pointer path.
func (e *Engine) checkInput(name string, a *ontology.Action, tenant string, input []byte) (*call, []Issue) {
	if len(input) == 0 {
		input = []byte("{}")
	}
	canonical, err := jcs.Canonicalize(input)
	if err != nil {
		return nil, []Issue{notIJSON(err)}
	}
	// The declared defaults become part of the input before its digest is
	// taken: the approval shows exactly what executes.
	if filled, ok := withDefaults(a.Input, canonical); ok {
		if canonical, err = jcs.Canonicalize(filled); err != nil {
			return nil, []Issue{{Path: "", Message: "the input with its defaults is not valid JSON: " + err.Error()}}
		}
		input = canonical
	}
	var decoded any
	if err := json.Unmarshal(canonical, &decoded); err != nil {
		return nil, []Issue{{Path: "", Message: "the input is not valid JSON"}}
	}
	if issues := nulIssues("", decoded, nil); issues != nil {
		return nil, issues
	}
	if issues := validateInput(a.InputSchema(), canonical); issues != nil {
		return nil, issues
	}
	values, ok := decoded.(map[string]any)
	if !ok {
		return nil, []Issue{{Path: "", Message: "the input must be a JSON object"}}
	}
	c := &call{name: name, action: a, input: input, canonical: canonical, values: values}
	c.digest, c.digestKey = e.inputDigest(tenant, name, canonical)
	return c, nil
}

const inputDigestPurpose = "input digest v1"

// inputDigest is the digest of an action's canonical input in a tenant,
// under the ring's active key, and the kid it carries: what an approver
// approves, and what the consume checks the stored input against. After a
// rotation an identical call has another digest, so it opens a fresh
// approval; the one staged before keeps its own.
func (e *Engine) inputDigest(tenant, action string, canonical []byte) ([]byte, keyring.KID) {
	return e.mac(inputDigestPurpose, []byte(tenant), []byte(action), canonical)
}

// inputDigestBy is the digest of the input under the key kid names, or
// false when the ring no longer holds that key.
func (e *Engine) inputDigestBy(kid keyring.KID, tenant, action string, canonical []byte) ([]byte, bool) {
	return e.macBy(kid, inputDigestPurpose, []byte(tenant), []byte(action), canonical)
}

// digestOfInput reports whether digest is the digest of the input under
// any key of the ring: for a digest stored without its kid (an
// idempotency key's), made under whichever key was active then.
func (e *Engine) digestOfInput(digest []byte, tenant, action string, canonical []byte) bool {
	for _, k := range e.ring.Keys() {
		if hmac.Equal(digest, macUnder(k.Secret(), inputDigestPurpose, []byte(tenant), []byte(action), canonical)) {
			return true
		}
	}
	return false
}

// notIJSON is the issue of an input jcs refused: at the value it refused
// (a number a double cannot hold, a lone surrogate, a repeated member),
// saying what is wrong with it, where the parser's own words said "jcs:"
// and a byte offset.
func notIJSON(err error) Issue {
	var se *jcs.SyntaxError
	if !errors.As(err, &se) {
		return Issue{Path: "", Message: "the input is not valid JSON"}
	}
	path := make(ontology.Pointer, len(se.Path))
	for i, seg := range se.Path {
		path[i] = display.Echo(seg)
	}
	return Issue{Path: path.String(), Message: "not I-JSON (RFC 7493), which an input must be: " + se.Msg}
}

// nulIssues lists every string and member name of v, at its JSON pointer
// path, that holds U+0000. No input may carry one: Postgres cannot store
// it in the audit record of the call (jsonb) nor in most columns an effect
// writes, so it is refused, at its path, before anything is staged.
func nulIssues(path string, v any, issues []Issue) []Issue {
	const msg = "must not contain the NUL character (U+0000)"
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			issues = append(issues, Issue{Path: path, Message: msg})
		}
	case []any:
		for i, item := range v {
			issues = nulIssues(path+"/"+strconv.Itoa(i), item, issues)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := path + "/" + escapePointer(display.Echo(k))
			if strings.ContainsRune(k, 0) {
				issues = append(issues, Issue{Path: p, Message: "member names " + msg})
			}
			issues = nulIssues(p, v[k], issues)
		}
	}
	return issues
}

// refuseInput records a call refused for its input, without the input (it
// may be what cannot be stored), and returns its outcome: an agent cannot
// make attempts that leave no trace.
func (e *Engine) refuseInput(ctx context.Context, caller *Caller, action, correlation string, code errcode.Code, issues []Issue) *Outcome {
	var masks []ontology.Pointer
	if a := e.cfg.Actions[action]; a != nil {
		masks = a.AuditMasks()
	}
	rec := &Record{Tenant: caller.Tenant, At: e.now(), CorrelationID: correlation, Phase: PhaseInvalidInput, Action: action,
		Actor: caller.actor(), DevMode: caller.DevMode, Error: issuesText(code, maskedIssues(issues, masks))}
	if err := e.appendAlone(ctx, caller.Tenant, rec); err != nil {
		return e.auditBlocked(ctx, action, correlation, err)
	}
	return &Outcome{Status: StatusInvalidInput, Code: code, Issues: issues, CorrelationID: correlation}
}

// maskedIssue is the message an audit record keeps of an issue at or
// under a redact_audit path; maskedAncestorIssue, of one at a value that
// holds such a path.
const (
	maskedIssue         = "withheld: the value is masked (redact_audit)"
	maskedAncestorIssue = "withheld: it may quote a value that is masked (redact_audit)"
)

// maskedIssues is issues as an audit record may keep them: an issue at or
// under one of masks (the action's redact_audit paths) loses its message,
// which may quote the value (a pattern's, a bound's, an enum's); so does
// one at a value holding a masked one — the whole input's, whose parse
// error quotes a number wherever it stands, or an object's — since its
// message may quote any part of it. The agent is still told the whole
// issue: it sent the value.
func maskedIssues(issues []Issue, masks []ontology.Pointer) []Issue {
	if len(masks) == 0 {
		return issues
	}
	out := slices.Clone(issues)
	for i, is := range out {
		// An issue's path is escaped as a pointer, or "" (the whole input:
		// no token, which holds every masked path).
		tokens, _ := ontology.ParsePointer(is.Path)
		switch {
		case slices.ContainsFunc(masks, func(m ontology.Pointer) bool { return covers(m, tokens) }):
			out[i].Message = maskedIssue
		case slices.ContainsFunc(masks, func(m ontology.Pointer) bool { return len(tokens) < len(m) && covers(m[:len(tokens)], tokens) }):
			out[i].Message = maskedAncestorIssue
		}
	}
	return out
}

// covers reports whether the value at path (its tokens, each truncated as
// an issue's path is) is at or under mask, a "*" token of the mask naming
// any one token of the path, as it names every element of an array
// (maskAt).
func covers(mask ontology.Pointer, path []string) bool {
	if len(path) < len(mask) {
		return false
	}
	for i, token := range mask {
		if token != "*" && display.Echo(token) != path[i] {
			return false
		}
	}
	return true
}

// issuesText summarizes issues for an audit record, bounded.
func issuesText(code errcode.Code, issues []Issue) string {
	const shown = 20
	var b strings.Builder
	b.WriteString(string(code))
	for i, is := range issues {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(issues)-shown)
			break
		}
		fmt.Fprintf(&b, "; %s: %s", cmp.Or(is.Path, "(input)"), display.Echo(is.Message))
	}
	return b.String()
}

var issuePrinter = message.NewPrinter(language.English)

// validateInput checks canonical input against a compiled schema.
func validateInput(schema *ontology.Validator, canonical []byte) []Issue {
	return schemaIssues(schema, canonical, false)
}

// schemaIssues validates a JSON document against schema and lists every
// issue at its JSON pointer path. atMember puts an issue of a missing,
// unknown or repeated member at the member's own path, where a read's
// checks have always put it; an action's input issues name the object
// holding it, as they always have.
func schemaIssues(schema *ontology.Validator, canonical []byte, atMember bool) []Issue {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canonical))
	if err != nil {
		return []Issue{{Path: "", Message: "the input is not valid JSON"}}
	}
	err = schema.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Issue{{Path: "", Message: err.Error()}}
	}
	var issues []Issue
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			path := ""
			for _, tok := range v.InstanceLocation {
				path += "/" + escapePointer(display.Echo(tok))
			}
			if atMember {
				issues = append(issues, memberIssues(path, v.ErrorKind)...)
			} else {
				issues = append(issues, Issue{Path: path, Message: v.ErrorKind.LocalizedString(issuePrinter)})
			}
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(verr)
	slices.SortStableFunc(issues, func(a, b Issue) int { return strings.Compare(a.Path, b.Path) })
	return issues
}

// memberIssues is a schema's issue at path, placed where the agent fixes
// it: a property that is missing, unknown or repeated at its own path.
func memberIssues(path string, k jsonschema.ErrorKind) []Issue {
	var issues []Issue
	switch k := k.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			issues = append(issues, Issue{Path: path + "/" + escapePointer(display.Echo(name)), Message: "required"})
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			issues = append(issues, Issue{Path: path + "/" + escapePointer(display.Echo(name)), Message: "unknown property"})
		}
	case *kind.UniqueItems:
		issues = append(issues, Issue{Path: fmt.Sprintf("%s/%d", path, k.Duplicates[1]), Message: fmt.Sprintf("listed twice: the same as item %d", k.Duplicates[0])})
	default:
		issues = append(issues, Issue{Path: path, Message: k.LocalizedString(issuePrinter)})
	}
	return issues
}

// resolveTarget reads the action's target row in the transaction's tenant,
// locking it when the caller will act on it, or asks the upstream that
// answers it (which nothing locks; tx is unused). With tx nil (and no
// lock) the row is read in a read-only transaction of its own, sent in
// one round trip. No target, or none found: nil.
func (e *Engine) resolveTarget(ctx context.Context, tx pgx.Tx, tenant string, a *ontology.Action, c *call, lock bool) (json.RawMessage, error) {
	if a.Target == nil {
		return nil, nil
	}
	if a.Target.Read() {
		// Keyed by declaration: an approval's review builds a call
		// without its name, and from its values.
		return e.targetReaders[a].ReadTarget(ctx, &EffectCall{Tenant: tenant, Action: c.name, Input: c.inputJSON()})
	}
	o := e.cfg.Objects[a.Target.Object]
	path := "/" + escapePointer(a.Target.KeyFrom)
	value, present := c.values[a.Target.KeyFrom]
	if !present {
		return nil, &targetKeyError{Issue{Path: path, Message: "is required: it names the action's target"}}
	}
	// Held to the key column's type, as a get's key is: a key Postgres
	// would refuse is the caller's to fix, not the datasource's failure.
	_, key, issue := e.bindValue(a.Target.Object, o.Key, "", mustJSON(value))
	if issue != nil {
		return nil, &targetKeyError{Issue{Path: path, Message: "names the action's target, so it " + issue.Message}}
	}
	if tx == nil {
		return readRow(ctx, e.datasource, tenant, rowSQL(o, selectList(o), o.Key, false), key)
	}
	return fetchRow(ctx, tx, o, selectList(o), tenant, o.Key, key, lock)
}

// targetKeyError is a call whose input does not hold its target's key as
// a scalar: an optional key_from property left out, or null. It is the
// caller's to fix, not the datasource's failure.
type targetKeyError struct{ issue Issue }

func (e *targetKeyError) Error() string {
	return "the target key at " + e.issue.Path + " " + e.issue.Message
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// where evaluates the action's precondition. A precondition that cannot be
// evaluated does not hold.
func (e *Engine) where(a *ontology.Action, target json.RawMessage, input map[string]any, caller *Caller) (bool, error) {
	program := a.WhereProgram()
	if program == nil {
		return true, nil
	}
	vars := map[string]any{
		"input":  input,
		"caller": callerVars(caller),
	}
	if a.Target != nil {
		var t map[string]any
		if err := json.Unmarshal(target, &t); err != nil {
			return false, err
		}
		vars["target"] = t
	}
	out, _, err := program.Eval(vars)
	if err != nil {
		return false, fmt.Errorf("the precondition could not be evaluated: %w", err)
	}
	holds, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the precondition evaluated to %v, not a boolean", out.Value())
	}
	if !holds {
		return false, errPreconditionFalse
	}
	return true, nil
}

// definitionHash identifies an action's declaration: an approval staged
// under one definition never executes under another.
func definitionHash(a *ontology.Action) []byte {
	canonical, err := jcs.Marshal(struct {
		Description string           `json:"description"`
		Target      *ontology.Target `json:"target"`
		Input       map[string]any   `json:"input"`
		Where       string           `json:"where"`
		Policy      any              `json:"policy"`
		Destructive bool             `json:"destructive"` // as declared: unset hashes as false, as before it could be unset
		Idempotent  bool             `json:"idempotent"`
		Execute     any              `json:"execute"`
		Effect      string           `json:"effect"`
		Rollback    string           `json:"rollback"`
	}{a.Description, a.Target, a.Input, a.Where, policyDefinition(a.Policy), a.DeclaredDestructive(), a.Idempotent, executeDefinition(a.Execute), a.Effect, a.Rollback})
	if err != nil {
		panic("engine: an action's declaration is not JSON: " + err.Error())
	}
	sum := sha256.Sum256(canonical)
	return sum[:]
}

// policyDefinition is a policy as its action's definition hash covers it:
// who may call the action, in the form of the first release (the Go field
// names). Who may decide its approvals (ApproverRoles) is left out: it
// changes nothing an approval executes, and a change of approvers must not
// void the approvals open (TestDefinitionHashesArePinned).
func policyDefinition(p ontology.Policy) any {
	return struct {
		Approval ontology.ApprovalPolicy
		Roles    []string
		Scope    string
	}{p.Approval, p.Roles, p.Scope}
}

// executeDefinition is an execute as its action's definition hash covers
// it. The kinds of the first release keep the form they were hashed in
// then — the Go field names of a struct holding both — so approvals staged
// before execute became a union still execute (TestDefinitionHashesArePinned).
// A kind added later is hashed as its member alone, {"<kind>": spec},
// which no earlier form can equal.
func executeDefinition(x ontology.Execute) any {
	switch kind := x.Kind(); kind {
	case ontology.ExecuteSQL, ontology.ExecuteNotImplemented:
		return struct {
			SQL            string
			NotImplemented bool
		}{x.SQL, x.NotImplemented}
	case ontology.ExecuteHTTP:
		return map[ontology.ExecuteKind]any{kind: x.HTTP}
	case ontology.ExecuteSOAP:
		return map[ontology.ExecuteKind]any{kind: x.SOAP}
	default:
		panic("engine: no definition form for execute kind " + string(kind))
	}
}

// stage records a pending approval and its staged audit record in one
// transaction. An identical open call returns the approval it made.
func (e *Engine) stage(ctx context.Context, caller *Caller, c *call) (out *Outcome) {
	ctx, span := e.phase(ctx, "stage", c.name)
	defer func() { endPhase(span, out) }()
	return e.stageOnce(ctx, caller, c, true)
}

func (e *Engine) stageOnce(ctx context.Context, caller *Caller, c *call, retry bool) *Outcome {
	if retry {
		// Most calls are new: the stage is then one statement, sent with
		// its scope and committed with it, in one round trip instead of
		// BEGIN, the stage and COMMIT. Staging twice is staging once (a
		// second send finds the open approval the first made, under the
		// same id), as RowWriter requires. An identical call's open
		// approval answers at once, unless it has lapsed; one that has,
		// and an identical call staged this instant, take the
		// transaction below.
		p, err := e.stageParams(caller, c)
		if err != nil {
			return e.storeFailure(ctx, "stage "+c.name, "", err)
		}
		approval, err := store.New(database.RowWriter(e.store, caller.Tenant)).ApprovalStage(ctx, p)
		if err != nil {
			err = changeError(err)
		}
		switch {
		case err == nil && approval.ID == p.ID:
			e.staged(ctx, nil, caller, c, p.ID)
			return pending(approval)
		case err == nil && !e.lapsed(approval):
			// Staged nothing: a repeated call (an agent polling by
			// calling again) costs one round trip.
			return e.answerOpen(ctx, caller, approval)
		case err != nil && !errors.Is(err, store.ErrConflict):
			return e.storeFailure(ctx, "stage "+c.name, "", err)
		}
	}
	var approval *store.Approval
	var existing bool
	err := database.InTenant(ctx, e.store, caller.Tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// Staging twice is staging once: a second run finds the open
		// approval a first run's COMMIT made, if it took effect.
		database.Repeatable(tx)
		existing = false
		st := store.New(tx)
		// An identical call's open approval, if one is, answers instead
		// of a stage. One that lapsed is expired, and the call staged
		// anew: the open one holds its place until then
		// (approvals_open_call_idx). So at most twice.
		for range 2 {
			p, err := e.stageParams(caller, c)
			if err != nil {
				return err
			}
			if approval, err = st.ApprovalStage(ctx, p); err != nil {
				return changeError(err)
			}
			if approval.ID == p.ID {
				e.staged(ctx, tx, caller, c, p.ID)
				return nil
			}
			if approval, err = e.expireIfLapsed(ctx, tx, caller.Tenant, approval); err != nil {
				return err
			}
			if approval.Status.Open() {
				existing = true
				return nil
			}
		}
		return fmt.Errorf("staging found an identical call's approval twice (%s)", approval.ID)
	})
	if errors.Is(err, store.ErrConflict) && retry {
		// An identical call staged the same approval meanwhile: find it.
		return e.stageOnce(ctx, caller, c, false)
	}
	if err != nil {
		return e.storeFailure(ctx, "stage "+c.name, "", err)
	}
	if existing {
		return e.answerOpen(ctx, caller, approval)
	}
	return pending(approval)
}

// answerOpen answers a call that found an identical call's open approval:
// repeating a pending call says it is pending; repeating an approved call
// is polling it.
func (e *Engine) answerOpen(ctx context.Context, caller *Caller, a *store.Approval) *Outcome {
	if a.Status == store.ApprovalApproved {
		return e.check(ctx, caller, a.ID.String())
	}
	return pending(a)
}

// pending is the outcome of a call that an open approval holds.
func pending(a *store.Approval) *Outcome {
	return &Outcome{Status: StatusApprovalPending, ApprovalID: &a.ID, ExpiresAt: &a.ExpiresAt, CorrelationID: a.ID.String()}
}

// stageParams is the stage of call c by caller under a new approval id.
// The approval keeps the canonical input: the bytes its digest covers,
// the bytes an approver is shown, the bytes that execute; sealed, under
// the key that made the digest.
func (e *Engine) stageParams(caller *Caller, c *call) (*store.ApprovalStageParams, error) {
	id := uuid.New()
	entry, err := encodeEntry(e.record(caller, c, PhaseStaged, id.String(), &id))
	if err != nil {
		return nil, &auditAppendError{err}
	}
	p := &store.ApprovalStageParams{
		ID: id, Action: c.name, RequestedBy: caller.actor().Subject,
		Input: c.canonical, InputDigest: c.digest, InputKeyID: string(c.digestKey), DefinitionHash: e.definitions[c.name],
		ExpiresAt: e.now().Add(time.Duration(e.cfg.Approvals.TTL)), Entry: entry,
	}
	if e.cfg.Approvals.SealInputs {
		if p.InputSealed, p.InputDataKey, err = e.sealInput(caller.Tenant, id, c.digestKey, c.canonical); err != nil {
			return nil, err
		}
		p.Input = nil
	}
	return p, nil
}

// staged emits the stage of approval id once tx commits; tx nil: the
// stage has committed.
func (e *Engine) staged(ctx context.Context, tx pgx.Tx, caller *Caller, c *call, id uuid.UUID) {
	approvalChanged(ctx, tx, ApprovalChanged{ApprovalID: id, Transition: TransitionStaged, Action: c.name,
		Tenant: caller.Tenant, Actor: caller.actor().Subject})
}

// lapsedBatch bounds the lapsed approvals one transaction expires: each
// is a round trip, and a transaction is bounded (database.Limits.Deadline),
// so a tenant's backlog (its sweepers down a while, calls nobody decided)
// is expired a batch per transaction. Unbounded, a backlog longer than the
// bound rolled back whole every time, and was never expired.
const lapsedBatch = 250

// expireLapsed marks the tenant's open approvals past their expiry, the
// longest lapsed first and up to lapsedBatch, as expired, each with an
// audit record; the sweeper expires the rest.
func (e *Engine) expireLapsed(ctx context.Context, tx pgx.Tx, tenant string) error {
	_, _, err := e.expireLapsedCount(ctx, tx, tenant)
	return err
}

// expireLapsedCount is expireLapsed, counting the approvals it expired;
// more reports a full batch, after which more may be lapsed.
func (e *Engine) expireLapsedCount(ctx context.Context, tx pgx.Tx, tenant string) (expired int, more bool, err error) {
	lapsed, err := store.New(tx).ApprovalListLapsed(ctx, tenant, lapsedBatch)
	if err != nil {
		return 0, false, err
	}
	for _, a := range lapsed {
		ok, err := e.expireAs(ctx, tx, tenant, a.ID, a.Action, a.DevMode)
		if err != nil {
			return expired, false, err
		}
		if ok {
			expired++
		}
	}
	return expired, len(lapsed) == lapsedBatch, nil
}

// expireIfLapsed expires a, the approval a stage, decision or poll is
// about, when it is still open past its expiry, with its audit record, and
// returns it as it now stands. Only the approval at hand is expired here,
// so that none of them scans the tenant: the tenant's other lapsed
// approvals are the sweeper's (Sweep), and a desk list's (PageApprovals).
// Whether a has lapsed is the database's clock's word (approval_expire);
// the engine's clock only spares the statement for an approval not yet
// due. Either way a lapsed approval is never decided nor consumed: those
// statements check its expiry themselves.
func (e *Engine) expireIfLapsed(ctx context.Context, tx pgx.Tx, tenant string, a *store.Approval) (*store.Approval, error) {
	if !e.lapsed(a) {
		return a, nil
	}
	expired, err := e.expire(ctx, tx, tenant, a.ID, a.Action)
	if err != nil {
		return a, err
	}
	if !expired {
		// Changed since it was read — expired by the sweeper or another
		// replica, decided, consumed, or by a first run of this
		// transaction whose COMMIT took effect — or not lapsed by the
		// database's clock: what it is now, not what it was.
		return store.New(tx).ApprovalGet(ctx, &store.ApprovalGetParams{ID: a.ID, TenantID: tenant})
	}
	lapsed := *a
	lapsed.Status = store.ApprovalExpired
	return &lapsed, nil
}

// lapsed reports whether a is open past its expiry by the engine's clock.
func (e *Engine) lapsed(a *store.Approval) bool {
	return a.Status.Open() && !e.now().Before(a.ExpiresAt)
}

// expire expires one approval of tenant if it is open and has lapsed,
// with its audit record, and reports whether it did. No row: it has not
// lapsed by the database's clock, or another transaction expired, decided
// or consumed it meanwhile, and recorded that.
//
// The record is dev_mode when the approval was staged by the development
// identity, whoever expires it (the sweeper, a person's list, a poll): an
// approval's lifecycle is its staging's, and a production approval a
// development caller's list happens to expire is no development record.
func (e *Engine) expire(ctx context.Context, tx pgx.Tx, tenant string, id uuid.UUID, action string) (bool, error) {
	devMode, err := store.New(tx).ApprovalStagedDevMode(ctx, tenant, id)
	if err != nil {
		return false, err
	}
	return e.expireAs(ctx, tx, tenant, id, action, devMode)
}

// expireAs is expire, the approval's staging's dev_mode known (a lapsed
// batch reads it with the batch, not a statement an approval).
func (e *Engine) expireAs(ctx context.Context, tx pgx.Tx, tenant string, id uuid.UUID, action string, devMode bool) (bool, error) {
	entry, err := encodeEntry(&Record{Tenant: tenant, At: e.now(), CorrelationID: id.String(), Phase: PhaseExpired,
		Action: action, Actor: Actor{Subject: "orangerail", Kind: ActorSystem}, DevMode: devMode, ApprovalID: &id})
	if err != nil {
		return false, &auditAppendError{err}
	}
	_, err = store.New(tx).ApprovalExpire(ctx, &store.ApprovalExpireParams{ID: id, Entry: entry})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, changeError(err)
	}
	approvalChanged(ctx, tx, ApprovalChanged{ApprovalID: id, Transition: TransitionExpired, Action: action,
		Tenant: tenant, Actor: "orangerail"})
	return true, nil
}

// changeError marks the failure of an audited approval change whose audit
// record the database refused, so the caller reports audit_blocked.
func changeError(err error) error {
	if !errors.Is(err, store.ErrCheckViolation) {
		if coded, ok := auditErrorCode(err); ok {
			return &auditAppendError{coded}
		}
	}
	return err
}

// record builds an audit record of a call, its input masked as the action
// says.
// With approvals.seal_inputs the record carries the input's digest
// instead: the chain must not keep in plaintext what the approvals table
// seals and shreds.
func (e *Engine) record(caller *Caller, c *call, phase Phase, correlation string, approval *uuid.UUID) *Record {
	rec := &Record{
		Tenant: caller.Tenant, At: e.now(), CorrelationID: correlation, Phase: phase, Action: c.name,
		Actor: caller.actor(), DevMode: caller.DevMode, ApprovalID: approval,
	}
	if e.sealing(c) {
		rec.InputDigest = DigestHex(c.digest)
	} else {
		rec.Input = mask(c.canonical, c.action.AuditMasks())
	}
	return rec
}

// mask replaces each value a pointer names in a JSON value with the
// redacted marker, and returns the value canonical. A path that names
// nothing in this value masks nothing. A value that cannot be read is
// withheld whole rather than kept unmasked.
func mask(value json.RawMessage, pointers []ontology.Pointer) json.RawMessage {
	if len(pointers) == 0 || value == nil {
		return value
	}
	// A row or a result may hold numbers no double holds: read losslessly,
	// as the entry will be.
	canonical, err := jcs.CanonicalizeLossless(value)
	if err != nil {
		return nil
	}
	v, err := jcs.Parse(canonical)
	if err != nil {
		return nil
	}
	for _, p := range pointers {
		maskAt(v, p)
	}
	return jcs.Append(nil, v)
}

// maskAt replaces the value at p inside v, if there is one.
func maskAt(v any, p ontology.Pointer) {
	eachAt(v, p, func(_ any, replace func(any)) { replace(redacted) })
}

// eachAt calls fn with each value at p inside v, and a func that replaces
// it there. A "*" token where the value is an array names every element
// (/members/*/email); where it is an object it is a member's name like any
// other, since an array's elements have only numeric indices. The empty
// pointer names nothing: a whole value is not replaced in place.
func eachAt(v any, p ontology.Pointer, fn func(value any, replace func(any))) {
	if len(p) == 0 {
		return
	}
	token, rest := p[0], p[1:]
	visit := func(next any, replace func(any)) {
		if len(rest) == 0 {
			fn(next, replace)
		} else {
			eachAt(next, rest, fn)
		}
	}
	switch node := v.(type) {
	case map[string]any:
		if next, ok := node[token]; ok {
			visit(next, func(x any) { node[token] = x })
		}
	case []any:
		if token == ontology.EveryElement {
			for i := range node {
				visit(node[i], func(x any) { node[i] = x })
			}
			return
		}
		if n, ok := ontology.Index(token); ok && n < len(node) {
			visit(node[n], func(x any) { node[n] = x })
		}
	}
}

// maskError is err with the text of every input value the audit log keeps
// masked (the action's redact_audit; the whole input where inputs are
// sealed) replaced: a datasource's message may quote the value it refused
// (value "4111…" is out of range for type integer), and an error's text
// goes to the audit record, whose input masks the value beside it, and to
// the host log. It unwraps to err, so that its cause is still classified.
func (e *Engine) maskError(c *call, err error) error {
	if err == nil {
		return nil
	}
	masks, sealed := c.action.AuditMasks(), e.sealing(c)
	if !sealed && len(masks) == 0 {
		return err
	}
	v, perr := jcs.Parse(c.inputJSON())
	if perr != nil {
		return &maskedError{text: redacted, err: err}
	}
	var texts []string
	if sealed {
		texts = scalarTexts(v, texts)
	} else {
		for _, p := range masks {
			eachAt(v, p, func(value any, _ func(any)) { texts = scalarTexts(value, texts) })
		}
	}
	var values []string
	for _, s := range texts {
		values = append(values, echoes(s)...)
	}
	// Each place any form of a value stands is masked, overlaps and all,
	// by one mark a run: looked for in the message alone, never in the
	// marks that masked another ("[redacted]" holds an e, a d...), and
	// no value cut short by another found where they overlap.
	//
	// A value found where it overlaps itself is compared whole at each
	// place (a letter repeated, in a message repeating it): the bytes
	// compared grow as the message's length times the values', which an
	// agent's values could make take seconds. Past maskMatchedMax the whole
	// message is masked: never a value in plaintext, only less kept.
	text := err.Error()
	cover := make([]int, len(text)+1)
	slices.Sort(values)
	matched := 0
	for _, s := range slices.Compact(values) {
		for i := 0; s != "" && i < len(text); {
			j := strings.Index(text[i:], s)
			if j < 0 {
				break
			}
			if matched += len(s); matched > maskMatchedMax {
				return &maskedError{text: redacted, err: err}
			}
			cover[i+j]++
			cover[i+j+len(s)]--
			i += j + 1
		}
	}
	var b strings.Builder
	depth, inMark := 0, false
	for i := range len(text) {
		depth += cover[i]
		if depth == 0 {
			b.WriteByte(text[i])
		} else if !inMark {
			b.WriteString(redacted)
		}
		inMark = depth > 0
	}
	text = b.String()
	if text == err.Error() {
		return err
	}
	return &maskedError{text: text, err: err}
}

// maskMatchedMax bounds the bytes of the values maskError finds in one
// message, counted at each place found: a message quoting its values a
// few times finds a few of each, far below it.
const maskMatchedMax = 16 << 20

// echoes are s as a message may quote it: as written, and escaped as the
// writers of the messages maskError sees quote a string. SQL doubles a
// single quote (a statement or a RAISE echoing a literal); JSON
// escapes " and \ (an upstream's error body), and each encoder some
// characters more: Go's encoding/json <, > and &; an ASCII-only encoder
// (Python's default; Jackson's, in capitals) every non-ASCII character as
// \uXXXX; PHP's json_encode that and / as \/; .NET's System.Text.Json
// non-ASCII, DEL and " ' + < > & ` as \uXXXX in capitals. Go's %q quotes
// the body of a failing answer httpeffect keeps, escaping each JSON
// form's escapes again. A value cut short in an echo is not found: no
// form can name a part.
func echoes(s string) []string {
	inJSON := string(jcs.AppendEscaped(nil, s))
	goJSON, _ := json.Marshal(s) // cannot fail: a string
	ascii := asciiJSON(inJSON, `\u%04x`)
	forms := []string{s, strings.ReplaceAll(s, "'", "''"), goQuoted(s)}
	for _, j := range []string{
		inJSON,
		string(goJSON[1 : len(goJSON)-1]),
		ascii,
		asciiJSON(inJSON, `\u%04X`),
		strings.ReplaceAll(ascii, "/", `\/`),
		dotnetJSON(s),
	} {
		forms = append(forms, j, goQuoted(j))
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// goQuoted is s as %q writes it, without the quotes.
func goQuoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// asciiJSON is a JSON string's escaped text with every non-ASCII
// character written in format (\u%04x, or in capitals), as a pair of
// surrogates beyond the BMP.
func asciiJSON(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, format, u)
		}
	}
	return b.String()
}

// dotnetJSON is s inside a JSON string as .NET's default encoder writes
// it: \\, the short escapes of control characters, and \uXXXX, in
// capitals, for the other control characters and DEL, every non-ASCII
// character and each of " ' + < > & `.
func dotnetJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b', r == '\f', r == '\n', r == '\r', r == '\t':
			b.Write(jcs.AppendEscaped(nil, string(r)))
		case r < 0x20 || r == 0x7f || r >= utf8.RuneSelf || strings.ContainsRune("\"'+<>&`", r):
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04X`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scalarTexts appends the text of every string, number and boolean in v.
func scalarTexts(v any, out []string) []string {
	switch node := v.(type) {
	case string:
		out = append(out, node)
	case jcs.Number:
		out = append(out, string(node))
	case bool:
		out = append(out, strconv.FormatBool(node))
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(node)) {
			out = scalarTexts(node[k], out)
		}
	case []any:
		for _, item := range node {
			out = scalarTexts(item, out)
		}
	}
	return out
}

// maskedError is an error whose text maskError masked.
type maskedError struct {
	text string
	err  error
}

func (m *maskedError) Error() string { return m.text }
func (m *maskedError) Unwrap() error { return m.err }

// auditRefusal records a call that stops before any effect, and returns
// its outcome.
func (e *Engine) auditRefusal(ctx context.Context, caller *Caller, c *call, approval *uuid.UUID, correlation string, phase Phase, status Status, cause error) *Outcome {
	rec := e.record(caller, c, phase, correlation, approval)
	if cause != nil {
		// A precondition that cannot be evaluated may quote the input.
		cause = e.maskError(c, cause)
		rec.Error = cause.Error()
	}
	if err := e.appendAlone(ctx, caller.Tenant, rec); err != nil {
		return e.auditBlocked(ctx, c.name, correlation, err)
	}
	out := &Outcome{Status: status, Code: status.refusalCode(), CorrelationID: correlation, ApprovalID: approval, Err: cause}
	if cause != nil && !routine(cause) {
		return e.failure(ctx, string(phase)+" "+c.name, out)
	}
	return out
}

// The causes of a refusal that is the action working as declared — its
// precondition false of the target, the target gone — not a failure: the
// record holds the cause, the host log's tool call line the refusal (at
// warn), and nothing is logged at error. A precondition that cannot be
// evaluated is a failure (a config's mistake), logged in full.
var (
	errPreconditionFalse = errors.New("the precondition does not hold")
	errTargetGone        = errors.New("the target no longer exists")
)

// routine reports whether a refusal's cause is one of them.
func routine(cause error) bool {
	return errors.Is(cause, errPreconditionFalse) || errors.Is(cause, errTargetGone)
}

// auditFailure records a datasource failure with its full text and
// diagnostic, and returns its outcome.
func (e *Engine) auditFailure(ctx context.Context, caller *Caller, c *call, approval *uuid.UUID, correlation string, phase Phase, status Status, cause error) *Outcome {
	cause = e.maskError(c, cause)
	rec := e.record(caller, c, phase, correlation, approval)
	rec.Error, rec.Diagnostic = cause.Error(), string(classify(cause))
	if err := e.appendAlone(ctx, caller.Tenant, rec); err != nil {
		out := e.auditBlocked(ctx, c.name, correlation, errors.Join(cause, err))
		out.Diagnostic = storeDiagnostic(err) // the append's, not the cause's
		return out
	}
	return e.failure(ctx, string(phase)+" "+c.name, &Outcome{Status: status, CorrelationID: correlation, ApprovalID: approval, Diagnostic: classify(cause), Err: cause})
}

// appendAlone appends one record in a transaction of its own.
func (e *Engine) appendAlone(ctx context.Context, tenant string, rec *Record) error {
	return database.InTenant(ctx, e.store, tenant, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return appendAudit(ctx, tx, rec)
	})
}

func (e *Engine) auditBlocked(ctx context.Context, op, correlation string, err error) *Outcome {
	return e.failure(ctx, op, &Outcome{Status: StatusAuditBlocked, CorrelationID: correlation, Diagnostic: storeDiagnostic(err), Err: err})
}

// storeDiagnostic classifies a failure of orangerail's own database:
// store_timeout for a wait past the limits, store_unavailable for a
// connection lost under the call; none for the rest.
func storeDiagnostic(err error) Diagnostic {
	switch {
	case timedOut(err):
		return DiagnosticStoreTimeout
	case errors.Is(store.InterpretError(err), store.ErrUnavailable):
		// The connection died under the call: its open transaction
		// rolled back with it, and a retry may well succeed.
		return DiagnosticStoreUnavailable
	}
	return DiagnosticNone
}

// storeFailure is a failure of orangerail's own database: audit_blocked
// when an audit append failed (so nothing ran), internal_error otherwise.
func (e *Engine) storeFailure(ctx context.Context, op, correlation string, err error) *Outcome {
	if correlation == "" {
		correlation = uuid.NewString()
	}
	// A store that kept the call waiting past the limits is said so:
	// nothing ran, and a retry may well succeed.
	diagnostic := storeDiagnostic(err)
	var blocked *auditAppendError
	if errors.As(err, &blocked) {
		return e.failure(ctx, op, &Outcome{Status: StatusAuditBlocked, CorrelationID: correlation, Diagnostic: diagnostic, Err: err})
	}
	return e.failure(ctx, op, &Outcome{Status: StatusInternalError, CorrelationID: correlation, Diagnostic: diagnostic, Err: err})
}

// auditAppendError marks a failed audit append inside a larger
// transaction, so the caller reports audit_blocked.
type auditAppendError struct{ err error }

func (e *auditAppendError) Error() string { return "audit append failed: " + e.err.Error() }
func (e *auditAppendError) Unwrap() error { return e.err }

// appendAudit appends rec in tx; a failure is an *auditAppendError.
func appendAudit(ctx context.Context, tx pgx.Tx, rec *Record) error {
	if err := AppendAudit(ctx, tx, rec); err != nil {
		return &auditAppendError{err}
	}
	appended(ctx, tx, rec)
	return nil
}

// appended registers, on tx, what follows rec's append once tx commits:
// its event, and for execution_started, that the execution started.
func appended(ctx context.Context, tx pgx.Tx, rec *Record) {
	emitOnCommit(ctx, tx, AuditAppended{Tenant: rec.Tenant, Phase: rec.Phase, Action: rec.Action,
		CorrelationID: rec.CorrelationID, Actor: rec.Actor.Subject})
	if rec.Phase == PhaseExecutionStarted {
		startedOnCommit(ctx, tx)
	}
}

// DigestHex returns an approval's input digest as the approver sees it.
func DigestHex(digest []byte) string { return hex.EncodeToString(digest) }
