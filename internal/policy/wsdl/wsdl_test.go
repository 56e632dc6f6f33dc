package wsdl

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// corpus holds the real descriptions the policy compiler is tried on (its
// INDEX.md says where each came from).
const corpus = "../testdata/apispecs"

// testFile is where a test's file is: a real WSDL of the corpus, or one of
// this package's own under testdata.
func testFile(name string) string {
	if _, err := os.Stat(filepath.Join(corpus, name)); err == nil {
		return filepath.Join(corpus, name)
	}
	return filepath.Join("testdata", name)
}

// load reads a test file, failing the test on an error.
func load(t *testing.T, name string) *apidoc.Document {
	t.Helper()
	doc, err := Load(testFile(name))
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return doc
}

// operation finds an operation by ID.
func operation(t *testing.T, doc *apidoc.Document, id string) *apidoc.Operation {
	t.Helper()
	for _, o := range doc.Operations {
		if o.ID == id {
			return o
		}
	}
	t.Fatalf("no operation %q", id)
	return nil
}

// nonNull is the schema a nillable use wraps (AnyOf [shared, null]), or s.
func nonNull(s *apidoc.Schema) *apidoc.Schema {
	if len(s.AnyOf) == 2 && slices.Equal(s.AnyOf[1].Types, []string{"null"}) {
		return s.AnyOf[0]
	}
	return s
}

// prop walks a path of property names, looking through nillable wrappers.
func prop(t *testing.T, s *apidoc.Schema, path ...string) *apidoc.Schema {
	t.Helper()
	for _, name := range path {
		next := nonNull(s).Property(name)
		if next == nil {
			var have []string
			for _, p := range nonNull(s).Properties {
				have = append(have, p.Name)
			}
			t.Fatalf("no property %q in %s (has %v)", name, s.Source, have)
		}
		s = next
	}
	return s
}

func names(s *apidoc.Schema) []string {
	var out []string
	for _, p := range nonNull(s).Properties {
		out = append(out, p.Name)
	}
	return out
}

// problem reports whether the document has a problem whose source and
// message contain the given texts.
func problem(doc *apidoc.Document, source, message string) bool {
	for _, p := range doc.Problems {
		if strings.Contains(p.Source, source) && strings.Contains(p.Message, message) {
			return true
		}
	}
	return false
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, title, server string
		ops                 int
	}{
		{"atlassian-crowd-securityserver.wsdl", "SecurityServer", "http://magnesium:8095/crowd/services/SecurityServer", 47},
		{"atlassian-jira-soap.wsdl", "JiraSoapServiceService", "https://jira.atlassian.com/rpc/soap/jirasoapservice-v2", 113},
		{"taxcloud-taxcloud.wsdl", "TaxCloud", "https://api.taxcloud.net/1.0/TaxCloud.asmx", 13},
		{"cdyne-emailverification.wsdl", "EmailVerNoTestEmail", "http://ws.cdyne.com/emailverify/Emailvernotestemail.asmx", 4},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			doc := load(t, tc.file)
			if doc.Format != apidoc.WSDL || doc.Version != "1.1" || doc.Title != tc.title {
				t.Errorf("format %q version %q title %q", doc.Format, doc.Version, doc.Title)
			}
			if len(doc.Servers) != 1 || doc.Servers[0].URL != tc.server || !strings.Contains(doc.Servers[0].Source, "}service:"+tc.title+"/port:") {
				t.Errorf("servers %+v", doc.Servers)
			}
			if doc.Schemes == nil || len(doc.Schemes) != 0 {
				t.Errorf("schemes %v, want an empty map", doc.Schemes)
			}
			if len(doc.Operations) != tc.ops {
				t.Fatalf("%d operations, want %d", len(doc.Operations), tc.ops)
			}
			seen := map[string]bool{}
			for _, o := range doc.Operations {
				if seen[o.ID] {
					t.Errorf("operation %q twice", o.ID)
				}
				seen[o.ID] = true
				if o.Security != nil || o.SOAP == nil || o.Body == nil || o.Body.Schema == nil || !o.Body.Required {
					t.Errorf("%s: security %v soap %v body %v", o.ID, o.Security, o.SOAP, o.Body)
					continue
				}
				if !strings.HasSuffix(o.Source, "}"+o.SOAP.Binding+"/"+o.ID) || o.SOAP.Address != tc.server || o.SOAP.Element == "" {
					t.Errorf("%s: source %q soap %+v", o.ID, o.Source, o.SOAP)
				}
				if len(o.Responses) == 0 || o.Responses[0].Status != "200" {
					t.Errorf("%s: responses %v", o.ID, o.Responses)
				}
			}
			// The same bytes give the same document.
			if again := load(t, tc.file); !reflect.DeepEqual(doc, again) {
				t.Error("two loads of the same file differ")
			}
		})
	}
}

