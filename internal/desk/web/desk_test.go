package web_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/front"
	"github.com/orangerail/orangerail/internal/identity"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/store"
)

func TestSignInReviewAndApprove(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	list := ada.signIn("ada")
	if list.status != http.StatusOK || list.url != f.base+web.Path || !strings.Contains(list.body, "/approvals/"+id) {
		t.Fatalf("after signing in: %d %s\n%s", list.status, list.url, list.body)
	}
	detail := ada.get(f.base + web.Path + "/" + id)
	for _, want := range []string{`&#34;order_id&#34;: &#34;o-1001&#34;`, `&#34;status&#34;: &#34;paid&#34;`,
		"The order is cancelled and the customer is emailed.", "re-create the order by hand", agentFor,
		"Approve: let the agent run cancel_order", "Reject: cancel_order will not run", "data-countdown"} {
		if !strings.Contains(detail.body, want) {
			t.Errorf("the detail page lacks %q", want)
		}
	}
	done := ada.follow(ada.submit(detail, "approve-form", nil))
	if done.status != http.StatusOK || !strings.Contains(done.body, "Your decision is recorded: this approval is approved.") ||
		strings.Contains(done.body, "approve-form") {
		t.Fatalf("after approving: %d\n%s", done.status, done.body)
	}
	// The page a decision lands on tells only its decider that it is
	// recorded: a link to it tells no one else, nor anyone before a
	// decision.
	other := f.stage(t, "o-1002")
	bob := f.client(t)
	bob.signIn("bob")
	for name, page := range map[string]response{
		"another approver, after ada's decision": bob.get(f.base + web.Path + "/" + id + "?decided=1"),
		"ada, before any decision":               ada.get(f.base + web.Path + "/" + other + "?decided=1"),
	} {
		if page.status != http.StatusOK || strings.Contains(page.body, "Your decision is recorded") {
			t.Errorf("%s: %d, the page says a decision is recorded", name, page.status)
		}
	}
	// The agent's next poll executes what ada approved.
	if out := f.rt.Engine.Check(context.Background(), agent, id); out.Status != engine.StatusOK {
		t.Fatalf("the agent's check after approval: %+v", out)
	}
	// The audit log names the verified subject as the decider.
	audit := ada.get(f.base + web.Path + "/audit?phase=approved&correlation_id=" + id)
	if !strings.Contains(audit.body, "ada@example.com (human)") || !strings.Contains(audit.body, `href="/approvals/`+id+`"`) {
		t.Fatalf("the audit view does not show ada's approval:\n%s", audit.body)
	}
	// Deciding twice is a conflict, shown with its code.
	again := ada.post(f.base+web.Path+"/"+id+"/decision", url.Values{"form_token": {formToken(t, detail)}, "decision": {"reject"}}, nil)
	if again.status != http.StatusConflict || !strings.Contains(again.body, string(errcode.ApprovalDecided)) {
		t.Fatalf("a second decision: %d\n%s", again.status, again.body)
	}
}

func TestApproveWithAnotherDigestIsRefused(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + id)
	got := ada.submit(detail, "approve-form", map[string]string{"digest": strings.Repeat("00", 32)})
	if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, string(errcode.ApprovalArgumentsMismatch)) {
		t.Fatalf("approving another digest: %d\n%s", got.status, got.body)
	}
}

func TestRejectWithANote(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + id)
	done := ada.follow(ada.submit(detail, "reject-form", map[string]string{"note": "not this one"}))
	if !strings.Contains(done.body, "this approval is rejected") || !strings.Contains(done.body, "not this one") {
		t.Fatalf("after rejecting:\n%s", done.body)
	}
}

// TestNotesTheEngineRefuses: a note the approvals API refuses is refused
// by the desk's form too, 400 with the engine's words, and nothing is
// decided: one with a NUL (which Postgres cannot store), one with bytes
// that are not UTF-8, one past engine.MaxNoteChars (the textarea's own
// bound is the browser's to keep, not the server's). One at the bound is
// recorded.
func TestNotesTheEngineRefuses(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	for _, note := range []string{"no\x00", "no\xff", strings.Repeat("n", engine.MaxNoteChars+1)} {
		detail := ada.get(f.base + web.Path + "/" + id)
		got := ada.submit(detail, "reject-form", map[string]string{"note": note})
		// html/template writes a plus sign as &#43;.
		if got.status != http.StatusBadRequest || !strings.Contains(got.body, strings.ReplaceAll(engine.NoteProblem(note), "+", "&#43;")) ||
			!strings.Contains(got.body, string(errcode.RequestInvalid)) {
			t.Fatalf("a note of %d bytes: %d\n%s", len(note), got.status, got.body)
		}
	}
	detail := ada.get(f.base + web.Path + "/" + id)
	done := ada.follow(ada.submit(detail, "reject-form", map[string]string{"note": strings.Repeat("n", engine.MaxNoteChars)}))
	if !strings.Contains(done.body, "this approval is rejected") {
		t.Fatalf("a note at the bound:\n%s", done.body)
	}
}

// TestNoButtonsForTheRequester: with four-eyes on, bob (for whom the
// agent asked) sees the approval but no decision buttons, and a decision
// he forges anyway is refused by the engine. Carol, who is neither
// approver nor auditor, is refused the desk's pages altogether.
func TestNoButtonsForTheRequester(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	bob := f.client(t)
	bob.signIn("bob")
	detail := bob.get(f.base + web.Path + "/" + id)
	if detail.status != http.StatusOK || strings.Contains(detail.body, "approve-form") || strings.Contains(detail.body, "reject-form") ||
		strings.Contains(detail.body, "Approve:") || !strings.Contains(detail.body, "You requested this approval; another approver must decide it (four-eyes).") {
		t.Errorf("bob's view of the approval: %d\n%s", detail.status, detail.body)
	}
	forged := bob.post(f.base+web.Path+"/"+id+"/decision", url.Values{"form_token": {formToken(t, detail)}, "decision": {"reject"}}, nil)
	if forged.status != http.StatusForbidden || !strings.Contains(forged.body, string(errcode.ApprovalFourEyes)) {
		t.Errorf("bob's forged decision: %d\n%s", forged.status, forged.body)
	}
	carol := f.client(t)
	landed := carol.signIn("carol")
	if landed.status != http.StatusForbidden || !strings.Contains(landed.body, string(errcode.Forbidden)) || strings.Contains(landed.body, id) {
		t.Errorf("carol's list: %d\n%s", landed.status, landed.body)
	}
	for _, path := range []string{"/" + id, "/audit", "/events"} {
		if got := carol.get(f.base + web.Path + path); got.status != http.StatusForbidden || strings.Contains(got.body, "o-1001") {
			t.Errorf("carol's %s: %d\n%s", path, got.status, got.body)
		}
	}
	// She can still sign out.
	if out := carol.submit(landed, web.Path+"/signout", nil); out.status != http.StatusOK {
		t.Errorf("carol signing out: %d", out.status)
	}
	v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, id)
	if err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("the approval is %v (%v), want still pending", v.Status, err)
	}
}

