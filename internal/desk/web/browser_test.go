package web_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/orangerail/orangerail/internal/browsertest"
	"github.com/orangerail/orangerail/internal/desk/web"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

func TestMain(m *testing.M) { browsertest.Main(m) }

var update = flag.Bool("update", false, "rewrite docs/desk-list.png and docs/desk-detail.png from the browser test's screenshots")

// screenshot saves the tab's page as docs/name with -update, else under
// the test's temporary directory.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	if *update {
		dir = filepath.Join("..", "..", "..", "docs")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	browsertest.Screenshot(ctx, t, filepath.Join(dir, name))
}

// signInBrowser signs in at the issuer's login page, typing like a person.
func signInBrowser(ctx context.Context, t *testing.T, f *fixture, username string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(f.base+web.Path),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("pending")),
	); err != nil {
		at, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s's sign-in in the browser: %v; the browser is at %s", username, err, at)
	}
}

// TestDeskInABrowser: ada signs in through the issuer's page; an approval
// an agent stages appears in her list without a reload; she opens it and
// approves; bob, at a second browser, sees it decided, and sees no buttons
// on the approval the agent asked for him; a cross-site form posting to
// the desk is refused.
func TestDeskInABrowser(t *testing.T) {
	f := newFixture(t)
	ada := browsertest.New(t)
	signInBrowser(ada, t, f, "ada")

	// A marker on the page survives only if the page is never reloaded.
	if _, err := chromedp.Run(ada, chromedp.Evaluate[bool](`window.deskMarker = true`)); err != nil {
		t.Fatal(err)
	}
	first := f.stage(t, "o-1001")
	second := f.stage(t, "o-1002")
	wait, cancel := context.WithTimeout(ada, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`a[href="/approvals/%s"]`, first)))); err != nil {
		t.Fatalf("the staged approval did not appear in the list: %v", err)
	}
	if err := chromedp.Do(wait, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`a[href="/approvals/%s"]`, second)))); err != nil {
		t.Fatalf("the second staged approval did not appear in the list: %v", err)
	}
	if marker, err := chromedp.Run(ada, chromedp.Evaluate[bool](`window.deskMarker === true`)); err != nil || !marker {
		t.Fatalf("the list page was reloaded (marker %v, %v)", marker, err)
	}
	screenshot(ada, t, "desk-list.png")

	if err := chromedp.Do(wait,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/approvals/%s"]`, first))),
		chromedp.WaitVisible(chromedp.ID("approve")),
	); err != nil {
		t.Fatalf("opening the approval: %v", err)
	}
	input, err := chromedp.Run(ada, chromedp.Text(chromedp.ID("input")))
	if err != nil || !strings.Contains(input, `"order_id": "o-1001"`) {
		t.Fatalf("the input shown: %q (%v)", input, err)
	}
	// The countdown script ran under the CSP.
	if _, err := chromedp.Run(wait, chromedp.Poll[bool](`(document.querySelector("[data-countdown]").textContent || "").startsWith("expires in")`)); err != nil {
		t.Fatalf("the expiry countdown did not run: %v", err)
	}
	screenshot(ada, t, "desk-detail.png")

	// A page on another origin posts ada's form, form token and all.
	token, err := chromedp.Run(ada, chromedp.Evaluate[string](`document.querySelector("#approve-form input[name=form_token]").value`))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := chromedp.Run(ada, chromedp.Evaluate[string](`document.querySelector("#approve-form input[name=digest]").value`))
	if err != nil {
		t.Fatal(err)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/approvals/%s/decision">
<input name="form_token" value="%s"><input name="decision" value="approve"><input name="digest" value="%s"></form>
<script>document.getElementById("f").submit()</script>`, f.base, first, token, digest)
	}))
	defer evil.Close()
	if err := chromedp.Do(wait, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS(".error"))); err != nil {
		t.Fatalf("the cross-site form: %v", err)
	}
	if text, _ := chromedp.Run(ada, chromedp.Text(chromedp.CSS(".error"))); !strings.Contains(text, string(errcode.DeskFormRefused)) {
		t.Fatalf("the cross-site form was answered %q", text)
	}
	if v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, first); err != nil || v.Status != store.ApprovalPending {
		t.Fatalf("after the cross-site form the approval is %v (%v)", v.Status, err)
	}

	// Ada approves from the desk itself.
	if err := chromedp.Do(wait,
		chromedp.Navigate(f.base+web.Path+"/"+first),
		chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	); err != nil {
		t.Fatalf("approving: %v", err)
	}
	if v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, first); err != nil || v.Status != store.ApprovalApproved || v.DecidedBy == nil || *v.DecidedBy != "ada@example.com" {
		t.Fatalf("after approving in the browser: %+v (%v)", v, err)
	}

	// Bob, at another browser, sees it decided, and the other approval,
	// asked for him, without buttons.
	bob := browsertest.New(t)
	signInBrowser(bob, t, f, "bob")
	bobWait, cancelBob := context.WithTimeout(bob, 30*time.Second)
	defer cancelBob()
	if err := chromedp.Do(bobWait, chromedp.Navigate(f.base+web.Path+"/"+first), chromedp.WaitVisible(chromedp.ID("why"))); err != nil {
		t.Fatal(err)
	}
	status, err := chromedp.Run(bob, chromedp.Text(chromedp.CSS(".status")))
	if err != nil || status != "approved" {
		t.Fatalf("bob sees the approval %q (%v)", status, err)
	}
	if err := chromedp.Do(bobWait, chromedp.Navigate(f.base+web.Path+"/"+second), chromedp.WaitVisible(chromedp.ID("why"))); err != nil {
		t.Fatal(err)
	}
	buttons, err := chromedp.Run(bob, chromedp.Evaluate[int](`document.querySelectorAll("#approve, #reject, form[id$=-form]").length`))
	if err != nil || buttons != 0 {
		t.Fatalf("the requester sees %d decision controls (%v)", buttons, err)
	}

	// On a phone's width the page needs no sideways scrolling, and every
	// control is a native one in document order (no positive tabindex).
	if err := chromedp.Do(bobWait, chromedp.EmulateViewport(390, 844), chromedp.Navigate(f.base+web.Path+"/"+second), chromedp.WaitVisible(chromedp.ID("why"))); err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(bob, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil || overflow {
		t.Fatalf("the detail page scrolls sideways on a phone (%v)", err)
	}
	positive, err := chromedp.Run(bob, chromedp.Evaluate[int](`[...document.querySelectorAll("[tabindex]")].filter(e => e.tabIndex > 0).length`))
	if err != nil || positive != 0 {
		t.Fatalf("%d elements reorder the focus (%v)", positive, err)
	}
}

// TestAMultiLineNoteInABrowser: a person pastes a note of many lines into
// the reject form, as much as its textarea takes. Chromium's maxlength
// counts each line break as one character and the form sends it as
// CRLF; the rejection is recorded with the note as the textarea held it.
func TestAMultiLineNoteInABrowser(t *testing.T) {
	f := newFixture(t)
	id := f.stage(t, "o-1001")
	ada := browsertest.New(t)
	signInBrowser(ada, t, f, "ada")
	wait, cancel := context.WithTimeout(ada, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(wait,
		chromedp.Navigate(f.base+web.Path+"/"+id),
		chromedp.WaitVisible(chromedp.ID("reject-note")),
		chromedp.Focus(chromedp.ID("reject-note")),
		// Inserted as pasted text, which the browser holds to maxlength.
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: strings.Repeat("line\n", 1200)})
			return err
		}),
	); err != nil {
		t.Fatal(err)
	}
	held, err := chromedp.Run(wait, chromedp.Evaluate[string](`document.getElementById("reject-note").value`))
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != engine.MaxNoteChars || !strings.Contains(held, "\n") {
		t.Fatalf("the textarea holds %d characters, want its maxlength %d of lines", len(held), engine.MaxNoteChars)
	}
	if err := chromedp.Do(wait, chromedp.Click(chromedp.ID("reject")), chromedp.WaitVisible(chromedp.CSS("p.notice"))); err != nil {
		body, _ := chromedp.Run(ada, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("rejecting with the note: %v; the page says:\n%.400s", err, body)
	}
	v, err := f.rt.Engine.ShowApproval(context.Background(), tenant, id)
	if err != nil || v.Status != store.ApprovalRejected || v.DecisionNote == nil || *v.DecisionNote != held {
		t.Fatalf("after the rejection: %+v (%v)", v, err)
	}
}