func TestCrowdDocumentLiteral(t *testing.T) {
	t.Parallel()
	doc := load(t, "atlassian-crowd-securityserver.wsdl")
	if len(doc.Problems) != 0 {
		t.Errorf("problems: %v", doc.Problems)
	}
	add := operation(t, doc, "addPrincipal")
	want := apidoc.SOAPBinding{Version: "1.1", Style: "document", Use: "literal", Binding: "SecurityServerHttpBinding",
		Port: "SecurityServerHttpPort", Address: "http://magnesium:8095/crowd/services/SecurityServer",
		Namespace: "urn:SecurityServer", Element: "addPrincipal"}
	if !reflect.DeepEqual(*add.SOAP, want) {
		t.Errorf("soap %+v\nwant %+v", *add.SOAP, want)
	}
	if add.Source != "{urn:SecurityServer}SecurityServerHttpBinding/addPrincipal" || add.Body.MediaType != "text/xml" {
		t.Errorf("source %q media %q", add.Source, add.Body.MediaType)
	}
	body := add.Body.Schema
	if body.Source != "{urn:SecurityServer}element:addPrincipal" || !slices.Equal(names(body), []string{"in0", "in1", "in2"}) {
		t.Fatalf("body %s %v", body.Source, names(body))
	}
	cred := prop(t, body, "in2")
	if !slices.Contains(cred.AnyOf[1].Types, "null") {
		t.Errorf("in2 is nillable: %+v", cred)
	}
	pc := nonNull(cred)
	if pc.Ref != "{http://authentication.integration.crowd.atlassian.com}complexType:PasswordCredential" || !slices.Equal(pc.Types, []string{"object"}) {
		t.Errorf("in2 is %q %v", pc.Ref, pc.Types)
	}
	if got := prop(t, pc, "credential").Types; !slices.Equal(got, []string{"string", "null"}) {
		t.Errorf("credential types %v", got)
	}
	if got := prop(t, pc, "encryptedCredential"); !slices.Equal(got.Types, []string{"boolean"}) ||
		got.Source != pc.Source+"/sequence/element:encryptedCredential" {
		t.Errorf("encryptedCredential %+v", got)
	}
	if len(pc.Required) != 0 || !slices.Equal(body.Required, []string{"in0", "in1", "in2"}) {
		t.Errorf("required %v / %v", pc.Required, body.Required)
	}
	var faults []string
	for _, r := range add.Responses[1:] {
		if r.Status != "500" {
			t.Errorf("fault status %q", r.Status)
		}
		faults = append(faults, r.Description)
	}
	if !slices.Equal(faults, []string{"InvalidUserException", "InvalidAuthorizationTokenException", "ApplicationPermissionException", "InvalidCredentialException", "RemoteException"}) {
		t.Errorf("faults %v", faults)
	}
	auth := operation(t, doc, "authenticatePrincipal")
	if got := names(auth.Responses[0].Schema); !slices.Equal(got, []string{"out"}) {
		t.Errorf("authenticatePrincipal returns %v", got)
	}
	// The same named type is one schema wherever it is used.
	tok := nonNull(prop(t, auth.Body.Schema, "in0"))
	if tok != nonNull(prop(t, body, "in0")) || !slices.Equal(names(tok), []string{"name", "token"}) {
		t.Error("AuthenticatedToken is not shared")
	}
	// A repeated element is an array of its type.
	arr := prop(t, nonNull(prop(t, operation(t, doc, "findAllGroupRelationships").Responses[0].Schema, "out")), "SOAPNestableGroup")
	if !slices.Equal(arr.Types, []string{"array"}) || arr.Items == nil {
		t.Errorf("SOAPNestableGroup %+v", arr)
	}
}

