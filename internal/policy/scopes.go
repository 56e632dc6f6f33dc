package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// placeScheme decides where a scheme's credential goes (spec 001, "The
// credential, not only the scope"), as the ontology's auth type that
// places it. A scheme orangerail cannot place is reported, never guessed:
// Placement is then empty and Rule says why.
func placeScheme(service string, s *apidoc.Scheme) SchemePolicy {
	p := SchemePolicy{Name: s.Name, Type: string(s.Type), Env: ontology.CredentialEnv(service, s.Name), Source: []string{s.Source}}
	switch s.Type {
	case apidoc.SchemeAPIKey:
		switch s.In {
		case apidoc.InHeader, apidoc.InQuery, apidoc.InCookie:
			if err := ontology.CheckAPIKeyName(s.In, s.ParamName); err != nil {
				p.Rule = fmt.Sprintf("an apiKey in the %s %q cannot be placed: %v; nothing is sent", s.In, s.ParamName, err)
				break
			}
			p.Auth, p.Placement = ontology.AuthAPIKey, s.In+" "+s.ParamName
			p.Rule = fmt.Sprintf("an apiKey goes in the %s the description names, %q", s.In, s.ParamName)
		default:
			p.Rule = fmt.Sprintf("an apiKey in %q has no place orangerail can put it: nothing is sent", s.In)
		}
	case apidoc.SchemeHTTP:
		switch s.HTTPScheme {
		case "basic":
			p.Auth, p.Placement = ontology.AuthBasic, "Authorization: Basic"
			p.Rule = "http basic: Authorization: Basic, base64 of the user:password the variable holds"
		case "bearer":
			p.Auth, p.Placement = ontology.AuthBearer, "Authorization: Bearer"
			p.Rule = "http bearer: Authorization: Bearer"
		default:
			p.Rule = fmt.Sprintf("http %q is not basic or bearer: nothing is sent, never a guess", s.HTTPScheme)
		}
	case apidoc.SchemeOAuth2:
		if f := clientCredentials(s); f != nil {
			if err := ontology.CheckUpstreamURL(f.TokenURL); err != nil {
				// Where a client secret is sent: never in the clear, never a
				// guess at another flow.
				p.Rule = fmt.Sprintf("oauth2 with a clientCredentials flow whose token URL cannot take the client secret: %v; nothing is sent", err)
				break
			}
			p.Auth, p.Placement = ontology.AuthOAuth2ClientCredentials, "Authorization: Bearer, from a client-credentials token"
			p.Rule = fmt.Sprintf("oauth2 with a clientCredentials flow: orangerail requests a token at %s with the client_id:client_secret the variable holds, each action asking for the scopes its operation needs (execute's scopes; the scheme lists every written action's), so that a read's token does not carry a write's scopes, and sends it as a bearer token", f.TokenURL)
			break
		}
		p.Auth, p.Placement = ontology.AuthBearer, "Authorization: Bearer"
		p.Rule = "oauth2 without a clientCredentials flow: the variable holds an access token, sent as Authorization: Bearer"
	case apidoc.SchemeOpenIDConnect:
		p.Auth, p.Placement = ontology.AuthBearer, "Authorization: Bearer"
		p.Rule = "openIdConnect: the variable holds an access token, sent as Authorization: Bearer"
	case apidoc.SchemeMutualTLS:
		p.Auth, p.Placement = ontology.AuthMTLS, "client certificate"
		p.Rule = "mutualTLS: the variable holds PEM, the client certificate and its key, presented on the connection"
	default:
		p.Rule = fmt.Sprintf("the scheme type %q has no placement: nothing is sent, never a guess", s.Type)
	}
	return p
}

// clientCredentials returns a scheme's clientCredentials flow, or nil.
func clientCredentials(s *apidoc.Scheme) *apidoc.Flow {
	for i := range s.Flows {
		if s.Flows[i].Name == "clientCredentials" && s.Flows[i].TokenURL != "" {
			return &s.Flows[i]
		}
	}
	return nil
}

// setsAuthorization reports whether a placement takes the Authorization
// header.
func setsAuthorization(p SchemePolicy) bool {
	return strings.HasPrefix(p.Placement, "Authorization") || (p.Auth == ontology.AuthAPIKey && strings.EqualFold(p.Placement, "header authorization"))
}

// access is the security a tool's policy chose: least privilege among the
// alternatives the description offers (spec 001, "Least privilege, chosen
// rather than unioned").
type access struct {
	scopes  Derived[[]string]
	schemes Derived[[]SchemeRef]
	// anonymous: the call needs no credential.
	anonymous  bool
	unresolved []Unresolved
}

