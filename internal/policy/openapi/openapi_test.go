package openapi_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// corpus is the policy compiler's directory of real API descriptions
// (INDEX.md there says where each came from and what it exercises).
const corpus = "../testdata/apispecs"

// parseFile reads a file under dir and parses it with dir as the
// directory its $refs may read.
func parseFile(t testing.TB, dir, name string) (*apidoc.Document, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return openapi.Parse(data, name, os.DirFS(dir))
}

func mustParse(t testing.TB, dir, name string) *apidoc.Document {
	t.Helper()
	doc, err := parseFile(t, dir, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

func op(t testing.TB, doc *apidoc.Document, id string) *apidoc.Operation {
	t.Helper()
	for _, o := range doc.Operations {
		if o.ID == id {
			return o
		}
	}
	t.Fatalf("no operation %q", id)
	return nil
}

func param(t testing.TB, o *apidoc.Operation, in, name string) *apidoc.Parameter {
	t.Helper()
	for _, p := range o.Parameters {
		if p.In == in && p.Name == name {
			return p
		}
	}
	t.Fatalf("%s: no %s parameter %q", o.ID, in, name)
	return nil
}

func response(t testing.TB, o *apidoc.Operation, status string) *apidoc.Response {
	t.Helper()
	for _, r := range o.Responses {
		if r.Status == status {
			return r
		}
	}
	t.Fatalf("%s: no response %q", o.ID, status)
	return nil
}

func prop(t testing.TB, s *apidoc.Schema, names ...string) *apidoc.Schema {
	t.Helper()
	for _, n := range names {
		if s == nil {
			t.Fatalf("no schema to find %q in", n)
		}
		next := s.Property(n)
		if next == nil {
			t.Fatalf("schema at %s has no property %q", s.Source, n)
		}
		s = next
	}
	return s
}

// security spells a requirement list as "A | B[s1 s2] + C | {}".
func security(s *apidoc.Security) string {
	if s == nil {
		return "<nil>"
	}
	var alts []string
	for _, r := range s.Alternatives {
		if len(r.Schemes) == 0 {
			alts = append(alts, "{}")
			continue
		}
		var and []string
		for _, u := range r.Schemes {
			and = append(and, u.Name+"["+strings.Join(u.Scopes, " ")+"]")
		}
		alts = append(alts, strings.Join(and, " + "))
	}
	return strings.Join(alts, " | ")
}

// problemsAt returns the messages of the problems at a source.
func problemsAt(doc *apidoc.Document, source string) []string {
	var out []string
	for _, p := range doc.Problems {
		if p.Source == source {
			out = append(out, p.Message)
		}
	}
	return out
}

// TestCorpusCounts reads every OpenAPI document of the corpus: the
// operation counts are INDEX.md's, counted there by a separate script.
func TestCorpusCounts(t *testing.T) {
	t.Parallel()
	want := map[string]struct {
		format  apidoc.Format
		version string
		ops     int
	}{
		"oai-petstore.yaml":             {apidoc.OpenAPI, "3.0.0", 3},
		"swagger-petstore3.yaml":        {apidoc.OpenAPI, "3.0.4", 19},
		"slack-web-api.json":            {apidoc.Swagger, "2.0", 174},
		"gotify-server.json":            {apidoc.Swagger, "2.0", 42},
		"google-oauth2-v2.yaml":         {apidoc.OpenAPI, "3.0.0", 4},
		"twilio-iam-v1.yaml":            {apidoc.OpenAPI, "3.0.1", 10},
		"vonage-account.yaml":           {apidoc.OpenAPI, "3.0.2", 7},
		"camara-quality-on-demand.yaml": {apidoc.OpenAPI, "3.0.3", 5},
		"openai-api.yaml":               {apidoc.OpenAPI, "3.0.0", 28},
		"adyen-transfers-v4.json":       {apidoc.OpenAPI, "3.1.0", 12},
		"adyen-balanceplatform-v2.json": {apidoc.OpenAPI, "3.1.0", 91},
		"discord-api.json":              {apidoc.OpenAPI, "3.1.0", 242},
	}
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") {
			continue
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: a corpus document this test does not know; add its facts", name)
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			doc := mustParse(t, corpus, name)
			if doc.Format != w.format || doc.Version != w.version || len(doc.Operations) != w.ops {
				t.Fatalf("%s %s with %d operations, want %s %s with %d", doc.Format, doc.Version, len(doc.Operations), w.format, w.version, w.ops)
			}
			if doc.Title == "" {
				t.Error("no title")
			}
			for _, o := range doc.Operations {
				if !strings.HasPrefix(o.Source, "/paths/") || o.Method == "" || !strings.HasPrefix(o.Path, "/") {
					t.Errorf("operation %q: source %q, %s %s", o.ID, o.Source, o.Method, o.Path)
				}
				for _, p := range o.Parameters {
					if p.In == apidoc.InPath && !p.Required {
						t.Errorf("%s: path parameter %s not required", o.ID, p.Name)
					}
				}
			}
		})
	}
	if seen != len(want) {
		t.Errorf("read %d documents, want %d", seen, len(want))
	}
}