func TestJiraRPCEncoded(t *testing.T) {
	t.Parallel()
	doc := load(t, "atlassian-jira-soap.wsdl")
	if len(doc.Problems) != 0 {
		t.Errorf("problems: %v", doc.Problems)
	}
	login := operation(t, doc, "login")
	if s := login.SOAP; s.Style != "rpc" || s.Use != "encoded" || s.Namespace != "http://soap.rpc.jira.atlassian.com" || s.Element != "login" {
		t.Errorf("soap %+v", *s)
	}
	body := login.Body.Schema
	const ns = "{https://jira.atlassian.com/rpc/soap/jirasoapservice-v2}"
	if body.Source != ns+"message:loginRequest" || !slices.Equal(names(body), []string{"in0", "in1"}) || !slices.Equal(body.Required, []string{"in0", "in1"}) {
		t.Fatalf("body %s %v required %v", body.Source, names(body), body.Required)
	}
	if in1 := prop(t, body, "in1"); !slices.Equal(in1.Types, []string{"string"}) || in1.Source != ns+"message:loginRequest/part:in1" {
		t.Errorf("in1 %+v", in1)
	}
	if got := names(login.Responses[0].Schema); !slices.Equal(got, []string{"loginReturn"}) {
		t.Errorf("login returns %v", got)
	}
	if got := names(operation(t, doc, "createUser").Body.Schema); !slices.Equal(got, []string{"in0", "in1", "in2", "in3", "in4"}) {
		t.Errorf("createUser takes %v", got)
	}
	// soapenc arrays: ArrayOf_xsd_string is an array of strings.
	names := prop(t, operation(t, doc, "addAttachmentsToIssue").Body.Schema, "in2")
	if !slices.Equal(names.Types, []string{"array"}) || names.Items == nil || !slices.Equal(names.Items.Types, []string{"string"}) || names.Ref != ns+"complexType:ArrayOf_xsd_string" {
		t.Errorf("ArrayOf_xsd_string %+v", names)
	}
	// Its wsdl:arrayType is xsd:byte[][]: an array of arrays of integers.
	if b := prop(t, operation(t, doc, "addAttachmentsToIssue").Body.Schema, "in3"); b.Items == nil || !slices.Equal(b.Items.Types, []string{"array"}) ||
		b.Items.Items == nil || !slices.Equal(b.Items.Items.Types, []string{"integer"}) {
		t.Errorf("ArrayOf_xsd_base64Binary %+v", b)
	}
	// An extension has its base's properties before its own.
	user := prop(t, operation(t, doc, "createGroup").Body.Schema, "in2")
	if !slices.Equal(nonNull(user).Types, []string{"object"}) || !slices.Equal(namesOf(user), []string{"email", "fullname", "name"}) {
		t.Errorf("RemoteUser %v", namesOf(user))
	}
	issue := prop(t, operation(t, doc, "getIssue").Responses[0].Schema, "getIssueReturn")
	if created := prop(t, issue, "created"); created.Format != "date-time" {
		t.Errorf("created %+v", created)
	}
}

func namesOf(s *apidoc.Schema) []string { return names(s) }

func TestTaxCloudChoosesSOAP11(t *testing.T) {
	t.Parallel()
	doc := load(t, "taxcloud-taxcloud.wsdl")
	for _, o := range doc.Operations {
		if o.SOAP.Version != "1.1" || o.SOAP.Binding != "TaxCloudSoap" || !slices.Equal(o.SOAP.Others, []string{"TaxCloudSoap12"}) {
			t.Errorf("%s: %+v", o.ID, *o.SOAP)
		}
	}
	lookup := operation(t, doc, "Lookup")
	if lookup.SOAP.Action != "http://taxcloud.net/Lookup" || lookup.SOAP.Namespace != "http://taxcloud.net" || lookup.SOAP.Element != "Lookup" {
		t.Errorf("soap %+v", *lookup.SOAP)
	}
	for _, name := range []string{"apiLoginID", "apiKey"} {
		if p := prop(t, lookup.Body.Schema, name); !slices.Equal(p.Types, []string{"string"}) {
			t.Errorf("%s %+v", name, p)
		}
	}
	if !slices.Equal(lookup.Body.Schema.Required, []string{"deliveredBySeller"}) {
		t.Errorf("required %v", lookup.Body.Schema.Required)
	}
	if got := names(lookup.Responses[0].Schema); !slices.Equal(got, []string{"LookupResult"}) {
		t.Errorf("Lookup returns %v", got)
	}
	msgType := prop(t, lookup.Responses[0].Schema, "LookupResult", "ResponseType")
	if !reflect.DeepEqual(msgType.Enum, []any{"Error", "Warning", "Informational", "OK"}) {
		t.Errorf("MessageType enum %v", msgType.Enum)
	}
	// An extension of Address adds its own elements after the base's.
	verified := prop(t, operation(t, doc, "VerifyAddress").Responses[0].Schema, "VerifyAddressResult")
	if got := names(verified); len(got) < 2 || got[0] != "Address1" {
		t.Errorf("VerifiedAddress %v", got)
	}
}

