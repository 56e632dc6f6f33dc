package policy_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/openapi"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

// TestActionsLoad writes the actions of every operation of every corpus
// document — each acceptable finding accepted, so that as many as can be
// served are written — and loads the file as orangerail does: whatever a
// description holds, what the compiler writes is a config that loads.
func TestActionsLoad(t *testing.T) {
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, name := range corpusNames(t) {
		t.Run(name, func(t *testing.T) {
			f := load(t, name)
			first := compile(t, name, "svc", nil)
			accept := map[string]string{}
			for _, tool := range first.Tools {
				accept[tool.Name] = "accepted by the test"
			}
			m := compile(t, name, "svc", accept)
			// In staging, every written action is served (production withholds
			// the destructive ones).
			out, err := policy.Emit(m, f.Doc, all, policy.EmitOptions{BaseURL: "https://api.example.com/v1", Environment: "staging"})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ontology.Parse(out.YAML)
			if err != nil {
				t.Fatalf("the actions file does not load: %v", err)
			}
			if len(cfg.Actions) != len(out.Written) {
				t.Fatalf("%d actions loaded, %d written", len(cfg.Actions), len(out.Written))
			}
			for name, a := range cfg.Actions {
				// Words joined by one space, none missing: a SOAP operation
				// without documentation was described "Calls  .".
				if strings.Contains(a.Description, "  ") {
					t.Errorf("%s: the description %q", name, a.Description)
				}
			}
			for _, s := range out.Skipped {
				if tool := m.Tool(s.Tool); tool != nil && tool.Status.Value == policy.StatusServable && !strings.Contains(s.Reason, "built-in") {
					t.Errorf("%s is servable and was skipped: %s", s.Tool, s.Reason)
				}
			}
			written += len(out.Written)
		})
	}
	if written < 300 {
		t.Fatalf("only %d actions written across the corpus", written)
	}
}