// TestDiscord: 3.1 with an OR of schemes, an anonymous alternative,
// oauth2 flows and type arrays.
func TestDiscord(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "discord-api.json")

	del := op(t, doc, "delete_application_command")
	if del.Source != "/paths/~1applications~1{application_id}~1commands~1{command_id}/delete" || del.Method != "DELETE" {
		t.Errorf("source %q method %q", del.Source, del.Method)
	}
	if got := security(del.Security); got != "BotToken[] | OAuth2[applications.commands.update]" {
		t.Errorf("security %s", got)
	}
	if del.Security.Source != del.Source+"/security" || del.Security.Alternatives[1].Source != del.Source+"/security/1" {
		t.Errorf("security sources %q, %q", del.Security.Source, del.Security.Alternatives[1].Source)
	}
	// Path-level parameters are merged in, and a path parameter is
	// required.
	if p := param(t, del, apidoc.InPath, "command_id"); !p.Required || p.Schema == nil {
		t.Errorf("command_id: %+v", p)
	}

	gw := op(t, doc, "get_gateway")
	if got := security(gw.Security); got != "{} | BotToken[]" {
		t.Errorf("get_gateway security %s", got)
	}

	bot := doc.Schemes["BotToken"]
	if bot == nil || bot.Type != apidoc.SchemeAPIKey || bot.In != "header" || bot.ParamName != "Authorization" {
		t.Errorf("BotToken %+v", bot)
	}
	oauth := doc.Schemes["OAuth2"]
	if oauth == nil || oauth.Type != apidoc.SchemeOAuth2 || oauth.Source != "/components/securitySchemes/OAuth2" {
		t.Fatalf("OAuth2 %+v", oauth)
	}
	var flows []string
	for _, f := range oauth.Flows {
		flows = append(flows, f.Name)
		if f.RefreshURL == "" || len(f.Scopes) < 32 || !slices.IsSorted(f.Scopes) {
			t.Errorf("flow %s: refresh %q, %d scopes", f.Name, f.RefreshURL, len(f.Scopes))
		}
	}
	if strings.Join(flows, ",") != "implicit,clientCredentials,authorizationCode" {
		t.Errorf("flows %v", flows)
	}
	if oauth.Flows[0].AuthorizationURL == "" || oauth.Flows[1].TokenURL == "" || !slices.Contains(oauth.Scopes(), "applications.commands.update") {
		t.Errorf("flow URLs or scopes: %+v", oauth.Flows)
	}

	// The list of commands: `type: ["array", "null"]`, items a $ref.
	list := op(t, doc, "list_application_commands")
	ok := response(t, list, "200")
	if ok.MediaType != "application/json" || ok.Schema == nil {
		t.Fatalf("200: %+v", ok)
	}
	if !slices.Equal(ok.Schema.Types, []string{"array", "null"}) {
		t.Errorf("types %v", ok.Schema.Types)
	}
	item := ok.Schema.Items
	if item == nil || item.Ref != "/components/schemas/ApplicationCommandResponse" || item.Source != item.Ref {
		t.Fatalf("items %+v", item)
	}
	// A property that is a $ref is the definition, at its own place.
	if id := prop(t, item, "id"); id.Ref != "/components/schemas/SnowflakeType" || id.Source != id.Ref {
		t.Errorf("id ref %q source %q", id.Ref, id.Source)
	}
	if name := prop(t, item, "name"); name.Source != "/components/schemas/ApplicationCommandResponse/properties/name" || name.Types[0] != "string" {
		t.Errorf("name %+v", name)
	}
	if len(ok.Headers) == 0 || !slices.IsSorted(ok.Headers) {
		t.Errorf("headers %v", ok.Headers)
	}
}

// TestTwilio: an operation's `security: []` is an explicit "no
// authentication", overriding the document's.
func TestTwilio(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "twilio-iam-v1.yaml")
	for _, id := range []string{"CreateToken", "ListRolePermission"} {
		o := op(t, doc, id)
		if o.Security == nil || len(o.Security.Alternatives) != 0 || o.Security.Source != o.Source+"/security" {
			t.Errorf("%s security %+v", id, o.Security)
		}
	}
	key := op(t, doc, "CreateNewKey")
	if got := security(key.Security); got != "accountSid_authToken[]" || key.Security.Source != key.Source+"/security" {
		t.Errorf("CreateNewKey security %s at %q", got, key.Security.Source)
	}
	// No security of its own: the document's.
	app := op(t, doc, "CreateOauthAppAccount")
	if got := security(app.Security); got != "accountSid_authToken[]" || app.Security.Source != "/security" || app.Security.Alternatives[0].Source != "/security/0" {
		t.Errorf("CreateOauthAppAccount security %s at %q", got, app.Security.Source)
	}
	if s := doc.Schemes["accountSid_authToken"]; s == nil || s.Type != apidoc.SchemeHTTP || s.HTTPScheme != "basic" {
		t.Errorf("accountSid_authToken %+v", s)
	}
}

// TestSlack: Swagger 2.0, oauth2 accessCode, formData into a body.
func TestSlack(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "slack-web-api.json")
	s := doc.Schemes["slackAuth"]
	if s == nil || s.Type != apidoc.SchemeOAuth2 || len(s.Flows) != 1 {
		t.Fatalf("slackAuth %+v", s)
	}
	f := s.Flows[0]
	if f.Name != "authorizationCode" || f.AuthorizationURL == "" || f.TokenURL == "" || len(f.Scopes) != 67 || !slices.Contains(f.Scopes, "chat:write:user") {
		t.Errorf("flow %s, %d scopes", f.Name, len(f.Scopes))
	}
	del := op(t, doc, "chat_delete")
	if got := security(del.Security); got != "slackAuth[chat:write:user chat:write:bot]" {
		t.Errorf("chat_delete security %s", got)
	}
	// The formData parameters are the body; the header one stays.
	if len(del.Parameters) != 1 || del.Parameters[0].In != apidoc.InHeader || del.Parameters[0].Name != "token" {
		t.Errorf("parameters %+v", del.Parameters)
	}
	b := del.Body
	if b == nil || b.MediaType != "application/x-www-form-urlencoded" || b.Schema == nil {
		t.Fatalf("body %+v", b)
	}
	var names []string
	for _, p := range b.Schema.Properties {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "ts,channel,as_user" || prop(t, b.Schema, "ts").Types[0] != "number" {
		t.Errorf("form properties %v", names)
	}
	if b.Source != del.Source+"/parameters/1" {
		t.Errorf("body source %q", b.Source)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "https://slack.com/api" {
		t.Errorf("servers %+v", doc.Servers)
	}
}

// TestGotify: Swagger 2.0's `basic`, a body parameter, seven alternatives.
func TestGotify(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "gotify-server.json")
	if s := doc.Schemes["basicAuth"]; s == nil || s.Type != apidoc.SchemeHTTP || s.HTTPScheme != "basic" || s.Source != "/securityDefinitions/basicAuth" {
		t.Errorf("basicAuth %+v", s)
	}
	if s := doc.Schemes["appTokenQuery"]; s == nil || s.Type != apidoc.SchemeAPIKey || s.In != "query" || s.ParamName != "token" {
		t.Errorf("appTokenQuery %+v", s)
	}
	msg := op(t, doc, "createMessage")
	if msg.Security == nil || len(msg.Security.Alternatives) != 7 {
		t.Errorf("createMessage security %s", security(msg.Security))
	}
	b := msg.Body
	if b == nil || b.MediaType != "application/json" || !slices.Equal(b.MediaTypes, []string{"application/json"}) || !b.Required {
		t.Fatalf("body %+v", b)
	}
	if b.Schema == nil || b.Schema.Ref != "/definitions/CreateMessage" || b.Schema.Property("message") == nil || b.Source != msg.Source+"/parameters/0" {
		t.Errorf("body schema %+v", b.Schema)
	}
	for _, p := range msg.Parameters {
		if p.In == "body" || p.In == "formData" {
			t.Errorf("a %s parameter left on the operation", p.In)
		}
	}
}

