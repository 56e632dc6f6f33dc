package policy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/policy/openapi"
	"github.com/orangerail/orangerail/internal/policy/wsdl"
)

func edgeParse(t testing.TB, data []byte) *apidoc.Document {
	t.Helper()
	doc, err := openapi.Parse(data, "api.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func edgeCompile(t testing.TB, doc *apidoc.Document, accept map[string]string) *policy.Manifest {
	t.Helper()
	m, err := policy.Compile(doc, policy.Options{Service: "svc", File: "api.yaml", SHA256: strings.Repeat("0", 64), Accept: accept})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func edgeEmit(t testing.TB, m *policy.Manifest, doc *apidoc.Document, base string) *policy.Emitted {
	t.Helper()
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{BaseURL: base, Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSameInputSameBytes: the same input gives byte-identical output
// (README), also where two definitions' $refs end on the same token (x):
// convert names each $defs entry first come, first named, and allOf, anyOf
// and oneOf were walked in a map's order, so x and x_2 changed places from
// run to run.
func TestSameInputSameBytes(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com"}]
paths:
  /things:
    get:
      operationId: listThings
      parameters:
        - name: q
          in: query
          schema:
            allOf: [{$ref: "#/components/schemas/A/properties/x"}]
            anyOf: [{$ref: "#/components/schemas/B/properties/x"}]
            oneOf: [{$ref: "#/components/schemas/C/properties/x"}]
      responses: {"200": {description: ok}}
components:
  schemas:
    A: {type: object, properties: {x: {type: string, minLength: 1}}}
    B: {type: object, properties: {x: {type: string, maxLength: 9}}}
    C: {type: object, properties: {x: {type: string, pattern: "^a"}}}
`
	var first []byte
	for i := range 30 {
		doc := edgeParse(t, []byte(spec))
		out := edgeEmit(t, edgeCompile(t, doc, nil), doc, "")
		if i == 0 {
			first = out.YAML
			continue
		}
		if !bytes.Equal(first, out.YAML) {
			t.Fatalf("run %d wrote other bytes than run 0:\n%s\n---\n%s", i, first, out.YAML)
		}
	}
}

// TestAnAPIKeyTheLoaderRefusesIsUnplaceable: an apiKey scheme whose name
// the loader refuses — empty, a header name that is no header (a space) or
// a reserved one (Host, Content-Type) — is listed as sending nothing, as
// README says, and the actions file loads: it was placed as written, and
// config check refused the file.
func TestAnAPIKeyTheLoaderRefusesIsUnplaceable(t *testing.T) {
	for _, c := range []struct{ in, name string }{{"header", ""}, {"query", ""}, {"header", "X Api Key"}, {"header", "Host"}, {"header", "Content-Type"}} {
		t.Run(c.in+":"+c.name, func(t *testing.T) {
			spec := fmt.Sprintf(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://api.example.com"}],
"components":{"securitySchemes":{"k":{"type":"apiKey","in":%q,"name":%q}}},"security":[{"k":[]}],
"paths":{"/a":{"get":{"operationId":"getA","responses":{"200":{"description":"ok"}}}}}}`, c.in, c.name)
			d := edgeParse(t, []byte(spec))
			out := edgeEmit(t, edgeCompile(t, d, nil), d, "")
			if _, err := ontology.Parse(out.YAML); err != nil {
				t.Fatalf("the actions file does not load: %v\n%s", err, out.YAML)
			}
		})
	}
}