func TestAnotherTenantsApprovalIsNotFound(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	eve := f.client(t)
	eve.signIn("eve")
	for _, path := range []string{"/" + id, "/00000000-0000-0000-0000-000000000000", "/not-an-id"} {
		if got := eve.get(f.base + web.Path + path); got.status != http.StatusNotFound || !strings.Contains(got.body, string(errcode.ApprovalNotFound)) {
			t.Errorf("%s: %d\n%s", path, got.status, got.body)
		}
	}
}

// TestAnAgentCannotSignIn: an agent's account, and a person's whose token
// names no tenant, sign in as no person of a tenant: X_DESK_NOT_A_PERSON,
// not a sign-in that failed and whose fix names the desk's client.
func TestAnAgentCannotSignIn(t *testing.T) {
	f := newFixture(t)
	for _, account := range []string{"mallory", "nobody", "stray"} {
		got := f.client(t).signIn(account)
		if got.status != http.StatusForbidden || !strings.Contains(got.body, string(errcode.DeskNotAPerson)) {
			t.Errorf("%s's sign-in: %d\n%s", account, got.status, got.body)
		}
	}
}

// TestUnreadableRolesRefuseTheSignIn: a person whose token's roles hold a
// control character (a NUL, which Postgres refuses in text) is refused at
// sign-in with the sign-in's code and what to fix, not answered with an
// internal error when the session is stored.
func TestUnreadableRolesRefuseTheSignIn(t *testing.T) {
	f := newFixture(t)
	got := f.client(t).signIn("nul")
	if got.status != http.StatusForbidden || !strings.Contains(got.body, string(errcode.DeskSignInFailed)) ||
		!strings.Contains(got.body, "roles or scopes") {
		t.Errorf("the sign-in: %d\n%s", got.status, got.body)
	}
}

// TestDecisionsAreRateLimited: a person's decisions at the desk spend the
// same allowance of writes (http.rate_limits.writes_per_minute) as the
// approvals API's: past it, a decision is refused with X_MCP_RATE_LIMITED
// and when to retry, and decides nothing.
func TestDecisionsAreRateLimited(t *testing.T) {
	f := newFixtureWith(t, ontologytest.Set("http.rate_limits.writes_per_minute", 2))
	ada := f.client(t)
	ada.signIn("ada")
	first, last := f.stage(t, "o-1001"), f.stage(t, "o-1002")
	// A decision refused as already made spends the allowance too, as the
	// API's does.
	ids := []string{first, first, last}
	for i, id := range ids {
		detail := ada.get(f.base + web.Path + "/" + id)
		got := ada.post(f.base+web.Path+"/"+id+"/decision", url.Values{"form_token": {formToken(t, detail)}, "decision": {"reject"}}, nil)
		limited := got.status == http.StatusTooManyRequests && strings.Contains(got.body, string(errcode.MCPRateLimited))
		if limited != (i == 2) {
			t.Fatalf("decision %d: %d\n%s", i+1, got.status, got.body)
		}
	}
	if v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, last); err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("the refused decision's approval is %v (%v), want still pending", v.Status, err)
	}
}

