package policy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/policy"
)

// petstore is a local upstream serving swagger-petstore3's pets: POST /pet
// makes one, GET /pet/{petId} reads it. Every request must carry the
// bearer token the compiled scheme places.
type petstore struct {
	token string

	mu    sync.Mutex
	pets  map[string]json.RawMessage
	posts []string // the body of each POST /pet
	auth  []string // the Authorization of each request
}

func (p *petstore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		http.Error(w, `{"message":"unauthenticated"}`, http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v3/pet":
		body, _ := io.ReadAll(r.Body)
		p.posts = append(p.posts, string(body))
		var pet struct {
			ID json.Number `json:"id"`
		}
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &pet) != nil || pet.ID == "" {
			http.Error(w, `{"message":"invalid"}`, http.StatusBadRequest)
			return
		}
		p.pets[pet.ID.String()] = body
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v3/pet/"):
		pet, ok := p.pets[strings.TrimPrefix(r.URL.Path, "/api/v3/pet/")]
		if !ok {
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(pet)
	default:
		http.NotFound(w, r)
	}
}

// TestCompiledActionsServed compiles swagger-petstore3, writes the actions
// for the pet operations, loads them as a config, and serves them to a
// real MCP client over real Postgres: addPet stages an approval, a person
// approves it, the agent's poll executes it once against the local
// upstream with the bearer credential the scheme places and the body the
// agent sent; getPetById, a read, runs at once; deletePet, destructive, is
// kept out of production; an operation not picked is not served.
func TestCompiledActionsServed(t *testing.T) {
	store := &petstore{token: "test-bearer-value", pets: map[string]json.RawMessage{}}
	upstream := httptest.NewServer(store)
	defer upstream.Close()

	m := compile(t, "swagger-petstore3.yaml", "petstore", nil)
	doc := load(t, "swagger-petstore3.yaml").Doc
	sel, err := policy.ParseSelectors([]string{"operation:addPet,operation:getPetById", "operation:deletePet"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := policy.Emit(m, doc, sel, policy.EmitOptions{BaseURL: upstream.URL + "/api/v3", Environment: "production"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"addPet", "deletePet", "getPetById"}; !slices.Equal(out.Written, want) {
		t.Fatalf("written %v, want %v (skipped %v)", out.Written, want, out.Skipped)
	}
	cfg, err := ontology.Parse(out.YAML)
	if err != nil {
		t.Fatalf("the actions file does not load: %v\n%s", err, out.YAML)
	}
	t.Setenv("PETSTORE_PETSTORE_AUTH_CREDENTIAL", store.token)

	ctx := context.Background()
	e, cs := connectServed(t, cfg, "petstore:read", "petstore:write")

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "addPet") || !slices.Contains(names, "getPetById") {
		t.Fatalf("tools %v lack the compiled actions", names)
	}
	for _, never := range []string{"deletePet", "updatePet", "placeOrder"} {
		if slices.Contains(names, never) {
			t.Errorf("%s is served: %v", never, names)
		}
	}

	call := func(name, args string) (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := res.StructuredContent.(map[string]any)
		return res, body
	}
	const pet = `{"id": 77, "name": "Rex", "photoUrls": ["https://example.com/rex.jpg"], "status": "available"}`
	res, body := call("addPet", `{"body": `+pet+`}`)
	id, _ := body["approvalId"].(string)
	if res.IsError || body["status"] != "approval_pending" || id == "" {
		t.Fatalf("addPet: %v", body)
	}
	if len(store.posts) != 0 {
		t.Fatal("the upstream was called before a person approved")
	}
	view, err := e.ShowApproval(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	person := &engine.Caller{Subject: "alice", Tenant: "acme", Roles: []string{"approver"}, Kind: engine.ActorHuman}
	if out := e.Decide(ctx, person, engine.Decision{ApprovalID: id, Approve: true, Digest: view.Digest}); out.Status != engine.StatusOK {
		t.Fatal(out.Status)
	}
	res, body = call("check_approval", `{"approvalId": "`+id+`"}`)
	if res.IsError || body["status"] != "executed" {
		t.Fatalf("executing addPet: %v", body)
	}
	if _, body = call("check_approval", `{"approvalId": "`+id+`"}`); body["status"] != "consumed" {
		t.Fatalf("a second poll: %v", body)
	}
	if len(store.posts) != 1 {
		t.Fatalf("the upstream got %d POSTs, want exactly one", len(store.posts))
	}
	var sent, want any
	_ = json.Unmarshal([]byte(store.posts[0]), &sent)
	_ = json.Unmarshal([]byte(pet), &want)
	if got, _ := json.Marshal(sent); string(got) != string(mustMarshal(want)) {
		t.Fatalf("the upstream got %s, want the agent's %s", store.posts[0], pet)
	}

	res, body = call("getPetById", `{"petId": 77}`)
	if res.IsError || !strings.Contains(string(mustMarshal(body)), `"Rex"`) {
		t.Fatalf("getPetById: %v", body)
	}
	for _, a := range store.auth {
		if a != "Bearer "+store.token {
			t.Fatalf("a request carried Authorization %q", a)
		}
	}
	if res, body = call("getPetById", `{"petId": "not a number"}`); !res.IsError {
		t.Fatalf("an input the compiled schema refuses was called: %v", body)
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
