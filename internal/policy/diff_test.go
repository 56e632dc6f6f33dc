package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// TestDiff holds policy diff to the review issue 15 asks for on every
// upstream release — "a scope widened, an operation turned destructive" —
// between the manifests of two hand-edited copies of one description:
// each change is reported, and Widens is set only where the new policy
// grants or risks more.
func TestDiff(t *testing.T) {
	old := compile(t, "diff/old.yaml", "things", nil)
	new := compile(t, "diff/new.yaml", "things", nil)
	changes := policy.Diff(old, new)
	type key struct{ tool, field string }
	got := map[key]policy.Change{}
	for _, c := range changes {
		if c.Why == "" {
			t.Errorf("%+v says no why", c)
		}
		got[key{c.Tool, c.Field}] = c
	}
	want := []struct {
		tool, field string
		widens      bool
		old, new    string
	}{
		{"widenScope", "required_scopes", true, "things:read", "things:read things:write"},
		{"narrowScope", "required_scopes", false, "things:read things:write", "things:read"},
		{"closeThing", "risk", true, "write", "destructive"},
		{"closeThing", "allowed_environments", false, "development staging production", "development staging"},
		{"closeThing", "rate", false, "", ""},
		// Another method is another operation: reviewed first.
		{"closeThing", "operation", true, "POST /destroy", "DELETE /destroy"},
		{"touchThing", "operation", true, "POST /approve", "GET /approve"},
		// RFC 9110 makes a DELETE idempotent: retried where a POST was not.
		{"closeThing", "retry", true, "never", "safe"},
		{"touchThing", "risk", false, "write", "read"},
		{"touchThing", "approval", true, "required", "none"},
		{"touchThing", "retry", true, "never", "safe"},
		{"touchThing", "rate", true, "", ""},
		// Hints that claim less risk: a client trusts them.
		{"touchThing", "annotations.readOnlyHint", true, "false", "true"},
		{"touchThing", "annotations.idempotentHint", true, "false", "true"},
		{"touchThing", "annotations.x-orangerail/reversibleHint", true, "false", "absent"},
		{"getAccount", "annotations.x-orangerail/sensitiveHint", true, "true", "false"},
		{"closeThing", "annotations.idempotentHint", true, "false", "true"},
		{"getAccount", "redact_fields", true, "response:/password", ""},
		{"getAccount", "sensitivity", false, "secret", "none"},
		{"getAccount", "log_class", true, "redacted", "full"},
		{"newThing", "", true, "", "servable"},
		{"oldThing", "", false, "servable", ""},
	}
	for _, w := range want {
		c, ok := got[key{w.tool, w.field}]
		if !ok {
			t.Errorf("%s %s: not reported", w.tool, w.field)
			continue
		}
		if c.Widens != w.widens {
			t.Errorf("%s %s: widens %v, want %v (%s)", w.tool, w.field, c.Widens, w.widens, c.Why)
		}
		if w.old+w.new != "" && (c.Old != w.old || c.New != w.new) {
			t.Errorf("%s %s: %q → %q, want %q → %q", w.tool, w.field, c.Old, c.New, w.old, w.new)
		}
		delete(got, key{w.tool, w.field})
	}
	for k, c := range got {
		if c.Widens {
			t.Errorf("%s %s widens, unexpectedly: %+v", k.tool, k.field, c)
		}
	}
	if c := find(changes, "widenScope", "required_scopes"); !strings.Contains(c.Why, "a scope widened: now needs things:write") {
		t.Errorf("the widened scope's why: %q", c.Why)
	}
	if c := find(changes, "closeThing", "risk"); !strings.Contains(c.Why, "turned destructive") {
		t.Errorf("the destructive turn's why: %q", c.Why)
	}
	if c := find(changes, "getAccount", "redact_fields"); !strings.Contains(c.Why, "no longer masked: response:/password") {
		t.Errorf("the unmasked field's why: %q", c.Why)
	}
	// A manifest compared with itself changes nothing, and the order is
	// fixed.
	if same := policy.Diff(old, old); len(same) != 0 {
		t.Errorf("a manifest against itself: %+v", same)
	}
	if fmt.Sprint(policy.Diff(old, new)) != fmt.Sprint(changes) {
		t.Error("two diffs of the same manifests differ")
	}
}

