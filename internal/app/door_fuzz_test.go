package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/devissuer"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/rpcerror"
	"github.com/orangerail/orangerail/internal/testdb"
)

// door is every HTTP route the app serves, in process, on a real database,
// with an OIDC issuer whose tokens the front verifies as it verifies
// every token.
type door struct {
	handler http.Handler
	// tokens are an agent's, an approver's and an auditor's, then none and
	// a forged one.
	tokens []string
	// approval is a pending approval the approver may decide, and digest
	// its input's digest.
	approval, digest string
}

// personClaim marks a token as a person's (identity.oidc.human).
const personClaim = "actor_type"

func newDoor(tb testing.TB) *door {
	tb.Helper()
	ctx := context.Background()
	dbURL := testdb.New(tb)
	admin := testdb.Pool(tb, dbURL)
	if _, err := admin.Exec(ctx, orders.Seed); err != nil {
		tb.Fatal(err)
	}
	iss, err := devissuer.New()
	if err != nil {
		tb.Fatal(err)
	}
	issuerSrv := httptest.NewServer(iss.Handler())
	tb.Cleanup(issuerSrv.Close)
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Identity.OIDC = &ontology.OIDC{Issuer: issuerSrv.URL, Audience: "orangerail", TenantClaim: "org_id",
		Human: &ontology.HumanRule{Claim: personClaim, Values: []string{"person"}}}
	// The fuzzer is one client sending thousands of requests a minute: the
	// allowances would answer most of them 429 before they reach a route.
	r := &cfg.HTTP.RateLimits
	r.Store, r.ReadsPerMinute, r.WritesPerMinute, r.FailedAuthPerMinute = ontology.RateLimitMemory, 1<<30, 1<<30, 1<<30
	rt, err := Open(ctx, Settings{Config: cfg, DatabaseURL: dbURL, Key: bytes.Repeat([]byte{7}, engine.KeySize), Serve: true, SweepEvery: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rt.Close)
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := rt.routes(resolver)
	if err != nil {
		tb.Fatal(err)
	}
	token := func(subject string, person bool, roles ...string) string {
		extra := map[string]any{"org_id": "acme", "roles": roles, "scope": "orders:read orders:write"}
		if person {
			extra[personClaim] = "person"
		}
		tok, err := iss.Token(devissuer.Claims{Issuer: issuerSrv.URL, Subject: subject, Audience: "orangerail",
			Expiry: time.Now().Add(24 * time.Hour), Extra: extra})
		if err != nil {
			tb.Fatal(err)
		}
		return tok
	}
	agent := token("agent-7", false, "support")
	d := &door{handler: h, tokens: []string{agent, token("ada", true, "approver"), token("audrey", true, "auditor"), "",
		agent[:len(agent)-4] + "AAAA"}}
	// Two approvals, so that each list has a second page and a cursor.
	for _, reason := range []string{"first", "second"} {
		out := rt.Engine.Call(ctx, &engine.Caller{Subject: "agent-7", Issuer: issuerSrv.URL, Tenant: "acme", Roles: []string{"support"},
			Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "`+reason+`"}`))
		if out.Status != engine.StatusApprovalPending {
			tb.Fatalf("stage: %s %s %v", out.Status, out.Code, out.Err)
		}
		d.approval = out.ApprovalID.String()
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/approvals/"+d.approval, nil)
	req.Header.Set("Authorization", "Bearer "+d.tokens[1])
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var detail struct{ Digest string }
	if err := json.Unmarshal(rec.Body.Bytes(), &detail); err != nil || detail.Digest == "" {
		tb.Fatalf("review: %d %s", rec.Code, rec.Body)
	}
	d.digest = detail.Digest
	return d
}

// serve sends one request, the headers an MCP client sends and the bearer
// token replaced by header's "Name: value" lines, and holds the answer to
// the door's promises.
func (d *door) serve(t *testing.T, method, path, query string, token uint8, header string, body []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.URL.RawQuery = query
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok := d.tokens[int(token)%len(d.tokens)]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for line := range strings.Lines(header) {
		name, value, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		req.Header[name] = append(req.Header[name][:0], strings.TrimSpace(value))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	d.handler.ServeHTTP(rec, req.WithContext(ctx))
	what := method + " " + path + "?" + query
	checkAnswer(t, what, rec)
	// An answer carries the request's id, or null when it was refused
	// before its body was read (its token, its origin).
	if sent := rpcerror.ID(body); sent != nil && path == MCPPath {
		var answer struct{ ID json.RawMessage }
		if json.Unmarshal(rec.Body.Bytes(), &answer) == nil && answer.ID != nil && string(answer.ID) != "null" && !sameJSON(sent, answer.ID) {
			t.Fatalf("%s: a request of id %s answered as id %s", what, sent, answer.ID)
		}
	}
}

// sameJSON reports whether two JSON values are the same value, numbers
// compared as written.
func sameJSON(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) any {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// doorRoutes are the routes a fuzzed request is sent to; %s stands for a
// path segment of the fuzzer's.
var doorRoutes = []struct{ method, path string }{
	{http.MethodPost, MCPPath},
	{http.MethodGet, MCPPath},
	{http.MethodDelete, MCPPath},
	{http.MethodGet, "/api/v1/approvals"},
	{http.MethodGet, "/api/v1/approvals/%s"},
	{http.MethodPost, "/api/v1/approvals/%s/decision"},
	{http.MethodGet, "/api/v1/audit"},
	{http.MethodGet, "/api/v1/audit/head"},
	{http.MethodGet, "/api/v1/openapi.json"},
	{http.MethodGet, "/.well-known/oauth-protected-resource/mcp"},
	{http.MethodGet, "/healthz"},
}

// mcpRequests are real MCP traffic: what a client sends over a session.
var mcpRequests = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"order_list","arguments":{"filters":{"status":{"eq":"paid"}},"sort":"-created_at","limit":2}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"cancel_order","arguments":{"order_id":"o-1001","reason":"customer asked"}}}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"check_approval","arguments":{"approval_id":"123e4567-e89b-12d3-a456-426614174000"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"describe_object","arguments":{"object":"order"}}}`,
	`{"jsonrpc":"2.0","id":8,"method":"resources/list"}`,
	`{"jsonrpc":"2.0","id":9,"method":"prompts/list"}`,
	`{"jsonrpc":"2.0","id":10,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":11,"method":"no/such/method"}`,
	`[{"jsonrpc":"2.0","id":12,"method":"tools/list"}]`,
	`{"jsonrpc":"2.0","id":13,"id":14,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-1001","id":"o-1002"}}}`,
	`{"jsonrpc":"2.0","id":1e999,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":100000000000000000000,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"order_list","arguments":{"limit":123456789012345678901234567890}}}`,
	`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"order_get","arguments":{"id":"o-\u0000"}}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"tools/call\",\"params\":{\"name\":\"order_get\",\"arguments\":{\"id\":\"\xff\xfe\"}}}",
	`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"order_get","arguments":` + strings.Repeat(`{"a":`, 3000) + `1` + strings.Repeat(`}`, 3000) + `}}`,
	`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"order_list","arguments":{"filters":` + strings.Repeat(`[`, 3000) + strings.Repeat(`]`, 3000) + `}}}`,
	`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"order_list","arguments":{"cursor":"e30.AAAAAAAAAAAAAAAAAAAAAA"}}}`,
	"",
	"\x00",
}

// deskRequests are real desk traffic: decisions, and what the lists read.
var deskRequests = []struct{ segment, query, body string }{
	{"123e4567-e89b-12d3-a456-426614174000", "status=pending&limit=2", `{"decision":"approve","digest":"sha256:00","note":"ok"}`},
	{"123e4567-e89b-12d3-a456-426614174000", "status=approved&action=cancel_order&requested_by=agent-7", `{"decision":"reject"}`},
	{"not-a-uuid", "limit=0", `{"decision":"approve","decision":"reject"}`},
	{"123e4567-e89b-12d3-a456-426614174000", "cursor=e30.AAAAAAAAAAAAAAAAAAAAAA&limit=1", `{"decision":"approve","digest":""}`},
	{"x", "phase=staged&actor=agent-7&correlation_id=c-1&limit=3", `{"decision":"reject","extra":1}`},
	{"%00", "action=%00&requested_by=%FF&actor=%00&correlation_id=%FF", "{\"decision\":\"reject\",\"note\":\"\x00\xff\"}"},
	{"..", "limit=99999999999999999999999", `{"decision":"reject","note":"` + strings.Repeat("n", 5000) + `"}`},
}

// doorHeaders are header sets a client sends, one "Name: value" a line.
var doorHeaders = []string{
	"",
	"Origin: https://evil.example.com",
	"MCP-Protocol-Version: 1999-01-01",
	"Content-Type: text/plain",
	"Accept: application/json",
	"Authorization: Basic dXNlcjpwYXNz",
	"Authorization: Bearer",
	"X-Forwarded-For: 10.0.0.1, \x00\nContent-Type: application/json; charset=\xff",
	"Mcp-Session-Id: \x00\xff",
}

// FuzzHTTPDoor sends hostile requests — bodies, headers, query strings,
// path segments, tokens — to every route the app serves, in process, and
// holds every answer to: no 5xx, so no internal error and no raw text of
// one; every refusal of 400 and above JSON naming a documented stable code
// (a JSON-RPC error's data.code, or the JSON API's error.code), and every
// code an answer names documented; a JSON-RPC answer carrying its
// request's id (or null, refused before the body was read); no datasource
// error, panic or stack in any answer. It is seeded with real MCP and desk
// traffic and with hostile JSON: deep nesting, duplicate keys, huge
// numbers, invalid UTF-8, NUL bytes.
func FuzzHTTPDoor(f *testing.F) {
	d := newDoor(f)
	for i, body := range mcpRequests {
		f.Add(uint8(0), uint8(0), "", "", "", []byte(body))
		f.Add(uint8(0), uint8(i), doorHeaders[i%len(doorHeaders)], "", "", []byte(body))
	}
	for _, r := range deskRequests {
		for route := uint8(3); route < 8; route++ {
			f.Add(route, uint8(1), "", r.segment, r.query, []byte(r.body))
			f.Add(route, uint8(2), "", r.segment, r.query, []byte(r.body))
		}
	}
	for i, header := range doorHeaders {
		for route := range doorRoutes {
			f.Add(uint8(route), uint8(i), header, "", "", []byte(nil))
		}
	}
	f.Fuzz(func(t *testing.T, route, token uint8, header, segment, query string, body []byte) {
		rt := doorRoutes[int(route)%len(doorRoutes)]
		d.serve(t, rt.method, strings.Replace(rt.path, "%s", url.PathEscape(segment), 1), query, token, header, body)
	})
}

// deskRoutes are the approvals API's routes that read what a person sends.
var deskRoutes = []struct{ method, path string }{
	{http.MethodGet, "/api/v1/approvals"},
	{http.MethodGet, "/api/v1/approvals/%s"},
	{http.MethodPost, "/api/v1/approvals/%s/decision"},
	{http.MethodGet, "/api/v1/audit"},
}

// FuzzDeskAPI sends people's requests to the approvals API — filters,
// cursors, limits, approval ids and decision bodies — as an approver and
// as an auditor, and holds every answer to FuzzHTTPDoor's promises. It is
// seeded with real desk traffic, a pending approval and its digest, and
// real cursors the API made.
func FuzzDeskAPI(f *testing.F) {
	d := newDoor(f)
	var cursors []string
	for _, path := range []string{"/api/v1/approvals?limit=1&status=pending", "/api/v1/audit?limit=1"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+d.tokens[1])
		rec := httptest.NewRecorder()
		d.handler.ServeHTTP(rec, req)
		var page struct {
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			f.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if page.NextCursor == nil {
			f.Fatalf("%s: no second page", path)
		}
		cursors = append(cursors, url.QueryEscape(*page.NextCursor))
	}
	for _, r := range deskRequests {
		for route := range deskRoutes {
			f.Add(uint8(route), uint8(1), r.segment, r.query, []byte(r.body))
			f.Add(uint8(route), uint8(2), d.approval, r.query, []byte(r.body))
		}
	}
	for _, body := range []string{`{"decision":"reject","note":"no\u0000"}`, `{"decision":"approve","digest":"` + d.digest + `","note":"\ud800"}`,
		`{"decision":"approve","digest":"` + d.digest + `"}`, `{"decision":"reject","note":"fine"}`} {
		f.Add(uint8(2), uint8(1), d.approval, "", []byte(body))
	}
	for _, c := range cursors {
		f.Add(uint8(0), uint8(1), "", "limit=1&status=pending&cursor="+c, []byte(nil))
		f.Add(uint8(3), uint8(1), "", "limit=1&cursor="+c, []byte(nil))
	}
	f.Fuzz(func(t *testing.T, route, token uint8, segment, query string, body []byte) {
		rt := deskRoutes[int(route)%len(deskRoutes)]
		d.serve(t, rt.method, strings.Replace(rt.path, "%s", url.PathEscape(segment), 1), query, 1+token%2, "", body)
	})
}

// leakMarkers are what an answer holding an internal error's raw text
// would show: a datasource error (pgconn's "… (SQLSTATE …)"), a panic, a stack.
var leakMarkers = []string{"SQLSTATE", "pgx", "pgconn", "goroutine ", "panic", "runtime error", ".go:"}

// checkAnswer holds one answer to the door's promises.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= http.StatusInternalServerError {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	for _, m := range leakMarkers {
		if bytes.Contains(body, []byte(m)) {
			t.Fatalf("%s: the answer holds %q: %s", what, m, body)
		}
	}
	if rec.Code < http.StatusBadRequest && !bytes.Contains(body, []byte(`"error"`)) {
		return
	}
	for _, code := range errorCodes(body) {
		if _, ok := errcode.Explain(code); !ok || code == string(errcode.InternalError) {
			t.Fatalf("%s: %d, code %q: %s", what, rec.Code, code, body)
		}
	}
	if rec.Code >= http.StatusBadRequest && len(errorCodes(body)) == 0 {
		t.Fatalf("%s: %d without a stable code (%s): %s", what, rec.Code, rec.Header().Get("Content-Type"), body)
	}
}

// errorCodes are the stable codes of the refusals in an answer: a JSON
// API's error.code, a JSON-RPC error's data.code, each event of a stream.
// A JSON-RPC error without data, go-sdk's answer within the protocol, has
// none: every answer of 400 and above must have one.
func errorCodes(body []byte) []string {
	var codes []string
	read := func(b []byte) {
		var msg struct {
			Error *struct {
				Code json.RawMessage `json:"code"`
				Data *struct {
					Code string `json:"code"`
				} `json:"data"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &msg) != nil || msg.Error == nil {
			return
		}
		var code string
		if json.Unmarshal(msg.Error.Code, &code) != nil {
			if msg.Error.Data == nil {
				// An MCP error the SDK answers in its own words (invalid
				// params, an unknown prompt): the protocol's, without a
				// stable code of orangerail's.
				return
			}
			code = msg.Error.Data.Code
		}
		codes = append(codes, code)
	}
	if json.Valid(body) {
		read(body)
		return codes
	}
	s := bufio.NewScanner(bytes.NewReader(body))
	s.Buffer(nil, len(body)+1)
	for s.Scan() {
		if data, ok := bytes.CutPrefix(s.Bytes(), []byte("data: ")); ok {
			read(data)
		}
	}
	return codes
}