// TestAdyen: apiKey in the query, Idempotency-Key through a $ref.
func TestAdyen(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "adyen-transfers-v4.json")
	if s := doc.Schemes["clientKey"]; s == nil || s.Type != apidoc.SchemeAPIKey || s.In != "query" || s.ParamName != "clientKey" {
		t.Errorf("clientKey %+v", s)
	}
	tr := op(t, doc, "post-transfers")
	if tr.Source != "/paths/~1transfers/post" || tr.Method != "POST" {
		t.Errorf("source %q", tr.Source)
	}
	if got := security(tr.Security); got != "clientKey[] | BasicAuth[] | ApiKeyAuth[]" {
		t.Errorf("security %s", got)
	}
	key := param(t, tr, apidoc.InHeader, "Idempotency-Key")
	if key.Source != "/components/parameters/Idempotency-Key" || key.Schema == nil || key.Schema.Types[0] != "string" {
		t.Errorf("Idempotency-Key %+v", key)
	}
	if tr.Body == nil || tr.Body.Schema == nil || tr.Body.Schema.Property("amount") == nil {
		t.Fatalf("body %+v", tr.Body)
	}
	// A response schema with properties, read through its $ref.
	created := response(t, tr, "200")
	if created.Schema == nil || created.Schema.Property("status") == nil || created.Schema.Ref == "" {
		t.Errorf("200 schema %+v", created.Schema)
	}

	bp := mustParse(t, corpus, "adyen-balanceplatform-v2.json")
	if len(bp.Operations) != 91 {
		t.Errorf("%d operations", len(bp.Operations))
	}
	if got := security(op(t, bp, "get-publicKey").Security); !strings.Contains(got, "clientKey[]") {
		t.Errorf("get-publicKey security %s", got)
	}
}

// TestPetstore3: servers, an OR of api_key and an oauth2 scope, responses
// in status order.
func TestPetstore3(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, corpus, "swagger-petstore3.yaml")
	get := op(t, doc, "getPetById")
	if got := security(get.Security); got != "api_key[] | petstore_auth[write:pets read:pets]" {
		t.Errorf("security %s", got)
	}
	var statuses []string
	for _, r := range get.Responses {
		statuses = append(statuses, r.Status)
	}
	if strings.Join(statuses, ",") != "200,400,404,default" {
		t.Errorf("statuses %v", statuses)
	}
	pet := response(t, get, "200").Schema
	if pet == nil || pet.Ref != "/components/schemas/Pet" || !slices.Equal(pet.Required, []string{"name", "photoUrls"}) {
		t.Fatalf("pet %+v", pet)
	}
	if status := prop(t, pet, "status"); len(status.Enum) != 3 {
		t.Errorf("status enum %v", status.Enum)
	}
	if op(t, doc, "getOrderById").Security != nil {
		t.Error("getOrderById declares no security, and the document none")
	}
	if len(doc.Servers) != 1 || doc.Servers[0].Source != "/servers/0" {
		t.Errorf("servers %+v", doc.Servers)
	}
}

