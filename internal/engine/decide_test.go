package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

// TestDecideNamesTheVerifiedPerson: who may decide is the action's
// approver roles, four-eyes compares the verified identity (subject and
// issuer), and the record names the decider's subject, issuer and kind.
func TestDecideNamesTheVerifiedPerson(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil,
		ontologytest.Set("actions.update_shipping_address.policy.approver_roles", []string{"shipping-lead"}))
	const issuer = "https://id.example"
	person := func(subject string, roles ...string) *engine.Caller {
		return &engine.Caller{Subject: subject, Issuer: issuer, Tenant: "acme", Roles: roles, Scopes: []string{"orders:write"}, Kind: engine.ActorHuman}
	}
	stage := func(c *engine.Caller, action, args string) (string, string) {
		t.Helper()
		out := e.Call(ctx, c, action, json.RawMessage(args))
		want(t, out, engine.StatusApprovalPending)
		v, err := e.ShowApproval(ctx, "acme", out.ApprovalID.String())
		if err != nil {
			t.Fatal(err)
		}
		return out.ApprovalID.String(), v.Digest
	}

	// The action's approver roles, not approvals.approver_role.
	ship, shipDigest := stage(support("acme"), "update_shipping_address", `{"order_id": "o-1001", "address": "2 New Street"}`)
	if out := e.Decide(ctx, person("bob", "approver"), engine.Decision{ApprovalID: ship, Approve: true, Digest: shipDigest}); out.Code != errcode.Forbidden {
		t.Fatalf("an approver without the action's role: %s %s", out.Status, out.Code)
	}
	if got := e.DecidableActions(person("bob", "approver")); !slices.Equal(got, []string{"add_order_note", "cancel_order", "create_return_label"}) {
		t.Fatalf("bob decides %v", got)
	}
	// A note no note may be is refused before anything is read, and
	// decides nothing: every way in (the API, the desk, the command line)
	// meets the same rule.
	for _, note := range []string{"a\x00", "a\xff", strings.Repeat("n", engine.MaxNoteChars+1)} {
		out, decided := e.DecideApproval(ctx, person("erin", "shipping-lead"), engine.Decision{ApprovalID: ship, Approve: true, Digest: shipDigest, Note: note})
		if out.Code != errcode.RequestInvalid || decided != nil || len(out.Issues) != 1 || out.Issues[0].Path != "/note" ||
			out.Issues[0].Message != engine.NoteProblem(note) {
			t.Fatalf("a note of %d bytes: %s %s %v", len(note), out.Status, out.Code, out.Issues)
		}
	}
	out, decided := e.DecideApproval(ctx, person("erin", "shipping-lead"), engine.Decision{ApprovalID: ship, Approve: true, Digest: shipDigest})
	want(t, out, engine.StatusOK)
	if decided == nil || decided.DecidedBy != "erin" || decided.Status != "approved" || decided.DecidedAt.IsZero() {
		t.Fatalf("decided %+v", decided)
	}
	var actor struct {
		Actor engine.Actor `json:"actor"`
	}
	var entry []byte
	if err := b.admin.QueryRow(ctx, "SELECT entry FROM orangerail.audit WHERE approval_id = $1 AND phase = 'approved'", ship).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(entry, &actor); err != nil || actor.Actor != (engine.Actor{Subject: "erin", Kind: engine.ActorHuman, Issuer: issuer}) {
		t.Fatalf("the approved record's actor: %s", entry)
	}

	// Four-eyes: the requester, verified by the same issuer, may not
	// decide; a namesake of another issuer is another person.
	own, ownDigest := stage(person("carol", "support", "approver"), "cancel_order", `{"order_id": "o-1002", "reason": "mine"}`)
	if out := e.Decide(ctx, person("carol", "approver"), engine.Decision{ApprovalID: own, Approve: true, Digest: ownDigest}); out.Code != errcode.ApprovalFourEyes {
		t.Fatalf("the requester deciding: %s %s", out.Status, out.Code)
	}
	namesake := person("carol", "approver")
	namesake.Issuer = "https://elsewhere.example"
	want(t, e.Decide(ctx, namesake, engine.Decision{ApprovalID: own, Approve: false, Note: "not mine"}), engine.StatusOK)

	// A requester no issuer vouched for (stdio, or a record from before
	// issuers were kept) is compared by subject alone.
	old, oldDigest := stage(&engine.Caller{Subject: "dave", Tenant: "acme", Roles: []string{"support"}, Scopes: []string{"orders:write"}, Kind: engine.ActorHuman},
		"cancel_order", `{"order_id": "o-1002", "reason": "old"}`)
	if out := e.Decide(ctx, person("dave", "approver"), engine.Decision{ApprovalID: old, Approve: true, Digest: oldDigest}); out.Code != errcode.ApprovalFourEyes {
		t.Fatalf("an unvouched requester deciding: %s %s", out.Status, out.Code)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestFourEyesHoldsAcrossIssuerSpellings: an issuer re-spelled in the
// config while approvals are pending (a trailing slash, the host's case) is
// the same issuer: its person who requested an approval still may not
// decide it, and is still the one it belongs to.
func TestFourEyesHoldsAcrossIssuerSpellings(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	person := func(issuer string) *engine.Caller {
		return &engine.Caller{Subject: "carol", Issuer: issuer, Tenant: "acme", Roles: []string{"support", "approver"},
			Scopes: []string{"orders:write"}, Kind: engine.ActorHuman}
	}
	out := e.Call(ctx, person("https://id.example/realms/acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "mine"}`))
	want(t, out, engine.StatusApprovalPending)
	v, err := e.ShowApproval(ctx, "acme", out.ApprovalID.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, respelled := range []string{"https://id.example/realms/acme/", "https://ID.Example/realms/acme", "HTTPS://id.example:443/realms/acme"} {
		if out := e.Decide(ctx, person(respelled), engine.Decision{ApprovalID: v.ID.String(), Approve: true, Digest: v.Digest}); out.Code != errcode.ApprovalFourEyes {
			t.Fatalf("the requester deciding under the issuer spelled %s: %s %s", respelled, out.Status, out.Code)
		}
	}
	if _, err := e.ReadApproval(ctx, person("https://ID.example/realms/acme/"), v.ID.String()); err != nil {
		t.Fatalf("the requester reading its approval under the issuer re-spelled: %v", err)
	}
	// Another issuer's namesake is still another person.
	want(t, e.Decide(ctx, person("https://id.example/realms/other"), engine.Decision{ApprovalID: v.ID.String(), Approve: false, Note: "not mine"}), engine.StatusOK)
	verifyClean(t, b.testBundle, "acme")
}

// TestIdenticalCallHoldsAcrossIssuerSpellings: an identical call after the
// operator re-spelled the issuer is answered with the open approval the
// first call staged, not staged again; another issuer's namesake's is its
// own.
func TestIdenticalCallHoldsAcrossIssuerSpellings(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil)
	person := func(issuer string) *engine.Caller {
		return &engine.Caller{Subject: "carol", Issuer: issuer, Tenant: "acme", Roles: []string{"support"},
			Scopes: []string{"orders:write"}, Kind: engine.ActorHuman}
	}
	args := json.RawMessage(`{"order_id": "o-1002", "reason": "once"}`)
	first := e.Call(ctx, person("https://id.example/realms/acme/"), "cancel_order", args)
	want(t, first, engine.StatusApprovalPending)
	for _, respelled := range []string{"https://id.example/realms/acme", "https://ID.Example/realms/acme/", "HTTPS://id.example:443/realms/acme"} {
		again := e.Call(ctx, person(respelled), "cancel_order", args)
		if again.Status != engine.StatusApprovalPending || *again.ApprovalID != *first.ApprovalID {
			t.Fatalf("an identical call under the issuer spelled %s: %s %v, the first call's approval %s", respelled, again.Status, again.ApprovalID, first.ApprovalID)
		}
	}
	other := e.Call(ctx, person("https://id.example/realms/other"), "cancel_order", args)
	if other.Status != engine.StatusApprovalPending || *other.ApprovalID == *first.ApprovalID {
		t.Fatalf("another issuer's namesake: %s %v, the first call's approval %s", other.Status, other.ApprovalID, first.ApprovalID)
	}
	var open int
	if err := b.admin.QueryRow(ctx, "SELECT count(*) FROM orangerail.approvals WHERE tenant_id = 'acme' AND status = 'pending'").Scan(&open); err != nil || open != 2 {
		t.Fatalf("%d pending approvals (%v), want 2", open, err)
	}
	verifyClean(t, b.testBundle, "acme")
}

// TestIssuerKeyInSQLIsNeverLooser: the database's issuer_key, which finds
// an identical call's open approval across spellings of one issuer, calls
// two issuers one only when ontology.SameIssuer does — else a call would
// be answered with another issuer's caller's approval — and agrees with
// ontology.IssuerKey on the plain issuers it rewrites.
func TestIssuerKeyInSQLIsNeverLooser(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	issuers := []string{
		"https://id.example/realms/acme", "https://id.example/realms/acme/", "https://ID.Example/realms/acme//",
		"HTTPS://id.example:443/realms/acme", "https://id.example:8443/realms/acme", "http://id.example:80/realms/acme",
		"http://id.example/realms/acme", "https://id.example/Realms/acme", "https://id.example:0443/realms/acme",
		"https://id.example:/realms/acme", "https://id.example/realms/ac%6De", "https://id.example/realms/acme?x=1",
		"https://id.example/realms/acme#f", "https://u@id.example/realms/acme", "https://[::1]:443/realms/acme",
		"https://[::1]/realms/acme", "https://id.example/a b", "https://id.example/%zz", "id.example/realms/acme",
		"https://acme.auth0.com/", "https://acme.auth0.com", "", "https://id.example/realms/acme/.", "https://id.example/~a(b)!*'",
	}
	keys := make([]string, len(issuers))
	for i, s := range issuers {
		if err := b.admin.QueryRow(ctx, "SELECT orangerail.issuer_key($1)", s).Scan(&keys[i]); err != nil {
			t.Fatal(err)
		}
		if keys[i] != s && keys[i] != ontology.IssuerKey(s) {
			t.Errorf("issuer_key(%q) = %q, ontology.IssuerKey %q", s, keys[i], ontology.IssuerKey(s))
		}
	}
	for i, a := range issuers {
		for j, c := range issuers {
			if keys[i] == keys[j] && !ontology.SameIssuer(a, c) {
				t.Errorf("issuer_key calls %q and %q one issuer; ontology.SameIssuer does not", a, c)
			}
		}
	}
	if keys[0] != keys[1] || keys[0] != keys[3] || keys[19] != keys[20] {
		t.Errorf("issuer_key keeps spellings of one issuer apart: %q", keys)
	}
}

// TestIssuerKeyInSQLIsTheSameUnderEveryCollation: issuer_key lower-cases
// an issuer's scheme and host as ASCII, as ontology.IssuerKey does,
// whatever collation its argument carries — the database's default, which
// idempotency_keys_canonical_idx evaluates it under, being one. Under a
// Turkish or Azerbaijani collation lower('I') is 'ı' (U+0131), so
// HTTPS://IDP.EXAMPLE was filed under https://ıdp.example: a key no
// lower-case spelling of the issuer finds, and one with a key of
// https://ıdp.example, another host, that issuer_key then called the same
// issuer as https://idp.example's.
func TestIssuerKeyInSQLIsTheSameUnderEveryCollation(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	rows, err := b.admin.Query(ctx, `SELECT collname FROM pg_collation
WHERE collname IN ('tr-x-icu', 'tr-TR-x-icu', 'az-x-icu', 'tr_TR.utf8', 'tr_TR', 'az_AZ.utf8') AND collencoding IN (-1, pg_char_to_encoding('UTF8'))`)
	if err != nil {
		t.Fatal(err)
	}
	collations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(collations) == 0 {
		t.Skip("this server has no Turkish or Azerbaijani collation to call issuer_key under")
	}
	for _, c := range append(collations, "default", "C") {
		for _, s := range []string{"HTTPS://IDP.EXAMPLE/", "https://Id.Example/realms/acme", "HTTPS://id.example:443", "https://ıd.example"} {
			var got string
			if err := b.admin.QueryRow(ctx, "SELECT orangerail.issuer_key($1::text COLLATE "+pgx.Identifier{c}.Sanitize()+")", s).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != s && got != ontology.IssuerKey(s) {
				t.Errorf("under collation %s issuer_key(%q) = %q, ontology.IssuerKey %q", c, s, got, ontology.IssuerKey(s))
			}
		}
	}
}
