package policy_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/mcp"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/testdb"
)

// seen is one request a local upstream received.
type seen struct {
	Method, URI, ContentType string
	Body                     string
}

// recorder is a local upstream that answers 200 {} to everything and
// keeps what it was sent.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, seen{req.Method, req.URL.RequestURI(), req.Header.Get("Content-Type"), string(body)})
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{}`))
}

// serveSpec compiles spec (its writes' scopeless key accepted, as a person
// would), writes every action, loads them as a config and serves them to
// a real MCP client over real Postgres against a recorder. call runs a
// tool to its execution, approving it when it waits for a person.
func serveSpec(t *testing.T, spec string, accept map[string]string) (*recorder, func(name, args string) map[string]any) {
	t.Helper()
	rec := &recorder{}
	upstream := httptest.NewServer(rec)
	t.Cleanup(upstream.Close)
	doc := edgeParse(t, []byte(spec))
	m := edgeCompile(t, doc, accept)
	all, err := policy.ParseSelectors([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, all, policy.EmitOptions{BaseURL: upstream.URL, Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Skipped) > 0 {
		t.Fatalf("skipped: %v", out.Skipped)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the actions file does not load: %v\n%s", err, out.YAML)
	}
	t.Setenv("SVC_K_CREDENTIAL", "key-value")
	ctx := context.Background()
	e, cs := connectServed(t, cfg, "svc:read", "svc:write")
	raw := func(name, args string) (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := res.StructuredContent.(map[string]any)
		return res, body
	}
	call := func(name, args string) map[string]any {
		t.Helper()
		res, body := raw(name, args)
		if res.IsError {
			t.Fatalf("%s %s: %v", name, args, body)
		}
		id, _ := body["approvalId"].(string)
		if body["status"] != "approval_pending" || id == "" {
			return body
		}
		view, err := e.ShowApproval(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
		if o := e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}); o.Status != engine.StatusOK {
			t.Fatal(o.Status)
		}
		_, body = raw("check_approval", `{"approvalId": "`+id+`"}`)
		return body
	}
	return rec, call
}

// keyed is the head of a 3.0 document whose calls present an apiKey.
const keyed = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com"}]
security: [{k: []}]
components:
  securitySchemes:
    k: {type: apiKey, in: header, name: X-Key}
`

// TestPatchSendsOnlyWhatTheAgentSent: a PATCH body's property left out
// means "unchanged"; its schema's default says what the upstream assumes
// when the property is absent (OAS "Schema Object": default), not a value
// to send. The compiled input kept the default, and the engine fills
// every default the input declares: an agent renaming a repository sent
// private: false and archived: false, making it public and unarchived.
func TestPatchSendsOnlyWhatTheAgentSent(t *testing.T) {
	spec := keyed + `paths:
  /repos/{repo}:
    patch:
      operationId: updateRepo
      parameters:
        - {name: repo, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                name: {type: string}
                private: {type: boolean, default: false}
                archived: {type: boolean, default: false}
      responses: {"200": {description: ok}}
`
	rec, call := serveSpec(t, spec, map[string]string{"updateRepo": "the key is ours"})
	if body := call("updateRepo", `{"repo": "r1", "body": {"name": "renamed"}}`); body["status"] != "executed" {
		t.Fatalf("updateRepo: %v", body)
	}
	if len(rec.reqs) != 1 {
		t.Fatalf("the upstream got %v", rec.reqs)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(rec.reqs[0].Body), &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent["name"] != "renamed" {
		t.Fatalf("the upstream was sent %s, want only the agent's {\"name\":\"renamed\"}", rec.reqs[0].Body)
	}
}

// connectServed serves cfg's actions on a database of their own, to an
// agent of acme holding scopes, and returns the engine and a real MCP
// client's session.
func connectServed(t *testing.T, cfg *ontology.Config, scopes ...string) (*engine.Engine, *sdk.ClientSession) {
	t.Helper()
	url := testdb.New(t)
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	pool := testdb.RuntimePool(t, url)
	catalog, err := cfg.ReadCatalog(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: pool, Catalog: catalog, Effects: effects.Factories(), Key: key,
		Mode: engine.ModeOf(cfg.Preset), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.New(mcp.Options{Engine: e, Ontology: cfg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	agent := &engine.Caller{Subject: "agent-7", Tenant: "acme", Scopes: scopes, Kind: engine.ActorAgent}
	serverT, clientT := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, agent, serverT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return e, cs
}