// TestExternalRefs: $refs into sibling files, their pointers named
// file#pointer, and a schema cycle that crosses files.
func TestExternalRefs(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata/external", "spec.yaml")
	if len(doc.Problems) != 0 {
		t.Errorf("problems %+v", doc.Problems)
	}
	list := op(t, doc, "listPets")
	if list.Source != "paths.yaml#/pets/get" || list.Path != "/pets" {
		t.Errorf("listPets at %q, path %q", list.Source, list.Path)
	}
	limit := param(t, list, apidoc.InQuery, "limit")
	if limit.Source != "common.yaml#/components/parameters/Limit" || limit.Schema == nil || *limit.Schema.Maximum != 100 {
		t.Errorf("limit %+v", limit)
	}
	pet := response(t, list, "200").Schema.Items
	if pet == nil || pet.Ref != "common.yaml#/components/schemas/Pet" || pet.Source != pet.Ref {
		t.Fatalf("pet %+v", pet)
	}
	// Pet -> Owner -> Pet is a cycle of pointers.
	if back := prop(t, pet, "owner", "pets").Items; back != pet {
		t.Errorf("Pet.owner.pets[] is not Pet: %+v", back)
	}

	owner := op(t, doc, "getOwner")
	id := param(t, owner, apidoc.InPath, "id")
	if id.Source != "common.yaml#/components/parameters/Id" || !id.Required {
		t.Errorf("id %+v", id)
	}
	r := response(t, owner, "200")
	if r.Source != "common.yaml#/components/responses/Owner" || !slices.Equal(r.Headers, []string{"X-Rate-Limit"}) {
		t.Errorf("response %+v", r)
	}
	// The same definition reached from two files is one *Schema.
	if r.Schema != prop(t, pet, "owner") {
		t.Error("Owner read twice")
	}

	tree := op(t, doc, "plantTree").Body.Schema
	if tree == nil || tree.Ref != "/components/schemas/Tree" {
		t.Fatalf("tree %+v", tree)
	}
	branch := prop(t, tree, "branch")
	if branch.Ref != "sub/branch.yaml#/Branch" {
		t.Errorf("branch ref %q", branch.Ref)
	}
	if prop(t, branch, "tree") != tree {
		t.Error("Tree -> Branch -> Tree is not a cycle")
	}
	if prop(t, branch, "leaves").Items != branch {
		t.Error("Branch -> leaves[] -> Branch (a local $ref in another file) is not a cycle")
	}

	// With no directory, every $ref to another file is a problem, never
	// a crash.
	data, err := os.ReadFile("testdata/external/spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alone, err := openapi.Parse(data, "spec.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(alone.Problems) == 0 || len(problemsAt(alone, "/paths/~1pets")) != 1 {
		t.Errorf("problems %+v", alone.Problems)
	}
}

// TestHostileRefs: a $ref that leaves the directory, names a URL or names
// nothing is a problem at its place; the operation is still read.
func TestHostileRefs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/hostile/refs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi.Parse(data, "refs.yaml", refusingFS{t: t, dir: "testdata/hostile", allowed: []string{"absent.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/paths/~1escape/get/responses/200/content/application~1json/schema":        "outside the document's directory",
		"/paths/~1url/get/responses/200/content/application~1json/schema":           "names a URL",
		"/paths/~1netpath/get/responses/200/content/application~1json/schema":       "names a URL",
		"/paths/~1absolute/get/responses/200/content/application~1json/schema":      "outside the document's directory",
		"/paths/~1fileurl/get/responses/200/content/application~1json/schema":       "names a URL",
		"/paths/~1nothing/get/responses/200/content/application~1json/schema":       "names nothing",
		"/paths/~1nothing-again/get/responses/200/content/application~1json/schema": "names nothing",
		"/paths/~1missing-file/get/responses/200/content/application~1json/schema":  "absent.yaml",
		// A chain's failure is the place's where it began (the
		// operation's), whatever hop it failed at.
		"/paths/~1loop/get/parameters/0": "more than 32",
	}
	for source, text := range want {
		got := problemsAt(doc, source)
		if len(got) != 1 || !strings.Contains(got[0], text) {
			t.Errorf("%s: problems %q, want one saying %q", source, got, text)
		}
	}
	if len(doc.Problems) != len(want) {
		t.Errorf("%d problems, want %d: %+v", len(doc.Problems), len(want), doc.Problems)
	}
	if len(doc.Operations) != 9 {
		t.Errorf("%d operations", len(doc.Operations))
	}
	if len(op(t, doc, "loop").Parameters) != 0 {
		t.Error("a parameter read from a $ref loop")
	}
	for _, id := range []string{"escape", "url", "nothing", "nothingAgain"} {
		if s := response(t, op(t, doc, id), "200").Schema; s == nil || len(s.Properties) != 0 || len(s.Types) != 0 {
			t.Errorf("%s: schema %+v", id, s)
		}
	}
}

// refusingFS fails the test when anything but the allowed files is
// opened: the reader must refuse a $ref before it asks for the file.
type refusingFS struct {
	t       *testing.T
	dir     string
	allowed []string
}

func (f refusingFS) Open(name string) (fs.File, error) {
	if !slices.Contains(f.allowed, name) {
		f.t.Errorf("opened %q", name)
	}
	return os.DirFS(f.dir).Open(name)
}

// runtimeMem is the bytes allocated so far.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}

// TestSchemas31: JSON Schema 2020-12 keywords.
func TestSchemas31(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "schemas31.yaml")
	if len(doc.Problems) != 0 {
		t.Errorf("problems %+v", doc.Problems)
	}
	o := op(t, doc, "makeThing")
	thing := o.Body.Schema
	if !o.Body.Required || thing.Ref != "/components/schemas/Thing" {
		t.Fatalf("body %+v", o.Body)
	}
	if got := prop(t, thing, "name").Types; !slices.Equal(got, []string{"string", "null"}) {
		t.Errorf("name types %v", got)
	}
	// nullable is 3.0's (3.0.3 §4.7.24.1); 3.1 removed it, a type array
	// naming "null" saying what it said. Honoured in 3.1, it let an
	// agent send null where the API takes a string.
	if got := prop(t, thing, "nickname").Types; !slices.Equal(got, []string{"string"}) {
		t.Errorf("nickname types %v: nullable honoured in 3.1", got)
	}
	score := prop(t, thing, "score")
	if *score.Minimum != 0 || *score.ExclusiveMinimum != 0 || *score.ExclusiveMaximum != 10 || score.Maximum != nil {
		t.Errorf("score bounds %v %v %v %v", score.Minimum, score.ExclusiveMinimum, score.Maximum, score.ExclusiveMaximum)
	}
	point := prop(t, thing, "point")
	if point.Items == nil || len(point.Items.AnyOf) != 3 || point.Items.AnyOf[0].Types[0] != "number" || point.Items.AnyOf[2].Types[0] != "string" {
		t.Errorf("prefixItems %+v", point.Items)
	}
	if point.Items.AnyOf[1].Source != "/components/schemas/Thing/properties/point/prefixItems/1" {
		t.Errorf("prefixItems source %q", point.Items.AnyOf[1].Source)
	}
	owner := prop(t, thing, "owner")
	// Annotations beside a $ref change nothing: the definition itself.
	if owner.Ref != "/components/schemas/Owner" {
		t.Errorf("owner %+v", owner)
	}
	// 3.1 applies keywords beside a $ref (JSON Schema 2020-12 §8.2.3.1):
	// a schema of its own whose allOf holds the definition.
	reviewer := prop(t, thing, "reviewer")
	if reviewer.Ref != "" || !reviewer.ReadOnly || len(reviewer.AllOf) != 1 || reviewer.AllOf[0] != owner || !slices.Equal(reviewer.Required, []string{"id"}) {
		t.Errorf("reviewer %+v", reviewer)
	}
	if any := prop(t, thing, "anything"); any.Enum != nil {
		t.Errorf("true: %+v", any)
	}
	if none := prop(t, thing, "nothing"); none.Enum == nil || len(none.Enum) != 0 {
		t.Errorf("false: %+v", none)
	}

	shape := response(t, o, "201").Schema
	if len(shape.OneOf) != 2 || len(shape.Mapping) != 2 {
		t.Fatalf("shape %+v", shape)
	}
	// A bare name is a component schema's; both mappings are the very
	// schemas the oneOf names.
	if shape.Mapping[0] != shape.OneOf[0] || shape.Mapping[1] != shape.OneOf[1] || shape.Mapping[0].Ref != "/components/schemas/Circle" {
		t.Errorf("mapping %+v", shape.Mapping)
	}
}

// TestSchemas30: 3.0's nullable and boolean exclusive bounds, a tuple in
// items, a $ref whose siblings 3.0 ignores.
func TestSchemas30(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "schemas30.yaml")
	if len(doc.Problems) != 0 {
		t.Errorf("problems %+v", doc.Problems)
	}
	thing := op(t, doc, "makeThing").Body.Schema
	if got := prop(t, thing, "name").Types; !slices.Equal(got, []string{"string", "null"}) {
		t.Errorf("name types %v", got)
	}
	// 3.0.3 §4.7.24.1: nullable adds null only to a type given beside it.
	if got := prop(t, thing, "untyped").Types; len(got) != 0 {
		t.Errorf("untyped types %v", got)
	}
	score := prop(t, thing, "score")
	if score.Minimum != nil || score.ExclusiveMinimum == nil || *score.ExclusiveMinimum != 0 || *score.Maximum != 10 || score.ExclusiveMaximum != nil {
		t.Errorf("score bounds %v %v %v %v", score.Minimum, score.ExclusiveMinimum, score.Maximum, score.ExclusiveMaximum)
	}
	pair := prop(t, thing, "pair")
	if pair.Items == nil || len(pair.Items.AnyOf) != 2 || pair.Items.AnyOf[1].Types[0] != "integer" {
		t.Errorf("tuple %+v", pair.Items)
	}
	// 3.0.3 §4.7.26: a Reference Object's other members SHALL be ignored.
	owner := prop(t, thing, "owner")
	if owner.Ref != "/components/schemas/Owner" || len(owner.AllOf) != 0 {
		t.Errorf("owner %+v", owner)
	}
	// JSON Schema: 10.0 is an integer.
	length := prop(t, thing, "length")
	if length.MaxLength == nil || *length.MaxLength != 10 || *length.MinLength != 1 {
		t.Errorf("length %v %v", length.MinLength, length.MaxLength)
	}
	// A definition written as null is still at its place.
	if unsaid := prop(t, thing, "unsaid"); unsaid.Source != "/components/schemas/Null" || unsaid.Ref != unsaid.Source {
		t.Errorf("unsaid %+v", unsaid)
	}
}