// TestExportIsReadOnlyOverASafeMethod: a POST named for "export" (or
// "download") is no read: Cloud SQL's sql.instances.export writes a whole
// database to a Cloud Storage URI the caller names, and as a read it ran
// approved by no one. Like resolve and verify, the words read only over a
// safe method.
func TestExportIsReadOnlyOverASafeMethod(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://sqladmin.example.com"}]
security: [{o: [sql.admin]}]
components:
  securitySchemes:
    o: {type: oauth2, flows: {authorizationCode: {authorizationUrl: "https://a.example.com", tokenUrl: "https://t.example.com", scopes: {sql.admin: admin}}}}
paths:
  /v1/projects/{project}/instances/{instance}/export:
    post:
      operationId: sql.instances.export
      parameters:
        - {name: project, in: path, required: true, schema: {type: string}}
        - {name: instance, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {uri: {type: string}}}
      responses: {"200": {description: ok}}
`
	m := edgeCompile(t, edgeParse(t, []byte(spec)), nil)
	tp := m.Tool("sql_instances_export")
	if tp == nil {
		for _, x := range m.Tools {
			tp = &x
		}
	}
	if tp.Risk.Value == ontology.RiskRead || tp.Approval.Value != ontology.ApprovalRequired {
		t.Fatalf("POST %s is %s, approval %s: %s", tp.Operation.ID, tp.Risk.Value, tp.Approval.Value, tp.Risk.Rule)
	}
}

// TestProblemsPerToolAreCapped: a tool lists at most 16 of the
// description's problems that reach it, and counts the rest in one
// finding: listed under every operation that reaches them, a shared
// component's problems made the manifest problems times operations.
func TestProblemsPerToolAreCapped(t *testing.T) {
	props := map[string]any{}
	for i := range 40 {
		props[fmt.Sprintf("f%d", i)] = map[string]any{"$ref": fmt.Sprintf("#/nope/%d", i)}
	}
	data, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "t", "version": "1"},
		"components": map[string]any{"schemas": map[string]any{"B": map[string]any{"type": "object", "properties": props}}},
		"paths": map[string]any{"/p": map[string]any{"get": map[string]any{"operationId": "getP",
			"responses": map[string]any{"200": map[string]any{"description": "ok", "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/B"}}}}}}}},
	})
	m := edgeCompile(t, edgeParse(t, data), nil)
	var listed []policy.Unresolved
	for _, u := range m.Tools[0].Unresolved {
		if u.Kind == policy.UnresolvedDocument {
			listed = append(listed, u)
		}
	}
	if len(listed) != 17 || !strings.HasPrefix(listed[16].Detail, "24 more parts of the description") {
		t.Fatalf("%d problems listed, the last %+v", len(listed), listed[len(listed)-1])
	}
}

// TestOperationsServedElsewhereAreNotWritten: OAS 3 lets a path item or an
// operation name its own servers (Vonage's /account/get-balance is served
// at rest.nexmo.com, the description's first server api.nexmo.com). Such
// an operation was written against the upstream's base, its call and the
// credential sent to a host it is not served at: it is now not written,
// with the reason, unless one of its servers is the base, or --base-url
// names where calls go.
func TestOperationsServedElsewhereAreNotWritten(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com"}]
security: [{k: []}]
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: X-Key}
paths:
  /balance:
    servers: [{url: "https://rest.example.net"}]
    get:
      operationId: getBalance
      responses: {"200": {description: ok}}
  /files:
    get:
      operationId: listFiles
      servers: [{url: "https://files.example.org"}]
      responses: {"200": {description: ok}}
  /both:
    get:
      operationId: getBoth
      servers: [{url: "https://files.example.org"}, {url: "https://api.example.com/"}]
      responses: {"200": {description: ok}}
  /plain:
    get:
      operationId: getPlain
      responses: {"200": {description: ok}}
`
	d := edgeParse(t, []byte(spec))
	m := edgeCompile(t, d, nil)
	out := edgeEmit(t, m, d, "")
	skipped := map[string]string{}
	for _, s := range out.Skipped {
		skipped[s.Tool] = s.Reason
	}
	if !strings.Contains(skipped["getBalance"], "https://rest.example.net") || !strings.Contains(skipped["listFiles"], "https://files.example.org") ||
		!slices.Equal(out.Written, []string{"getBoth", "getPlain"}) {
		t.Fatalf("written %v, skipped %v", out.Written, skipped)
	}
	if _, err := ontology.Parse(out.YAML); err != nil {
		t.Fatal(err)
	}
	if chosen := edgeEmit(t, m, d, "https://rest.example.net"); len(chosen.Written) != 4 {
		t.Fatalf("with --base-url: written %v, skipped %v", chosen.Written, chosen.Skipped)
	}
}