// spell names an alternative as the spec does: Scheme(scope, scope) AND …,
// Scheme(no scopes), or {} for anonymous.
func spell(r apidoc.Requirement) string {
	if len(r.Schemes) == 0 {
		return "{} (anonymous)"
	}
	parts := make([]string, len(r.Schemes))
	for i, u := range r.Schemes {
		inner := "no scopes"
		if real := slices.DeleteFunc(slices.Clone(u.Scopes), func(s string) bool { return s == noScope }); len(real) > 0 {
			inner = strings.Join(real, ", ")
		} else if len(u.Scopes) > 0 {
			inner = "the pseudo-scope none: no scopes"
		}
		parts[i] = u.Name + "(" + inner + ")"
	}
	return strings.Join(parts, " AND ")
}

// noScope is the pseudo-scope some descriptions write for "no scope is
// needed" (Slack's "none"): it names no capability, so it is not counted.
const noScope = "none"

// scopesOf is every scope an alternative needs, each once, sorted; the
// pseudo-scope none is not one.
func scopesOf(r apidoc.Requirement) []string {
	out := []string{}
	for _, u := range r.Schemes {
		for _, s := range u.Scopes {
			if s != noScope && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// chooseAccess picks the narrowest alternative. Fewest scopes is not least
// privilege: a scopeless credential such as an admin key looks narrowest
// by count while granting the most, so scoped alternatives are preferred,
// and a scopeless winner is reported as a concern rather than accepted.
// Among the candidates the fewest scopes win, then the fewest schemes,
// then one orangerail can place, then the first written.
func chooseAccess(doc *apidoc.Document, op *apidoc.Operation, schemes map[string]SchemePolicy, changesState bool) access {
	var a access
	sec := op.Security
	noCredential := func(rule string, source []string) {
		a.scopes = derive([]string{}, rule, source...)
		a.schemes = derive([]SchemeRef{}, rule, source...)
		detail := "no credential is needed to call it: " + rule
		if !a.anonymous {
			// Every alternative names an undeclared scheme: the call
			// needs a credential nobody can say how to present, so
			// nothing is sent — it is not public (spec 001: "An
			// unplaceable scheme is reported, never guessed").
			detail = "the description requires a credential, but " + rule + ": nothing can be presented, so the call is made without one"
		}
		if changesState {
			detail += "; an operation that changes state with none cannot be shown to be governed, so it fails closed"
		}
		a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedUnauthenticated, Field: "required_schemes", Source: source,
			Detail: detail, Fatal: changesState, Acceptable: true})
	}
	switch {
	case sec == nil:
		a.anonymous = true
		noCredential("the description declares no security, for the operation or the document", []string{op.Source})
		return a
	case len(sec.Alternatives) == 0:
		a.anonymous = true
		noCredential("security: [] declares the operation public", []string{sec.Source})
		return a
	}
	type candidate struct {
		req       apidoc.Requirement
		scopes    []string
		scoped    bool
		placeable bool
	}
	var usable []candidate
	for _, r := range sec.Alternatives {
		if len(r.Schemes) == 0 {
			a.anonymous = true
			noCredential(fmt.Sprintf("the alternative {} at %s allows an anonymous call, which grants the least of all", r.Source), []string{r.Source})
			return a
		}
		ok, placeable, scoped := true, true, false
		for _, u := range r.Schemes {
			s, declared := doc.Schemes[u.Name]
			if !declared {
				ok = false
				a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedUnknownScheme, Field: "required_schemes", Source: []string{r.Source},
					Detail: fmt.Sprintf("the alternative %s names the scheme %q, which the description does not declare: it cannot be used", spell(r), u.Name)})
				continue
			}
			if schemes[u.Name].Auth == "" {
				placeable = false
			}
			if (s.Type == apidoc.SchemeOAuth2 || s.Type == apidoc.SchemeOpenIDConnect) && slices.ContainsFunc(u.Scopes, func(sc string) bool { return sc != noScope }) {
				scoped = true
			}
			offered := s.Scopes()
			for _, sc := range u.Scopes {
				if s.Type == apidoc.SchemeOAuth2 && sc != noScope && !slices.Contains(offered, sc) {
					a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedUndeclaredScope, Field: "required_scopes", Source: []string{r.Source, s.Source},
						Detail: fmt.Sprintf("the scope %q is not one the scheme %s's flows offer", sc, u.Name)})
				}
			}
		}
		if ok {
			usable = append(usable, candidate{req: r, scopes: scopesOf(r), scoped: scoped, placeable: placeable})
		}
	}
	if len(usable) == 0 {
		noCredential("no alternative names only declared schemes", []string{sec.Source})
		return a
	}
	pool := usable
	if slices.ContainsFunc(usable, func(c candidate) bool { return c.scoped }) {
		pool = slices.DeleteFunc(slices.Clone(usable), func(c candidate) bool { return !c.scoped })
	}
	win := slices.MinFunc(pool, func(x, y candidate) int {
		switch {
		case len(x.scopes) != len(y.scopes):
			return len(x.scopes) - len(y.scopes)
		case len(x.req.Schemes) != len(y.req.Schemes):
			return len(x.req.Schemes) - len(y.req.Schemes)
		case x.placeable != y.placeable:
			if x.placeable {
				return -1
			}
			return 1
		}
		return 0 // MinFunc keeps the first of equals: the first written
	})
	// The rule, in the spec's words.
	var rule strings.Builder
	if len(usable) == 1 {
		fmt.Fprintf(&rule, "The only alternative, %s.", spell(win.req))
	} else {
		names := make([]string, len(win.req.Schemes))
		for i, u := range win.req.Schemes {
			names[i] = u.Name
		}
		fmt.Fprintf(&rule, "Narrowest of %d alternatives, using %s.", len(usable), strings.Join(names, " AND "))
		union := map[string]bool{}
		for _, c := range usable {
			for _, s := range c.scopes {
				union[s] = true
			}
		}
		if len(union) > 0 {
			all := make([]string, 0, len(union))
			for s := range union {
				all = append(all, s)
			}
			slices.Sort(all)
			fmt.Fprintf(&rule, " The union across alternatives would have granted %s;", strings.Join(all, ", "))
		}
		var rejected []string
		for _, c := range usable {
			if c.req.Source != win.req.Source {
				rejected = append(rejected, spell(c.req))
			}
		}
		fmt.Fprintf(&rule, " rejected %s.", strings.Join(rejected, "; "))
		if !win.scoped && len(pool) == len(usable) {
			rule.WriteString(" No alternative is scoped.")
		} else if len(pool) < len(usable) {
			rule.WriteString(" Scoped alternatives are preferred: a scopeless credential looks narrowest by count while it may grant the most.")
		}
	}
	sources := []string{win.req.Source}
	refs := make([]SchemeRef, 0, len(win.req.Schemes))
	authorization := ""
	for _, u := range win.req.Schemes {
		p := schemes[u.Name]
		sources = append(sources, p.Source...)
		refs = append(refs, SchemeRef{Scheme: u.Name, Placement: p.Placement, Env: p.Env})
		if p.Auth == "" {
			a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedUnplaceableScheme, Field: "required_schemes", Source: p.Source,
				Detail: fmt.Sprintf("the scheme %s cannot be placed (%s): nothing is sent for it, so the call fails at the service as unauthenticated", u.Name, p.Rule)})
		}
		if setsAuthorization(p) {
			if authorization != "" {
				// A request carries one Authorization header: the first
				// scheme is presented, and this one is not placed.
				refs[len(refs)-1].Placement = ""
				a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedUnplaceableScheme, Field: "required_schemes", Source: []string{win.req.Source},
					Detail: fmt.Sprintf("the alternative needs %s and %s, and both go in the one Authorization header a request carries: orangerail presents %s and sends nothing for %s, so the call is not made as declared", authorization, u.Name, authorization, u.Name)})
				continue
			}
			authorization = u.Name
		}
	}
	a.scopes = derive(win.scopes, rule.String(), sources...)
	a.schemes = derive(refs, rule.String(), sources...)
	if !win.scoped {
		detail := fmt.Sprintf("the chosen credential, %s, carries no scopes: the description cannot show how much it grants (a scopeless key looks narrowest by count while it may grant the most)", spell(win.req))
		if changesState {
			detail += "; for an operation that changes state this is fatal until a person accepts it"
		}
		a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedScopeless, Field: "required_scopes", Source: []string{win.req.Source},
			Detail: detail, Fatal: changesState, Acceptable: true})
	} else {
		for _, u := range win.req.Schemes {
			s := doc.Schemes[u.Name]
			if offered := s.Scopes(); len(offered) > 1 && len(u.Scopes) >= len(offered) && !slices.ContainsFunc(offered, func(o string) bool { return !slices.Contains(u.Scopes, o) }) {
				a.unresolved = append(a.unresolved, Unresolved{Kind: UnresolvedBroadScopes, Field: "required_scopes", Source: []string{win.req.Source},
					Detail: fmt.Sprintf("the narrowest scoped alternative still needs every one of the %d scopes %s offers: it is not narrow", len(offered), u.Name)})
			}
		}
	}
	return a
}
