package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// manifests compiles each corpus document once for the rule tests.
var manifests sync.Map // name → *policy.Manifest

func corpusManifest(t *testing.T, name string) *policy.Manifest {
	t.Helper()
	if m, ok := manifests.Load(name); ok {
		return m.(*policy.Manifest)
	}
	m := compile(t, name, "svc", nil)
	manifests.Store(name, m)
	return m
}

func tool(t *testing.T, m *policy.Manifest, name string) *policy.ToolPolicy {
	t.Helper()
	tp := m.Tool(name)
	if tp == nil {
		t.Fatalf("no tool %s", name)
	}
	return tp
}

func finding(tp *policy.ToolPolicy, k policy.UnresolvedKind) *policy.Unresolved {
	for i := range tp.Unresolved {
		if tp.Unresolved[i].Kind == k {
			return &tp.Unresolved[i]
		}
	}
	return nil
}

// TestRiskClass holds the corpus's risk-class traps (INDEX.md) to the
// class spec 001 says approval, rate, environments and hints follow.
func TestRiskClass(t *testing.T) {
	cases := []struct {
		doc, tool string
		want      ontology.Risk
		finding   policy.UnresolvedKind // "" for none of inferred_read / state_changing_read
	}{
		{"slack-web-api.json", "auth_revoke", ontology.RiskDestructive, policy.UnresolvedStateChangingRead},
		{"slack-web-api.json", "apps_uninstall", ontology.RiskDestructive, policy.UnresolvedStateChangingRead},
		{"slack-web-api.json", "chat_delete", ontology.RiskDestructive, ""},
		{"slack-web-api.json", "admin_users_remove", ontology.RiskDestructive, ""},
		{"slack-web-api.json", "views_update", ontology.RiskWrite, policy.UnresolvedStateChangingRead},
		{"slack-web-api.json", "conversations_list", ontology.RiskRead, ""},
		{"camara-quality-on-demand.yaml", "retrieveSessionsByDevice", ontology.RiskRead, policy.UnresolvedInferredRead},
		{"camara-quality-on-demand.yaml", "extendQosSessionDuration", ontology.RiskWrite, ""},
		{"camara-quality-on-demand.yaml", "deleteSession", ontology.RiskDestructive, ""},
		{"google-oauth2-v2.yaml", "oauth2_tokeninfo", ontology.RiskRead, policy.UnresolvedInferredRead},
		{"gotify-server.json", "updateUser", ontology.RiskWrite, ""},
		{"gotify-server.json", "updatePluginConfig", ontology.RiskWrite, ""},
		{"gotify-server.json", "deleteUser", ontology.RiskDestructive, ""},
		{"discord-api.json", "get_guild_ban", ontology.RiskRead, ""},
		// resolve reads over a GET, and verify makes no SOAP call a read.
		{"discord-api.json", "invite_resolve", ontology.RiskRead, ""},
		{"taxcloud-taxcloud.wsdl", "VerifyAddress", ontology.RiskWrite, ""},
		{"discord-api.json", "ban_user_from_guild", ontology.RiskDestructive, ""},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			tp := tool(t, corpusManifest(t, c.doc), c.tool)
			if tp.Risk.Value != c.want {
				t.Fatalf("%s %s: risk %s, want %s (%s)", tp.Operation.Method, tp.Operation.Path, tp.Risk.Value, c.want, tp.Risk.Rule)
			}
			for _, k := range []policy.UnresolvedKind{policy.UnresolvedInferredRead, policy.UnresolvedStateChangingRead} {
				if got := finding(tp, k) != nil; got != (k == c.finding) {
					t.Errorf("%s finding: %v, want %v", k, got, k == c.finding)
				}
			}
		})
	}
	// DELETE is always destructive, PUT and PATCH never read, whatever
	// they are called.
	for _, name := range []string{"discord-api.json", "gotify-server.json", "twilio-iam-v1.yaml", "swagger-petstore3.yaml", "adyen-balanceplatform-v2.json"} {
		for _, tp := range corpusManifest(t, name).Tools {
			if m := tp.Operation.Method; (m == "DELETE" && tp.Risk.Value != ontology.RiskDestructive) || ((m == "PUT" || m == "PATCH") && tp.Risk.Value == ontology.RiskRead) {
				t.Errorf("%s %s: %s classified %s", name, tp.Name, m, tp.Risk.Value)
			}
		}
	}
}