// TestYAMLFeatures: integer keys read as written, anchors, aliases and
// merge keys.
func TestYAMLFeatures(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "yamlfeatures.yaml")
	list := op(t, doc, "listPets")
	var statuses []string
	for _, r := range list.Responses {
		statuses = append(statuses, r.Status)
	}
	if strings.Join(statuses, ",") != "200,404,default" {
		t.Errorf("statuses %v", statuses)
	}
	if r := response(t, list, "200"); r.Source != "/paths/~1pets/get/responses/200" || r.Description != "the pets" {
		t.Errorf("200 %+v", r)
	}
	notFound := response(t, list, "404")
	if notFound.Description != "an error" || notFound.Schema.Property("message") == nil {
		t.Errorf("404 through an alias %+v", notFound)
	}
	// The mapping's own keys win over merged ones.
	if list.Summary != "list the pets" || !slices.Equal(list.Tags, []string{"pets"}) || list.Deprecated {
		t.Errorf("merged %q %v %v", list.Summary, list.Tags, list.Deprecated)
	}
	// Of two merged mappings the first wins.
	del := op(t, doc, "deletePets")
	if del.Deprecated || del.Description != "merged from the second source" || del.Summary != "the base summary" {
		t.Errorf("merged list %v %q %q", del.Deprecated, del.Description, del.Summary)
	}
	if len(del.Responses) != 1 || del.Responses[0].Status != "204" {
		t.Errorf("responses %+v", del.Responses)
	}
}

// TestSecondDocumentIsRefused: a description of two YAML documents is
// refused, not read as its first: the operations of the second would
// vanish.
func TestSecondDocumentIsRefused(t *testing.T) {
	t.Parallel()
	doc := "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n---\npaths:\n  /x: {get: {operationId: x, responses: {'200': {description: ok}}}}\n"
	if _, err := openapi.Parse([]byte(doc), "two.yaml", nil); !errors.Is(err, openapi.ErrUnreadable) || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("two documents: %v", err)
	}
}

// TestAliasBomb: a billion laughs fails fast with the size error and
// never builds the expansion.
func TestAliasBomb(t *testing.T) {
	// Not parallel: it measures the bytes the process allocates.
	data, err := os.ReadFile("testdata/bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtimeMem
	before.read()
	start := time.Now()
	_, err = openapi.Parse(data, "bomb.yaml", nil)
	took := time.Since(start)
	after.read()
	if !errors.Is(err, openapi.ErrUnreadable) || !errors.Is(err, openapi.ErrTooLarge) {
		t.Fatalf("err %v", err)
	}
	// Allocation, not time, is asserted (timing belongs in benchmarks):
	// expanding even the budget's 5,000,000 values takes hundreds of MiB.
	t.Logf("refused in %v", took)
	if grew := after.total - before.total; grew > 64<<20 {
		t.Errorf("allocated %d MiB", grew>>20)
	}
}

// TestParameters: path-level parameters merged under the operation's, x-
// keys skipped, a path parameter always required.
func TestParameters(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "params.yaml")
	if len(doc.Operations) != 1 {
		t.Fatalf("%d operations: an x- key under paths read as a path?", len(doc.Operations))
	}
	o := op(t, doc, "getOrder")
	if len(o.Parameters) != 4 {
		t.Errorf("parameters %d", len(o.Parameters))
	}
	if v := param(t, o, apidoc.InQuery, "verbose"); v.Description != "operation level" || v.Schema.Types[0] != "integer" || v.Source != "/paths/~1orders~1{id}/get/parameters/0" {
		t.Errorf("verbose %+v", v)
	}
	if v := param(t, o, apidoc.InHeader, "verbose"); v.Description != "same name elsewhere" {
		t.Errorf("header verbose %+v", v)
	}
	if id := param(t, o, apidoc.InPath, "id"); !id.Required || id.Source != "/paths/~1orders~1{id}/parameters/0" {
		t.Errorf("id %+v", id)
	}
	param(t, o, apidoc.InHeader, "X-Trace")
	if len(o.Responses) != 1 || o.Responses[0].Status != "200" {
		t.Errorf("responses %+v", o.Responses)
	}
}

