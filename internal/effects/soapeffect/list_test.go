package soapeffect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
)

// listExecute binds codes to an xs:list element at the top and marks to
// one inside Parcel, beside a repeated element, lines.
var listExecute = fmt.Sprintf(`upstream: carrier
version: "1.1"
action: "urn:carrier/CreateLabel"
operation: {namespace: %q, name: CreateLabel}
body:
  - OrderId: ":order_id"
  - Codes: {list: ":codes"}
  - Parcel:
      - Marks: {list: ":marks"}
  - Line: ":lines"
`, opNS)

// listPolicy is the action's policy: not destructive, so that a test's
// calls are inside its budget.
const listPolicy = "{roles: [support]}\n    destructive: false"

const listProperties = `{order_id: {type: string}, codes: {type: array, items: {type: string}}, marks: {type: array, items: {type: integer}}, lines: {type: array, items: {type: string}}}`

// TestSOAPListIsOneElement: an element of an XML Schema list type
// (xs:list) is one element whose text is the items joined by single
// spaces. The effect wrote one element per item, as it writes a repeated
// element (maxOccurs > 1), so ["AB","CD"] was sent as two Codes elements,
// which the upstream refuses or reads as the last alone. An empty array
// is one empty element; an absent one is left out; a repeated
// element still repeats.
func TestSOAPListIsOneElement(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, envelope(http.StatusOK, ns11, response))
	h := newHarnessOf(t, up.URL, "", listExecute, listPolicy, listProperties)
	const head = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" xmlns:m="urn:carrier:labels"><soap:Body><m:CreateLabel><m:OrderId>o-1</m:OrderId>`
	const tail = `</m:CreateLabel></soap:Body></soap:Envelope>`
	for i, tt := range []struct{ input, want string }{
		{`{"order_id": "o-1", "codes": ["AB", "CD"], "marks": [1, 22, 333], "lines": ["a", "b"]}`,
			`<m:Codes>AB CD</m:Codes><m:Parcel><m:Marks>1 22 333</m:Marks></m:Parcel><m:Line>a</m:Line><m:Line>b</m:Line>`},
		{`{"order_id": "o-1", "codes": ["A&lt;"], "marks": []}`,
			`<m:Codes>A&amp;lt;</m:Codes><m:Parcel><m:Marks></m:Marks></m:Parcel>`},
		{`{"order_id": "o-1"}`,
			`<m:Parcel></m:Parcel>`},
	} {
		out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(tt.input))
		if out.Status != engine.StatusOK {
			t.Fatalf("%s: status %s (%v)", tt.input, out.Status, out.Err)
		}
		reqs := up.requests()
		if len(reqs) != i+1 {
			t.Fatalf("%d requests", len(reqs))
		}
		if got, want := reqs[i].body, head+tt.want+tail; got != want {
			t.Errorf("%s: sent\n%s\nwant\n%s", tt.input, got, want)
		}
	}
}

// TestSOAPListItemWithWhitespaceRefused: a list item holding whitespace
// would be read as two items, and an empty one as none: such an item is
// refused before anything is sent, upstream_request_unplaceable, rather
// than sent as other items than the agent gave.
func TestSOAPListItemWithWhitespaceRefused(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, envelope(http.StatusOK, ns11, response))
	h := newHarnessOf(t, up.URL, "", listExecute, listPolicy, listProperties)
	for _, codes := range []string{`["AB CD"]`, `["AB", "C\tD"]`, `[" AB"]`, `["AB\n"]`, `[""]`, `["AB", "\r"]`} {
		out := h.e.Call(context.Background(), agent("acme"), "create_label", json.RawMessage(`{"order_id": "o-1", "codes": `+codes+`}`))
		if out.Status != engine.StatusFailed || out.Diagnostic != engine.DiagnosticUpstreamUnplaceable {
			t.Errorf("%s: %s %s (%v), want %s", codes, out.Status, out.Diagnostic, out.Err, engine.DiagnosticUpstreamUnplaceable)
		}
		if err := out.Err; err == nil || !strings.Contains(err.Error(), "Codes: the list's item") {
			t.Errorf("%s: err %v", codes, err)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}