func find(cs []policy.Change, tool, field string) policy.Change {
	for _, c := range cs {
		if c.Tool == tool && c.Field == field {
			return c
		}
	}
	return policy.Change{}
}

// TestDiffFindsAFindingLifted: a fatal finding gone, turned non-fatal or
// accepted is a widening — the tool may now be served — and so is an
// idempotency key no longer required; a finding's fatal flag flipped was
// reported as no change at all.
func TestDiffFindsAFindingLifted(t *testing.T) {
	old := compile(t, "oai-petstore.yaml", "petstore", nil)
	for name, edit := range map[string]func(tp *policy.ToolPolicy){
		"turned non-fatal": func(tp *policy.ToolPolicy) {
			for i := range tp.Unresolved {
				tp.Unresolved[i].Fatal = false
			}
		},
		"accepted": func(tp *policy.ToolPolicy) {
			for i := range tp.Unresolved {
				if tp.Unresolved[i].Fatal {
					tp.Unresolved[i].Accepted = "a person accepted it"
				}
			}
		},
		"gone": func(tp *policy.ToolPolicy) { tp.Unresolved = []policy.Unresolved{} },
	} {
		t.Run(name, func(t *testing.T) {
			new := compile(t, "oai-petstore.yaml", "petstore", nil)
			var tool string
			for i := range new.Tools {
				if slices.ContainsFunc(new.Tools[i].Unresolved, func(u policy.Unresolved) bool { return u.Fatal }) {
					tool = new.Tools[i].Name
					edit(&new.Tools[i])
					break
				}
			}
			if tool == "" {
				t.Fatal("the petstore has no tool with a fatal finding")
			}
			c := find(policy.Diff(old, new), tool, "unresolved")
			if !c.Widens || !strings.Contains(c.Why, "a fatal finding no longer stands") {
				t.Fatalf("%s: %+v", tool, c)
			}
		})
	}
	required, dropped := compile(t, "oai-petstore.yaml", "petstore", nil), compile(t, "oai-petstore.yaml", "petstore", nil)
	required.Tool("createPets").IdempotencyKeyRequired.Value = true
	dropped.Tool("createPets").IdempotencyKeyRequired.Value = false
	if c := find(policy.Diff(required, dropped), "createPets", "idempotency_key_required"); !c.Widens {
		t.Fatalf("a key no longer required: %+v", c)
	}
}

// TestDiffScopedToScopeless: a release whose operation asks its OAuth
// credential for no scope where it asked for some grants more — the token
// gets what the authorization server grants by default, "narrowest by
// count while granting the most" (spec 001) — and policy diff says so, on
// the scopes and on the finding, though a read's scopeless finding is not
// fatal.
func TestDiffScopedToScopeless(t *testing.T) {
	build := func(scopes string) *policy.Manifest {
		src := `openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /things:
    get:
      operationId: getThing
      security: [{oauth: [` + scopes + `]}]
      responses: {"204": {description: done}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example", scopes: {"things:read": r, "things:admin": a}}}}
`
		doc, err := openapi.Parse([]byte(src), "t.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return compileDoc(t, doc, nil)
	}
	scoped, scopeless := build(`"things:read"`), build(``)
	changes := policy.Diff(scoped, scopeless)
	if c := find(changes, "getThing", "required_scopes"); !c.Widens || c.Old != "things:read" || c.New != "" || !strings.Contains(c.Why, "no scope is asked for") {
		t.Errorf("required_scopes: %+v", c)
	}
	if c := find(changes, "getThing", "unresolved"); !c.Widens || !strings.Contains(c.New, "scopeless@") {
		t.Errorf("unresolved: %+v", c)
	}
	// The other way, the scopeless finding gone is no widening (asking
	// for a scope where none was is one, as any scope added is).
	if c := find(policy.Diff(scopeless, scoped), "getThing", "unresolved"); c.Field == "" || c.Widens {
		t.Errorf("scopeless to scoped, unresolved: %+v", c)
	}
}
