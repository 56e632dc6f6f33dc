package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/display"
)

// ErrManifest is a file that is not a manifest this version reads.
var ErrManifest = errors.New("not an orangerail policy manifest")

// MaxManifestBytes bounds a manifest read back: one is at most some one
// and a half times its description's size (Discord's 1.2 MB gives 1.6 MB),
// and a description at most apispec.MaxBytes (64 MiB); the bound keeps a
// device (/dev/zero) or an endless pipe from filling memory.
const MaxManifestBytes = 128 << 20

// ReadManifest reads a manifest's bytes: JSON of ManifestFormat that its
// JSON Schema (ManifestSchema) accepts, so that a hand-edited manifest
// whose values contradict each other is refused, not explained.
func ReadManifest(data []byte) (*Manifest, error) {
	if err := ValidateManifest(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%w: its format is %q, and this orangerail reads %q", ErrManifest, m.Format, ManifestFormat)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more follows the manifest's object", ErrManifest)
	}
	if err := m.consistent(); err != nil {
		return nil, err
	}
	return &m, nil
}

// consistent checks what the manifest's schema cannot say: each tool's
// name is its own (explain and diff find a tool by name), and its status
// is the one its findings make — servable exactly when no fatal finding
// stands unaccepted — so that a hand-edited status is not explained as if
// the compiler had reached it.
func (m *Manifest) consistent() error {
	names := map[string]bool{}
	for i := range m.Tools {
		t := &m.Tools[i]
		if names[t.Name] {
			return fmt.Errorf("%w: two tools are named %q", ErrManifest, t.Name)
		}
		names[t.Name] = true
		standing := slices.ContainsFunc(t.Unresolved, func(u Unresolved) bool { return u.Fatal && u.Accepted == "" })
		switch {
		case standing && t.Status.Value == StatusServable:
			return fmt.Errorf("%w: tool %q is %s while a fatal finding stands unaccepted", ErrManifest, t.Name, t.Status.Value)
		case !standing && t.Status.Value != StatusServable:
			return fmt.Errorf("%w: tool %q is %s, though no fatal finding stands", ErrManifest, t.Name, t.Status.Value)
		}
	}
	return nil
}

// Tool returns the named tool's policy, or nil.
func (m *Manifest) Tool(name string) *ToolPolicy {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i]
		}
	}
	return nil
}

// Explain writes the reasoning behind each value of a tool's policy: the
// value, where it was read and the rule that made it.
func Explain(w io.Writer, m *Manifest, t *ToolPolicy) {
	call := t.Operation.Method + " " + t.Operation.Path
	if s := t.Operation.SOAP; s != nil {
		call = fmt.Sprintf("SOAP %s {%s}%s", s.Version, s.Namespace, s.Element)
	}
	fmt.Fprintf(w, "%s: %s, from %s (%s)\n", t.Name, display.Text(call), display.Text(m.Source.File), display.Text(t.Operation.Source))
	// Every string here came from a document someone else wrote: shown
	// through display.Text, none can rewrite the terminal.
	line := func(name, value string, source []string, rule string) {
		fmt.Fprintf(w, "\n%s: %s\n  because: %s\n", name, display.Text(value), display.Text(rule))
		for i, s := range source {
			lead := "  from:    "
			if i > 0 {
				lead = "           "
			}
			fmt.Fprintf(w, "%s%s\n", lead, display.Text(s))
		}
	}
	str := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	line("status", string(t.Status.Value), t.Status.Source, t.Status.Rule)
	line("risk", string(t.Risk.Value), t.Risk.Source, t.Risk.Rule)
	line("approval", string(t.Approval.Value), t.Approval.Source, t.Approval.Rule)
	line("retry", string(t.Retry.Value), t.Retry.Source, t.Retry.Rule)
	line("idempotency_key_required", str(t.IdempotencyKeyRequired.Value), t.IdempotencyKeyRequired.Source, t.IdempotencyKeyRequired.Rule)
	if t.IdempotencyHeader.Value != "" {
		line("idempotency_header", t.IdempotencyHeader.Value, t.IdempotencyHeader.Source, t.IdempotencyHeader.Rule)
	}
	r := t.Rate.Value
	line("rate", fmt.Sprintf("%d a minute, %d at once, %d a day", r.CallsPerMinute, r.MaxConcurrent, r.DailyCallBudget), t.Rate.Source, t.Rate.Rule)
	line("required_scopes", str(t.RequiredScopes.Value), t.RequiredScopes.Source, t.RequiredScopes.Rule)
	schemes := make([]string, len(t.RequiredSchemes.Value))
	for i, s := range t.RequiredSchemes.Value {
		where := s.Placement
		if where == "" {
			where = "not placeable"
		}
		schemes[i] = fmt.Sprintf("%s (%s, from $%s)", s.Scheme, where, s.Env)
	}
	if len(schemes) == 0 {
		schemes = []string{"none"}
	}
	line("required_schemes", strings.Join(schemes, "; "), t.RequiredSchemes.Source, t.RequiredSchemes.Rule)
	sens := "null"
	if t.Sensitivity.Value != nil {
		sens = string(*t.Sensitivity.Value)
	}
	line("sensitivity", sens, t.Sensitivity.Source, t.Sensitivity.Rule)
	line("log_class", string(t.LogClass.Value), t.LogClass.Source, t.LogClass.Rule)
	for _, f := range t.RedactFields {
		line("redact", fmt.Sprintf("%s %s (%s)", f.Value.In, f.Value.Pointer, f.Value.Sensitivity), f.Source, f.Rule)
	}
	line("output.max_bytes", str(t.Output.MaxBytes.Value), t.Output.MaxBytes.Source, t.Output.MaxBytes.Rule)
	line("allowed_environments", str(t.AllowedEnvironments.Value), t.AllowedEnvironments.Source, t.AllowedEnvironments.Rule)
	a := t.Annotations
	line("readOnlyHint", str(a.ReadOnlyHint.Value), a.ReadOnlyHint.Source, a.ReadOnlyHint.Rule)
	line("destructiveHint", str(a.DestructiveHint.Value), a.DestructiveHint.Source, a.DestructiveHint.Rule)
	line("idempotentHint", str(a.IdempotentHint.Value), a.IdempotentHint.Source, a.IdempotentHint.Rule)
	line("x-orangerail/sensitiveHint", str(a.SensitiveHint.Value), a.SensitiveHint.Source, a.SensitiveHint.Rule)
	if h := a.ReversibleHint; h != nil {
		line("x-orangerail/reversibleHint", str(h.Value), h.Source, h.Rule)
	}
	line("effect", t.Effect.Value, t.Effect.Source, t.Effect.Rule)
	line("rollback", t.Rollback.Value, t.Rollback.Source, t.Rollback.Rule)
	if len(t.Unresolved) == 0 {
		fmt.Fprintf(w, "\nunresolved: nothing\n")
		return
	}
	fmt.Fprintf(w, "\nunresolved:\n")
	for _, u := range t.Unresolved {
		mark := "-"
		switch {
		case u.Accepted != "":
			mark = "accepted"
		case u.Fatal:
			mark = "FATAL"
		}
		// Field is free text in the manifest's schema: a hand-edited
		// manifest could carry escapes in it, so it is shown like every
		// other string a file holds.
		fmt.Fprintf(w, "  %s %s (%s): %s\n    at %s\n", mark, u.Kind, display.Text(u.Field), display.Text(u.Detail), display.Text(strings.Join(u.Source, ", ")))
		if u.Accepted != "" {
			fmt.Fprintf(w, "    accepted: %s\n", display.Text(u.Accepted))
		}
	}
}