// TestActionsBindEveryParameter: each parameter is bound to a property of
// its own — two path parameters named thing-id and thing_id each fill
// their own slot — a parameter of one name in two places is masked in
// both, the same bytes every time; and a path that cannot be bound (a
// parameter none declares, a query) is skipped with why, not written for
// config check to refuse.
func TestActionsBindEveryParameter(t *testing.T) {
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "synthetic-binding.yaml"
	f := load(t, name)
	accept := map[string]string{}
	for _, tool := range compile(t, name, "svc", nil).Tools {
		accept[tool.Name] = "accepted by the test"
	}
	m := compile(t, name, "svc", accept)
	out, err := policy.Emit(m, f.Doc, all, policy.EmitOptions{BaseURL: "https://api.example.com/v1", Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 { // map order once chose which of two was masked
		again, err := policy.Emit(m, f.Doc, all, policy.EmitOptions{BaseURL: "https://api.example.com/v1", Environment: "staging"})
		if err != nil || !bytes.Equal(again.YAML, out.YAML) {
			t.Fatalf("a second emit differs (%v):\n%s\n---\n%s", err, out.YAML, again.YAML)
		}
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the actions file does not load: %v\n%s", err, out.YAML)
	}
	thing := cfg.Actions["getThing"]
	if thing == nil {
		t.Fatalf("getThing not written: %s", out.YAML)
	}
	parts, err := ontology.ParsePath(thing.Execute.HTTP.Path)
	if err != nil || len(parts) != 4 || parts[1].Param == "" || parts[3].Param == "" || parts[1].Param == parts[3].Param {
		t.Fatalf("getThing's path %q binds its two parameters to one property", thing.Execute.HTTP.Path)
	}
	search := cfg.Actions["search"]
	if search == nil {
		t.Fatalf("search not written: %s", out.YAML)
	}
	var bound []string
	for _, v := range search.Execute.HTTP.Query {
		bound = append(bound, "/"+strings.TrimPrefix(v, ":"))
	}
	for _, v := range search.Execute.HTTP.Headers {
		bound = append(bound, "/"+strings.TrimPrefix(v, ":"))
	}
	slices.Sort(bound)
	if len(bound) != 2 || bound[0] == bound[1] || !slices.Equal(search.RedactAudit, bound) {
		t.Fatalf("search binds %v and masks %v: want both emails masked", bound, search.RedactAudit)
	}
	skipped := map[string]string{}
	for _, s := range out.Skipped {
		skipped[s.Tool] = s.Reason
	}
	if r := skipped["getItem"]; !strings.Contains(r, "{id}") {
		t.Errorf("getItem, whose path names a parameter none declares: skipped %q", r)
	}
	if r := skipped["queryInPath"]; !strings.Contains(r, "query") {
		t.Errorf("queryInPath, whose path holds a query: skipped %q", r)
	}
	// A client secret is never sent to a token URL over plain http.
	for _, sp := range m.Schemes {
		if sp.Name == "ledger" && (sp.Placement != "" || !strings.Contains(sp.Rule, "must be https")) {
			t.Errorf("the ledger scheme, whose token URL is http: placed %q (%s)", sp.Placement, sp.Rule)
		}
	}
	if u := cfg.Upstreams["svc"]; u != nil && u.Auth["ledger"] != nil {
		t.Errorf("the ledger scheme was written: %+v", u.Auth["ledger"])
	}
	// An operation's id is its tool's name before any name is made.
	names := map[string]string{}
	for _, tool := range m.Tools {
		names[tool.Name] = tool.Operation.Path
	}
	if !strings.HasSuffix(names["get_pet"], "/pets/b") || !strings.HasSuffix(names["get_pet_2"], "/pets/j") || !strings.HasSuffix(names["get_pet_3"], "/pets/c") {
		t.Errorf("tool names %v: want get_pet for /pets/b, get_pet_2 for /pets/j, whose id it is, get_pet_3 for /pets/c", names)
	}
}

// TestUnreadablePartsFailClosed: a part the loader cannot read — a
// parameter's $ref, or a property's in a component the body reaches; a
// parameter (the operation's or its path's), a body or a response whose
// $ref chain breaks past its first hop or cycles — is a fatal finding of each operation that uses it (the parameter, the
// property's schema, is missing, not defaulted), until a person accepts
// it.
func TestUnreadablePartsFailClosed(t *testing.T) {
	const name = "synthetic-problems.yaml"
	m := compile(t, name, "svc", nil)
	for _, tool := range []string{"listPets", "createPet", "listItems", "deleteAllItems", "createTransfer", "getLoop", "getReceipt"} {
		tp := m.Tool(tool)
		if tp == nil || tp.Status.Value != policy.StatusFailsClosed ||
			!slices.ContainsFunc(tp.Unresolved, func(u policy.Unresolved) bool {
				return u.Kind == policy.UnresolvedDocument && u.Fatal && u.Acceptable
			}) {
			t.Fatalf("%s: %+v", tool, tp)
		}
	}
	if u := m.Tool("createPet").Unresolved; !slices.ContainsFunc(u, func(u policy.Unresolved) bool {
		return u.Kind == policy.UnresolvedDocument && slices.Contains(u.Source, "/components/schemas/Pet/properties/owner")
	}) {
		t.Fatalf("createPet lacks the problem of the component its body reaches: %+v", u)
	}
	if u := m.Tool("createAnimal").Unresolved; !slices.ContainsFunc(u, func(u policy.Unresolved) bool {
		return u.Kind == policy.UnresolvedDocument && u.Fatal && slices.Contains(u.Source, "/components/schemas/Dog/properties/collar")
	}) {
		t.Fatalf("createAnimal lacks the problem of the component its body's discriminator maps to: %+v", u)
	}
	accepted := compile(t, name, "svc", map[string]string{"listPets": "q is all we send"})
	if s := accepted.Tool("listPets").Status.Value; s != policy.StatusServable {
		t.Fatalf("listPets accepted: %s", s)
	}
}

// TestUnreadableWSDLPartsFailClosed: a WSDL's problem inside a schema
// component the operation's body reaches — a group that contains itself,
// a type derived from itself, a facet that is no count — is a fatal
// finding of the operation, as an OpenAPI one's is: the part is missing
// from its input, not defaulted.
func TestUnreadableWSDLPartsFailClosed(t *testing.T) {
	m := compile(t, "synthetic-wsdl-problems.wsdl", "svc", nil)
	tp := m.Tool("Op")
	if tp == nil || tp.Status.Value != policy.StatusFailsClosed {
		t.Fatalf("Op: %+v", tp)
	}
	var found []string
	for _, u := range tp.Unresolved {
		if u.Kind == policy.UnresolvedDocument && u.Fatal {
			found = append(found, u.Source...)
		}
	}
	slices.Sort(found)
	if want := []string{"{urn:t}complexType:Self/complexContent/extension", "{urn:t}group:H/sequence/group", "{urn:t}simpleType:Facet/restriction"}; !slices.Equal(found, want) {
		t.Fatalf("Op's document problems %v, want %v", found, want)
	}
}

// TestDeepInputsAreNotWritten: an operation whose input nests deeper than
// an actions file can hold at a cost linear in it is skipped, saying so;
// its neighbour is written.
func TestDeepInputsAreNotWritten(t *testing.T) {
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "synthetic-deep.json"
	accept := map[string]string{"deep": "test", "shallow": "test"}
	out, err := policy.Emit(compile(t, name, "svc", accept), load(t, name).Doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Written, []string{"shallow"}) || len(out.Skipped) != 1 || out.Skipped[0].Tool != "deep" || !strings.Contains(out.Skipped[0].Reason, "nests") {
		t.Fatalf("written %v, skipped %+v", out.Written, out.Skipped)
	}
}

// TestSchemeNamesAnActionsFileCanHold: a scheme whose name an upstream's
// auth cannot take as it is (Bearer-Auth) is written under a name that
// reads the same credential variable the manifest names; two schemes that
// share one variable (AdminKey, adminkey), and one whose name cannot begin
// an auth name (9lives), are not placed — nothing is sent for them, never
// one's credential where the other's goes — and the file config check
// reads has none of them.
func TestSchemeNamesAnActionsFileCanHold(t *testing.T) {
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "synthetic-scheme-names.yaml"
	m := compile(t, name, "svc", nil)
	envs := map[string]string{}
	for _, s := range m.Schemes {
		placed := s.Placement != "" && s.Auth != ""
		if placed != (s.Name == "Bearer-Auth") {
			t.Errorf("scheme %s: placement %q (%s)", s.Name, s.Placement, s.Rule)
		}
		envs[s.Name] = s.Env
	}
	for _, tool := range []string{"getB", "getC", "getD"} {
		if tp := m.Tool(tool); tp == nil || !slices.ContainsFunc(tp.Unresolved, func(u policy.Unresolved) bool { return u.Kind == policy.UnresolvedUnplaceableScheme }) {
			t.Errorf("%s: no unplaceable_scheme finding: %+v", tool, tp)
		}
	}
	out, err := policy.Emit(m, load(t, name).Doc, all, policy.EmitOptions{Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("config check refuses the written file: %v\n%s", err, out.YAML)
	}
	slots := cfg.CredentialSlots()
	if len(slots) != 1 || slots[0].Env != envs["Bearer-Auth"] {
		t.Fatalf("the written file reads %+v, want Bearer-Auth's one credential from %s", slots, envs["Bearer-Auth"])
	}
}

// TestLongIDsSharedStayToolNames: operations sharing an id of 64
// characters, a tool name's most, are told apart by a suffix within those
// 64 — the compiler's manifest passes its own schema (policy explain and
// diff read it) — each name distinct.
func TestLongIDsSharedStayToolNames(t *testing.T) {
	id := strings.Repeat("a", 64)
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: T, version: \"1\"}\npaths:\n")
	for i := range 12 {
		fmt.Fprintf(&b, "  /p%d:\n    get: {operationId: %s, responses: {\"204\": {description: done}}}\n", i, id)
	}
	doc, err := openapi.Parse([]byte(b.String()), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil) // holds the manifest to its schema
	seen := map[string]bool{}
	for _, tp := range m.Tools {
		if len(tp.Name) > 64 || seen[tp.Name] {
			t.Errorf("tool name %q: %d characters, or given twice", tp.Name, len(tp.Name))
		}
		seen[tp.Name] = true
	}
	if len(seen) != 12 || !seen[id] || !seen[id[:62]+"_2"] || !seen[id[:61]+"_12"] {
		t.Errorf("names %v", slices.Sorted(maps.Keys(seen)))
	}
}

// TestSOAPBodyWithoutElementFailsClosed: a document-style input part given
// by type (WS-I Basic Profile R2204) leaves the call no Body element to
// send: its operation fails closed on the document's problem, where it was
// served and --actions wrote an operation of no name, which config check
// refuses.
func TestSOAPBodyWithoutElementFailsClosed(t *testing.T) {
	src := `<?xml version="1.0"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:t" targetNamespace="urn:t" name="T">
  <types><xs:schema targetNamespace="urn:t">
    <xs:complexType name="OrderT"><xs:sequence><xs:element name="id" type="xs:string"/></xs:sequence></xs:complexType>
  </xs:schema></types>
  <message name="In"><part name="order" type="tns:OrderT"/></message>
  <message name="Out"><part name="ok" type="xs:string"/></message>
  <portType name="P"><operation name="GetOrder"><input message="tns:In"/><output message="tns:Out"/></operation></portType>
  <binding name="B" type="tns:P"><soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="GetOrder"><soap:operation soapAction="urn:t#GetOrder"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation></binding>
  <service name="S"><port name="Port" binding="tns:B"><soap:address location="https://example.com/soap"/></port></service>
</definitions>`
	doc, err := wsdl.Parse([]byte(src), "t.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	tp := tool(t, compileDoc(t, doc, nil), "GetOrder")
	if tp.Status.Value != policy.StatusFailsClosed || !slices.ContainsFunc(tp.Unresolved, func(u policy.Unresolved) bool {
		return u.Kind == policy.UnresolvedDocument && u.Fatal && slices.Contains(u.Source, "{urn:t}message:In")
	}) {
		t.Fatalf("GetOrder: %s (%s), findings %+v", tp.Status.Value, tp.Status.Rule, tp.Unresolved)
	}
}

// TestCredentialParameterOfAnotherScheme: a parameter an apiKey scheme
// places is that scheme's credential only where the call presents that
// scheme. Where the operation's requirement names another (oauth here),
// a required X-Api-Key header is no one's to send: it fails the tool
// closed (an agent would have to hold it), where it was dropped from the
// input and the call sent without it; where the key's scheme is the one
// presented, it is placed and not the agent's.
func TestCredentialParameterOfAnotherScheme(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.0.3
info: {title: T, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /a:
    get:
      operationId: getWithOAuth
      security: [{oauth: [things]}]
      parameters: [{name: X-Api-Key, in: header, required: true, schema: {type: string}}]
      responses: {"204": {description: done}}
  /b:
    get:
      operationId: getWithKey
      security: [{key: []}]
      parameters: [{name: X-Api-Key, in: header, required: true, schema: {type: string}}]
      responses: {"204": {description: done}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example", scopes: {things: t}}}}
    key: {type: apiKey, in: header, name: X-Api-Key}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil)
	credential := func(tp *policy.ToolPolicy) *policy.Unresolved {
		return finding(tp, policy.UnresolvedCredentialParameter)
	}
	if tp := tool(t, m, "getWithOAuth"); credential(tp) == nil || !credential(tp).Fatal || tp.Status.Value != policy.StatusFailsClosed {
		t.Errorf("getWithOAuth, needing another scheme's key: %s, findings %+v", tp.Status.Value, tp.Unresolved)
	}
	if tp := tool(t, m, "getWithKey"); credential(tp) != nil {
		t.Errorf("getWithKey, whose key its scheme places: %+v", credential(tp))
	}
}
