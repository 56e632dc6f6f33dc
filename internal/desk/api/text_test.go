package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/desk/api"
)

// TestFiltersAndNotesAreText: a list's filter or a decision's note that
// Postgres cannot take as text — a NUL, bytes that are not UTF-8 — or a
// filter longer than api.MaxFilterBytes is refused 400 X_REQUEST_INVALID
// naming the parameter, never sent to fail as a 500 (found by
// FuzzHTTPDoor); a filter at the bound is served.
func TestFiltersAndNotesAreText(t *testing.T) {
	t.Parallel()
	d := newDesk(t, nil, nil)
	bob := d.token("bob", "acme", true, "approver")
	frank := d.token("frank", "acme", true, "auditor")
	long := strings.Repeat("a", api.MaxFilterBytes+1)
	for _, c := range []struct{ path, token, param string }{
		{"/approvals?action=%00", bob, "action"},
		{"/approvals?requested_by=%FF", bob, "requested_by"},
		{"/approvals?action=" + long, bob, "action"},
		{"/audit?correlation_id=c%00", frank, "correlation_id"},
		{"/audit?action=%FF%FE", frank, "action"},
		{"/audit?actor=" + url.QueryEscape("agent\x00"), frank, "actor"},
		{"/audit?actor=" + long, frank, "actor"},
	} {
		a := d.do("GET", "/api/v1"+c.path, c.token, "")
		if a.status != 400 || a.code(t) != "X_REQUEST_INVALID" || !strings.Contains(string(a.body), c.param) {
			t.Errorf("GET %.60s: %d %s, want 400 X_REQUEST_INVALID naming %s", c.path, a.status, a.body, c.param)
		}
	}
	atBound := strings.Repeat("a", api.MaxFilterBytes)
	for _, path := range []string{"/approvals?action=" + atBound, "/audit?actor=" + atBound} {
		if a := d.do("GET", "/api/v1"+path, frank, ""); a.status != 200 {
			t.Errorf("GET %.40s…: %d %s", path, a.status, a.body)
		}
	}
	id := d.stage(d.rt.Engine, d.agent("agent-7", "acme"), "cancel_order", `{"order_id": "o-1001", "reason": "r"}`)
	a := d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"reject","note":"no\u0000"}`)
	if a.status != 400 || a.code(t) != "X_REQUEST_INVALID" || !strings.Contains(string(a.body), "note") {
		t.Fatalf("a note with a NUL: %d %s", a.status, a.body)
	}
	if a := d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"reject","note":"no"}`); a.status != 200 {
		t.Fatalf("the approval after the refused note: %d %s", a.status, a.body)
	}
}
