package engine

import (
	"reflect"
	"testing"
)

// TestAudienceKeyNamesWhatTheGatesRead: a caller's AudienceKey changes
// whenever what an audience gate reads of it (callerVars) changes, so that
// a transport answering a key once never answers a caller the catalog of
// another. Each field of Caller is changed in turn: a field added to
// callerVars but not to the key fails here, as does a field added to
// Caller that neither reads (it must be judged, below, by whoever adds
// it).
func TestAudienceKeyNamesWhatTheGatesRead(t *testing.T) {
	base := Caller{Subject: "agent-7", Issuer: "https://issuer.example", Tenant: "acme", Roles: []string{"support", "ops"},
		Scopes: []string{"orders:read"}, Kind: ActorAgent}
	// Fields no gate of audience reads: the key may ignore them.
	unread := map[string]bool{"DevMode": true}
	typ := reflect.TypeFor[Caller]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		changed := base
		changed.Roles, changed.Scopes = append([]string(nil), base.Roles...), append([]string(nil), base.Scopes...)
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.ValueOf("x")))
		default:
			t.Fatalf("Caller.%s is a %s: teach this test to change it", f.Name, v.Kind())
		}
		varsChanged := !reflect.DeepEqual(callerVars(&base), callerVars(&changed))
		keyChanged := base.AudienceKey() != changed.AudienceKey()
		switch {
		case varsChanged && !keyChanged:
			t.Errorf("changing Caller.%s changes what an audience predicate reads but not the AudienceKey", f.Name)
		case !varsChanged && !unread[f.Name]:
			t.Errorf("Caller.%s is not read by an audience predicate: decide whether a gate reads it, and list it in unread if none does", f.Name)
		}
	}
}

// TestAudienceKeyIsUnambiguous: callers whose fields differ but whose
// values, run together, spell the same text have different keys.
func TestAudienceKeyIsUnambiguous(t *testing.T) {
	pairs := [][2]Caller{
		{{Subject: "ab"}, {Subject: "a", Issuer: "b"}},
		{{Roles: []string{"a,b"}}, {Roles: []string{"a", "b"}}},
		{{Roles: []string{"a"}}, {Scopes: []string{"a"}}},
		{{Roles: []string{""}}, {}},
		{{Roles: []string{"1:a"}}, {Roles: []string{"1", "a"}}},
		{{Tenant: "acme", Kind: ActorHuman}, {Tenant: "acmehuman"}},
	}
	for _, p := range pairs {
		if p[0].AudienceKey() == p[1].AudienceKey() {
			t.Errorf("%+v and %+v share the key %q", p[0], p[1], p[0].AudienceKey())
		}
	}
	c := Caller{Subject: "s", Roles: []string{"r"}}
	if again := (Caller{Subject: "s", Roles: []string{"r"}}); c.AudienceKey() != again.AudienceKey() {
		t.Errorf("equal callers, different keys: %q, %q", c.AudienceKey(), again.AudienceKey())
	}
}