// TestErrors: each kind of unreadable document is its sentinel.
func TestErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		want error
		says string
	}{
		{"trailing.json", openapi.ErrUnreadable, "more follows"},
		{"trailing-text.json", openapi.ErrUnreadable, "more follows"},
		{"broken.yaml", openapi.ErrUnreadable, "YAML"},
		{"toplevel-array.json", openapi.ErrNotOpenAPI, "not an object"},
		{"openapi4.yaml", openapi.ErrNotOpenAPI, `"4.0.0"`},
		{"swagger12.json", openapi.ErrNotOpenAPI, `"1.2"`},
		{"noversion.yaml", openapi.ErrNotOpenAPI, "no openapi or swagger member"},
		// A key given twice: a reader keeps one and drops the other.
		{"repeated-key.yaml", openapi.ErrUnreadable, `line 6: the key "/a" is given twice in one mapping (first at line 4)`},
		{"repeated-key.json", openapi.ErrUnreadable, `the key "/a" is given twice in one object`},
		{"repeated-key-nested.json", openapi.ErrUnreadable, `the key "in" is given twice in one object`},
	} {
		t.Run(c.file, func(t *testing.T) {
			doc, err := parseFile(t, "testdata", c.file)
			if !errors.Is(err, c.want) || doc != nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v, want %v saying %q", err, c.want, c.says)
			}
			other := openapi.ErrUnreadable
			if errors.Is(c.want, openapi.ErrUnreadable) {
				other = openapi.ErrNotOpenAPI
			}
			if errors.Is(err, other) {
				t.Errorf("%v is also %v", err, other)
			}
		})
	}
	// A merge key's members are overridden by the mapping's own, once.
	if doc, err := parseFile(t, "testdata", "merged-key.yaml"); err != nil || len(doc.Operations) != 1 || doc.Operations[0].ID != "own" {
		t.Errorf("merged-key.yaml: %v", err)
	}
	for _, in := range []string{"", "   ", "null", "42", `"text"`, "- a\n- b\n"} {
		if _, err := openapi.Parse([]byte(in), "x.yaml", nil); !errors.Is(err, openapi.ErrNotOpenAPI) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestDeterminism: the same bytes read twice are the same document, down
// to which schemas are shared.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	files := append(corpusFiles(t), fixtureFiles(t)...)
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			a, errA := parseFile(t, f.dir, f.name)
			b, errB := parseFile(t, f.dir, f.name)
			if fmt.Sprint(errA) != fmt.Sprint(errB) {
				t.Fatalf("%v then %v", errA, errB)
			}
			if errA != nil {
				return
			}
			da, db := dump(a), dump(b)
			if da != db {
				t.Fatalf("two reads differ:\n%s", firstDiff(da, db))
			}
		})
	}
}

type file struct{ dir, name string }

func corpusFiles(t testing.TB) []file {
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var out []file
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") || strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, file{corpus, e.Name()})
		}
	}
	return out
}

// fixtureFiles lists this package's testdata documents (each a main
// document or a file a $ref reads).
func fixtureFiles(t testing.TB) []file {
	var out []file
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "fuzz" {
			return filepath.SkipDir
		}
		if ext := path.Ext(p); !d.IsDir() && (ext == ".json" || ext == ".yaml") {
			rel, err := filepath.Rel("testdata", p)
			if err != nil {
				return err
			}
			dir, name := "testdata", filepath.ToSlash(rel)
			if i := strings.Index(name, "/"); i > 0 {
				dir, name = filepath.Join("testdata", name[:i]), name[i+1:]
			}
			out = append(out, file{dir, name})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dump prints a value canonically: a pointer seen before is printed as the
// number it was given when first seen, so that cycles end and sharing
// shows.
func dump(v any) string {
	var b strings.Builder
	seen := map[uintptr]int{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			if n, ok := seen[v.Pointer()]; ok {
				fmt.Fprintf(&b, "@%d", n)
				return
			}
			seen[v.Pointer()] = len(seen)
			fmt.Fprintf(&b, "&%d", len(seen)-1)
			walk(v.Elem())
		case reflect.Struct:
			b.WriteString("{")
			for i := range v.NumField() {
				fmt.Fprintf(&b, "%s:", v.Type().Field(i).Name)
				walk(v.Field(i))
				b.WriteString(" ")
			}
			b.WriteString("}\n")
		case reflect.Slice:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			b.WriteString("[")
			for i := range v.Len() {
				walk(v.Index(i))
				b.WriteString(",")
			}
			b.WriteString("]")
		case reflect.Map:
			keys := v.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
			b.WriteString("map[")
			for _, k := range keys {
				fmt.Fprintf(&b, "%v=", k)
				walk(v.MapIndex(k))
				b.WriteString(",")
			}
			b.WriteString("]")
		case reflect.Interface:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			fmt.Fprintf(&b, "%T:", v.Elem().Interface())
			walk(v.Elem())
		default:
			fmt.Fprintf(&b, "%#v", v.Interface())
		}
	}
	walk(reflect.ValueOf(v))
	return b.String()
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}

// TestEncodedPointers: a $ref's fragment is percent-decoded before it is
// read as a JSON pointer.
func TestEncodedPointers(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "encoded.yaml")
	if len(doc.Problems) != 0 {
		t.Errorf("problems %+v", doc.Problems)
	}
	if s := response(t, op(t, doc, "getPet"), "200").Schema; s.Ref != "/components/schemas/My Pet" || s.Property("name") == nil {
		t.Errorf("My Pet %+v", s)
	}
	cp := op(t, doc, "copy")
	if id := param(t, cp, apidoc.InPath, "id"); id.Source != "/paths/~1pets~1{id}/get/parameters/0" {
		t.Errorf("id at %q", id.Source)
	}
	if s := response(t, cp, "200").Schema; s.Ref != "/components/schemas/100%" || s.Types[0] != "integer" {
		t.Errorf("100%% %+v", s)
	}
}

// TestSwaggerUnquoted: `swagger: 2.0` unquoted, form and body parameters,
// servers from host and schemes.
func TestSwaggerUnquoted(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "swagger-unquoted.yaml")
	if doc.Format != apidoc.Swagger || doc.Version != "2.0" || doc.APIVersion != "1.0" {
		t.Fatalf("%s %s, API %q", doc.Format, doc.Version, doc.APIVersion)
	}
	if len(doc.Servers) != 2 || doc.Servers[1].URL != "https://api.example.com/v1" || doc.Servers[0].Source != "/host" {
		t.Errorf("servers %+v", doc.Servers)
	}
	up := op(t, doc, "upload")
	b := up.Body
	if b == nil || b.MediaType != "multipart/form-data" || !b.Required || !slices.Equal(b.Schema.Required, []string{"file"}) {
		t.Fatalf("upload body %+v", b)
	}
	if f := prop(t, b.Schema, "file"); f.Types[0] != "string" || f.Format != "binary" {
		t.Errorf("file %+v", f)
	}
	// 2.0 has no rule against an Authorization header parameter.
	param(t, up, apidoc.InHeader, "Authorization")
	if r := response(t, up, "200"); r.MediaType != "application/json" || r.Schema.Property("id") == nil {
		t.Errorf("200 %+v", r)
	}
	mk := op(t, doc, "makeThing")
	if mk.Body == nil || mk.Body.Schema.Ref != "/definitions/Thing" || !slices.Equal(mk.Body.MediaTypes, []string{"application/json"}) {
		t.Fatalf("body %+v", mk.Body)
	}
	if got := prop(t, mk.Body.Schema, "name").Types; !slices.Equal(got, []string{"string", "null"}) {
		t.Errorf("x-nullable: %v", got)
	}
}

