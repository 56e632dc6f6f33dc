package policy_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/display"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// hostile is what a description's author could put in a summary to
// rewrite a reviewer's terminal: clear the screen, a bell, a carriage
// return over the line, a right-to-left override.
const hostile = "Delete nothing\x1b[2J\x07\r\u202eSAFE"

// checkShown fails when out holds a character that must not reach a
// terminal as itself (display.Unsafe), other than the newlines Explain
// writes.
func checkShown(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r != '\n' && display.Unsafe(r) {
			t.Fatalf("the output holds %U at %d: %q", r, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
}

// TestExplain holds policy explain to spec 001's "one ToolPolicy per
// tool, each carrying provenance for how every value was reached,
// including the reasoning in the rule string": every field is named with
// its rule and its source, and nothing a description says reaches the
// terminal raw.
func TestExplain(t *testing.T) {
	doc := oneOp("POST", "eraseThing", object(apidoc.Property{Name: "clientSecret", Schema: typed("string")}))
	doc.Operations[0].Summary = hostile
	m := compileDoc(t, doc, nil)
	tp := &m.Tools[0]
	var buf bytes.Buffer
	policy.Explain(&buf, m, tp)
	out := buf.String()
	checkShown(t, out)
	if !strings.Contains(out, display.Text(tp.Effect.Value)) {
		t.Errorf("the effect is not shown escaped: %s", out)
	}
	type field struct {
		name, rule string
		source     []string
	}
	fields := []field{
		{"status", tp.Status.Rule, tp.Status.Source}, {"risk", tp.Risk.Rule, tp.Risk.Source},
		{"approval", tp.Approval.Rule, tp.Approval.Source}, {"retry", tp.Retry.Rule, tp.Retry.Source},
		{"idempotency_key_required", tp.IdempotencyKeyRequired.Rule, tp.IdempotencyKeyRequired.Source},
		{"rate", tp.Rate.Rule, tp.Rate.Source}, {"required_scopes", tp.RequiredScopes.Rule, tp.RequiredScopes.Source},
		{"required_schemes", tp.RequiredSchemes.Rule, tp.RequiredSchemes.Source},
		{"sensitivity", tp.Sensitivity.Rule, tp.Sensitivity.Source}, {"log_class", tp.LogClass.Rule, tp.LogClass.Source},
		{"redact", tp.RedactFields[0].Rule, tp.RedactFields[0].Source},
		{"output.max_bytes", tp.Output.MaxBytes.Rule, tp.Output.MaxBytes.Source},
		{"allowed_environments", tp.AllowedEnvironments.Rule, tp.AllowedEnvironments.Source},
		{"readOnlyHint", tp.Annotations.ReadOnlyHint.Rule, tp.Annotations.ReadOnlyHint.Source},
		{"destructiveHint", tp.Annotations.DestructiveHint.Rule, tp.Annotations.DestructiveHint.Source},
		{"idempotentHint", tp.Annotations.IdempotentHint.Rule, tp.Annotations.IdempotentHint.Source},
		{"x-orangerail/sensitiveHint", tp.Annotations.SensitiveHint.Rule, tp.Annotations.SensitiveHint.Source},
		{"x-orangerail/reversibleHint", tp.Annotations.ReversibleHint.Rule, tp.Annotations.ReversibleHint.Source},
		{"effect", tp.Effect.Rule, tp.Effect.Source}, {"rollback", tp.Rollback.Rule, tp.Rollback.Source},
	}
	for _, f := range fields {
		i := strings.Index(out, "\n"+f.name+": ")
		if i < 0 {
			t.Errorf("%s is not named", f.name)
			continue
		}
		block := out[i+1:]
		if j := strings.Index(block, "\n\n"); j >= 0 {
			block = block[:j]
		}
		if f.rule == "" || !strings.Contains(block, "because: "+display.Text(f.rule)) {
			t.Errorf("%s: its rule %q is not shown in %q", f.name, f.rule, block)
		}
		if len(f.source) == 0 {
			t.Errorf("%s has no source", f.name)
		}
		for _, s := range f.source {
			if !strings.Contains(block, display.Text(s)) {
				t.Errorf("%s: its source %q is not shown in %q", f.name, s, block)
			}
		}
	}
	if !strings.Contains(out, "unresolved:\n") {
		t.Errorf("the findings are not listed: %s", out)
	}
	for _, u := range tp.Unresolved {
		if !strings.Contains(out, string(u.Kind)+" ("+u.Field+"): "+display.Text(u.Detail)) {
			t.Errorf("the finding %s is not shown", u.Kind)
		}
	}
	if !strings.HasPrefix(out, tp.Name+": POST /things, from t.yaml") {
		t.Errorf("the heading: %q", strings.SplitN(out, "\n", 2)[0])
	}
}

// TestExplainHandEdited: a manifest is a file a person or a tool may
// have edited; what ReadManifest accepts must still be shown safely,
// each free-text string of it through display.Text.
func TestExplainHandEdited(t *testing.T) {
	doc := oneOp("POST", "eraseThing", object(apidoc.Property{Name: "id", Schema: typed("string")}))
	doc.Operations[0].Security = nil // unauthenticated: a write's finding a person accepts
	m := compileDoc(t, doc, map[string]string{"eraseThing": hostile})
	tp := &m.Tools[0]
	for i := range tp.Unresolved {
		tp.Unresolved[i].Field = "required_schemes" + hostile
		tp.Unresolved[i].Source = []string{hostile}
	}
	tp.Operation.Path = "/things" + hostile
	m.Source.File = hostile
	tp.RequiredScopes.Value = []string{hostile}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := policy.ReadManifest(data)
	if err != nil {
		t.Fatalf("the schema refused the edit, so this test tests nothing: %v", err)
	}
	var buf bytes.Buffer
	policy.Explain(&buf, back, back.Tool("eraseThing"))
	checkShown(t, buf.String())
	if !strings.Contains(buf.String(), "accepted: "+display.Text(hostile)) {
		t.Errorf("the accepted reason is not shown: %s", buf.String())
	}
}
