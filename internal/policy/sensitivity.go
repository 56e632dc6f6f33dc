package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// Sensitivity is what a field holds that a log must not keep as it is,
// from a closed set, least first.
type Sensitivity string

// The sensitivities.
const (
	SensitivityNone      Sensitivity = "none"
	SensitivityPersonal  Sensitivity = "personal"  // a person's contact or identity details
	SensitivityFinancial Sensitivity = "financial" // an account or card number
	SensitivitySecret    Sensitivity = "secret"    // a credential: a token, key or password
)

// Sensitivities returns every sensitivity, least first.
func Sensitivities() []Sensitivity {
	return []Sensitivity{SensitivityNone, SensitivityPersonal, SensitivityFinancial, SensitivitySecret}
}

func (s Sensitivity) rank() int { return slices.Index(Sensitivities(), s) }

// The nouns each sensitivity is decided on. A name is judged on the noun
// it ends on (its last word, or its last two words run together), never
// on a word somewhere inside it: accessToken and clientSecret hold
// secrets; prompt_tokens, tokenType and TitleCaseWordsWithTokenResult do
// not (spec 001, "Redaction decides on the noun").
var nouns = map[string]Sensitivity{
	// Credentials.
	"token": SensitivitySecret, "secret": SensitivitySecret, "password": SensitivitySecret,
	"passwd": SensitivitySecret, "pass": SensitivitySecret, "passphrase": SensitivitySecret,
	"pwd": SensitivitySecret, "key": SensitivitySecret, "apikey": SensitivitySecret,
	"credential": SensitivitySecret, "credentials": SensitivitySecret, "cvc": SensitivitySecret,
	"cvv": SensitivitySecret, "pin": SensitivitySecret, "otp": SensitivitySecret,
	"authorization": SensitivitySecret, "cookie": SensitivitySecret, "privatekey": SensitivitySecret,
	// Financial identifiers.
	"iban": SensitivityFinancial, "cardnumber": SensitivityFinancial, "accountnumber": SensitivityFinancial,
	"routingnumber": SensitivityFinancial, "pan": SensitivityFinancial, "bankaccount": SensitivityFinancial,
	// A person's contact and identity details.
	"email": SensitivityPersonal, "emailaddress": SensitivityPersonal, "phone": SensitivityPersonal,
	"phonenumber": SensitivityPersonal, "mobile": SensitivityPersonal, "msisdn": SensitivityPersonal,
	"ssn": SensitivityPersonal, "birthdate": SensitivityPersonal, "dob": SensitivityPersonal,
	"dateofbirth": SensitivityPersonal, "passport": SensitivityPersonal, "passportnumber": SensitivityPersonal,
	"firstname": SensitivityPersonal, "lastname": SensitivityPersonal, "fullname": SensitivityPersonal,
	"surname": SensitivityPersonal, "givenname": SensitivityPersonal, "familyname": SensitivityPersonal,
	"streetaddress": SensitivityPersonal, "postalcode": SensitivityPersonal, "zipcode": SensitivityPersonal,
	"ipaddress": SensitivityPersonal, "taxid": SensitivityPersonal, "nationalid": SensitivityPersonal,
}

// notSecret are the words that, before key or token, say the value is not
// a credential: a public key, a sort key, a page token are handed out on
// purpose or name a position.
var notSecret = map[string]bool{
	"public": true, "verify": true, "sort": true, "entity": true, "page": true, "next": true,
	"previous": true, "prev": true, "continuation": true, "sync": true, "cursor": true,
	"idempotency": true, "partition": true, "primary": true, "foreign": true, "cache": true,
	"lookup": true, "dedup": true, "deduplication": true, "etag": true,
}

// judgement is what a name says about its value, and why.
type judgement struct {
	sensitivity Sensitivity
	rule        string
}

// valueKind is what a field's schema says its value is, as far as
// judging its name needs.
type valueKind uint8

const (
	valueOther   valueKind = iota
	valueBoolean           // booleans (and null) only: holds no secret
	valueStrings           // a string, or an array of strings
)

// kindOf is a schema's valueKind.
func kindOf(s *apidoc.Schema) valueKind {
	switch {
	case isBoolean(s):
		return valueBoolean
	case s == nil:
		return valueOther
	case slices.Contains(s.Types, "string"), slices.Contains(s.Types, "array") && s.Items != nil && slices.Contains(s.Items.Types, "string"):
		return valueStrings
	}
	return valueOther
}

