package api_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/engine"
)

// TestFiltersAndNotesAreText: a list's filter or a decision's note that
// Postgres cannot take as text — a NUL, bytes that are not UTF-8 — or a
// filter longer than api.MaxFilterChars is refused 400 X_REQUEST_INVALID
// naming the parameter, never sent to fail as a 500 (found by
// FuzzHTTPDoor); a filter at the bound is served.
func TestFiltersAndNotesAreText(t *testing.T) {
	t.Parallel()
	d := newDesk(t, nil, nil)
	bob := d.token("bob", "acme", true, "approver")
	frank := d.token("frank", "acme", true, "auditor")
	long := strings.Repeat("a", api.MaxFilterChars+1)
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
	atBound := strings.Repeat("a", api.MaxFilterChars)
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

// TestLengthsCountCharacters: the document bounds a note and a filter with
// maxLength, which counts characters; the server counts alike. At the
// bound in two-byte characters (twice the bound in bytes) both the
// document and the server take it; one character past it, both refuse.
func TestLengthsCountCharacters(t *testing.T) {
	t.Parallel()
	d := newDesk(t, nil, nil)
	c := newContract(t)
	bob := d.token("bob", "acme", true, "approver")
	documented := func(schema, value string) bool {
		t.Helper()
		s, err := c.compiler.Compile(documentURL + schema)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		return s.Validate(v) == nil
	}
	filterSchema := "#/paths/~1approvals/get/parameters/2/schema" // requested_by
	for _, n := range []int{api.MaxFilterChars, api.MaxFilterChars + 1} {
		filter := strings.Repeat("é", n)
		want := n <= api.MaxFilterChars
		if got := documented(filterSchema, strconv.Quote(filter)); got != want {
			t.Errorf("a requested_by of %d characters: the document takes it %v, want %v", n, got, want)
		}
		a := d.do("GET", "/api/v1/approvals?requested_by="+url.QueryEscape(filter), bob, "")
		if (a.status == 200) != want || (!want && a.code(t) != "X_REQUEST_INVALID") {
			t.Errorf("a requested_by of %d characters (%d bytes): %d %.200s", n, len(filter), a.status, a.body)
		}
	}
	for _, n := range []int{engine.MaxNoteChars + 1, engine.MaxNoteChars} {
		id := d.stage(d.rt.Engine, d.agent("agent-7", "acme"), "cancel_order", fmt.Sprintf(`{"order_id": "o-1001", "reason": "r%d"}`, n))
		body := `{"decision":"reject","note":"` + strings.Repeat("é", n) + `"}`
		want := n <= engine.MaxNoteChars
		if got := documented("#/components/schemas/DecisionRequest", body); got != want {
			t.Errorf("a note of %d characters: the document takes it %v, want %v", n, got, want)
		}
		a := d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, body)
		if (a.status == 200) != want || (!want && a.code(t) != "X_REQUEST_INVALID") {
			t.Errorf("a note of %d characters (%d bytes): %d %.200s", n, 2*n, a.status, a.body)
		}
	}
}