// TestSOAPPortsServedElsewhereAreNotWritten: a WSDL service's ports may
// be on hosts of their own. PayOrder's binding is served at
// payments.example.net, the upstream at orders.example.com, the first
// port's host: its action was written to post the payment to
// https://orders.example.com/soap/pay, a host it is not served at. It is
// now not written, with the reason, unless --base-url names where calls go;
// a port on the upstream's host (over http, where the upstream is its
// https port) is written.
func TestSOAPPortsServedElsewhereAreNotWritten(t *testing.T) {
	element := func(name string) string {
		return `<xs:element name="` + name + `"><xs:complexType><xs:sequence><xs:element name="id" type="xs:string"/></xs:sequence></xs:complexType></xs:element>`
	}
	op := func(name, pt, b string) (string, string, string) {
		return `<message name="` + name + `In"><part name="p" element="tns:` + name + `"/></message>
  <message name="` + name + `Out"><part name="p" element="tns:` + name + `Response"/></message>`,
			`<portType name="` + pt + `"><operation name="` + name + `"><input message="tns:` + name + `In"/><output message="tns:` + name + `Out"/></operation></portType>`,
			`<binding name="` + b + `" type="tns:` + pt + `"><soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="` + name + `"><soap:operation soapAction="urn:t#` + name + `"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation></binding>`
	}
	var msgs, pts, bindings string
	for _, o := range [][3]string{{"GetOrder", "P", "B"}, {"PayOrder", "Q", "C"}, {"ShipOrder", "R", "D"}} {
		m, p, b := op(o[0], o[1], o[2])
		msgs, pts, bindings = msgs+m, pts+p, bindings+b
	}
	src := `<?xml version="1.0"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:t" targetNamespace="urn:t" name="T">
  <types><xs:schema targetNamespace="urn:t" elementFormDefault="qualified">` +
		element("GetOrder") + element("GetOrderResponse") + element("PayOrder") + element("PayOrderResponse") +
		element("ShipOrder") + element("ShipOrderResponse") + `</xs:schema></types>
  ` + msgs + pts + bindings + `
  <service name="S">
    <port name="Orders" binding="tns:B"><soap:address location="https://orders.example.com/soap/orders"/></port>
    <port name="Pay" binding="tns:C"><soap:address location="https://payments.example.net/soap/pay"/></port>
    <port name="Ship" binding="tns:D"><soap:address location="http://orders.example.com/soap/ship"/></port>
  </service>
</definitions>`
	d, err := wsdl.Parse([]byte(src), "t.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	m := edgeCompile(t, d, map[string]string{"PayOrder": "accepted by the test", "ShipOrder": "accepted by the test"})
	out := edgeEmit(t, m, d, "")
	skipped := map[string]string{}
	for _, s := range out.Skipped {
		skipped[s.Tool] = s.Reason
	}
	if !strings.Contains(skipped["PayOrder"], "https://payments.example.net/soap/pay") || !slices.Equal(out.Written, []string{"GetOrder", "ShipOrder"}) {
		t.Fatalf("written %v, skipped %v", out.Written, skipped)
	}
	if _, err := ontology.Parse(out.YAML); err != nil {
		t.Fatal(err)
	}
	if chosen := edgeEmit(t, m, d, "https://payments.example.net/soap/pay"); len(chosen.Written) != 3 {
		t.Fatalf("with --base-url: written %v, skipped %v", chosen.Written, chosen.Skipped)
	}
}

// TestActionsFileBoundedByTheLoader: each action holds its own copy of
// every definition its input reaches, so one large schema shared by many
// operations multiplies: a 71 KB description (a 6,000-value enum under 100
// GETs) made a 12 MB actions file config check refuses. Emit stops as the
// count passes what the loader reads, ErrTooLarge; fewer of the same
// operations fit, and load.
func TestActionsFileBoundedByTheLoader(t *testing.T) {
	enum := make([]string, 6000)
	for i := range enum {
		enum[i] = fmt.Sprintf("v%d", i)
	}
	paths := map[string]any{}
	for i := range 100 {
		paths[fmt.Sprintf("/p%d", i)] = map[string]any{"get": map[string]any{
			"operationId": fmt.Sprintf("getP%d", i),
			"parameters":  []any{map[string]any{"name": "q", "in": "query", "schema": map[string]any{"$ref": "#/components/schemas/E"}}},
			"responses":   map[string]any{"200": map[string]any{"description": "ok"}},
		}}
	}
	data, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "t", "version": "1"},
		"servers":    []any{map[string]any{"url": "https://api.example.com"}},
		"components": map[string]any{"schemas": map[string]any{"E": map[string]any{"type": "string", "enum": enum}}},
		"paths":      paths,
	})
	d := edgeParse(t, data)
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Emit(edgeCompile(t, d, nil), d, all, policy.EmitOptions{}); !errors.Is(err, policy.ErrTooLarge) {
		t.Fatalf("a 6,000-value enum under 100 operations: %v, want ErrTooLarge", err)
	}
	// Ten of them fit, and load.
	ten, err := policy.ParseSelectors([]string{"operation:getP1", "operation:getP2", "operation:getP3", "operation:getP4", "operation:getP5",
		"operation:getP6", "operation:getP7", "operation:getP8", "operation:getP9", "operation:getP10"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(edgeCompile(t, d, nil), d, ten, policy.EmitOptions{})
	if err != nil || len(out.Written) != 10 {
		t.Fatalf("ten operations: %v, %v", out, err)
	}
	if _, err := ontology.Parse(out.YAML); err != nil {
		t.Fatal(err)
	}
}

// TestABodyOfNoSchema: a JSON request body the description gives no
// schema (content: {application/json: {}}) was dropped without a word: a
// required one leaves the operation unwritten, with the reason; an
// optional one is written without it, and a note says so.
func TestABodyOfNoSchema(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com"}]
security: [{k: []}]
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: X-Key}
paths:
  /must:
    post:
      operationId: createMust
      requestBody: {required: true, content: {application/json: {}}}
      responses: {"201": {description: ok}}
  /may:
    post:
      operationId: createMay
      requestBody: {content: {application/json: {}}}
      responses: {"201": {description: ok}}
`
	d := edgeParse(t, []byte(spec))
	// The key's breadth is unknown (scopeless): accepted, as a person would.
	out := edgeEmit(t, edgeCompile(t, d, map[string]string{"createMust": "the key is ours", "createMay": "the key is ours"}), d, "")
	reasons := map[string]string{}
	for _, s := range append(out.Skipped, out.Notes...) {
		reasons[s.Tool] += s.Reason
	}
	if !slices.Equal(out.Written, []string{"createMay"}) || !strings.Contains(reasons["createMust"], "no schema") || !strings.Contains(reasons["createMay"], "never sent") {
		t.Fatalf("written %v, reasons %v", out.Written, reasons)
	}
}