// judgeName decides a field's sensitivity on the noun its name ends on.
// A boolean holds no secret whatever it is called (shouldChangePassword,
// regenerateToken).
func judgeName(name string, s *apidoc.Schema) judgement {
	return judgeNoun(name, kindOf(s))
}

// judge remembers the names it has judged: a large description names the
// same fields in hundreds of places.
type judge struct{ memo map[judged]judgement }

type judged struct {
	name string
	kind valueKind
}

func newJudge() *judge { return &judge{memo: map[judged]judgement{}} }

// name is judgeName, remembered.
func (j *judge) name(name string, s *apidoc.Schema) judgement {
	k := judged{name, kindOf(s)}
	if v, ok := j.memo[k]; ok {
		return v
	}
	v := judgeNoun(name, k.kind)
	j.memo[k] = v
	return v
}

// isBoolean reports whether a schema allows booleans (and null) only.
func isBoolean(s *apidoc.Schema) bool {
	return s != nil && len(s.Types) > 0 && !slices.ContainsFunc(s.Types, func(t string) bool { return t != "boolean" && t != "null" })
}

// judgeNoun is judgeName once the kind of a name's value is known.
func judgeNoun(name string, kind valueKind) judgement {
	noun, before := lastNoun(name)
	if noun == "" {
		return judgement{SensitivityNone, ""}
	}
	if kind == valueBoolean {
		if _, ok := nouns[noun]; ok {
			return judgement{SensitivityNone, fmt.Sprintf("%s ends on %q, but is a boolean, which holds no secret", name, noun)}
		}
		return judgement{SensitivityNone, ""}
	}
	if sens, ok := nouns[before+noun]; ok && before != "" {
		return judgement{sens, fmt.Sprintf("%s ends on the noun %q, which is %s", name, before+" "+noun, sens)}
	}
	sens, ok := nouns[noun]
	plural := false
	if singular, cut := strings.CutSuffix(noun, "s"); !ok && cut && kind == valueStrings {
		// A plural noun holding strings holds the things it names
		// (spec 001: "accessToken and clientSecret are secrets", and so
		// is discord's access_tokens, a list of them); a count
		// (max_tokens) or a list of objects, whose members are judged
		// themselves, is not.
		sens, ok = nouns[singular]
		noun, plural = singular, ok
	}
	if !ok {
		return judgement{SensitivityNone, ""}
	}
	if sens == SensitivitySecret && notSecret[before] {
		return judgement{SensitivityNone, fmt.Sprintf("%s ends on %q, but %q before it says it is not a credential", name, noun, before)}
	}
	if plural {
		return judgement{sens, fmt.Sprintf("%s ends on the plural of the noun %q, which is %s, and holds strings", name, noun, sens)}
	}
	return judgement{sens, fmt.Sprintf("%s ends on the noun %q, which is %s", name, noun, sens)}
}

// credentialPurpose reports whether an operation's name or path says it
// handles credentials as its purpose — it signs in, or issues or reveals a
// token, key or password — so that everything it answers is a secret even
// where a field's name does not say so (Crowd's authenticatePrincipal
// returns the session token as out; JIRA's login as loginReturn). A path
// is judged on its last literal segment ({webhook_token} is a parameter,
// not what the operation makes), and a name ending "by token" looks
// something up by one.
func credentialPurpose(op *apidoc.Operation) (bool, string) {
	verbs := []string{"login", "logon", "signin", "authenticate"}
	names := []string{op.ID}
	if op.Path != "" {
		segments := strings.Split(op.Path, "/")
		for i := len(segments) - 1; i >= 0; i-- {
			if s := segments[i]; s != "" && !strings.HasPrefix(s, "{") {
				names = append(names, s)
				break
			}
		}
	}
	for _, n := range names {
		for _, w := range words(n) {
			if slices.Contains(verbs, w) {
				return true, fmt.Sprintf("%q names %q, a sign-in: what it answers is a credential", n, w)
			}
		}
		noun, before := lastNoun(n)
		if nouns[noun] == SensitivitySecret && !notSecret[before] && !slices.Contains([]string{"by", "with", "from", "for", "using"}, before) {
			return true, fmt.Sprintf("%q ends on %q: what it answers is that credential", n, noun)
		}
	}
	return false, ""
}

