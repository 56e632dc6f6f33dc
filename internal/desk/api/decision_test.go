package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestDecisionAPI drives every route of the API over HTTP with real
// tokens, through every status the document names, validating each answer
// against the document.
func TestDecisionAPI(t *testing.T) {
	ctx := context.Background()
	d := newDesk(t, func(cfg *ontology.Config) {
		// Shipping changes are decided by shipping leads alone.
		cfg.Actions["update_shipping_address"].Policy.ApproverRoles = []string{"shipping-lead"}
	}, nil)
	c := newContract(t)
	bob := d.token("bob", "acme", true, "approver")
	alice := d.token("alice", "acme", true, "approver", "support")
	dave := d.token("dave", "acme", true)                  // a person without a role
	erin := d.token("erin", "acme", true, "shipping-lead") // decides shipping changes only
	frank := d.token("frank", "acme", true, "auditor")
	carol := d.token("carol", "globex", true, "approver")
	agent := d.token("agent-7", "acme", false, "approver", "support") // an agent, whatever its roles
	e := d.rt.Engine

	cancel := d.stage(e, d.agent("agent-7", "acme"), "cancel_order", `{"reason": "customer asked", "order_id": "o-1001"}`)
	ship := d.stage(e, d.agent("agent-7", "acme"), "update_shipping_address", `{"order_id": "o-1002", "address": "1 New Street"}`)
	get := func(path, token string) *answer { return d.do("GET", "/api/v1"+path, token, "") }
	decide := func(id, token, body string) *answer {
		return d.do("POST", "/api/v1/approvals/"+id+"/decision", token, body)
	}
	refusals := map[string]*answer{}
	refused := func(name string, a *answer, status int, code string) {
		t.Helper()
		if a.status != status || a.code(t) != code {
			t.Fatalf("%s: %d %s, want %d %s", name, a.status, a.body, status, code)
		}
		refusals[name] = a
	}

	// The document is served, and holds itself.
	doc := get("/openapi.json", "")
	c.check(t, "GET", "/openapi.json", doc)

	// No token: 401 with the challenge naming the API's metadata.
	for path, route := range map[string]string{"/approvals": "/approvals", "/approvals/" + cancel: "/approvals/{id}",
		"/audit": "/audit", "/audit/head": "/audit/head", "/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/inclusion?seq=1": "/audit/proof/inclusion", "/audit/proof/consistency?from=1": "/audit/proof/consistency"} {
		a := get(path, "")
		c.check(t, "GET", route, a)
		if a.status != 401 || !strings.Contains(a.header.Get("WWW-Authenticate"), `resource_metadata="`+d.base+"/.well-known/oauth-protected-resource/api/v1") {
			t.Fatalf("GET %s without a token: %d %q", path, a.status, a.header.Get("WWW-Authenticate"))
		}
		refusals["no_token"] = a
	}
	a := decide(cancel, "", `{"decision":"reject"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("no_token", a, 401, "X_MCP_UNAUTHORIZED")
	meta := d.do("GET", "/.well-known/oauth-protected-resource/api/v1", "", "")
	if m := meta.json(t); m["resource"] != d.base+"/api/v1" {
		t.Fatalf("the API's protected-resource metadata: %s", meta.body)
	}

	// An agent's token: 403 on every route, whatever roles it claims.
	for path, route := range map[string]string{"/approvals": "/approvals", "/approvals/" + cancel: "/approvals/{id}",
		"/audit": "/audit", "/audit/head": "/audit/head", "/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/inclusion?seq=1": "/audit/proof/inclusion", "/audit/proof/consistency?from=1": "/audit/proof/consistency"} {
		a := get(path, agent)
		c.check(t, "GET", route, a)
		refused("agent_token", a, 403, "X_FORBIDDEN")
		// The audit log's refusal says why: not a person, not a role.
		if strings.HasPrefix(route, "/audit") && !strings.Contains(a.message(t), "not a person's") {
			t.Fatalf("%s refuses an agent's token saying: %s", route, a.body)
		}
	}
	a = decide(cancel, agent, `{"decision":"approve","digest":"00"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("agent_token", a, 403, "X_FORBIDDEN")

	// A cross-site request from a browser.
	req, _ := http.NewRequest("POST", d.base+"/api/v1/approvals/"+cancel+"/decision", strings.NewReader(`{"decision":"reject"}`))
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	crossSite := &answer{status: resp.StatusCode, header: resp.Header}
	crossSite.body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	c.check(t, "POST", "/approvals/{id}/decision", crossSite)
	refused("cross_site", crossSite, 403, "X_MCP_ORIGIN_REFUSED")

	// A path the API does not have, and a route's path with another
	// method: refused in JSON with a code, the method named in Allow.
	if a := get("/approvals/"+cancel+"/decision/extra", bob); a.status != 404 || a.code(t) != "X_API_ROUTE_UNKNOWN" {
		t.Fatalf("a path under a route: %d %s", a.status, a.body)
	}
	refused("route_unknown", get("/approval", bob), 404, "X_API_ROUTE_UNKNOWN")
	wrongMethod := d.do("DELETE", "/api/v1/approvals/"+cancel, bob, "")
	refused("method_not_allowed", wrongMethod, 405, "X_API_ROUTE_UNKNOWN")
	if allow := wrongMethod.header.Get("Allow"); allow != "GET" {
		t.Fatalf("DELETE of an approval: Allow %q, want GET", allow)
	}
	if a := d.do("GET", "/api/v1/approvals/"+cancel+"/decision", bob, ""); a.status != 405 || a.header.Get("Allow") != "POST" {
		t.Fatalf("GET of a decision: %d %q %s", a.status, a.header.Get("Allow"), a.body)
	}
	if a := d.do("POST", "/api/v1/nowhere", "", ""); a.status != 401 {
		t.Fatalf("an unknown path without a token: %d, want 401 as the rest", a.status)
	}

	// A person without the action's approver role.
	a = get("/approvals/"+cancel, dave)
	c.check(t, "GET", "/approvals/{id}", a)
	refused("not_an_approver", a, 403, "X_FORBIDDEN")
	refused("not_an_approver", get("/approvals/"+cancel, erin), 403, "X_FORBIDDEN")
	refused("not_an_approver", get("/approvals/"+ship, bob), 403, "X_FORBIDDEN")
	refused("not_an_approver", decide(ship, bob, `{"decision":"reject"}`), 403, "X_FORBIDDEN")
	a = get("/audit", dave)
	refused("not_an_auditor", a, 403, "X_FORBIDDEN")

	// Another tenant's approval and an unknown one: the same 404.
	other := get("/approvals/"+cancel, carol)
	c.check(t, "GET", "/approvals/{id}", other)
	unknown := get("/approvals/"+uuid.NewString(), bob)
	refused("not_found", other, 404, "X_APPROVAL_NOT_FOUND")
	if string(other.body) != string(unknown.body) || unknown.status != 404 {
		t.Fatalf("another tenant's approval %s, an unknown one %d %s", other.body, unknown.status, unknown.body)
	}
	if a := get("/approvals/not-a-uuid", bob); string(a.body) != string(other.body) {
		t.Fatalf("a malformed id: %s", a.body)
	}
	a = decide(cancel, carol, `{"decision":"reject","note":"x"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("not_found", a, 404, "X_APPROVAL_NOT_FOUND")

	// The list: a person sees the approvals of the actions they decide.
	list := get("/approvals", bob)
	c.check(t, "GET", "/approvals", list)
	items := list.json(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != cancel || items[0].(map[string]any)["title"] != "Cancel an order" {
		t.Fatalf("bob's list: %s", list.body)
	}
	if l := get("/approvals", erin).json(t)["items"].([]any); len(l) != 1 || l[0].(map[string]any)["id"] != ship {
		t.Fatalf("erin's list: %v", l)
	}
	a = get("/approvals?status=nonsense", bob)
	c.check(t, "GET", "/approvals", a)
	refused("bad_status", a, 400, "X_REQUEST_INVALID")

	// The detail: the input as stored (canonical), the target now, and
	// what the statement would write.
	detail := get("/approvals/"+cancel, bob)
	c.check(t, "GET", "/approvals/{id}", detail)
	v := detail.json(t)
	input, _ := json.Marshal(v["input"])
	if string(input) != `{"order_id":"o-1001","reason":"customer asked"}` || !strings.Contains(string(detail.body), `"input":{"order_id":"o-1001","reason":"customer asked"}`) {
		t.Fatalf("input %s", detail.body)
	}
	if target, _ := v["target_now"].(map[string]any); target["status"] != "paid" || v["target_error"] != nil {
		t.Fatalf("target_now %v, target_error %v", v["target_now"], v["target_error"])
	}
	if w, _ := json.Marshal(v["would_write"]); string(w) != `{"status":"cancelled"}` {
		t.Fatalf("would_write %s", w)
	}
	if shipDetail := get("/approvals/"+ship, erin).json(t); fmt.Sprint(shipDetail["would_write"]) != "map[shipping_address:1 New Street]" {
		t.Fatalf("would_write of a shipping change: %v", shipDetail["would_write"])
	}
	digest := v["digest"].(string)

	// Malformed decisions.
	// A member named otherwise than exactly, or given twice, is refused:
	// encoding/json would match the first whatever its case and keep the
	// last of two, where a proxy or a log may read the first.
	for _, body := range []string{`{"decision":"maybe"}`, `{"decision":"approve"}`, `not json`, `{"decision":"reject","extra":1}`, `null`, `[]`,
		`{"Decision":"reject"}`, `{"decision":"reject","note":"a","NOTE":"b"}`, `{"decision":"reject","DECISION":"approve","digest":"` + digest + `"}`,
		`{"decision":"reject","note":"` + strings.Repeat("n", 5000) + `"}`} {
		a := decide(cancel, bob, body)
		c.check(t, "POST", "/approvals/{id}/decision", a)
		refused("malformed_decision", a, 400, "X_REQUEST_INVALID")
	}
	a = decide(cancel, bob, `{"decision":"reject","decision":"approve","digest":"`+digest+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("member_twice", a, 400, "X_REQUEST_INVALID")
	if v := get("/approvals/"+cancel, bob).json(t); v["status"] != "pending" {
		t.Fatalf("after refused decisions the approval is %v", v["status"])
	}
	a = decide(cancel, bob, `{"decision":"reject","note":"`+strings.Repeat("n", 70_000)+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("body_too_large", a, 413, "X_REQUEST_TOO_LARGE")
	// A body compressed (as some HTTP clients send one) is refused as
	// such, not read as the bytes it is and refused as no JSON.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"decision":"reject","note":"compressed"}`))
	_ = zw.Close()
	a = d.doWith("POST", "/api/v1/approvals/"+cancel+"/decision", bob, gz.String(), http.Header{"Content-Encoding": {"gzip"}})
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("body_encoded", a, 415, "X_CONTENT_ENCODING_UNSUPPORTED")

	// A digest that is not the stored input's.
	a = decide(cancel, bob, `{"decision":"approve","digest":"`+strings.Repeat("0", 64)+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("digest_mismatch", a, 422, "X_APPROVAL_ARGUMENTS_MISMATCH")

	// Four-eyes: a person who requested the approval may not decide it —
	// the same subject of the same issuer; the same subject name from
	// another issuer is another person.
	own := d.stage(e, &engine.Caller{Subject: "alice", Issuer: d.issuerAt, Tenant: "acme", Roles: []string{"support"},
		Scopes: []string{"orders:write"}, Kind: engine.ActorHuman}, "cancel_order", `{"order_id": "o-1002", "reason": "mine"}`)
	a = decide(own, alice, `{"decision":"reject","note":"x"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("four_eyes", a, 403, "X_APPROVAL_FOUR_EYES")
	namesake := d.stage(e, &engine.Caller{Subject: "alice", Issuer: "https://elsewhere.example", Tenant: "acme", Roles: []string{"support"},
		Scopes: []string{"orders:write"}, Kind: engine.ActorHuman}, "cancel_order", `{"order_id": "o-1001", "reason": "theirs"}`)
	if a := decide(namesake, alice, `{"decision":"reject","note":"not yours"}`); a.status != 200 {
		t.Fatalf("alice deciding another issuer's alice's request: %d %s", a.status, a.body)
	}

	// Approve with the digest shown: 200, once.
	ok := decide(cancel, bob, `{"decision":"approve","digest":"`+digest+`","note":"fine"}`)
	c.check(t, "POST", "/approvals/{id}/decision", ok)
	if r := ok.json(t); ok.status != 200 || r["id"] != cancel || r["status"] != "approved" || r["decided_by"] != "bob" {
		t.Fatalf("approve: %d %s", ok.status, ok.body)
	}
	a = decide(cancel, bob, `{"decision":"approve","digest":"`+digest+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("decided", a, 409, "X_APPROVAL_DECIDED")
	if d := get("/approvals/"+cancel, bob).json(t); d["status"] != "approved" || d["decided_by"] != "bob" || d["note"] != "fine" || d["decided_at"] == nil {
		t.Fatalf("the decided approval: %v", d)
	}

	// The audit record names the token's subject, issuer and kind.
	var entry []byte
	if err := d.admin.QueryRow(ctx, "SELECT entry FROM orangerail.audit WHERE approval_id = $1 AND phase = 'approved'", cancel).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Actor map[string]string `json:"actor"`
	}
	if err := json.Unmarshal(entry, &rec); err != nil || rec.Actor["subject"] != "bob" || rec.Actor["issuer"] != d.issuerAt || rec.Actor["kind"] != "human" {
		t.Fatalf("the approved record's actor: %s", entry)
	}

	// A rejection's note reaches the agent.
	if a := decide(ship, erin, `{"decision":"reject","note":"that street does not exist"}`); a.status != 200 || a.json(t)["status"] != "rejected" {
		t.Fatalf("reject: %d %s", a.status, a.body)
	}
	checked := e.Check(ctx, d.agent("agent-7", "acme"), ship)
	if checked.Status != engine.StatusRejected || checked.Note != "that street does not exist" {
		t.Fatalf("check_approval of a rejected approval: %s %q", checked.Status, checked.Note)
	}

	// A lapsed approval is expired, never decided, and never listed as
	// pending.
	lapsed := d.stage(d.pastEngine(), d.agent("agent-7", "acme"), "cancel_order", `{"order_id": "o-1002", "reason": "late"}`)
	d.waitLapsed(lapsed)
	for _, it := range get("/approvals", bob).json(t)["items"].([]any) {
		if it.(map[string]any)["id"] == lapsed {
			t.Fatal("a lapsed approval is listed as pending")
		}
	}
	a = decide(lapsed, bob, `{"decision":"reject","note":"x"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("expired", a, 409, "X_APPROVAL_EXPIRED")
	if l := get("/approvals?status=expired", bob).json(t)["items"].([]any); len(l) != 1 || l[0].(map[string]any)["id"] != lapsed {
		t.Fatalf("expired list: %v", l)
	}

	// The audit log: auditors and approvers read their tenant's.
	for _, tok := range []string{bob, frank, erin} {
		head := get("/audit/head", tok)
		c.check(t, "GET", "/audit/head", head)
		if head.status != 200 || head.json(t)["seq"].(float64) < 1 {
			t.Fatalf("audit head: %d %s", head.status, head.body)
		}
	}
	if h := get("/audit/head", carol); h.status != 200 || h.json(t)["seq"].(float64) != 0 || h.json(t)["hash"] != nil {
		t.Fatalf("globex's empty chain: %s", h.body)
	}
	trail := get("/audit?correlation_id="+cancel, frank)
	c.check(t, "GET", "/audit", trail)
	var phases []string
	for _, it := range trail.json(t)["items"].([]any) {
		phases = append(phases, it.(map[string]any)["phase"].(string))
		// The auditor reads each record whole.
		if entry, _ := it.(map[string]any)["entry"].(map[string]any); entry["phase"] != it.(map[string]any)["phase"] {
			t.Fatalf("the auditor reads a record without its entry: %v", it)
		}
	}
	if !bytes.Contains(trail.body, []byte("customer asked")) {
		t.Fatalf("the auditor reads the staged record without its input: %s", trail.body)
	}
	if strings.Join(phases, ",") != "approved,staged" {
		t.Fatalf("the approval's records, newest first: %v", phases)
	}
	// An approver reads the records' columns, never their entries: not
	// those of an action they may not review (erin's), nor those of their
	// own (bob's), which hold the target's state and the datasource's
	// words.
	for name, tok := range map[string]string{"erin": erin, "bob": bob} {
		a := get("/audit?correlation_id="+cancel, tok)
		c.check(t, "GET", "/audit", a)
		items := a.json(t)["items"].([]any)
		if len(items) != 2 {
			t.Fatalf("%s reads %d of the approval's records, want 2", name, len(items))
		}
		for _, it := range items {
			if entry, ok := it.(map[string]any)["entry"]; !ok || entry != nil {
				t.Fatalf("%s, an approver, reads a record's entry: %v", name, it)
			}
		}
		if bytes.Contains(a.body, []byte("customer asked")) {
			t.Fatalf("%s, an approver, reads the call's input: %s", name, a.body)
		}
	}
	if l := get("/audit?actor=bob&phase=approved", bob).json(t)["items"].([]any); len(l) != 1 {
		t.Fatalf("bob's approvals: %v", l)
	}
	if l := get("/audit", carol).json(t)["items"].([]any); len(l) != 0 {
		t.Fatalf("globex sees acme's records: %v", l)
	}
	a = get("/audit?phase=nonsense", frank)
	c.check(t, "GET", "/audit", a)
	refused("bad_phase", a, 400, "X_REQUEST_INVALID")

	// Pages: every record once, newest first, the cursor bound to its
	// filters.
	seen := map[float64]bool{}
	prev := 1e18
	for cursor := ""; ; {
		page := get("/audit?limit=2&cursor="+url.QueryEscape(cursor), frank).json(t)
		for _, it := range page["items"].([]any) {
			seq := it.(map[string]any)["seq"].(float64)
			if seen[seq] || seq >= prev {
				t.Fatalf("seq %v after %v", seq, prev)
			}
			seen[seq], prev = true, seq
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		if a := get("/audit?limit=2&phase=staged&cursor="+url.QueryEscape(next), frank); a.status != 400 {
			t.Fatalf("a cursor under other filters: %d", a.status)
		}
		cursor = next
	}
	var total float64
	if err := d.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit WHERE tenant_id = 'acme'").Scan(&total); err != nil || float64(len(seen)) != total {
		t.Fatalf("paged %d records of %v (%v)", len(seen), total, err)
	}
	pending := map[string]bool{own: true}
	for i := range 3 {
		pending[d.stage(e, d.agent("agent-7", "acme"), "cancel_order", fmt.Sprintf(`{"order_id": "o-1001", "reason": "r%d"}`, i))] = true
	}
	ids := map[string]bool{}
	for cursor := ""; ; {
		page := get("/approvals?status=pending&limit=1&cursor="+url.QueryEscape(cursor), bob)
		c.check(t, "GET", "/approvals", page)
		for _, it := range page.json(t)["items"].([]any) {
			ids[it.(map[string]any)["id"].(string)] = true
		}
		next, _ := page.json(t)["next_cursor"].(string)
		if next == "" {
			break
		}
		if a := get("/approvals?status=pending&limit=1&action=cancel_order&cursor="+url.QueryEscape(next), bob); a.status != 400 {
			t.Fatalf("a cursor under other filters: %d", a.status)
		}
		cursor = next
	}
	if !maps.Equal(ids, pending) {
		t.Fatalf("paged %v, want the pending %v", ids, pending)
	}
	refused("bad_cursor", get("/approvals?cursor=forged.x", bob), 400, "X_REQUEST_INVALID")
	// A path not written clean is refused as written, never redirected to
	// the one it cleans to (a 307 has a client post the body there).
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/approvals//decision"}, {http.MethodPost, "/approvals/x/../" + cancel + "/decision"},
		{http.MethodGet, "/approvals/" + cancel + "/../" + cancel}, {http.MethodGet, "/approvals/."}, {http.MethodGet, "/approvals/.."},
	} {
		if a := d.do(c.method, "/api/v1"+c.path, frank, ""); a.status != http.StatusNotFound || a.code(t) != "X_API_ROUTE_UNKNOWN" {
			t.Errorf("%s %s: %d %s", c.method, c.path, a.status, a.body)
		}
	}
	// A limit out of range is one refusal, said one way, whoever finds it
	// (the query's parse, or the engine).
	for _, limit := range []string{"0", "-1", "201", "x", "1.5"} {
		a := get("/approvals?limit="+limit, bob)
		if msg, _ := a.json(t)["error"].(map[string]any)["message"].(string); a.status != 400 || msg != engine.PageLimitProblem {
			t.Errorf("limit=%s: %d %s", limit, a.status, a.body)
		}
	}

	// A target that cannot be read now is said so, in orangerail's words.
	if _, err := d.admin.Exec(ctx, "REVOKE SELECT ON orders FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	unread := get("/approvals/"+own, bob)
	c.check(t, "GET", "/approvals/{id}", unread)
	if u := unread.json(t); u["target_now"] != nil || u["target_error"] != "the target could not be read now (datasource_permission_denied)" ||
		strings.Contains(string(unread.body), "permission denied for") {
		t.Fatalf("an unreadable target: %s", unread.body)
	}
	if _, err := d.admin.Exec(ctx, "GRANT SELECT ON orders TO orangerail_runtime"); err != nil {
		t.Fatal(err)
	}

	// Signed checkpoints and proofs of the audit log.
	auditProofs(t, d, c, refused, frank, dave, bob, d.token("gina", "globex", true, "auditor"))

	// A store that fails: 500 with a correlation id, its cause withheld.
	if _, err := d.admin.Exec(ctx, "REVOKE SELECT ON orangerail.approvals, orangerail.audit, orangerail.audit_heads, orangerail.audit_checkpoints FROM orangerail_runtime"); err != nil {
		t.Fatal(err)
	}
	for path, route := range map[string]string{"/approvals": "/approvals", "/approvals/" + cancel: "/approvals/{id}",
		"/audit": "/audit", "/audit/head": "/audit/head", "/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/inclusion?seq=1": "/audit/proof/inclusion", "/audit/proof/consistency?from=1": "/audit/proof/consistency"} {
		a := get(path, frank)
		if path == "/approvals/"+cancel || path == "/approvals" {
			a = get(path, bob)
		}
		c.check(t, "GET", route, a)
		refused("internal_error", a, 500, "X_INTERNAL_ERROR")
		if strings.Contains(string(a.body), "permission") {
			t.Fatalf("the store's error reached the caller: %s", a.body)
		}
	}
	a = decide(own, bob, `{"decision":"reject","note":"x"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("internal_error", a, 500, "X_INTERNAL_ERROR")
	delete(refusals, "internal_error") // its message carries a fresh correlation id

	// Past the failed-authentication allowance, an address is answered 429
	// on every route.
	for range d.rt.Config.HTTP.RateLimits.FailedAuthPerMinute + 1 {
		get("/approvals", "not-a-token")
	}
	for path, route := range map[string]string{"/approvals": "/approvals", "/approvals/" + cancel: "/approvals/{id}",
		"/audit": "/audit", "/audit/head": "/audit/head", "/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/inclusion?seq=1": "/audit/proof/inclusion", "/audit/proof/consistency?from=1": "/audit/proof/consistency"} {
		a := get(path, "not-a-token")
		c.check(t, "GET", route, a)
		refused("throttled", a, 429, "X_MCP_AUTH_THROTTLED")
	}
	a = decide(cancel, "not-a-token", `{"decision":"reject"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("throttled", a, 429, "X_MCP_AUTH_THROTTLED")

	// An issuer that cannot be reached: the token cannot be checked, which
	// is not the caller's fault.
	dead := newDesk(t, func(cfg *ontology.Config) {
		cfg.Identity.OIDC.Issuer = fmt.Sprintf("http://127.0.0.1:%d", testdb.FreePort(t))
	}, nil)
	for path, route := range map[string]string{"/approvals": "/approvals", "/approvals/" + cancel: "/approvals/{id}",
		"/audit": "/audit", "/audit/head": "/audit/head", "/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/inclusion?seq=1": "/audit/proof/inclusion", "/audit/proof/consistency?from=1": "/audit/proof/consistency"} {
		a := dead.do("GET", "/api/v1"+path, bob, "")
		c.check(t, "GET", route, a)
		refused("identity_unavailable", a, 503, "X_MCP_IDENTITY_UNAVAILABLE")
	}
	a = dead.do("POST", "/api/v1/approvals/"+cancel+"/decision", bob, `{"decision":"reject"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	refused("identity_unavailable", a, 503, "X_MCP_IDENTITY_UNAVAILABLE")

	c.covered(t)
	for name, a := range refusals {
		// A refusal is of one request by one caller: no cache keeps it.
		if got := a.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q", name, got)
		}
		var body any
		if err := json.Unmarshal(a.body, &body); err != nil {
			t.Fatal(err)
		}
		golden.JSON(t, filepath.Join("testdata", "refusals", name+".json"), map[string]any{"status": a.status, "body": body})
	}
}

// TestSweepersExpireEachLapsedApprovalOnce runs two sweepers at once over
// lapsed approvals: each is expired once, audited once, and the chain
// verifies.
func TestSweepersExpireEachLapsedApprovalOnce(t *testing.T) {
	ctx := context.Background()
	d := newDesk(t, nil, nil)
	past := d.pastEngine()
	var ids []string
	for i := range 6 {
		ids = append(ids, d.stage(past, d.agent("agent-7", "acme"), "update_shipping_address", fmt.Sprintf(`{"order_id": "o-1001", "address": "%d Long Street"}`, i)))
	}
	ids = append(ids, d.stage(past, d.agent("agent-9", "globex"), "update_shipping_address", `{"order_id": "o-1001", "address": "9 Long Street"}`))
	for _, id := range ids {
		d.waitLapsed(id)
	}
	// Staging expires its tenant's lapsed approvals too, so some may be
	// expired already when the sweepers start: they must not be again.
	var before int
	if err := d.admin.QueryRow(ctx, `SELECT count(*) FROM orangerail.approvals WHERE id = ANY($1::uuid[]) AND status = 'expired'`, ids).Scan(&before); err != nil {
		t.Fatal(err)
	}
	sweepers := []*engine.Engine{d.rt.Engine, d.pastEngine()}
	var wg sync.WaitGroup
	counts := make([]int, len(sweepers))
	for i, s := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := s.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	// A sweeper that found a tenant locked passed it over; a later sweep
	// expires what is left.
	n, err := d.rt.Engine.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if total := before + counts[0] + counts[1] + n; total != len(ids) {
		t.Fatalf("expired %d before, then %v + %d, want %d in all", before, counts, n, len(ids))
	}
	for _, id := range ids {
		var status string
		var records int
		if err := d.admin.QueryRow(ctx, `SELECT a.status, (SELECT count(*) FROM orangerail.audit r WHERE r.approval_id = a.id AND r.phase = 'expired')
			FROM orangerail.approvals a WHERE a.id = $1`, id).Scan(&status, &records); err != nil {
			t.Fatal(err)
		}
		if status != "expired" || records != 1 {
			t.Fatalf("approval %s: %s with %d expired records", id, status, records)
		}
	}
	// SealTenant waits for the runtime's own sealer where it holds a
	// tenant; Seal would pass over it.
	tenants, err := engine.Tenants(ctx, d.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		if _, err := engine.SealTenant(ctx, d.admin, tenant); err != nil {
			t.Fatal(err)
		}
	}
	reports, err := engine.VerifyAll(ctx, d.admin, engine.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if !r.OK() {
			t.Fatalf("tenant %s does not verify: %+v", r.Tenant, r)
		}
	}
}

// TestServingRuntimeSweeps: the runtime's own sweeper expires a lapsed
// approval without any request touching it.
func TestServingRuntimeSweeps(t *testing.T) {
	d := newDesk(t, nil, func(s *app.Settings) { s.SweepEvery = 50 * time.Millisecond })
	id := d.stage(d.pastEngine(), d.agent("agent-7", "acme"), "update_shipping_address", `{"order_id": "o-1001", "address": "1 Long Street"}`)
	for status := "pending"; status != "expired"; time.Sleep(20 * time.Millisecond) {
		if err := d.admin.QueryRow(context.Background(), "SELECT status FROM orangerail.approvals WHERE id = $1", id).Scan(&status); err != nil {
			t.Fatal(err)
		}
	}
}
