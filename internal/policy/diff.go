package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/ontology"
)

// Change is one difference between two manifests' policies.
type Change struct {
	Tool string `json:"tool"`
	// Field is the policy field that changed ("" for a tool added or
	// removed).
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
	// Widens is set when the new policy grants more or risks more: a scope
	// or scheme added, the risk raised, approval dropped, retry loosened,
	// a sensitive field no longer masked, a tool newly served. A review
	// reads these first; policy diff exits 1 when any is found.
	Widens bool   `json:"widens"`
	Why    string `json:"why"`
}

// Diff lists what changes between an old and a new manifest, tool by tool
// (tools are matched by name), in a fixed order.
func Diff(old, new *Manifest) []Change {
	var out []Change
	names := map[string]bool{}
	for _, t := range old.Tools {
		names[t.Name] = true
	}
	for _, t := range new.Tools {
		names[t.Name] = true
	}
	for _, name := range sortedKeys(names) {
		o, n := old.Tool(name), new.Tool(name)
		switch {
		case o == nil:
			out = append(out, Change{Tool: name, New: string(n.Status.Value), Widens: n.Status.Value == StatusServable,
				Why: fmt.Sprintf("a new operation, %s, %s", describeCall(n), n.Risk.Value)})
		case n == nil:
			out = append(out, Change{Tool: name, Old: string(o.Status.Value), Why: "the operation is gone from the description"})
		default:
			out = append(out, diffTool(o, n)...)
		}
	}
	return out
}