// TestNamesReadOnlyWhereTheMethodAllows: a read word makes a POST a read
// (inferred_read), but never a PUT or a PATCH, which change state by RFC
// 9110 whatever they are called; resolve and verify, which change state as
// often as not, read over a GET only; CheckIn is a write. Each write
// needs a person's approval.
func TestNamesReadOnlyWhereTheMethodAllows(t *testing.T) {
	var b strings.Builder
	b.WriteString(`openapi: 3.0.3
info: {title: T, version: "1"}
paths:
`)
	cases := []struct {
		method, id string
		want       ontology.Risk
	}{
		{"put", "resolveIncident", ontology.RiskWrite},
		{"patch", "verifyAccount", ontology.RiskWrite},
		{"put", "getSettings", ontology.RiskWrite},
		{"post", "resolveAlert", ontology.RiskWrite},
		{"post", "verifyEmail", ontology.RiskWrite},
		{"post", "checkIn", ontology.RiskWrite},
		{"post", "searchOrders", ontology.RiskRead},
		{"get", "resolveName", ontology.RiskRead},
		{"get", "verifyStatus", ontology.RiskRead},
	}
	for i, c := range cases {
		fmt.Fprintf(&b, "  /p%d:\n    %s:\n      operationId: %s\n      security: [{oauth: [things]}]\n      responses: {\"204\": {description: done}}\n", i, c.method, c.id)
	}
	b.WriteString(`components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example", scopes: {things: t}}}}
`)
	doc, err := openapi.Parse([]byte(b.String()), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil)
	for _, c := range cases {
		tp := tool(t, m, c.id)
		if tp.Risk.Value != c.want || (c.want != ontology.RiskRead) != (tp.Approval.Value == ontology.ApprovalRequired) {
			t.Errorf("%s %s: risk %s, approval %s (%s), want %s", strings.ToUpper(c.method), c.id, tp.Risk.Value, tp.Approval.Value, tp.Risk.Rule, c.want)
		}
	}
}

// TestDerivedFromRisk holds, for every tool of every corpus document, the
// values spec 001 derives from the risk class and idempotency: the hints
// "cannot disagree with the gate" (readOnlyHint and destructiveHint from
// the risk class), approval none only for a read, rate the class's budget
// (spec 001, "Call budgets"), idempotentHint from the idempotency that
// retry acts on, and production kept from destructive tools.
func TestDerivedFromRisk(t *testing.T) {
	for _, name := range corpusNames(t) {
		t.Run(name, func(t *testing.T) {
			for _, tp := range corpusManifest(t, name).Tools {
				r := tp.Risk.Value
				a := tp.Annotations
				if a.ReadOnlyHint.Value != (r == ontology.RiskRead) || a.DestructiveHint.Value != (r == ontology.RiskDestructive) {
					t.Errorf("%s: %s with readOnlyHint %v, destructiveHint %v", tp.Name, r, a.ReadOnlyHint.Value, a.DestructiveHint.Value)
				}
				if (tp.Approval.Value == ontology.ApprovalNone) != (r == ontology.RiskRead) {
					t.Errorf("%s: %s with approval %s", tp.Name, r, tp.Approval.Value)
				}
				b := ontology.RiskBudget(r)
				if got := tp.Rate.Value; got.CallsPerMinute != b.PerMinute || got.MaxConcurrent != b.MaxConcurrent || got.DailyCallBudget != b.PerDay {
					t.Errorf("%s: %s with rate %+v, want %+v", tp.Name, r, got, b)
				}
				if a.IdempotentHint.Value != (tp.Retry.Value == ontology.RetrySafe) {
					t.Errorf("%s: idempotentHint %v with retry %s", tp.Name, a.IdempotentHint.Value, tp.Retry.Value)
				}
				if tp.IdempotencyKeyRequired.Value != (tp.Retry.Value == ontology.RetryWithIdempotencyKey) || (tp.IdempotencyHeader.Value != "") != tp.IdempotencyKeyRequired.Value {
					t.Errorf("%s: retry %s, key required %v, header %q", tp.Name, tp.Retry.Value, tp.IdempotencyKeyRequired.Value, tp.IdempotencyHeader.Value)
				}
				if tp.Operation.SOAP != nil && tp.Retry.Value != ontology.RetryNever {
					t.Errorf("%s: a SOAP call with retry %s: WSDL declares no idempotency", tp.Name, tp.Retry.Value)
				}
				if prod := slices.Contains(tp.AllowedEnvironments.Value, "production"); prod == (r == ontology.RiskDestructive) {
					t.Errorf("%s: %s allowed in %v", tp.Name, r, tp.AllowedEnvironments.Value)
				}
				if (a.ReversibleHint != nil) && (r == ontology.RiskRead || a.ReversibleHint.Value) {
					t.Errorf("%s: reversibleHint %+v on a %s", tp.Name, a.ReversibleHint, r)
				}
			}
		})
	}
}