// TestShared: what several operations reach through $refs is read once:
// one *Schema, one problem.
func TestShared(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "shared.yaml")
	a, b := op(t, doc, "getA"), op(t, doc, "getB")
	ra, rb := response(t, a, "200").Schema, response(t, b, "200").Schema
	if ra != rb || ra.Source != "/components/responses/Listing/content/application~1json/schema" {
		t.Errorf("the inline schema of a shared response read twice, or at %q", ra.Source)
	}
	if param(t, a, apidoc.InPath, "id").Schema != param(t, b, apidoc.InPath, "id").Schema {
		t.Error("the schema of a shared parameter read twice")
	}
	// A problem in what is shared is said once, at its place.
	want := []apidoc.Problem{
		{Source: "/paths/~1a~1{id}/get/parameters/2", Message: "a header parameter named Authorization is ignored (OpenAPI 3: the security schemes declare credentials)"},
		{Source: "/components/responses/Listing/content/application~1json/schema/properties/broken", Message: `the $ref "#/components/schemas/Gone" names nothing`},
		{Source: "/paths/~1d/get/parameters/0", Message: "a parameter needs a name and an in"},
	}
	if !slices.Equal(doc.Problems, want) {
		t.Errorf("problems %+v", doc.Problems)
	}
	if len(doc.Operations) != 4 {
		t.Errorf("%d operations", len(doc.Operations))
	}
	// Header names are case-insensitive: the operation's overrides the
	// path item's. Accept and Authorization header parameters are not
	// read in 3.x.
	var headers []string
	for _, p := range a.Parameters {
		if p.In == apidoc.InHeader {
			headers = append(headers, p.Name+": "+p.Description)
		}
	}
	if !slices.Equal(headers, []string{"x-request-id: operation level"}) {
		t.Errorf("headers %q", headers)
	}
	// A mapping value that is a component's name, dots and all.
	pet := prop(t, ra, "pet")
	if len(pet.Mapping) != 2 || pet.Mapping[0] != pet.OneOf[0] || pet.Mapping[0].Ref != "/components/schemas/Pet.v1" {
		t.Errorf("mapping %+v", pet.Mapping)
	}
}

// TestAmplification: $refs that multiply a small document into millions
// of parts are refused, not built.
func TestAmplification(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"components":{"parameters":{"p":{"name":"p","in":"query","schema":{"type":"string"}}},"pathItems":{"item":{"get":{"parameters":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"$ref":"#/components/parameters/p"}`)
	}
	b.WriteString(`]}}}},"paths":{`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/p%d":{"$ref":"#/components/pathItems/item"}`, i)
	}
	b.WriteString("}}")
	doc, err := openapi.Parse([]byte(b.String()), "spec.json", nil)
	if !errors.Is(err, openapi.ErrTooLarge) || doc != nil {
		t.Fatalf("%d bytes made %v", b.Len(), err)
	}
}

// TestFiles: a $ref's file must be a regular file of bounded size, and
// one that cannot be read is a problem that says why.
func TestFiles(t *testing.T) {
	t.Parallel()
	spec := []byte(`openapi: 3.0.3
paths:
  /pipe: {$ref: "pipe.yaml#/item"}
  /bad: {$ref: "bad.yaml#/item"}
  /dir: {$ref: "sub#/item"}
`)
	fsys := fstest.MapFS{
		"pipe.yaml":  {Data: []byte("item: {get: {operationId: x}}"), Mode: fs.ModeNamedPipe},
		"bad.yaml":   {Data: []byte("item: [unclosed")},
		"sub/x.yaml": {Data: []byte("{}")},
	}
	doc, err := openapi.Parse(spec, "spec.yaml", fsys)
	if err != nil {
		t.Fatal(err)
	}
	for source, says := range map[string]string{
		"/paths/~1pipe": "not a regular file",
		"/paths/~1bad":  "bad.yaml: neither JSON nor YAML",
		"/paths/~1dir":  "not a regular file",
	} {
		if got := problemsAt(doc, source); len(got) != 1 || !strings.Contains(got[0], says) {
			t.Errorf("%s: %q, want %q", source, got, says)
		}
	}
	if len(doc.Operations) != 0 {
		t.Errorf("operations %+v", doc.Operations)
	}
}

// TestFlowYAML: a YAML file in flow style starts like JSON and is YAML.
func TestFlowYAML(t *testing.T) {
	t.Parallel()
	doc := mustParse(t, "testdata", "flow.yaml")
	if doc.Version != "3.1.0" || response(t, op(t, doc, "getA"), "200").Description != "ok" {
		t.Errorf("%+v", doc)
	}
}

// TestDeepRefs: a chain of definitions, each naming the next, is as deep
// as it is long; reading it is bounded (400,000 of them overflowed the
// stack, a fatal error) and the cut is a problem at its place.
func TestDeepRefs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","paths":{"/a":{"get":{"operationId":"a","responses":{"200":{"description":"x","content":{"application/json":{"schema":{"$ref":"#/components/schemas/S0"}}}}}}}},"components":{"schemas":{`)
	const n = 5000
	for i := range n {
		fmt.Fprintf(&b, `"S%d":{"type":"object","properties":{"next":{"$ref":"#/components/schemas/S%d"}}},`, i, i+1)
	}
	fmt.Fprintf(&b, `"S%d":{"type":"string"}}}}`, n)
	doc, err := openapi.Parse([]byte(b.String()), "deep.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Problems) != 1 || !strings.Contains(doc.Problems[0].Message, "nest deeper than") {
		t.Fatalf("problems %+v", doc.Problems)
	}
	depth := 0
	for s := response(t, op(t, doc, "a"), "200").Schema; s != nil && s.Property("next") != nil; s = s.Property("next") {
		depth++
	}
	if depth < 500 || depth >= n {
		t.Errorf("read %d deep", depth)
	}
}