func describeCall(t *ToolPolicy) string {
	if t.Operation.SOAP != nil {
		return "SOAP " + t.Operation.ID
	}
	return t.Operation.Method + " " + t.Operation.Path
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// diffTool compares one tool's two policies.
func diffTool(o, n *ToolPolicy) []Change {
	var out []Change
	add := func(field, old, new string, widens bool, why string) {
		if old != new {
			out = append(out, Change{Tool: n.Name, Field: field, Old: old, New: new, Widens: widens, Why: why})
		}
	}
	if oc, nc := describeCall(o), describeCall(n); oc != nc {
		add("operation", oc, nc, true, "the tool now calls another operation")
	}
	add("status", string(o.Status.Value), string(n.Status.Value), n.Status.Value == StatusServable,
		map[bool]string{true: "the tool is now served", false: "the tool now fails closed: " + n.Status.Rule}[n.Status.Value == StatusServable])
	rank := func(r ontology.Risk) int { return slices.Index(ontology.Risks(), r) }
	if o.Risk.Value != n.Risk.Value {
		widens := rank(n.Risk.Value) > rank(o.Risk.Value)
		why := "the operation is now classified " + string(n.Risk.Value) + ": " + n.Risk.Rule
		if n.Risk.Value == ontology.RiskDestructive {
			why = "the operation turned destructive: " + n.Risk.Rule
		}
		add("risk", string(o.Risk.Value), string(n.Risk.Value), widens, why)
	}
	add("approval", string(o.Approval.Value), string(n.Approval.Value), n.Approval.Value == ontology.ApprovalNone,
		"approval is now "+string(n.Approval.Value)+": "+n.Approval.Rule)
	retryRank := map[ontology.HTTPRetry]int{ontology.RetryNever: 0, ontology.RetryWithIdempotencyKey: 1, ontology.RetrySafe: 2}
	add("retry", string(o.Retry.Value), string(n.Retry.Value), retryRank[n.Retry.Value] > retryRank[o.Retry.Value], n.Retry.Rule)
	added, removed := setDiff(o.RequiredScopes.Value, n.RequiredScopes.Value)
	if len(added)+len(removed) > 0 {
		// None where some were is no narrowing: a credential requested with
		// no scope gets what the authorization server grants by default,
		// which "looks narrowest by count while granting the most" (spec
		// 001).
		unscoped := len(o.RequiredScopes.Value) > 0 && len(n.RequiredScopes.Value) == 0
		why := "the scopes needed changed"
		switch {
		case unscoped:
			why = "no scope is asked for now: the credential is requested with none, and gets what the authorization server grants by default"
		case len(added) > 0:
			why = "a scope widened: now needs " + strings.Join(added, ", ")
		}
		add("required_scopes", strings.Join(o.RequiredScopes.Value, " "), strings.Join(n.RequiredScopes.Value, " "), len(added) > 0 || unscoped, why+" ("+n.RequiredScopes.Rule+")")
	}
	schemeNames := func(refs []SchemeRef) []string {
		out := make([]string, len(refs))
		for i, r := range refs {
			out[i] = r.Scheme + "@" + r.Placement
		}
		return out
	}
	oldSchemes, newSchemes := schemeNames(o.RequiredSchemes.Value), schemeNames(n.RequiredSchemes.Value)
	if a, r := setDiff(oldSchemes, newSchemes); len(a)+len(r) > 0 {
		add("required_schemes", strings.Join(oldSchemes, " "), strings.Join(newSchemes, " "), len(a) > 0, "the credential presented changed: "+n.RequiredSchemes.Rule)
	}
	sensOf := func(s *Sensitivity) string {
		if s == nil {
			return "null"
		}
		return string(*s)
	}
	sensRank := func(s *Sensitivity) int {
		if s == nil {
			return -1
		}
		return s.rank()
	}
	add("sensitivity", sensOf(o.Sensitivity.Value), sensOf(n.Sensitivity.Value), sensRank(n.Sensitivity.Value) > sensRank(o.Sensitivity.Value), n.Sensitivity.Rule)
	logRank := map[LogClass]int{LogMetadataOnly: 0, LogRedacted: 1, LogFull: 2}
	add("log_class", string(o.LogClass.Value), string(n.LogClass.Value), logRank[n.LogClass.Value] > logRank[o.LogClass.Value], n.LogClass.Rule)
	fields := func(fs []Derived[RedactField]) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = string(f.Value.In) + ":" + f.Value.Pointer
		}
		return out
	}
	if a, r := setDiff(fields(o.RedactFields), fields(n.RedactFields)); len(a)+len(r) > 0 {
		why := "masked fields changed"
		if len(r) > 0 {
			why = "no longer masked: " + strings.Join(r, ", ")
		}
		if len(a) > 0 {
			why += "; newly masked: " + strings.Join(a, ", ")
		}
		add("redact_fields", strings.Join(fields(o.RedactFields), " "), strings.Join(fields(n.RedactFields), " "), len(r) > 0, why)
	}
	if a, r := setDiff(o.AllowedEnvironments.Value, n.AllowedEnvironments.Value); len(a)+len(r) > 0 {
		add("allowed_environments", strings.Join(o.AllowedEnvironments.Value, " "), strings.Join(n.AllowedEnvironments.Value, " "), len(a) > 0, n.AllowedEnvironments.Rule)
	}
	rate := func(r Rate) string {
		return fmt.Sprintf("%d/min, %d at once, %d/day", r.CallsPerMinute, r.MaxConcurrent, r.DailyCallBudget)
	}
	or, nr := o.Rate.Value, n.Rate.Value
	add("rate", rate(or), rate(nr), nr.CallsPerMinute > or.CallsPerMinute || nr.MaxConcurrent > or.MaxConcurrent || nr.DailyCallBudget > or.DailyCallBudget, n.Rate.Rule)
	add("output.max_bytes", fmt.Sprint(o.Output.MaxBytes.Value), fmt.Sprint(n.Output.MaxBytes.Value), n.Output.MaxBytes.Value > o.Output.MaxBytes.Value, n.Output.MaxBytes.Rule)
	add("effect", o.Effect.Value, n.Effect.Value, false, "the summary a person confirms changed")
	add("rollback", o.Rollback.Value, n.Rollback.Value, false, n.Rollback.Rule)
	add("idempotency_key_required", fmt.Sprint(o.IdempotencyKeyRequired.Value), fmt.Sprint(n.IdempotencyKeyRequired.Value),
		o.IdempotencyKeyRequired.Value && !n.IdempotencyKeyRequired.Value, n.IdempotencyKeyRequired.Rule)
	// A hint that claims less risk widens: a client trusts it (retries an
	// idempotent call, skips confirming a read).
	oa, na := o.Annotations, n.Annotations
	add("annotations.readOnlyHint", fmt.Sprint(oa.ReadOnlyHint.Value), fmt.Sprint(na.ReadOnlyHint.Value), na.ReadOnlyHint.Value && !oa.ReadOnlyHint.Value, na.ReadOnlyHint.Rule)
	add("annotations.destructiveHint", fmt.Sprint(oa.DestructiveHint.Value), fmt.Sprint(na.DestructiveHint.Value), oa.DestructiveHint.Value && !na.DestructiveHint.Value, na.DestructiveHint.Rule)
	add("annotations.idempotentHint", fmt.Sprint(oa.IdempotentHint.Value), fmt.Sprint(na.IdempotentHint.Value), na.IdempotentHint.Value && !oa.IdempotentHint.Value, na.IdempotentHint.Rule)
	hint := func(v *bool) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprint(*v)
	}
	add("annotations.x-orangerail/sensitiveHint", hint(oa.SensitiveHint.Value), hint(na.SensitiveHint.Value),
		hint(oa.SensitiveHint.Value) == "true" && hint(na.SensitiveHint.Value) != "true", na.SensitiveHint.Rule)
	reversible := func(d *Derived[bool]) (string, string) {
		if d == nil {
			return "absent", "the description says nothing of undoing it"
		}
		return fmt.Sprint(d.Value), d.Rule
	}
	orev, _ := reversible(oa.ReversibleHint)
	nrev, nwhy := reversible(na.ReversibleHint)
	add("annotations.x-orangerail/reversibleHint", orev, nrev, orev == "false" && nrev != "false", nwhy)
	add("idempotency_header", o.IdempotencyHeader.Value, n.IdempotencyHeader.Value, false, n.IdempotencyHeader.Rule)
	// Each finding by kind and field, with whether it is fatal and stands:
	// a fatal one gone, turned non-fatal or accepted widens.
	findings := func(us []Unresolved) []string {
		out := make([]string, 0, len(us))
		for _, u := range us {
			f := string(u.Kind) + "@" + u.Field
			switch {
			case u.Fatal && u.Accepted != "":
				f += "(fatal, accepted)"
			case u.Fatal:
				f += "(fatal)"
			}
			out = append(out, f)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if a, r := setDiff(findings(o.Unresolved), findings(n.Unresolved)); len(a)+len(r) > 0 {
		lifted := slices.ContainsFunc(r, func(f string) bool { return strings.HasSuffix(f, "(fatal)") })
		// A credential newly unauthenticated or scopeless grants more,
		// fatal or not (a read's is not fatal); one that was so already,
		// its acceptance or fatality changed, is judged above.
		opened := slices.ContainsFunc(a, func(f string) bool {
			base, _, _ := strings.Cut(f, "(")
			newly := !slices.ContainsFunc(findings(o.Unresolved), func(old string) bool {
				oldBase, _, _ := strings.Cut(old, "(")
				return oldBase == base
			})
			return newly && (strings.HasPrefix(f, string(UnresolvedUnauthenticated)+"@") || strings.HasPrefix(f, string(UnresolvedScopeless)+"@"))
		})
		why := "what could not be demonstrated changed"
		switch {
		case lifted:
			why = "a fatal finding no longer stands: " + strings.Join(slices.DeleteFunc(slices.Clone(r), func(f string) bool { return !strings.HasSuffix(f, "(fatal)") }), ", ")
		case opened:
			why = "the call's credential now grants more: " + strings.Join(a, ", ")
		}
		add("unresolved", strings.Join(findings(o.Unresolved), " "), strings.Join(findings(n.Unresolved), " "), lifted || opened, why)
	}
	return out
}

// setDiff returns what b has that a has not, and what a has that b has
// not, each sorted.
func setDiff(a, b []string) (added, removed []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}