// TestRetry holds spec 001's "Retrying, and when not to": safe for a read
// or an idempotent method, with_idempotency_key where the operation
// declares the key, never where idempotency cannot be determined, and
// never on the SOAP path.
func TestRetry(t *testing.T) {
	cases := []struct {
		doc, tool string
		want      ontology.HTTPRetry
		header    string
		unknown   bool // an idempotency_unknown finding
	}{
		{"adyen-transfers-v4.json", "post-transfers", ontology.RetryWithIdempotencyKey, "Idempotency-Key", false},
		{"adyen-transfers-v4.json", "post-grants", ontology.RetryWithIdempotencyKey, "Idempotency-Key", false},
		{"adyen-transfers-v4.json", "get-transfers-id", ontology.RetrySafe, "", false},
		{"oai-petstore.yaml", "createPets", ontology.RetryNever, "", true},
		{"oai-petstore.yaml", "listPets", ontology.RetrySafe, "", false},
		{"swagger-petstore3.yaml", "updatePet", ontology.RetrySafe, "", false}, // PUT
		{"swagger-petstore3.yaml", "deletePet", ontology.RetrySafe, "", false}, // DELETE
		{"discord-api.json", "update_guild", ontology.RetryNever, "", true},    // PATCH
		{"slack-web-api.json", "auth_revoke", ontology.RetryNever, "", true},   // a GET that changes state
		{"camara-quality-on-demand.yaml", "retrieveSessionsByDevice", ontology.RetryNever, "", true},
		{"taxcloud-taxcloud.wsdl", "Lookup", ontology.RetryNever, "", true},
		{"taxcloud-taxcloud.wsdl", "GetTICs", ontology.RetryNever, "", true},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			tp := tool(t, corpusManifest(t, c.doc), c.tool)
			if tp.Retry.Value != c.want {
				t.Fatalf("%s: retry %s, want %s (%s)", tp.Operation.Method, tp.Retry.Value, c.want, tp.Retry.Rule)
			}
			if tp.IdempotencyHeader.Value != c.header || tp.IdempotencyKeyRequired.Value != (c.header != "") {
				t.Errorf("header %q required %v, want %q", tp.IdempotencyHeader.Value, tp.IdempotencyKeyRequired.Value, c.header)
			}
			if c.header != "" && (len(tp.IdempotencyHeader.Source) == 0 || !strings.Contains(tp.IdempotencyHeader.Source[0], "parameters")) {
				t.Errorf("the header's source %v is not its parameter", tp.IdempotencyHeader.Source)
			}
			if got := finding(tp, policy.UnresolvedIdempotency) != nil; got != c.unknown {
				t.Errorf("idempotency_unknown: %v, want %v", got, c.unknown)
			}
			if tp.Annotations.IdempotentHint.Value != (c.want == ontology.RetrySafe) {
				t.Errorf("idempotentHint %v for retry %s", tp.Annotations.IdempotentHint.Value, c.want)
			}
		})
	}
}