func TestCDYNEListsHTTPBindings(t *testing.T) {
	t.Parallel()
	doc := load(t, "cdyne-emailverification.wsdl")
	var ids []string
	for _, o := range doc.Operations {
		ids = append(ids, o.ID)
		if o.SOAP.Binding != "EmailVerNoTestEmailSoap" || !slices.Equal(o.SOAP.Others,
			[]string{"EmailVerNoTestEmailSoap12", "EmailVerNoTestEmailHttpGet", "EmailVerNoTestEmailHttpPost"}) {
			t.Errorf("%s: %+v", o.ID, *o.SOAP)
		}
	}
	if !slices.Equal(ids, []string{"VerifyMXRecord", "AdvancedVerifyEmail", "VerifyEmail", "ReturnCodes"}) {
		t.Errorf("operations %v", ids)
	}
	adv := operation(t, doc, "AdvancedVerifyEmail")
	if got := prop(t, adv.Body.Schema, "timeout"); !slices.Equal(got.Types, []string{"integer"}) || !slices.Equal(adv.Body.Schema.Required, []string{"timeout"}) {
		t.Errorf("timeout %+v required %v", got, adv.Body.Schema.Required)
	}
	if !strings.HasPrefix(adv.Summary, "This function will verify an email address") || !strings.HasSuffix(adv.Summary, ".") || len(adv.Description) <= len(adv.Summary) {
		t.Errorf("summary %q", adv.Summary)
	}
	codes := prop(t, operation(t, doc, "ReturnCodes").Responses[0].Schema, "ReturnCodesResult", "anyType")
	if !slices.Equal(codes.Types, []string{"array"}) || codes.Items == nil || len(codes.Items.Types) != 0 {
		t.Errorf("anyType %+v", codes)
	}
	if !problem(doc, "{http://ws.cdyne.com/}complexType:ArrayOfAnyType/sequence/element:anyType", "any content") {
		t.Errorf("no problem for anyType: %v", doc.Problems)
	}
}

func TestSynthetic(t *testing.T) {
	t.Parallel()
	doc := load(t, "synthetic.wsdl")
	if doc.Title != "Shop" || len(doc.Servers) != 2 || doc.Servers[0].URL != "https://shop.example/soap12" {
		t.Errorf("title %q servers %+v", doc.Title, doc.Servers)
	}
	if len(doc.Operations) != 2 {
		t.Fatalf("%d operations", len(doc.Operations))
	}
	buy := doc.Operations[0]
	// SOAP 1.1 is chosen though its 1.2 twin is written first.
	want := apidoc.SOAPBinding{Version: "1.1", Style: "document", Use: "literal", Action: "urn:svc#Buy", Binding: "ShopSoap",
		Port: "ShopSoapPort", Address: "https://shop.example/soap", Namespace: "urn:wrong", Element: "Req", Others: []string{"ShopSoap12"}}
	if buy.ID != "Buy" || !reflect.DeepEqual(*buy.SOAP, want) || buy.Source != "{urn:svc}ShopSoap/Buy" {
		t.Errorf("%s %s %+v", buy.ID, buy.Source, *buy.SOAP)
	}
	if buy.Summary != "Buy an item." || buy.Description != "Buy an item. It is charged at once." {
		t.Errorf("summary %q description %q", buy.Summary, buy.Description)
	}
	body := buy.Body.Schema
	// Prefixes resolve in the scope they are written in.
	if got := names(prop(t, body, "right")); !slices.Equal(got, []string{"sku", "price", "link", "blob", "day", "tags"}) {
		t.Errorf("right is %v", got)
	}
	if got := names(prop(t, body, "wrong")); !slices.Equal(got, []string{"decoy"}) {
		t.Errorf("wrong is %v", got)
	}
	right := prop(t, body, "right")
	for name, format := range map[string]string{"link": "uri", "blob": "byte", "day": "date"} {
		if p := prop(t, right, name); p.Format != format || !slices.Equal(p.Types, []string{"string"}) {
			t.Errorf("%s %+v", name, p)
		}
	}
	if tags := prop(t, right, "tags"); tags.MaxItems == nil || *tags.MaxItems != 5 || tags.Items.Types[0] != "string" {
		t.Errorf("tags %+v", tags)
	}
	if p := prop(t, right, "price"); !slices.Equal(p.Types, []string{"number"}) {
		t.Errorf("price %+v", p)
	}
	if p := prop(t, body, "when"); p.Format != "date-time" {
		t.Errorf("when %+v", p)
	}
	if p := prop(t, body, "count"); !slices.Equal(p.Types, []string{"integer"}) || p.Minimum == nil || *p.Minimum != 0 {
		t.Errorf("count %+v", p)
	}
	if !slices.Equal(body.Required, []string{"when", "right", "wrong", "ghost"}) {
		t.Errorf("required %v", body.Required)
	}
	if buy.Body.MediaType != "text/xml" || buy.Responses[1].Status != "500" || buy.Responses[1].Description != "OutOfStock" {
		t.Errorf("media %q responses %+v", buy.Body.MediaType, buy.Responses)
	}
	ping := doc.Operations[1]
	if ping.ID != "Ping" || len(ping.Responses) != 0 || ping.SOAP.Element != "" {
		t.Errorf("ping %+v %+v", ping, ping.SOAP)
	}
	for _, p := range []struct{ source, message string }{
		{"{urn:wrong}element:Req/sequence/element:ghost", "type {urn:wrong}Missing is not declared"},
		{"{urn:svc}message:RespOut/part:parameters", "element {urn:svc}NoSuchElement is not declared"},
		{"{urn:svc}message:Broken/part:nothing", "neither an element nor a type"},
		{"{urn:svc}message:Empty", "names no part"},
		{"{urn:svc}binding:ShopJms", "is not HTTP"},
		{"{urn:svc}ShopSoap/Buy", "input's SOAP header (message tns:Auth, part token) is not read"},
	} {
		if !problem(doc, p.source, p.message) {
			t.Errorf("no problem %q at %s in %v", p.message, p.source, doc.Problems)
		}
	}
}