// TestRefCycles: $refs that lead back to a definition through $refs alone
// (A to B to A, Self to itself) name no schema, and each is a problem at
// its place — the body would otherwise be read as anything at all; a
// recursive schema, a $ref back to it under a property, is not.
func TestRefCycles(t *testing.T) {
	t.Parallel()
	doc, err := parseFile(t, "testdata", "ref-cycles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, p := range doc.Problems {
		problems = append(problems, p.Source+": "+p.Message)
	}
	for _, want := range []string{"/components/schemas/B: the $ref \"#/components/schemas/B\" leads back", "/components/schemas/Self: the $ref \"#/components/schemas/Self\" leads back"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem %q in %q", want, problems)
		}
	}
	if len(problems) != 2 {
		t.Errorf("problems %q: want the two cycles only, not the recursive Node", problems)
	}
}

// TestSpecialFileIsNotOpened: a $ref naming a FIFO beside the document is
// a problem at its place, read without opening the FIFO, where opening it
// waited for a writer for ever.
func TestSpecialFileIsNotOpened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	doc := []byte(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {"operationId": "a",
		"parameters": [{"$ref": "pipe.yaml#/P"}], "responses": {"204": {"description": "none"}}}}}}`)
	done := make(chan *apidoc.Document, 1)
	go func() {
		d, err := openapi.Parse(doc, "api.json", os.DirFS(dir))
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	select {
	case d := <-done:
		if got := problemsAt(d, "/paths/~1a/get/parameters/0"); d != nil && (len(got) != 1 || !strings.Contains(got[0], "not a regular file")) {
			t.Errorf("problems %+v", d.Problems)
		}
	case <-time.After(time.Minute):
		t.Fatal("the $ref to a FIFO is still being read")
	}
}

// TestPathItemMembers: a path item's $ref and the operations written
// beside it are one item (OAS "Path Item Object"), both read; a member in
// both is read from beside the $ref and said as a problem at it. A member
// of paths or of a path item that OAS does not name there — a path without
// its leading /, a method in capitals, a field misspelled — is a problem at
// its place, never skipped without a word; an extension is skipped.
func TestPathItemMembers(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: T, version: "1"}
paths:
  /pets:
    $ref: '#/components/pathItems/Pets'
    delete: {operationId: deleteAllPets, responses: {"204": {description: done}}}
  /owners:
    $ref: '#/components/pathItems/Owners'
    get: {operationId: listOwnersHere, responses: {"204": {description: done}}}
  /toys:
    get: {operationId: listToys, responses: {"204": {description: done}}}
    DELETE: {operationId: deleteAllToys, responses: {"204": {description: done}}}
    gett: {operationId: typo, responses: {"204": {description: done}}}
    x-internal: true
  toys/{id}:
    post: {operationId: updateToy, responses: {"204": {description: done}}}
  x-paths-note: {}
components:
  pathItems:
    Pets:
      get: {operationId: listPets, responses: {"204": {description: done}}}
    Owners:
      get: {operationId: listOwnersThere, responses: {"204": {description: done}}}
`
	doc, err := openapi.Parse([]byte(src), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, o := range doc.Operations {
		ops = append(ops, o.Method+" "+o.ID+" "+o.Source)
	}
	slices.Sort(ops)
	want := []string{
		"DELETE deleteAllPets /paths/~1pets/delete",
		"GET listOwnersHere /paths/~1owners/get",
		"GET listPets /components/pathItems/Pets/get",
		"GET listToys /paths/~1toys/get",
	}
	if !slices.Equal(ops, want) {
		t.Errorf("operations\n%s\nwant\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}
	var problems []string
	for _, p := range doc.Problems {
		problems = append(problems, p.Source)
	}
	slices.Sort(problems)
	wantProblems := []string{"/paths/toys~1{id}", "/paths/~1owners/get", "/paths/~1toys/DELETE", "/paths/~1toys/gett"}
	if !slices.Equal(problems, wantProblems) {
		t.Errorf("problems at %q, want %q: %v", problems, wantProblems, doc.Problems)
	}
	for _, p := range doc.Problems {
		if p.Source == "/paths/~1toys/DELETE" && !strings.Contains(p.Message, "lower case") {
			t.Errorf("the capitals' problem: %s", p.Message)
		}
	}
}

// TestSwaggerOneBody: 2.0 allows one body parameter. The operation's
// overrides its path item's whatever each is named (where both were kept,
// the path's replaced the operation's); two at one level are a problem.
func TestSwaggerOneBody(t *testing.T) {
	doc, err := openapi.Parse([]byte(`swagger: "2.0"
info: {title: T, version: "1"}
consumes: [application/json]
paths:
  /things:
    parameters: [{name: shared, in: body, schema: {type: object, properties: {fromPath: {type: string}}}}]
    post:
      operationId: createThing
      parameters: [{name: own, in: body, required: true, schema: {type: object, properties: {fromOperation: {type: string}}}}]
      responses: {"204": {description: done}}
  /pairs:
    post:
      operationId: createPair
      parameters:
        - {name: first, in: body, schema: {type: object, properties: {a: {type: string}}}}
        - {name: second, in: body, schema: {type: object, properties: {b: {type: string}}}}
      responses: {"204": {description: done}}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var create, pair *apidoc.Operation
	for _, o := range doc.Operations {
		switch o.ID {
		case "createThing":
			create = o
		case "createPair":
			pair = o
		}
	}
	if create == nil || create.Body == nil || create.Body.Schema == nil || len(create.Body.Schema.Properties) != 1 ||
		create.Body.Schema.Properties[0].Name != "fromOperation" || !create.Body.Required {
		t.Fatalf("createThing's body: %+v", create)
	}
	if pair == nil || pair.Body == nil || len(doc.Problems) != 1 || !strings.Contains(doc.Problems[0].Message, "second body parameter") ||
		!strings.HasPrefix(doc.Problems[0].Source, "/paths/~1pairs/post/parameters/1") {
		t.Fatalf("createPair: %+v, problems %v", pair, doc.Problems)
	}
}