// TestInfoNounsThatWriteAreNotReads: a word ending on info is a noun of
// information (tokeninfo, userinfo) only where it does not begin on a word
// that writes or removes: a POST named updateuserinfo, setuserinfo or
// deleteuserinfo (lower case, one word: a legacy RPC path) changes state,
// and was made a read by its info, served with no approval.
func TestInfoNounsThatWriteAreNotReads(t *testing.T) {
	var b strings.Builder
	b.WriteString(`openapi: 3.0.3
info: {title: T, version: "1"}
paths:
`)
	cases := []struct {
		method, id string
		want       ontology.Risk
	}{
		{"post", "updateuserinfo", ontology.RiskWrite},
		{"post", "setuserinfo", ontology.RiskWrite},
		{"post", "deleteuserinfo", ontology.RiskWrite},
		{"post", "oauth2.tokeninfo", ontology.RiskRead},
		{"post", "userinfo", ontology.RiskRead},
		{"get", "updateinfo", ontology.RiskRead},
	}
	for i, c := range cases {
		fmt.Fprintf(&b, "  /p%d:\n    %s:\n      operationId: %s\n      security: [{oauth: [things]}]\n      responses: {\"204\": {description: done}}\n", i, c.method, c.id)
	}
	b.WriteString(`components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example", scopes: {things: t}}}}
`)
	doc, err := openapi.Parse([]byte(b.String()), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil)
	for _, c := range cases {
		tp := tool(t, m, strings.ReplaceAll(c.id, ".", "_"))
		if tp.Risk.Value != c.want || (c.want != ontology.RiskRead) != (tp.Approval.Value == ontology.ApprovalRequired) {
			t.Errorf("%s %s: risk %s, approval %s (%s), want %s", strings.ToUpper(c.method), c.id, tp.Risk.Value, tp.Approval.Value, tp.Risk.Rule, c.want)
		}
	}
}

// TestAPathIsNoVerb: an operation without an operationId is named by its
// path, whose words are resources: a POST to /orders/{orderId}/status
// sets the status, to /devices/{deviceId}/version installs one. The read
// words a verb's place makes a POST a read by are an operationId's only;
// such a POST was served as a read, with no approval. A GET named by its
// path still reads.
func TestAPathIsNoVerb(t *testing.T) {
	doc, err := openapi.Parse([]byte(`openapi: 3.0.3
info: {title: T, version: "1"}
security: [{oauth: [things]}]
paths:
  /orders/{orderId}/status:
    parameters: [{name: orderId, in: path, required: true, schema: {type: string}}]
    post:
      requestBody: {content: {application/json: {schema: {type: object, properties: {status: {type: string}}}}}}
      responses: {"204": {description: done}}
    get:
      responses: {"200": {description: ok}}
  /devices/{deviceId}/version:
    post:
      parameters: [{name: deviceId, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: done}}
  /search:
    post:
      operationId: searchOrders
      responses: {"200": {description: ok}}
components:
  securitySchemes:
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://t.example", scopes: {things: t}}}}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := compileDoc(t, doc, nil)
	for _, c := range []struct {
		source string
		want   ontology.Risk
	}{
		{"/paths/~1orders~1{orderId}~1status/post", ontology.RiskWrite},
		{"/paths/~1devices~1{deviceId}~1version/post", ontology.RiskWrite},
		{"/paths/~1orders~1{orderId}~1status/get", ontology.RiskRead},
		{"/paths/~1search/post", ontology.RiskRead},
	} {
		i := slices.IndexFunc(m.Tools, func(tp policy.ToolPolicy) bool { return tp.Operation.Source == c.source })
		if i < 0 {
			t.Fatalf("no tool for %s", c.source)
		}
		tp := m.Tools[i]
		if tp.Risk.Value != c.want || (c.want != ontology.RiskRead) != (tp.Approval.Value == ontology.ApprovalRequired) {
			t.Errorf("%s: risk %s, approval %s (%s), want %s", c.source, tp.Risk.Value, tp.Approval.Value, tp.Risk.Rule, c.want)
		}
	}
}