// walkFields calls visit for every named field of a schema, depth first,
// following properties, array items, map values, allOf/anyOf/oneOf and
// discriminator mappings; a definition already on the path is not entered
// again (a recursive one ends there). path holds the field's pointer
// tokens ("*" for every element), valid during the call only. It returns
// the places that could not be judged — an object whose members are open,
// a schema that says nothing — and whether the walk stopped at its bounds:
// maxDepth levels, maxVisits schemas entered, which keep a large
// description's shared definitions from multiplying without end. Every
// schema entered counts, a field's or a composition's: a definition shared
// by allOf at each level is entered once per path to it, and twelve levels
// of eight would be 8^12 entries.
func walkFields(s *apidoc.Schema, visit func(path []string, name string, field, parent *apidoc.Schema)) (opaque []string, truncated bool) {
	const (
		maxDepth  = 12
		maxVisits = 10_000
	)
	onPath := map[*apidoc.Schema]bool{}
	var path []string
	visited := 0
	var walk func(s *apidoc.Schema, depth int)
	walk = func(s *apidoc.Schema, depth int) {
		if s == nil || onPath[s] {
			return
		}
		if depth > maxDepth || visited >= maxVisits {
			truncated = true
			return
		}
		visited++
		onPath[s] = true
		defer delete(onPath, s)
		for _, p := range s.Properties {
			path = append(path, p.Name)
			visit(path, p.Name, p.Schema, s)
			walk(p.Schema, depth+1)
			path = path[:len(path)-1]
		}
		if s.Items != nil {
			path = append(path, "*")
			walk(s.Items, depth+1)
			path = path[:len(path)-1]
		}
		for _, group := range [][]*apidoc.Schema{s.AllOf, s.AnyOf, s.OneOf, s.Mapping} {
			for _, sub := range group {
				walk(sub, depth+1)
			}
		}
		if s.AdditionalProperties != nil && !isEmpty(s.AdditionalProperties) {
			path = append(path, "*")
			walk(s.AdditionalProperties, depth+1)
			path = path[:len(path)-1]
		}
		if open(s) {
			opaque = append(opaque, s.Source)
		}
	}
	walk(s, 0)
	return opaque, truncated
}

// open reports whether a schema lets values through whose names it does
// not list: an object with no properties and no composition, or a schema
// that says nothing at all.
func open(s *apidoc.Schema) bool {
	composed := len(s.AllOf)+len(s.AnyOf)+len(s.OneOf)+len(s.Mapping) > 0
	if composed || len(s.Properties) > 0 || s.Items != nil {
		return false
	}
	if len(s.Types) == 0 {
		return len(s.Enum) == 0 && !s.HasConst
	}
	return slices.Contains(s.Types, "object") && !s.NoAdditional && (s.AdditionalProperties == nil || isEmpty(s.AdditionalProperties))
}

// isEmpty reports whether s is the empty schema, which allows anything.
func isEmpty(s *apidoc.Schema) bool {
	return len(s.Types) == 0 && len(s.Properties) == 0 && s.Items == nil && len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) == 0 && len(s.Enum) == 0 && !s.HasConst
}

// sourceOf is where a field is written: its schema's place, else its
// parent's.
func sourceOf(s, parent *apidoc.Schema) string {
	if s != nil && s.Source != "" {
		return s.Source
	}
	return parent.Source
}

// scalar reports whether a schema is a single value with no members.
func scalar(s *apidoc.Schema) bool {
	if s == nil {
		return false
	}
	return len(s.Types) > 0 && !slices.ContainsFunc(s.Types, func(t string) bool { return t == "object" || t == "array" }) &&
		len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) == 0
}

// sensitivityResult is what an operation's names say of its data.
type sensitivityResult struct {
	sensitivity Derived[*Sensitivity]
	redact      []Derived[RedactField]
	logClass    Derived[LogClass]
	unresolved  []Unresolved
}

