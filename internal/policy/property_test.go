package policy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// realScopes is every scope an alternative needs, sorted, each once; the
// pseudo-scope "none" (Slack's) names no capability.
func realScopes(r apidoc.Requirement) []string {
	var out []string
	for _, u := range r.Schemes {
		for _, s := range u.Scopes {
			if s != "none" {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// scopedAlt reports whether an alternative carries a real scope of an
// oauth2 or openIdConnect scheme.
func scopedAlt(doc *apidoc.Document, r apidoc.Requirement) bool {
	for _, u := range r.Schemes {
		s := doc.Schemes[u.Name]
		if s != nil && (s.Type == apidoc.SchemeOAuth2 || s.Type == apidoc.SchemeOpenIDConnect) && slices.ContainsFunc(u.Scopes, func(x string) bool { return x != "none" }) {
			return true
		}
	}
	return false
}

// usableAlts are the alternatives that name only declared schemes.
func usableAlts(doc *apidoc.Document, sec *apidoc.Security) []apidoc.Requirement {
	if sec == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(sec.Alternatives), func(r apidoc.Requirement) bool {
		return slices.ContainsFunc(r.Schemes, func(u apidoc.SchemeUse) bool { return doc.Schemes[u.Name] == nil })
	})
}

// checkLeastPrivilege is the property the issue asks for — no scope in a
// manifest is wider than one the spec offered for that operation — and
// spec 001's "Least privilege, chosen rather than unioned": the tool's
// scopes and schemes are exactly ONE declared alternative's (never a
// union), a scoped alternative is preferred where one exists, no scoped
// alternative needs fewer scopes than the one chosen, and a scopeless or
// anonymous choice on a tool that changes state fails closed unless a
// person accepted it.
func checkLeastPrivilege(doc *apidoc.Document, op *apidoc.Operation, tp *policy.ToolPolicy, accepted bool) error {
	scopes, schemes := tp.RequiredScopes.Value, schemeNames(tp)
	usable := usableAlts(doc, op.Security)
	anonymous := op.Security == nil || len(op.Security.Alternatives) == 0 || len(usable) == 0 ||
		slices.ContainsFunc(op.Security.Alternatives, func(r apidoc.Requirement) bool { return len(r.Schemes) == 0 })
	if anonymous {
		if len(scopes)+len(schemes) != 0 {
			return fmt.Errorf("an anonymous call given scopes %v schemes %v", scopes, schemes)
		}
	} else {
		i := slices.IndexFunc(usable, func(r apidoc.Requirement) bool {
			names := make([]string, len(r.Schemes))
			for i, u := range r.Schemes {
				names[i] = u.Name
			}
			return slices.Equal(names, schemes) && slices.Equal(realScopes(r), scopes)
		})
		if i < 0 {
			return fmt.Errorf("scopes %v with schemes %v are no one alternative's of %+v", scopes, schemes, op.Security.Alternatives)
		}
		chosen := usable[i]
		anyScoped := slices.ContainsFunc(usable, func(r apidoc.Requirement) bool { return scopedAlt(doc, r) })
		if anyScoped && !scopedAlt(doc, chosen) {
			return fmt.Errorf("a scopeless alternative %v chosen over a scoped one", schemes)
		}
		for _, r := range usable {
			if scopedAlt(doc, r) && scopedAlt(doc, chosen) && len(realScopes(r)) < len(scopes) {
				return fmt.Errorf("chose %v, but %v needs fewer scopes", scopes, realScopes(r))
			}
		}
		if !anyScoped && finding(tp, policy.UnresolvedScopeless) == nil {
			return fmt.Errorf("a scopeless choice %v with no scopeless finding", schemes)
		}
	}
	scopeless := anonymous
	if !anonymous {
		scopeless = !slices.ContainsFunc(usable, func(r apidoc.Requirement) bool { return scopedAlt(doc, r) })
	}
	if tp.Risk.Value == ontology.RiskRead || !scopeless {
		return nil
	}
	// A scopeless or anonymous write.
	f := finding(tp, policy.UnresolvedScopeless)
	if anonymous {
		f = finding(tp, policy.UnresolvedUnauthenticated)
	}
	switch {
	case f == nil || !f.Fatal || !f.Acceptable:
		return fmt.Errorf("a %s with scopes %v schemes %v: finding %+v, want fatal and acceptable", tp.Risk.Value, scopes, schemes, f)
	case accepted && f.Accepted == "":
		return fmt.Errorf("accepted, but the finding is not: %+v", f)
	case !accepted && (f.Accepted != "" || tp.Status.Value != policy.StatusFailsClosed):
		return fmt.Errorf("a scopeless %s not accepted is %s", tp.Risk.Value, tp.Status.Value)
	}
	return nil
}

// TestNoScopeWiderThanOffered runs the property over every tool of every
// corpus document.
func TestNoScopeWiderThanOffered(t *testing.T) {
	for _, name := range corpusNames(t) {
		t.Run(name, func(t *testing.T) {
			doc := load(t, name).Doc
			m := corpusManifest(t, name)
			for _, op := range doc.Operations {
				i := slices.IndexFunc(m.Tools, func(tp policy.ToolPolicy) bool { return tp.Operation.Source == op.Source })
				if i < 0 {
					t.Fatalf("no tool for %s", op.Source)
				}
				if err := checkLeastPrivilege(doc, op, &m.Tools[i], false); err != nil {
					t.Errorf("%s: %v", m.Tools[i].Name, err)
				}
			}
		})
	}
}

// TestLeastPrivilegeRandom runs the property over generated descriptions:
// oauth2, openIdConnect, apiKey and http schemes, random ORs of ANDs with
// random scope subsets (the pseudo-scope none among them), anonymous
// alternatives and undeclared schemes, on reads and writes, some accepted.
func TestLeastPrivilegeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	pool := []string{"a:read", "a:write", "b:read", "b:write", "admin"}
	schemes := map[string]*apidoc.Scheme{
		"o1":    {Name: "o1", Type: apidoc.SchemeOAuth2, Source: "/s/o1", Flows: []apidoc.Flow{{Name: "implicit", AuthorizationURL: "https://a", Scopes: pool}}},
		"o2":    {Name: "o2", Type: apidoc.SchemeOAuth2, Source: "/s/o2", Flows: []apidoc.Flow{{Name: "clientCredentials", TokenURL: "https://t", Scopes: pool[:3]}}},
		"oidc":  {Name: "oidc", Type: apidoc.SchemeOpenIDConnect, Source: "/s/oidc", OpenIDConnectURL: "https://o"},
		"key":   {Name: "key", Type: apidoc.SchemeAPIKey, In: apidoc.InHeader, ParamName: "X-Key", Source: "/s/key"},
		"basic": {Name: "basic", Type: apidoc.SchemeHTTP, HTTPScheme: "basic", Source: "/s/basic"},
		"dig":   {Name: "dig", Type: apidoc.SchemeHTTP, HTTPScheme: "digest", Source: "/s/dig"},
	}
	names := []string{"o1", "o2", "oidc", "key", "basic", "dig", "ghost"}
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	for n := range 3000 {
		doc := &apidoc.Document{Format: apidoc.OpenAPI, Version: "3.1.0", Title: "R", Schemes: schemes}
		src := fmt.Sprintf("/paths/~1r%d", n)
		op := &apidoc.Operation{ID: fmt.Sprintf("op%d", n), Method: methods[rng.IntN(len(methods))], Path: "/r", Source: src}
		switch rng.IntN(8) {
		case 0: // none declared
		case 1:
			op.Security = &apidoc.Security{Source: src + "/security"}
		default:
			op.Security = &apidoc.Security{Source: src + "/security"}
			for a := range 1 + rng.IntN(4) {
				r := apidoc.Requirement{Source: fmt.Sprintf("%s/security/%d", src, a)}
				if rng.IntN(10) > 0 {
					for _, s := range rng.Perm(len(names))[:1+rng.IntN(2)] {
						u := apidoc.SchemeUse{Name: names[s]}
						if k := schemes[names[s]]; k == nil || k.Type == apidoc.SchemeOAuth2 || k.Type == apidoc.SchemeOpenIDConnect || rng.IntN(6) == 0 {
							for _, p := range rng.Perm(len(pool)) {
								if rng.IntN(3) == 0 {
									u.Scopes = append(u.Scopes, pool[p])
								}
							}
							if rng.IntN(8) == 0 {
								u.Scopes = []string{"none"}
							}
						}
						r.Schemes = append(r.Schemes, u)
					}
				}
				op.Security.Alternatives = append(op.Security.Alternatives, r)
			}
		}
		doc.Operations = []*apidoc.Operation{op}
		accepted := rng.IntN(3) == 0
		var accept map[string]string
		if accepted {
			accept = map[string]string{op.ID: "reviewed"}
		}
		m, err := policy.Compile(doc, policy.Options{Service: "r", Accept: accept})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkLeastPrivilege(doc, op, &m.Tools[0], accepted); err != nil {
			t.Fatalf("case %d (%s, security %s): %v", n, op.Method, spellSecurity(op.Security), err)
		}
	}
}

func spellSecurity(s *apidoc.Security) string {
	if s == nil {
		return "none"
	}
	var alts []string
	for _, r := range s.Alternatives {
		var us []string
		for _, u := range r.Schemes {
			us = append(us, u.Name+"["+strings.Join(u.Scopes, ",")+"]")
		}
		alts = append(alts, "{"+strings.Join(us, " AND ")+"}")
	}
	return "[" + strings.Join(alts, ", ") + "]"
}
