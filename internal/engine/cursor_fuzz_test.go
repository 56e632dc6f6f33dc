package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/jcs"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/store"
)

// The lists a fuzzed cursor is opened for: an object's list, the desk's
// approvals, the desk's audit log.
const (
	fuzzList = iota
	fuzzApprovals
	fuzzAudit
	fuzzLists
)

// fuzzCursorEngine is an engine with only a key: enough to seal and open
// cursors.
func fuzzCursorEngine() *Engine {
	ring, err := keyring.Single(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		panic(err)
	}
	return &Engine{ring: ring}
}

// realCursors are cursors as the engine makes them for tenant acme, one of
// each list, each under the query that binds it.
func realCursors(tb testing.TB, e *Engine) map[int]string {
	tb.Helper()
	query, err := jcs.Marshal(map[string]any{"filters": []filter{
		{field: "status", op: ontology.FilterEq, values: []string{"paid"}},
		{field: "total", op: ontology.FilterIn, values: []string{"1", "2.5"}},
	}, "sort": "created_at", "desc": true})
	if err != nil {
		tb.Fatal(err)
	}
	sortVal := "2024-05-01T12:00:00Z"
	list, err := e.sealCursor("acme", "order", &cursor{Query: query, SortVal: &sortVal, Key: "o-1001"})
	if err != nil {
		tb.Fatal(err)
	}
	approvals, err := e.sealApprovalCursor("acme", &approvalCursor{Query: ApprovalQuery{Status: store.ApprovalPending, Action: "cancel_order", Limit: 2},
		CreatedAt: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), ID: uuid.MustParse("123e4567-e89b-12d3-a456-426614174000")})
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(auditCursor{Query: AuditQuery{Actor: "agent-7", Phase: PhaseStaged, Limit: 2}, Seq: 42})
	if err != nil {
		tb.Fatal(err)
	}
	audit, err := e.sealCursor("acme", cursorObjectAudit, &cursor{Query: body})
	if err != nil {
		tb.Fatal(err)
	}
	return map[int]string{fuzzList: list, fuzzApprovals: approvals, fuzzAudit: audit}
}

// openFuzzed opens text as a cursor of list which for tenant, as the
// engine's callers do, and returns the body it opened.
func openFuzzed(e *Engine, which int, tenant, text string) ([]byte, error) {
	switch which {
	case fuzzApprovals:
		c, err := e.openApprovalCursor(tenant, text)
		if err != nil {
			return nil, err
		}
		return json.Marshal(c)
	case fuzzAudit:
		c, err := e.openCursor(tenant, cursorObjectAudit, text)
		if err != nil {
			return nil, err
		}
		var ac auditCursor
		if json.Unmarshal(c.Query, &ac) != nil {
			return nil, errBadCursor
		}
		return c.Query, nil
	}
	c, err := e.openCursor(tenant, "order", text)
	if err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

// FuzzCursor holds the opening of a cursor an agent or a person hands back
// to never panicking, to refusing with errBadCursor alone (which each list
// answers with its stable code), and to opening only what this engine
// sealed, for this tenant and this list: a cursor it opens is one of the
// engine's real cursors, and opens for no other tenant. It is seeded with
// a real cursor of each list and with hostile spellings of one.
func FuzzCursor(f *testing.F) {
	e := fuzzCursorEngine()
	real := realCursors(f, e)
	opened := map[int][]byte{}
	for which, text := range real {
		body, err := openFuzzed(e, which, "acme", text)
		if err != nil {
			f.Fatalf("a real cursor of list %d does not open: %v", which, err)
		}
		opened[which] = body
		for _, seed := range []string{text, text + "=", strings.ToUpper(text), strings.Replace(text, ".", "..", 1),
			strings.Repeat(text, 2), "." + text, text[:len(text)/2], text[:len(text)-1] + "\x00", text + "\xff"} {
			f.Add(uint8(which), seed)
		}
	}
	for _, seed := range []string{"", ".", "a.b", "e30.AAAAAAAAAAAAAAAAAAAAAA", "e30.", "e30.AA", strings.Repeat("A", maxCursorLength) + ".A", "\x00.\x00"} {
		f.Add(uint8(fuzzList), seed)
	}
	f.Fuzz(func(t *testing.T, which uint8, text string) {
		list := int(which) % fuzzLists
		body, err := openFuzzed(e, list, "acme", text)
		if err != nil {
			if !errors.Is(err, errBadCursor) {
				t.Fatalf("list %d refused %q with %v, not errBadCursor", list, text, err)
			}
			return
		}
		if !bytes.Equal(body, opened[list]) {
			t.Fatalf("list %d opened %q as %s, which the engine never sealed", list, text, body)
		}
		if _, err := openFuzzed(e, list, "globex", text); err == nil {
			t.Fatalf("list %d opened acme's %q for globex", list, text)
		}
		if _, err := openFuzzed(e, (list+1)%fuzzLists, "acme", text); err == nil {
			t.Fatalf("list %d's %q opened for list %d", list, text, (list+1)%fuzzLists)
		}
	})
}

// FuzzSealedCursorBody holds the decoding of a cursor's body, past its
// signature, to never panicking and to refusing with errBadCursor alone:
// what a key shared with an older version may have sealed.
func FuzzSealedCursorBody(f *testing.F) {
	e := fuzzCursorEngine()
	for which, text := range realCursors(f, e) {
		c, err := e.openCursor("acme", []string{fuzzList: "order", fuzzApprovals: cursorObjectApprovals, fuzzAudit: cursorObjectAudit}[which], text)
		if err != nil {
			f.Fatal(err)
		}
		if which == fuzzList {
			whole, err := json.Marshal(c)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(which), whole)
			continue
		}
		f.Add(uint8(which), c.Query)
	}
	for _, seed := range []string{`{}`, `null`, `{"q":1e999}`, `{"q":{"Limit":99999999999999999999}}`, `{"t":"0000-00-00"}`,
		`{"k":"not a uuid"}`, `{"s":-1}`, `{"q":"` + strings.Repeat(`\u0000`, 100) + `"}`, strings.Repeat(`{"q":`, 1000)} {
		f.Add(uint8(fuzzApprovals), []byte(seed))
		f.Add(uint8(fuzzAudit), []byte(seed))
		f.Add(uint8(fuzzList), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		list := int(which) % fuzzLists
		var text string
		var err error
		switch list {
		case fuzzList:
			var c cursor
			if json.Unmarshal(body, &c) != nil {
				return // sealCursor marshals a cursor: no other body is ever signed
			}
			text, err = e.sealCursor("acme", "order", &c)
		case fuzzApprovals:
			text, err = e.sealCursor("acme", cursorObjectApprovals, &cursor{Query: body})
		case fuzzAudit:
			text, err = e.sealCursor("acme", cursorObjectAudit, &cursor{Query: body})
		}
		if err != nil {
			return // not JSON: json.Marshal refuses a RawMessage that is not
		}
		if _, err := openFuzzed(e, list, "acme", text); err != nil && !errors.Is(err, errBadCursor) {
			t.Fatalf("list %d refused the sealed body %q with %v, not errBadCursor", list, body, err)
		}
	})
}