// judgeSensitivity decides an operation's sensitivity, the fields its
// audit records mask and its log class, on the nouns of its parameters'
// and fields' names and of its own name and path.
func judgeSensitivity(op *apidoc.Operation, judge *judge) sensitivityResult {
	var (
		r       sensitivityResult
		highest = SensitivityNone
		sources []string
		unknown []string // the parts that could not be judged
		seen    = map[RedactField]bool{}
	)
	note := func(in Field, pointer, source string, j judgement) {
		f := RedactField{In: in, Pointer: pointer, Sensitivity: j.sensitivity}
		if seen[f] {
			return
		}
		seen[f] = true
		r.redact = append(r.redact, derive(f, j.rule, source))
		if j.sensitivity.rank() > highest.rank() {
			highest = j.sensitivity
		}
		sources = append(sources, source)
	}
	judgeSchema := func(in Field, s *apidoc.Schema, source string) {
		if s == nil {
			unknown = append(unknown, source)
			return
		}
		opaque, truncated := walkFields(s, func(path []string, name string, field, parent *apidoc.Schema) {
			if j := judge.name(name, field); j.sensitivity != SensitivityNone {
				note(in, apidoc.Pointer("", path...), sourceOf(field, parent), j)
			}
		})
		if scalar(s) && in != FieldParameter {
			opaque = append(opaque, cmp.Or(s.Source, source))
		}
		unknown = append(unknown, opaque...)
		if truncated {
			unknown = append(unknown, cmp.Or(s.Source, source))
		}
	}
	for _, p := range op.Parameters {
		if j := judge.name(p.Name, p.Schema); j.sensitivity != SensitivityNone {
			note(FieldParameter, apidoc.Pointer("", p.Name), p.Source, j)
		}
	}
	if b := op.Body; b != nil {
		judgeSchema(FieldBody, b.Schema, b.Source)
	}
	for _, resp := range successes(op) {
		if resp.Schema != nil {
			judgeSchema(FieldResponse, resp.Schema, resp.Source)
		}
	}
	purpose, why := credentialPurpose(op)
	if purpose {
		// Everything it answers is a secret: every member of the
		// answer, whatever it is called.
		for _, resp := range successes(op) {
			if resp.Schema == nil {
				continue
			}
			members := resp.Schema.Members(true)
			for _, m := range members {
				note(FieldResponse, apidoc.Pointer("", m.Name), cmp.Or(m.Schema.Source, resp.Source), judgement{SensitivitySecret, why})
			}
			if len(members) == 0 {
				unknown = append(unknown, resp.Source)
			}
		}
		highest = SensitivitySecret
		sources = append(sources, op.Source)
	}
	slices.Sort(sources)
	sources = slices.Compact(sources)
	slices.Sort(unknown)
	unknown = slices.Compact(unknown)
	switch {
	case highest != SensitivityNone:
		h := highest
		rule := fmt.Sprintf("the most sensitive field found is %s, judged on the noun each name ends on", h)
		if purpose {
			rule = why
		}
		r.sensitivity = derive(&h, rule, sources...)
	case len(unknown) > 0:
		r.sensitivity = derive[*Sensitivity](nil, "null: no field was judged sensitive, but some of the call could not be judged, so no claim is made", unknown...)
	default:
		none := SensitivityNone
		r.sensitivity = derive(&none, "every named field of the call was judged on its noun, and none is sensitive", op.Source)
	}
	if len(unknown) > 0 {
		r.unresolved = append(r.unresolved, Unresolved{Kind: UnresolvedSensitivity, Field: "sensitivity", Source: unknown,
			Detail: "these parts declare no names to judge (an open object, a bare value, a schema too deep to walk, no schema): what they hold is kept in audit records unjudged"})
	}
	switch {
	case purpose:
		r.logClass = derive(LogMetadataOnly, why+": audit records keep who called it and when, its answer masked", op.Source)
	case len(r.redact) > 0:
		r.logClass = derive(LogRedacted, "audit records keep the call with redact_fields masked", sources...)
	case len(unknown) > 0:
		r.logClass = derive(LogRedacted, "nothing named is sensitive, but some of the call could not be judged: see unresolved", unknown...)
	default:
		r.logClass = derive(LogFull, "nothing in the call is sensitive: audit records keep it as it is", op.Source)
	}
	if r.redact == nil {
		r.redact = []Derived[RedactField]{}
	}
	return r
}

// successes are the responses that mean the call succeeded: the 2xx ones,
// or default when none is declared.
func successes(op *apidoc.Operation) []*apidoc.Response {
	var ok, def []*apidoc.Response
	for _, r := range op.Responses {
		switch {
		case strings.HasPrefix(r.Status, "2"):
			ok = append(ok, r)
		case r.Status == "default":
			def = append(def, r)
		}
	}
	if len(ok) > 0 {
		return ok
	}
	return def
}