// TestSessions: the cookie is HttpOnly and SameSite=Lax; the database
// keeps only the id's hash; a forged cookie, the stored hash used as a
// cookie, a signed-out session, a revoked one, an expired one, the one a
// browser held before signing in again and one of an issuer no longer
// configured are all refused — every replica reads the same table.
func TestSessions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ada := f.client(t)
	landed := ada.signIn("ada")
	if landed.status != http.StatusOK {
		t.Fatalf("sign-in: %d", landed.status)
	}
	cookie := ada.sessionCookie()
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	var stored []byte
	var n int
	if err := f.admin.QueryRow(ctx, `SELECT id_hash, (SELECT count(*) FROM orangerail.desk_sessions s2
		WHERE position($1::bytea IN s2::text::bytea) > 0) FROM orangerail.desk_sessions`, []byte(cookie)).Scan(&stored, &n); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(cookie)); hex.EncodeToString(stored) != hex.EncodeToString(sum[:]) || n != 0 {
		t.Fatalf("the table holds %x and the id appears in %d rows; want only the id's SHA-256", stored, n)
	}

	refused := func(name, value string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, f.base+web.Path, nil)
		req.AddCookie(&http.Cookie{Name: "orangerail_desk", Value: value})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), web.Path+"/signin") {
			t.Errorf("%s: %d to %q, want sent to sign in", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	accepted := func(value string) bool {
		req, _ := http.NewRequest(http.MethodGet, f.base+web.Path, nil)
		req.AddCookie(&http.Cookie{Name: "orangerail_desk", Value: value})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !accepted(cookie) {
		t.Fatal("the session's own cookie is refused")
	}
	refused("a forged cookie", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	refused("the stored hash as a cookie", hex.EncodeToString(stored))
	refused("the cookie with a character changed", cookie[:len(cookie)-1]+string(rune('A'+(cookie[len(cookie)-1]-'A'+1)%26)))

	// Expiry: a session past its time is refused.
	if _, err := f.admin.Exec(ctx, `UPDATE orangerail.desk_sessions SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	refused("an expired session", cookie)

	// Revocation of every session of a person (an operator's).
	bob := f.client(t)
	bob.signIn("bob")
	if !accepted(bob.sessionCookie()) {
		t.Fatal("bob's session is refused")
	}
	if n, err := store.New(f.admin).DeskSessionRevokeSubject(ctx, f.issuerURL, agentFor); err != nil || n != 1 {
		t.Fatalf("revoking bob: %d, %v", n, err)
	}
	refused("a revoked session", bob.sessionCookie())

	// Signing out ends the session for a copy of the cookie too.
	carol := f.client(t)
	page := carol.signIn("carol")
	stolen := carol.sessionCookie()
	out := carol.submit(page, web.Path+"/signout", nil)
	if out.status != http.StatusOK || !strings.Contains(out.body, "Signed out") {
		t.Fatalf("signing out: %d\n%s", out.status, out.body)
	}
	refused("a signed-out session", stolen)

	// Signing in again ends the browser's previous session, for a copy of
	// its cookie too.
	dan := f.client(t)
	dan.signIn("ada")
	before := dan.sessionCookie()
	again := dan.follow(dan.get(f.base + web.Path + "/signin"))
	if strings.HasPrefix(again.url, f.issuerURL) {
		again = dan.follow(dan.submit(again, "/authorize", map[string]string{"username": "ada", "password": password, "action": "sign_in"}))
	}
	if again.status != http.StatusOK || again.url != f.base+web.Path || dan.sessionCookie() == before || !accepted(dan.sessionCookie()) {
		t.Fatalf("signing in again: %d, the cookie changed: %v", again.status, dan.sessionCookie() != before)
	}
	refused("the session before signing in again", before)

	// A session begun at another issuer than the one configured now is no
	// session.
	sum := sha256.Sum256([]byte(dan.sessionCookie()))
	if tag, err := f.admin.Exec(ctx, `UPDATE orangerail.desk_sessions SET issuer = 'https://previous-issuer.example' WHERE id_hash = $1`, sum[:]); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("moving the session to another issuer: %v %v", tag, err)
	}
	refused("a session of another issuer", dan.sessionCookie())
}

// TestCookieAttributes: outside loopback the session cookie is __Host-
// prefixed and Secure, and the desk asks for https from then on (HSTS);
// everywhere the cookie is HttpOnly and SameSite=Lax.
func TestCookieAttributes(t *testing.T) {
	f := newFixture(t)
	ada := f.client(t)
	login := ada.follow(ada.get(f.base + web.Path))
	landed := ada.submit(login, "/authorize", map[string]string{"username": "ada", "password": password, "action": "sign_in"})
	back := ada.get(landed.header.Get("Location"))
	var set *http.Cookie
	for _, c := range (&http.Response{Header: back.header}).Cookies() {
		if c.Name == "orangerail_desk" && c.Value != "" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/" || set.Secure {
		t.Fatalf("the session cookie on loopback http: %+v", set)
	}

	cfg := *f.rt.Config
	cfg.HTTP.PublicURL = "https://desk.example.com"
	resolver, err := identity.NewResolver(*cfg.Identity.OIDC, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	desk, err := web.New(web.Config{Ontology: &cfg, Engine: f.rt.Engine, Store: f.rt.Store, Resolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	desk.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://desk.example.com"+web.Path, nil))
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != "__Host-orangerail_desk" || !cookies[0].Secure || !cookies[0].HttpOnly || cookies[0].Path != "/" {
		t.Fatalf("the session cookie on https: %+v", cookies)
	}
	// Reached over https, the desk asks to be reached so from now on; on
	// loopback http it does not.
	if hsts := rec.Result().Header.Get("Strict-Transport-Security"); hsts != "max-age=31536000" {
		t.Fatalf("Strict-Transport-Security on https: %q", hsts)
	}
	if hsts := back.header.Get("Strict-Transport-Security"); hsts != "" {
		t.Fatalf("Strict-Transport-Security on loopback http: %q", hsts)
	}
}

// TestCrossSitePostsAreRefused: a POST from another site is refused even
// with a valid form token, and one without the form token even from the
// desk itself; neither decides anything.
func TestCrossSitePostsAreRefused(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + id)
	form := formsOf(t, detail.body)["approve-form"].values
	target := f.base + web.Path + "/" + id + "/decision"
	for _, tc := range []struct {
		name   string
		form   url.Values
		header http.Header
		code   errcode.Code
	}{
		{"cross-site, by Sec-Fetch-Site", form, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}, errcode.DeskFormRefused},
		{"cross-origin, by Origin", form, http.Header{"Origin": {"https://evil.example"}}, errcode.DeskFormRefused},
		{"without the form token", url.Values{"decision": {"approve"}, "digest": form["digest"]}, nil, errcode.DeskFormRefused},
		{"with another form token", url.Values{"decision": {"approve"}, "digest": form["digest"], "form_token": {"ABCDEFGHIJKLMNOPQRSTUVWXYZ"}}, nil, errcode.DeskFormRefused},
	} {
		got := ada.post(target, tc.form, tc.header)
		if got.status != http.StatusForbidden || !strings.Contains(got.body, string(tc.code)) {
			t.Errorf("%s: %d\n%s", tc.name, got.status, got.body)
		}
	}
	// Signing out is a POST too.
	if got := ada.post(f.base+web.Path+"/signout", url.Values{}, nil); got.status != http.StatusForbidden {
		t.Errorf("signing out without the form token: %d", got.status)
	}
	v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, id)
	if err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("the approval is %v (%v), want still pending", v.Status, err)
	}
	if got := ada.post(target, form, http.Header{"Origin": {f.base}, "Sec-Fetch-Site": {"same-origin"}}); got.status != http.StatusSeeOther {
		t.Fatalf("the same form from the desk itself: %d\n%s", got.status, got.body)
	}
}

// TestContentSecurityPolicy: every answer carries the strict policy, and
// no page holds an inline script, an event handler attribute or an inline
// style the policy would have to allow.
func TestContentSecurityPolicy(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	for _, path := range []string{"", "/" + id, "/audit", "/assets/desk.js", "/assets/desk.css", "/nope-nope", "/signin"} {
		got := ada.get(f.base + web.Path + path)
		if csp := got.header.Get("Content-Security-Policy"); csp != web.ContentSecurityPolicy {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if got.header.Get("X-Content-Type-Options") != "nosniff" || got.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, got.header)
		}
		if strings.HasSuffix(path, ".js") || strings.HasSuffix(path, ".css") {
			continue
		}
		lower := strings.ToLower(got.body)
		if strings.Contains(lower, "<script>") || strings.Contains(lower, " style=") || strings.Contains(lower, "<style") ||
			strings.Contains(lower, " onclick=") || strings.Contains(lower, " onload=") || strings.Contains(lower, "javascript:") {
			t.Errorf("%s holds inline script or style:\n%s", path, got.body)
		}
	}
	// What the front refuses before the desk reads the request (a body
	// over the desk's bound) is a desk page under the same policy.
	detail := ada.get(f.base + web.Path + "/" + id)
	big := ada.post(f.base+web.Path+"/"+id+"/decision", url.Values{"form_token": {formToken(t, detail)}, "decision": {"approve"},
		"note": {strings.Repeat("n", 100<<10)}}, nil)
	if big.status != http.StatusRequestEntityTooLarge || big.header.Get("Content-Security-Policy") != web.ContentSecurityPolicy ||
		!strings.HasPrefix(big.header.Get("Content-Type"), "text/html") || !strings.Contains(big.body, string(errcode.RequestTooLarge)) ||
		!strings.Contains(big.body, "Shorten the note") {
		t.Errorf("a body over the bound: %d %v\n%s", big.status, big.header, big.body)
	}
	// A refusal with a cause in the host log (a handler's panic, which the
	// front contains) names its correlation id on the page.
	rec := httptest.NewRecorder()
	f.desk.Refuse(rec, httptest.NewRequest(http.MethodGet, web.Path, nil), front.Refusal{Status: http.StatusInternalServerError,
		Code: errcode.InternalError, Message: "an unexpected internal error; the details are withheld", CorrelationID: "c0ffee-1234"})
	if rec.Code != http.StatusInternalServerError || rec.Header().Get("Content-Security-Policy") != web.ContentSecurityPolicy ||
		!strings.Contains(rec.Body.String(), "c0ffee-1234") || !strings.Contains(rec.Body.String(), string(errcode.InternalError)) {
		t.Errorf("a contained panic's page: %d %v\n%s", rec.Code, rec.Header(), rec.Body.String())
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(web.ContentSecurityPolicy, want) {
			t.Errorf("the policy lacks %s", want)
		}
	}
}

// TestEventsStreamTheListAsItChanges: the live list's stream sends the
// rows at once and again when an approval is staged, read from the
// database (as another replica's staging would be).
func TestEventsStreamTheListAsItChanges(t *testing.T) {
	f := newFixture(t)
	ada := f.client(t)
	ada.signIn("ada")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+web.Path+"/events", nil)
	resp, err := ada.http.Do(req) //nolint:bodyclose // closed by the defer below; the reader goroutine reads it until then
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan string)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev strings.Builder
		for sc.Scan() {
			if sc.Text() == "" {
				if ev.Len() > 0 {
					select {
					case events <- ev.String():
					case <-ctx.Done():
						return
					}
				}
				ev.Reset()
				continue
			}
			ev.WriteString(sc.Text() + "\n")
		}
	}()
	next := func() string {
		for ev := range events {
			if strings.HasPrefix(ev, "event: pending") {
				return ev
			}
		}
		t.Fatal("the stream ended")
		return ""
	}
	if first := next(); !strings.Contains(first, "Nothing is waiting") {
		t.Fatalf("the first event: %s", first)
	}
	id := f.stage(t, "o-1001")
	if second := next(); !strings.Contains(second, "/approvals/"+id) {
		t.Fatalf("after staging: %s", second)
	}
	// A session holds at most web.MaxStreamsPerSession streams: the
	// rest are refused until one ends; another session is not held back.
	open := func(c *client) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+web.Path+"/events", nil)
		resp, err := c.http.Do(req) //nolint:bodyclose // closed by the caller
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var more []*http.Response
	for range web.MaxStreamsPerSession - 1 {
		more = append(more, open(ada)) //nolint:bodyclose // each closed below
	}
	for _, r := range more {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("a stream within the bound: %d", r.StatusCode)
		}
	}
	over := open(ada)
	body, _ := io.ReadAll(over.Body)
	over.Body.Close()
	if over.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), string(errcode.DeskStreamsBusy)) {
		t.Fatalf("a stream past the bound: %d\n%s", over.StatusCode, body)
	}
	bob := f.client(t)
	bob.signIn("bob")
	if other := open(bob); other.StatusCode != http.StatusOK {
		t.Fatalf("another person's stream: %d", other.StatusCode)
	} else {
		other.Body.Close()
	}
	more[0].Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		again := open(ada)
		again.Body.Close()
		if again.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stream ended, and another is still refused: %d", again.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range more[1:] {
		r.Body.Close()
	}

	// Signing out ends the stream.
	if _, err := store.New(f.admin).DeskSessionRevokeSubject(ctx, f.issuerURL, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	for range events { //nolint:revive // drained until the server ends the stream
	}
}

func TestSignInRefusals(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	// A callback that did not start in this browser.
	got := c.get(f.base + web.Path + "/callback?code=x&state=y")
	if got.status != http.StatusBadRequest || !strings.Contains(got.body, string(errcode.DeskSignInFailed)) {
		t.Errorf("a callback without its sign-in: %d\n%s", got.status, got.body)
	}
	// A sign-in whose state is swapped.
	to := c.get(f.base + web.Path + "/signin")
	u, _ := url.Parse(to.header.Get("Location"))
	got = c.get(f.base + web.Path + "/callback?code=x&state=" + url.QueryEscape(u.Query().Get("state")+"x"))
	if got.status != http.StatusBadRequest {
		t.Errorf("a swapped state: %d", got.status)
	}
	// A code the issuer never issued.
	to = c.get(f.base + web.Path + "/signin")
	u, _ = url.Parse(to.header.Get("Location"))
	got = c.get(f.base + web.Path + "/callback?code=forged&state=" + url.QueryEscape(u.Query().Get("state")))
	if got.status != http.StatusForbidden || !strings.Contains(got.body, string(errcode.DeskSignInFailed)) {
		t.Errorf("a forged code: %d\n%s", got.status, got.body)
	}
}

// TestSignInReturnsToThePageAsked: a page asked for without a session is
// where the sign-in lands, its query with it (a search, a cursor, which
// holds dots); a next outside the desk, or whose decoded path holds a dot
// or a backslash, lands on the list (one that decoded to a dot failed the
// sign-in); a query too long to keep is dropped, the page kept.
func TestSignInReturnsToThePageAsked(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	c := f.client(t)
	login := c.follow(c.get(f.base + web.Path + "/" + id))
	landed := c.follow(c.submit(login, "/authorize", map[string]string{"username": "ada", "password": password, "action": "sign_in"}))
	if landed.url != f.base+web.Path+"/"+id || !strings.Contains(landed.body, "approve-form") {
		t.Fatalf("landed at %s", landed.url)
	}
	for asked, want := range map[string]string{
		"/audit?phase=approved":                     "/audit?phase=approved",
		"/audit?actor=agent+7&cursor=k1.b0dy.s1g":   "/audit?actor=agent+7&cursor=k1.b0dy.s1g",
		"?status=rejected":                          "?status=rejected",
		"/audit?actor=" + strings.Repeat("a", 3000): "/audit",
	} {
		c := f.client(t)
		login := c.follow(c.get(f.base + web.Path + asked))
		landed := c.follow(c.submit(login, "/authorize", map[string]string{"username": "ada", "password": password, "action": "sign_in"}))
		if landed.url != f.base+web.Path+want {
			t.Errorf("asked for %.80s, landed at %.80s, want %s", asked, landed.url, want)
		}
	}
	for _, next := range []string{"https://evil.example/approvals/x", "//evil.example/approvals", "/approvals/../mcp", `/approvals\evil`, "/mcp",
		"/approvals%2F%2E%2E%2F%2Fevil", "/approvals%5Cevil"} {
		c := f.client(t)
		login := c.follow(c.get(f.base + web.Path + "/signin?next=" + url.QueryEscape(next)))
		landed := c.follow(c.submit(login, "/authorize", map[string]string{"username": "ada", "password": password, "action": "sign_in"}))
		if landed.url != f.base+web.Path {
			t.Errorf("next %q landed at %s, want the list", next, landed.url)
		}
	}
}

// TestIssuerDown: with the issuer unreachable, signing in says so.
func TestIssuerDown(t *testing.T) {
	f := newFixture(t)
	cfg := *f.rt.Config
	oidcCfg := *cfg.Identity.OIDC
	oidcCfg.Issuer = "http://127.0.0.1:1"
	cfg.Identity.OIDC = &oidcCfg
	resolver, err := identity.NewResolver(oidcCfg, identity.ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	desk, err := web.New(web.Config{Ontology: &cfg, Engine: f.rt.Engine, Store: f.rt.Store, Resolver: resolver, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	desk.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.Path+"/signin", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), string(errcode.DeskSignInFailed)) {
		t.Fatalf("signing in with the issuer down: %d\n%s", rec.Code, rec.Body)
	}
}

// TestTextFromAgentsIsShownEscaped: an input holding bidirectional
// overrides and control characters reaches the list and the detail page
// only as visible escapes.
func TestTextFromAgentsIsShownEscaped(t *testing.T) {
	f := newFixture(t)
	agent := &engine.Caller{Subject: "agent\u202e-7", Tenant: tenant, Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorAgent}
	out := f.rt.Engine.Call(context.Background(), agent, "cancel_order", []byte(`{"order_id":"o-1001","reason":"ok\u202edesrever\u0007\u200b"}`))
	if out.ApprovalID == nil {
		t.Fatalf("staging: %+v", out)
	}
	ada := f.client(t)
	list := ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + out.ApprovalID.String())
	for name, body := range map[string]string{"list": list.body, "detail": detail.body} {
		if strings.ContainsAny(body, "\u202e\u0007\u200b") {
			t.Errorf("the %s page holds a raw override, control or invisible character", name)
		}
		if !strings.Contains(body, `\u202edesrever\u0007\u200b`) {
			t.Errorf("the %s page does not show the input's escapes", name)
		}
	}
	if !strings.Contains(detail.body, `&#34;agent\u202e-7&#34;`) {
		t.Errorf("the requester is not shown escaped:\n%s", detail.body)
	}
}

// TestAuditView: the chain head, and records filtered by action, actor,
// correlation id and phase, each linking to its approval.
func TestAuditView(t *testing.T) {
	f := newFixture(t)
	first, second := f.stage(t, "o-1001"), f.stage(t, "o-1002")
	ada := f.client(t)
	ada.signIn("ada")
	ada.follow(ada.submit(ada.get(f.base+web.Path+"/"+first), "reject-form", map[string]string{"note": "no"}))
	count := func(body, s string) int { return strings.Count(body, s) }

	all := ada.get(f.base + web.Path + "/audit")
	// Two staged records and one rejection: the head is record 3.
	if !strings.Contains(all.body, "record <strong>3</strong>") || count(all.body, `<td data-label="Seq">`) != 3 {
		t.Fatalf("the whole log:\n%s", all.body)
	}
	for _, tc := range []struct {
		query string
		want  int
		links []string
	}{
		{"actor=ada%40example.com", 1, []string{first}},
		{"phase=staged", 2, []string{first, second}},
		{"correlation_id=" + second, 1, []string{second}},
		{"action=cancel_order&phase=rejected", 1, []string{first}},
		{"action=no_such_action", 0, nil},
	} {
		got := ada.get(f.base + web.Path + "/audit?" + tc.query)
		if n := count(got.body, `<td data-label="Seq">`); got.status != http.StatusOK || n != tc.want {
			t.Errorf("%s: %d records (status %d), want %d", tc.query, n, got.status, tc.want)
		}
		for _, id := range tc.links {
			if !strings.Contains(got.body, `href="/approvals/`+id+`"`) {
				t.Errorf("%s: no link to approval %s", tc.query, id)
			}
		}
	}
	// Past a page, older records are a link away, the search kept: 55
	// more staged records make 58, 57 of them staged.
	if err := database.InTenant(context.Background(), f.rt.Store, "acme", pgx.TxOptions{}, func(tx pgx.Tx) error {
		for i := range 55 {
			if err := engine.AppendAudit(context.Background(), tx, &engine.Record{Tenant: "acme", At: time.Now(), CorrelationID: fmt.Sprintf("bulk-%d", i),
				Phase: engine.PhaseStaged, Actor: engine.Actor{Subject: "agent-7", Kind: engine.ActorAgent}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	older := regexp.MustCompile(`<a href="([^"]+)">Older records</a>`)
	for query, want := range map[string][]int{"": {50, 8}, "?phase=staged": {50, 7}, "?phase=staged&actor=agent-7": {50, 5}} {
		page := ada.get(f.base + web.Path + "/audit" + query)
		for i, n := range want {
			if got := count(page.body, `<td data-label="Seq">`); page.status != http.StatusOK || got != n {
				t.Fatalf("%q, page %d: %d records (status %d), want %d", query, i+1, got, page.status, n)
			}
			m := older.FindStringSubmatch(page.body)
			if i == len(want)-1 {
				if m != nil {
					t.Fatalf("%q: a link past the last page: %s", query, m[1])
				}
				break
			}
			if m == nil {
				t.Fatalf("%q, page %d: no link to older records", query, i+1)
			}
			next := html.UnescapeString(m[1])
			if query != "" && !strings.Contains(next, "phase=staged") {
				t.Fatalf("%q: the link forgets the search: %s", query, next)
			}
			page = ada.get(f.base + next)
		}
	}
	// A cursor of another search, or none at all, is refused as the API
	// refuses it.
	link := older.FindStringSubmatch(ada.get(f.base + web.Path + "/audit?phase=staged").body)
	if link == nil {
		t.Fatal("no link to older records")
	}
	cursor, _ := url.ParseQuery(strings.SplitN(html.UnescapeString(link[1]), "?", 2)[1])
	for _, query := range []string{"cursor=" + url.QueryEscape(cursor.Get("cursor")), "phase=staged&cursor=nonsense"} {
		if got := ada.get(f.base + web.Path + "/audit?" + query); got.status != http.StatusBadRequest || count(got.body, `<td data-label="Seq">`) != 0 {
			t.Errorf("%s: status %d, %d records", query, got.status, count(got.body, `<td data-label="Seq">`))
		}
	}

	// A search the API refuses, the desk refuses alike: 400, not a
	// failure of the database, nor every record.
	for _, query := range []string{"actor=a%00", "action=%ff", "phase=bogus", "correlation_id=" + strings.Repeat("c", engine.MaxFilterChars+1)} {
		if got := ada.get(f.base + web.Path + "/audit?" + query); got.status != http.StatusBadRequest || count(got.body, `<td data-label="Seq">`) != 0 {
			t.Errorf("%s: status %d, %d records", query, got.status, count(got.body, `<td data-label="Seq">`))
		}
	}
}

// TestApproversSeeOnlyTheirActions: with per-action approver roles, the
// desk shows a person only the approvals of actions they may decide, as
// the API does; another action's approval is refused, its input unshown.
func TestApproversSeeOnlyTheirActions(t *testing.T) {
	f := newFixtureWith(t, ontologytest.Set("actions.cancel_order.policy.approver_roles", []string{"finance"}))
	id := f.stage(t, "o-1001")
	ada := f.client(t) // an approver, of the other actions
	ada.signIn("ada")
	if list := ada.get(f.base + web.Path); list.status != http.StatusOK || strings.Contains(list.body, id) {
		t.Fatalf("ada's list shows a cancel_order approval: %d\n%s", list.status, list.body)
	}
	if got := ada.get(f.base + web.Path + "/" + id); got.status != http.StatusForbidden || strings.Contains(got.body, "customer asked") {
		t.Fatalf("ada opened cancel_order's approval: %d\n%s", got.status, got.body)
	}
	fin := f.client(t) // finance decides cancel_order
	fin.signIn("fin")
	if list := fin.get(f.base + web.Path); !strings.Contains(list.body, id) {
		t.Fatalf("fin's list lacks the approval:\n%s", list.body)
	}
	if got := fin.get(f.base + web.Path + "/" + id); got.status != http.StatusOK || !strings.Contains(got.body, "customer asked") || !strings.Contains(got.body, "would-write") {
		t.Fatalf("fin's review: %d\n%s", got.status, got.body)
	}
}

// TestSignInBoundToNetworks: identity.allowed_networks binds the desk's
// sign-in as it binds bearer calls: a person signing in from outside every
// listed network is refused with its code; from inside, signed in.
func TestSignInBoundToNetworks(t *testing.T) {
	t.Parallel()
	outside := newFixtureWith(t, ontologytest.Set("identity.allowed_networks", []string{"203.0.113.0/24"}))
	if p := outside.client(t).signIn("ada"); p.status != http.StatusForbidden || !strings.Contains(p.body, "X_IDENTITY_NETWORK_REFUSED") {
		t.Fatalf("a sign-in from loopback outside 203.0.113.0/24: %d\n%s", p.status, p.body)
	}
	inside := newFixtureWith(t, ontologytest.Set("identity.allowed_networks", []string{"127.0.0.0/8", "::1/128"}))
	if p := inside.client(t).signIn("ada"); p.status != http.StatusOK || strings.Contains(p.body, "X_IDENTITY") {
		t.Fatalf("a sign-in from loopback inside 127.0.0.0/8: %d\n%s", p.status, p.body)
	}
}

// TestSessionBoundToNetworks: identity.allowed_networks binds every request
// of a desk session, not only its sign-in: the session's cookie, sent from
// an address outside the networks (here through a trusted proxy), is
// refused with its code, and still serves inside.
func TestSessionBoundToNetworks(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, ontologytest.Set("identity.allowed_networks", []string{"127.0.0.0/8", "::1/128"}),
		ontologytest.Set("http.trusted_proxy_hops", 1))
	c := f.client(t)
	// Signed in through the proxy, which names the client: behind a
	// trusted proxy a request that names none comes from an unknown
	// address, outside every network.
	c.http.Transport = forwardedFor{"127.0.0.1"}
	if p := c.signIn("ada"); p.status != http.StatusOK {
		t.Fatalf("sign-in from loopback through the proxy: %d\n%s", p.status, p.body)
	}
	c.http.Transport = nil
	from := func(addr string) response {
		req, err := http.NewRequest(http.MethodGet, f.base+web.Path+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if addr != "" {
			req.Header.Set("X-Forwarded-For", addr)
		}
		return c.do(req)
	}
	if got := from("203.0.113.9"); got.status != http.StatusForbidden || !strings.Contains(got.body, string(errcode.IdentityNetworkRefused)) {
		t.Fatalf("the session from 203.0.113.9: %d\n%s", got.status, got.body)
	}
	if got := from("127.0.0.1"); got.status != http.StatusOK {
		t.Fatalf("the session from 127.0.0.1: %d\n%s", got.status, got.body)
	}
	for _, addr := range []string{"", "unknown"} {
		if got := from(addr); got.status != http.StatusForbidden || !strings.Contains(got.body, string(errcode.IdentityNetworkRefused)) {
			t.Fatalf("the session through the proxy naming no client (%q): %d\n%s", addr, got.status, got.body)
		}
	}
}

// forwardedFor is a transport that sends requests as a trusted proxy
// would, naming the client it saw, unless the request names one.
type forwardedFor struct{ client string }

func (f forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Forwarded-For") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Forwarded-For", f.client)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestUnreadableInputOffersNoApprove: an approval whose sealed input this
// server cannot open (another replica sealed it under a key this one's
// ring does not hold yet) shows no input and no Approve form, only
// Reject, and says why; an approve posted anyway is refused 409
// X_APPROVAL_INPUT_UNREADABLE and decides nothing.
func TestUnreadableInputOffersNoApprove(t *testing.T) {
	f := newFixtureWith(t, ontologytest.Set("approvals.seal_inputs", true))
	ctx := context.Background()
	catalog, err := f.rt.Config.ReadCatalog(ctx, f.rt.Store)
	if err != nil {
		t.Fatal(err)
	}
	other := make([]byte, engine.KeySize)
	copy(other, "another replica's newer key.....")
	elsewhere, err := engine.New(engine.Config{Ontology: f.rt.Config, Store: f.rt.Store, Effects: effects.Factories(), Catalog: catalog, Key: other})
	if err != nil {
		t.Fatal(err)
	}
	staged := elsewhere.Call(ctx, agent, "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "sealed-elsewhere-marker"}`))
	if staged.Status != engine.StatusApprovalPending {
		t.Fatalf("staging: %+v", staged)
	}
	id := staged.ApprovalID.String()
	ada := f.client(t)
	ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + id)
	if detail.status != http.StatusOK || strings.Contains(detail.body, "approve-form") || !strings.Contains(detail.body, "reject-form") ||
		!strings.Contains(detail.body, `id="unshown"`) || strings.Contains(detail.body, "sealed-elsewhere-marker") {
		t.Fatalf("ada's view of an input this server cannot open: %d\n%s", detail.status, detail.body)
	}
	v, err := f.rt.Engine.ShowApproval(ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	forged := ada.post(f.base+web.Path+"/"+id+"/decision", url.Values{"form_token": {formToken(t, detail)}, "decision": {"approve"}, "digest": {v.Digest}}, nil)
	if forged.status != http.StatusConflict || !strings.Contains(forged.body, string(errcode.ApprovalInputUnreadable)) {
		t.Fatalf("an approve posted anyway: %d\n%s", forged.status, forged.body)
	}
	if v, err := f.rt.Engine.ShowApproval(ctx, tenant, id); err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("the approval is %v (%v), want still pending", v.Status, err)
	}
	if done := ada.follow(ada.submit(detail, "reject-form", map[string]string{"note": "cannot read it"})); done.status != http.StatusOK {
		t.Fatalf("rejecting it: %d\n%s", done.status, done.body)
	}
}

// TestManyPendingArePaged: past a page of pending approvals the list says
// more are waiting, older ones that lapse first, and links to them (a page
// that does not update by itself and links back); a link the desk did not
// make is refused. "Recently decided" still shows what was decided before
// them, however many pending approvals came after.
func TestManyPendingArePaged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rejected := f.stage(t, "o-1001")
	if out := f.rt.Engine.Decide(ctx, &engine.Caller{Subject: "ada@example.com", Tenant: tenant, Roles: []string{"approver"}, Kind: engine.ActorHuman},
		engine.Decision{ApprovalID: rejected, Note: "no"}); out.Status != engine.StatusOK {
		t.Fatalf("reject: %+v", out)
	}
	var ids []string
	for i := range 101 {
		out := f.rt.Engine.Call(ctx, agent, "cancel_order", json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "reason": "r-%03d"}`, i)))
		if out.Status != engine.StatusApprovalPending {
			t.Fatalf("staging %d: %+v", i, out)
		}
		ids = append(ids, out.ApprovalID.String())
	}
	ada := f.client(t)
	first := ada.signIn("ada")
	if first.status != http.StatusOK || !strings.Contains(first.body, `id="more"`) || strings.Contains(first.body, ids[0]) ||
		!strings.Contains(first.body, ids[100]) || !strings.Contains(first.body, "data-live") || !strings.Contains(first.body, rejected) {
		t.Fatalf("the first page: %d\n%s", first.status, first.body)
	}
	older := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(first.body)
	if older == nil {
		t.Fatalf("no link to the older approvals:\n%s", first.body)
	}
	second := ada.get(f.base + html.UnescapeString(older[1]))
	if second.status != http.StatusOK || !strings.Contains(second.body, ids[0]) || strings.Contains(second.body, ids[100]) ||
		strings.Contains(second.body, `id="more"`) || !strings.Contains(second.body, `id="paged"`) || strings.Contains(second.body, "data-live") {
		t.Fatalf("the older page: %d\n%s", second.status, second.body)
	}
	if bad := ada.get(f.base + web.Path + "?older=not-a-cursor"); bad.status != http.StatusBadRequest || !strings.Contains(bad.body, string(errcode.RequestInvalid)) {
		t.Fatalf("a link the desk did not make: %d\n%s", bad.status, bad.body)
	}
}

// TestRecentlyDecidedIsInTheOrderOfDecisions: "Recently decided" lists
// what was settled most recently first — an approval asked for long ago
// and decided last leads it, though twenty asked for after it were
// decided before — and lists no more than it shows.
func TestRecentlyDecidedIsInTheOrderOfDecisions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ada := &engine.Caller{Subject: "ada@example.com", Tenant: tenant, Roles: []string{"approver"}, Kind: engine.ActorHuman}
	stage := func(reason string) string {
		out := f.rt.Engine.Call(ctx, agent, "cancel_order", json.RawMessage(fmt.Sprintf(`{"order_id": "o-1001", "reason": %q}`, reason)))
		if out.Status != engine.StatusApprovalPending {
			t.Fatalf("staging %s: %+v", reason, out)
		}
		return out.ApprovalID.String()
	}
	reject := func(id string) {
		if out := f.rt.Engine.Decide(ctx, ada, engine.Decision{ApprovalID: id, Note: "no"}); out.Status != engine.StatusOK {
			t.Fatalf("reject %s: %+v", id, out)
		}
	}
	first := stage("asked first")
	var later []string
	for i := range 21 {
		later = append(later, stage(fmt.Sprintf("r-%02d", i)))
	}
	for _, id := range later {
		reject(id)
	}
	reject(first)
	page := f.client(t).signIn("ada")
	recent := page.body[strings.Index(page.body, "Recently decided"):]
	var order []string
	for _, m := range regexp.MustCompile(`href="/approvals/([0-9a-f-]{36})"`).FindAllStringSubmatch(recent, -1) {
		order = append(order, m[1])
	}
	slices.Reverse(later)
	want := append([]string{first}, later...)
	if !slices.Equal(order, want[:20]) {
		t.Fatalf("Recently decided lists %q,\nwant the last decided first: %q", order, want[:20])
	}
}

// TestANoteTheTextareaTakesIsRecorded: the longest note a detail page's
// textarea lets a person type — in characters of three UTF-8 bytes, the
// most one UTF-16 unit a browser counts can take — is one the server
// records, never one it refuses, the note lost with the page.
func TestANoteTheTextareaTakesIsRecorded(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := f.client(t)
	ada.signIn("ada")
	detail := ada.get(f.base + web.Path + "/" + id)
	m := regexp.MustCompile(`id="reject-note"[^>]*maxlength="(\d+)"`).FindStringSubmatch(detail.body)
	if m == nil {
		t.Fatalf("the reject note has no maxlength:\n%s", detail.body)
	}
	n, _ := strconv.Atoi(m[1])
	if n < 1000 {
		t.Fatalf("the textarea takes %d characters: too few for a note", n)
	}
	done := ada.follow(ada.submit(detail, "reject-form", map[string]string{"note": strings.Repeat("€", n)}))
	if done.status != http.StatusOK || !strings.Contains(done.body, "this approval is rejected") {
		t.Fatalf("a note of %d three-byte characters: %d\n%s", n, done.status, done.body)
	}

	// A note of lines, as a browser submits it: maxlength counts each
	// line break as one character, the form sends it as CRLF. Recorded as
	// the textarea held it.
	id = f.stage(t, "o-1002")
	detail = ada.get(f.base + web.Path + "/" + id)
	typed := strings.Repeat("a\n", n/2)
	done = ada.follow(ada.submit(detail, "reject-form", map[string]string{"note": strings.ReplaceAll(typed, "\n", "\r\n")}))
	if done.status != http.StatusOK || !strings.Contains(done.body, "this approval is rejected") {
		t.Fatalf("a note of %d lines: %d\n%s", n/2, done.status, done.body)
	}
	v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, id)
	if err != nil || v.DecisionNote == nil || *v.DecisionNote != typed {
		t.Fatalf("the note of lines recorded as %v (%v)", v, err)
	}

	// A note the server refuses (sent past the textarea, one character
	// too long) is refused on the approval's page, coded, and kept in the
	// form it came from, to mend: not lost with the page.
	id = f.stage(t, "o-1001") // its first approval is rejected: a new one
	detail = ada.get(f.base + web.Path + "/" + id)
	long := "\n" + strings.Repeat("b", engine.MaxNoteChars)
	refused := ada.submit(detail, "reject-form", map[string]string{"note": long})
	kept := regexp.MustCompile(`(?s)<textarea id="reject-note"[^>]*>\n(.*?)</textarea>`).FindStringSubmatch(refused.body)
	if refused.status != http.StatusBadRequest || !strings.Contains(refused.body, string(errcode.RequestInvalid)) || kept == nil || kept[1] != long {
		t.Fatalf("a note one character too long: %d, kept %q\n%s", refused.status, kept, refused.body)
	}
	if v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, id); err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("after the refused note: %v (%v)", v, err)
	}
}

// TestUnknownPagesAreRefusedWithACode: a path the desk has no page for,
// a page asked with a method it does not take, the assets' directory and
// an asset that does not exist are refused on the desk's page with
// X_DESK_PAGE_UNKNOWN (405 naming the method in Allow), not the mux's
// plain text or the assets' listing; an asset that exists is served.
func TestUnknownPagesAreRefusedWithACode(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/a/b/c", http.StatusNotFound, ""},
		{http.MethodGet, "/assets/", http.StatusNotFound, ""},
		{http.MethodGet, "/assets/nope.js", http.StatusNotFound, ""},
		{http.MethodDelete, "/00000000-0000-0000-0000-000000000000", http.StatusMethodNotAllowed, http.MethodGet},
		{http.MethodPut, "", http.StatusMethodNotAllowed, http.MethodGet},
		{http.MethodGet, "/00000000-0000-0000-0000-000000000000/decision", http.StatusMethodNotAllowed, http.MethodPost},
		// A fixed page asked with the other method is not read as an
		// approval's id (GET /{id}), nor named by the refusal of another.
		{http.MethodGet, "/signout", http.StatusMethodNotAllowed, http.MethodPost},
		{http.MethodPut, "/signout", http.StatusMethodNotAllowed, http.MethodPost},
		{http.MethodPost, "/events", http.StatusMethodNotAllowed, http.MethodGet},
		{http.MethodPost, "", http.StatusMethodNotAllowed, http.MethodGet},
		// A path not written clean is refused as written, not redirected
		// to the page it cleans to.
		{http.MethodGet, "//00000000-0000-0000-0000-000000000000", http.StatusNotFound, ""},
		{http.MethodPost, "/x/../00000000-0000-0000-0000-000000000000/decision", http.StatusNotFound, ""},
		{http.MethodGet, "/./audit", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequest(c.method, f.base+web.Path+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Allow") != c.allow || !strings.Contains(string(body), string(errcode.DeskPageUnknown)) ||
			strings.Contains(string(body), `<a href="desk.css">`) {
			t.Errorf("%s %s: %d Allow %q\n%.300s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if resp, err := http.Get(f.base + web.Path + "/assets/desk.css"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("an asset: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