// loadWithin fails the test when Load does not return in time: a cycle
// that is followed instead of shared would never return.
func loadWithin(t *testing.T, file string) *apidoc.Document {
	t.Helper()
	type result struct {
		doc *apidoc.Document
		err error
	}
	done := make(chan result, 1)
	go func() {
		doc, err := Load(file)
		done <- result{doc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.doc
	case <-time.After(20 * time.Second):
		t.Fatal("Load did not return: a cycle is followed")
		return nil
	}
}

func TestCyclesTerminate(t *testing.T) {
	t.Parallel()
	doc := loadWithin(t, filepath.Join("testdata", "recursive.wsdl"))
	put := operation(t, doc, "PutNode")
	node := put.Body.Schema
	// The element that contains itself is one schema, its own item.
	if self := prop(t, node, "Node"); self.Items != node || node.Ref != "{urn:recursive}element:Node" {
		t.Errorf("Node's Node is %+v", self)
	}
	plant := operation(t, doc, "Plant")
	if plant.Responses[0].Schema != node {
		t.Error("the output's Node is not the shared element schema")
	}
	tree := prop(t, plant.Body.Schema, "tree")
	if tree.Ref != "{urn:recursive}complexType:Tree" {
		t.Fatalf("tree ref %q", tree.Ref)
	}
	if prop(t, tree, "children").Items != tree || nonNull(prop(t, tree, "parent")) != tree {
		t.Error("Tree's children and parent are not Tree")
	}
	if prop(t, tree, "forest", "trees").Items != tree {
		t.Error("Forest's trees are not Tree")
	}
	if !problem(doc, "{urn:recursive}complexType:Loop", "derives from itself") {
		t.Errorf("no problem for the extension cycle: %v", doc.Problems)
	}
}

func TestImportsBesideTheFile(t *testing.T) {
	t.Parallel()
	doc := load(t, filepath.Join("imports", "service.wsdl"))
	open := operation(t, doc, "Open")
	if open.SOAP.Namespace != "urn:imports:types" || open.SOAP.Element != "Open" {
		t.Errorf("soap %+v", *open.SOAP)
	}
	if got := names(open.Body.Schema); !slices.Equal(got, []string{"owner", "currency"}) {
		t.Errorf("body %v", got)
	}
	if cur := prop(t, open.Body.Schema, "currency"); !reflect.DeepEqual(cur.Enum, []any{"EUR", "USD"}) {
		t.Errorf("currency from the chameleon include: %+v", cur)
	}
	if got := names(open.Responses[0].Schema); !slices.Equal(got, []string{"accountId"}) {
		t.Errorf("output %v", got)
	}
	for _, p := range []struct{ source, message string }{
		{"import:urn:remote", "not fetched"},
		{"import:/etc/absolute.xsd", "absolute path"},
		{"import:../recursive.wsdl", "outside the document's directory"},
		{"import:file:///etc/hostname", "not a relative path"},
	} {
		if !problem(doc, p.source, p.message) {
			t.Errorf("no problem %q at %s in %v", p.message, p.source, doc.Problems)
		}
	}
	// Parse reads no file: the same bytes give Problems instead.
	data, err := os.ReadFile(filepath.Join("testdata", "imports", "service.wsdl"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(data, "service.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	if !problem(parsed, "import:urn:imports", "Parse reads no files") || !problem(parsed, "", "message {urn:imports}OpenIn is not declared") {
		t.Errorf("parse problems %v", parsed.Problems)
	}
}

func TestRemoteImportIsNotFetched(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `<schema xmlns="http://www.w3.org/2001/XMLSchema"/>`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	wsdl := fmt.Sprintf(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" targetNamespace="urn:r">
  <import namespace="urn:r2" location="%[1]s/defs.wsdl"/>
  <types><xsd:schema targetNamespace="urn:r"><xsd:import namespace="urn:r3" schemaLocation="%[1]s/types.xsd"/></xsd:schema></types>
</definitions>`, srv.URL)
	file := filepath.Join(dir, "remote.wsdl")
	if err := os.WriteFile(file, []byte(wsdl), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 0 {
		t.Errorf("the loader fetched %d URLs", hits.Load())
	}
	if !problem(doc, "{urn:r}import:urn:r2", "not fetched") || !problem(doc, "{urn:r}import:"+srv.URL+"/types.xsd", "not fetched") {
		t.Errorf("problems %v", doc.Problems)
	}
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	crowd, err := os.ReadFile(testFile("atlassian-crowd-securityserver.wsdl"))
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("<a>", maxDepth+1) + strings.Repeat("</a>", maxDepth+1)
	for _, tc := range []struct {
		name, data string
		want       error
	}{
		{"empty", "", ErrMalformed},
		{"text", "this is not XML", ErrMalformed},
		{"truncated", string(crowd[:len(crowd)/2]), ErrMalformed},
		{"mismatched", `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"><types></message></definitions>`, ErrMalformed},
		{"two roots", `<a/><b/>`, ErrMalformed},
		{"xsd", `<schema xmlns="http://www.w3.org/2001/XMLSchema"/>`, ErrNotWSDL},
		{"wsdl 2.0", `<description xmlns="http://www.w3.org/ns/wsdl"/>`, ErrNotWSDL},
		{"no namespace", `<definitions/>`, ErrNotWSDL},
		{"encoding", `<?xml version="1.0" encoding="EBCDIC"?><definitions/>`, ErrMalformed},
		{"deep", deep, ErrTooLarge},
	} {
		doc, err := Parse([]byte(tc.data), tc.name)
		if !errors.Is(err, tc.want) || doc != nil {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join("testdata", "no-such.wsdl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// chain is a document whose operation's element is the head of a chain of
// n named types, each holding the next.
func chain(n int) []byte {
	var b strings.Builder
	b.WriteString(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" ` +
		`xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:c" targetNamespace="urn:c"><types><xs:schema targetNamespace="urn:c">`)
	b.WriteString(`<xs:element name="Head" type="tns:T0"/>`)
	for i := range n {
		fmt.Fprintf(&b, `<xs:complexType name="T%d"><xs:sequence><xs:element name="next" type="tns:T%d" minOccurs="0"/></xs:sequence></xs:complexType>`, i, i+1)
	}
	fmt.Fprintf(&b, `<xs:complexType name="T%d"/>`, n)
	b.WriteString(`</xs:schema></types><message name="In"><part name="p" element="tns:Head"/></message>` +
		`<portType name="P"><operation name="Op"><input message="tns:In"/></operation></portType>` +
		`<binding name="B" type="tns:P"><soap:binding transport="http://schemas.xmlsoap.org/soap/http"/><operation name="Op"/></binding></definitions>`)
	return []byte(b.String())
}

func TestTypeChainIsBounded(t *testing.T) {
	t.Parallel()
	doc, err := Parse(chain(maxNest-1), "short.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Operations[0].Body.Schema
	depth := 0
	for ; s.Property("next") != nil; s = s.Property("next") {
		depth++
	}
	if depth != maxNest-1 {
		t.Errorf("depth %d", depth)
	}
	if _, err := Parse(chain(maxNest+1), "long.wsdl"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a chain past the bound: %v", err)
	}
}

// extensions is a document whose element's type extends a chain of n
// types, each adding width elements to its base's.
func extensions(n, width int) []byte {
	var b strings.Builder
	b.WriteString(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" ` +
		`xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:c" targetNamespace="urn:c"><types><xs:schema targetNamespace="urn:c">`)
	fmt.Fprintf(&b, `<xs:element name="Head" type="tns:T%d"/><xs:complexType name="T0"/>`, n)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `<xs:complexType name="T%d"><xs:complexContent><xs:extension base="tns:T%d"><xs:sequence>`, i, i-1)
		for j := range width {
			fmt.Fprintf(&b, `<xs:element name="f%d_%d" type="xs:string"/>`, i, j)
		}
		b.WriteString(`</xs:sequence></xs:extension></xs:complexContent></xs:complexType>`)
	}
	b.WriteString(`</xs:schema></types><message name="In"><part name="p" element="tns:Head"/></message>` +
		`<portType name="P"><operation name="Op"><input message="tns:In"/></operation></portType>` +
		`<binding name="B" type="tns:P"><soap:binding transport="http://schemas.xmlsoap.org/soap/http"/><operation name="Op"/></binding></definitions>`)
	return []byte(b.String())
}

func TestExtensionChainIsBounded(t *testing.T) {
	t.Parallel()
	doc, err := Parse(extensions(10, 3), "short.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(doc.Operations[0].Body.Schema); len(got) != 30 || got[0] != "f1_0" || got[29] != "f10_2" {
		t.Errorf("properties %v", got)
	}
	// Each level copies its base's properties: 500 levels of 20 make
	// 2.5 million copies, past the bound.
	if _, err := Parse(extensions(500, 20), "wide.wsdl"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a chain past the bound: %v", err)
	}
}

func TestLatin1(t *testing.T) {
	t.Parallel()
	data := []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<definitions xmlns=\"http://schemas.xmlsoap.org/wsdl/\" name=\"Caf\xe9\"/>")
	doc, err := Parse(data, "latin1.wsdl")
	if err != nil || doc.Title != "Café" {
		t.Fatalf("%v %+v", err, doc)
	}
}

// FuzzParse: the corpus seeds are large, and minimizing a large new input
// takes the fuzzer's default minute each time, which looks like a stall;
// run it with -fuzzminimizetime 1s.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"atlassian-crowd-securityserver.wsdl", "atlassian-jira-soap.wsdl", "taxcloud-taxcloud.wsdl",
		"cdyne-emailverification.wsdl", "recursive.wsdl", "synthetic.wsdl", "imports/service.wsdl"} {
		data, err := os.ReadFile(testFile(name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data, "fuzz.wsdl")
		if err != nil {
			if doc != nil {
				t.Fatal("a document and an error")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotWSDL) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("an error of no known kind: %v", err)
			}
			return
		}
		for _, o := range doc.Operations {
			if o.SOAP == nil || o.Source == "" {
				t.Fatalf("operation %+v", o)
			}
		}
	})
}

// TestNamespaceScopes: a prefix resolves to its nearest declaration — an
// element's own over its ancestors', a sibling's never — and a file that
// declares many prefixes and redeclares one on each of many elements is
// read in memory proportional to it: each element kept a copy of every
// declaration in scope, and 126 KB of such a file held 823 MB.
func TestNamespaceScopes(t *testing.T) {
	var dc decoder
	root, err := dc.parse([]byte(`<r xmlns="urn:default" xmlns:a="urn:a1"><x xmlns:a="urn:a2"><y/></x><z/></r>`))
	if err != nil {
		t.Fatal(err)
	}
	x, z := root.children[0], root.children[1]
	y := x.children[0]
	for _, c := range []struct {
		n    *node
		v    string
		want string
	}{{y, "a:T", "urn:a2"}, {x, "a:T", "urn:a2"}, {z, "a:T", "urn:a1"}, {root, "a:T", "urn:a1"}, {y, "T", "urn:default"}} {
		if got, ok := c.n.qname(c.v); !ok || got.Space != c.want || got.Local != "T" {
			t.Errorf("%s on <%s>: %v %v, want %s", c.v, c.n.name.Local, got, ok, c.want)
		}
	}
	if _, ok := y.qname("b:T"); ok {
		t.Error("an undeclared prefix resolved")
	}

	var b strings.Builder
	b.WriteString(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"`)
	for i := range 2000 {
		fmt.Fprintf(&b, ` xmlns:p%d="urn:x%d"`, i, i)
	}
	b.WriteString(`>`)
	for range 5000 {
		b.WriteString(`<x xmlns:z="u"/>`)
	}
	b.WriteString(`</definitions>`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := (&decoder{}).parse([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// The bound is the allocation's order, not its exact size: about 3 MB
	// read in scopes of their own; a copy per element is some 800 MB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("reading %d bytes allocated %d MB", b.Len(), alloc>>20)
	}
}

// TestSpecialFileIsNotOpened: an import naming a FIFO beside the file is
// a problem, read without opening it, where opening it waited for a
// writer for ever.
func TestSpecialFileIsNotOpened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.xsd"), 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	wsdl := `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" targetNamespace="urn:x"><import namespace="urn:y" location="pipe.xsd"/></definitions>`
	if err := os.WriteFile(filepath.Join(dir, "service.wsdl"), []byte(wsdl), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan *apidoc.Document, 1)
	go func() {
		doc, err := Load(filepath.Join(dir, "service.wsdl"))
		if err != nil {
			t.Error(err)
		}
		done <- doc
	}()
	select {
	case doc := <-done:
		if doc != nil && !problem(doc, "{urn:x}import:urn:y", "pipe.xsd is not a regular file") {
			t.Errorf("problems %v", doc.Problems)
		}
	case <-time.After(time.Minute):
		t.Fatal("the import of a FIFO is still being read")
	}
}

// TestOccurrences: an element that may not appear (maxOccurs 0) is no
// property; one whose maxOccurs is neither a count nor unbounded is a
// problem at it, read as a list.
func TestOccurrences(t *testing.T) {
	t.Parallel()
	doc, err := Parse([]byte(`<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" `+
		`xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:o" targetNamespace="urn:o"><types><xs:schema targetNamespace="urn:o">`+
		`<xs:element name="Req"><xs:complexType><xs:sequence><xs:element name="never" type="xs:string" maxOccurs="0"/>`+
		`<xs:element name="odd" type="xs:string" maxOccurs="-1"/><xs:element name="two" type="xs:string" maxOccurs="2"/>`+
		`</xs:sequence></xs:complexType></xs:element></xs:schema></types><message name="In"><part name="p" element="tns:Req"/></message>`+
		`<portType name="P"><operation name="Op"><input message="tns:In"/></operation></portType>`+
		`<binding name="B" type="tns:P"><soap:binding transport="http://schemas.xmlsoap.org/soap/http"/><operation name="Op"/></binding></definitions>`), "o.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Operations[0].Body.Schema
	if got := names(s); !slices.Equal(got, []string{"odd", "two"}) {
		t.Fatalf("properties %v", got)
	}
	if two := prop(t, s, "two"); two.MaxItems == nil || *two.MaxItems != 2 {
		t.Errorf("two: %+v", two)
	}
	if !problem(doc, "{urn:o}element:Req/sequence/element:odd", `maxOccurs "-1"`) {
		t.Errorf("problems %v", doc.Problems)
	}
}

// TestDocumentPartByType: a document-style input whose part is given by
// type names no element for the SOAP Body a call sends (WS-I Basic Profile
// R2204): a problem at its message, which the compiler fails the
// operation closed on; an output's or a fault's part by type is only read,
// and no problem.
func TestDocumentPartByType(t *testing.T) {
	src := `<?xml version="1.0"?>
<definitions xmlns="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:tns="urn:t" targetNamespace="urn:t" name="T">
  <types><xs:schema targetNamespace="urn:t">
    <xs:complexType name="OrderT"><xs:sequence><xs:element name="id" type="xs:string"/></xs:sequence></xs:complexType>
    <xs:element name="Ping" type="xs:string"/>
  </xs:schema></types>
  <message name="In"><part name="order" type="tns:OrderT"/></message>
  <message name="PingIn"><part name="ping" element="tns:Ping"/></message>
  <message name="Out"><part name="ok" type="xs:string"/></message>
  <portType name="P">
    <operation name="PlaceOrder"><input message="tns:In"/><output message="tns:Out"/></operation>
    <operation name="Ping"><input message="tns:PingIn"/><output message="tns:Out"/></operation>
  </portType>
  <binding name="B" type="tns:P"><soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <operation name="PlaceOrder"><soap:operation soapAction="urn:t#PlaceOrder"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation>
    <operation name="Ping"><soap:operation soapAction="urn:t#Ping"/>
      <input><soap:body use="literal"/></input><output><soap:body use="literal"/></output></operation></binding>
  <service name="S"><port name="Port" binding="tns:B"><soap:address location="https://example.com/soap"/></port></service>
</definitions>`
	doc, err := Parse([]byte(src), "t.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Problems) != 1 || doc.Problems[0].Source != "{urn:t}message:In" || !strings.Contains(doc.Problems[0].Message, "R2204") {
		t.Fatalf("problems %v, want one at {urn:t}message:In", doc.Problems)
	}
	if s := operation(t, doc, "Ping").SOAP; s.Namespace != "urn:t" || s.Element != "Ping" {
		t.Errorf("Ping sends {%s}%s", s.Namespace, s.Element)
	}
}
