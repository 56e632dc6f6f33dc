package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
	"github.com/orangerail/orangerail/internal/testdb"
)

// ringEngine serves the orders example on b's database under ring.
func ringEngine(t *testing.T, b *testBundle, ring *keyring.Ring) *engine.Engine {
	t.Helper()
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Ring: ring, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// listPage lists one order under e and returns the next cursor.
func listPage(t *testing.T, e *engine.Engine, cursor string) (*engine.Outcome, string) {
	t.Helper()
	args := `{"limit": 1, "sort": "created_at"`
	if cursor != "" {
		args += `, "cursor": "` + cursor + `"`
	}
	out := e.List(context.Background(), agent("acme"), "order", json.RawMessage(args+"}"))
	var body struct {
		NextCursor string `json:"nextCursor"`
	}
	if out.Status == engine.StatusOK {
		if err := json.Unmarshal(out.Data, &body); err != nil {
			t.Fatal(err)
		}
	}
	return out, body.NextCursor
}

func mustRing(t *testing.T, text string) *keyring.Ring {
	t.Helper()
	r, err := keyring.Parse(text, "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKeyRotationKeepsCursorsAndApprovals rotates a legacy key to a ring
// whose new key is active: a cursor and a pending approval made before
// keep working, an identical call opens a fresh approval (never a digest
// mismatch), and what the new key signs stops verifying once a ring drops
// it.
func TestKeyRotationKeepsCursorsAndApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	oldHex, newHex := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	before := ringEngine(t, b, mustRing(t, oldHex)) // a bare key: as deployed before rings
	after := ringEngine(t, b, mustRing(t, "k2:"+newHex+",legacy:"+oldHex))

	// Made before the rotation: a cursor, and a pending approval.
	out, cursor := listPage(t, before, "")
	want(t, out, engine.StatusOK)
	if strings.Count(cursor, ".") != 1 {
		t.Fatalf("a legacy key's cursor %q is not in the form before rings (body.sig)", cursor)
	}
	args := json.RawMessage(`{"order_id": "o-1001", "reason": "rotated"}`)
	staged := before.Call(ctx, support("acme"), "cancel_order", args)
	want(t, staged, engine.StatusApprovalPending)
	var kid *string
	if err := b.admin.QueryRow(ctx, "SELECT input_key_id FROM orangerail.approvals WHERE id = $1", *staged.ApprovalID).Scan(&kid); err != nil || kid != nil {
		t.Fatalf("a legacy key's approval carries kid %v (%v), want none", kid, err)
	}

	// After: the cursor pages on, under the legacy key the ring keeps.
	out, next := listPage(t, after, cursor)
	want(t, out, engine.StatusOK)
	if !strings.HasPrefix(next, "k2.") {
		t.Fatalf("the next cursor %q does not carry the active kid k2", next)
	}
	out, _ = listPage(t, after, next)
	want(t, out, engine.StatusOK)

	// An identical call opens a fresh approval under k2.
	fresh := after.Call(ctx, support("acme"), "cancel_order", args)
	want(t, fresh, engine.StatusApprovalPending)
	if *fresh.ApprovalID == *staged.ApprovalID {
		t.Fatal("an identical call after rotation returned the approval staged under the old key")
	}
	if err := b.admin.QueryRow(ctx, "SELECT input_key_id FROM orangerail.approvals WHERE id = $1", *fresh.ApprovalID).Scan(&kid); err != nil || kid == nil || *kid != "k2" {
		t.Fatalf("the fresh approval carries kid %v (%v), want k2", kid, err)
	}

	// The old approval is decided with its stored digest and executes,
	// verified under the legacy key its kid (none) names.
	approve(t, after, "acme", staged.ApprovalID.String())
	want(t, after.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)
	if s := orderStatus(t, b, "acme", "o-1001"); s != "cancelled" {
		t.Fatalf("o-1001 is %s after the old approval executed", s)
	}

	// A ring without k2 opens neither k2's cursor nor executes k2's
	// approval: it fails closed as a signature mismatch, recorded.
	dropped := ringEngine(t, b, mustRing(t, "legacy:"+oldHex))
	if out, _ := listPage(t, dropped, next); out.Status != engine.StatusInvalidInput {
		t.Fatalf("k2's cursor under a ring without k2: %s", out.Status)
	}
	if out, _ := listPage(t, dropped, cursor); out.Status != engine.StatusOK {
		t.Fatalf("the legacy cursor under the legacy ring: %s", out.Status)
	}
	approve(t, dropped, "acme", fresh.ApprovalID.String())
	want(t, dropped.Check(ctx, support("acme"), fresh.ApprovalID.String()), engine.StatusSignatureMismatch)
	verifyClean(t, b, "acme")
}

// TestLegacyKeyDigestIsUnchanged pins the input digest a bare key makes to
// the formula of the releases before rings, so approvals staged then are
// still found by an identical call and still execute.
func TestLegacyKeyDigestIsUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := bytes.Repeat([]byte{0x5c}, engine.KeySize)
	canonical := []byte(`{"order_id":"o-1001","reason":"x"}`)
	h := hmac.New(sha256.New, key)
	h.Write([]byte("input digest v1"))
	for _, p := range [][]byte{[]byte("acme"), []byte("cancel_order"), canonical} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		h.Write(p)
	}
	pinned := h.Sum(nil)
	for name, ring := range map[string]*keyring.Ring{
		"bare key":       mustRing(t, hex.EncodeToString(key)),
		"legacy in ring": mustRing(t, "legacy:"+hex.EncodeToString(key)+",k9:"+strings.Repeat("00", 32)),
	} {
		if got := engine.InputDigest(ringEngine(t, b, ring), "acme", "cancel_order", canonical); !bytes.Equal(got, pinned) {
			t.Fatalf("%s: digest %x, want the pre-ring %x", name, got, pinned)
		}
	}
	rotated := ringEngine(t, b, mustRing(t, "k9:"+strings.Repeat("00", 32)+",legacy:"+hex.EncodeToString(key)))
	if got := engine.InputDigest(rotated, "acme", "cancel_order", canonical); bytes.Equal(got, pinned) {
		t.Fatal("with k9 active the digest is still the legacy key's")
	}
}

// ringEngineWith is ringEngine with edits to the example's config.
func ringEngineWith(t *testing.T, b *testBundle, ring *keyring.Ring, edits ...ontologytest.Edit) *engine.Engine {
	t.Helper()
	cfg := ontologytest.Parse(t, orders.Config, edits...)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Ring: ring, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestIdempotencyKeySurvivesRotation: a retry under an idempotency key
// after a rotation answers the first call's result; its digest was made
// under the old key, and is checked under every key of the ring.
func TestIdempotencyKeySurvivesRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	oldHex, newHex := strings.Repeat("3d", 32), strings.Repeat("4e", 32)
	idempotent := ontologytest.Set("actions.add_order_note.idempotent", true)
	before := ringEngineWith(t, b, mustRing(t, "k1:"+oldHex), idempotent)
	after := ringEngineWith(t, b, mustRing(t, "k2:"+newHex+",k1:"+oldHex), idempotent)
	args := json.RawMessage(`{"order_id": "o-1001", "note": "once across a rotation", "idempotencyKey": "rot-1"}`)
	first := before.Call(ctx, support("acme"), "add_order_note", args)
	want(t, first, engine.StatusOK)
	retry := after.Call(ctx, support("acme"), "add_order_note", args)
	want(t, retry, engine.StatusOK)
	if retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry after a rotation ran again (%s, first %s)", retry.CorrelationID, first.CorrelationID)
	}
	// Another input under the key is still refused.
	other := after.Call(ctx, support("acme"), "add_order_note", json.RawMessage(`{"order_id": "o-1001", "note": "another", "idempotencyKey": "rot-1"}`))
	if other.Code != errcode.IdempotencyKeyReused {
		t.Fatalf("another input under the key after a rotation: %s %s", other.Status, other.Code)
	}
}

// TestSealedInputAcrossRotation: a sealed input staged under one key is
// reviewed and executed after a rotation; once its key leaves the ring it
// is unreadable, and the approved approval does not run and stays
// approved.
func TestSealedInputAcrossRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	oldHex, newHex := strings.Repeat("5f", 32), strings.Repeat("6a", 32)
	seal := ontologytest.Set("approvals.seal_inputs", true)
	before := ringEngineWith(t, b, mustRing(t, oldHex), seal)
	after := ringEngineWith(t, b, mustRing(t, "k2:"+newHex+",legacy:"+oldHex), seal)
	dropped := ringEngineWith(t, b, mustRing(t, "k2:"+newHex), seal)

	kept := before.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "sealed before"}`))
	want(t, kept, engine.StatusApprovalPending)
	lost := before.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "sealed before, too"}`))
	want(t, lost, engine.StatusApprovalPending)

	v, err := after.ShowApproval(ctx, "acme", kept.ApprovalID.String())
	if err != nil || !strings.Contains(string(v.Input), "sealed before") {
		t.Fatalf("after the rotation the view = %s, %v", v.Input, err)
	}
	approve(t, after, "acme", kept.ApprovalID.String())
	want(t, after.Check(ctx, support("acme"), kept.ApprovalID.String()), engine.StatusOK)

	approve(t, after, "acme", lost.ApprovalID.String())
	if v, err := dropped.ShowApproval(ctx, "acme", lost.ApprovalID.String()); err != nil || v.Input != nil || v.InputState != engine.InputUnreadable {
		t.Fatalf("without its key the view = %s %s, %v", v.Input, v.InputState, err)
	}
	out := dropped.Check(ctx, support("acme"), lost.ApprovalID.String())
	if out.Code != errcode.ApprovalInputUnreadable {
		t.Fatalf("polling an approval whose key left the ring = %s %s", out.Status, out.Code)
	}
	// The poll is in the audit log, with why it did not run.
	if got := phases(t, b, "acme", lost.ApprovalID.String()); !slices.Equal(got, []string{"staged", "approved", "refused"}) {
		t.Fatalf("the approval's records after the refused poll: %v", got)
	}
	if v, err := after.ShowApproval(ctx, "acme", lost.ApprovalID.String()); err != nil || v.Status != "approved" {
		t.Fatalf("the approval is %v (%v), want still approved", v.Status, err)
	}
	if s := orderStatus(t, b, "acme", "o-1002"); s == "cancelled" {
		t.Fatal("an approval whose input could not be opened executed")
	}
	want(t, after.Check(ctx, support("acme"), lost.ApprovalID.String()), engine.StatusOK)
	verifyClean(t, b, "acme")
}

// TestUnreadableInputIsNotApproved: during a key rotation a replica that
// does not yet hold the key an input was sealed under cannot show that
// input, so nobody deciding there may approve it — the replica that holds
// the key would run it — whichever path the decision takes (the quick one
// or the full one); it may be rejected. Where the key is held the same
// approval is approved as usual.
func TestUnreadableInputIsNotApproved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.admin.Exec(ctx, orders.Seed); err != nil {
		t.Fatal(err)
	}
	oldHex, newHex := strings.Repeat("5f", 32), strings.Repeat("6a", 32)
	seal := ontologytest.Set("approvals.seal_inputs", true)
	stale := ringEngineWith(t, b, mustRing(t, oldHex), seal)
	fresh := ringEngineWith(t, b, mustRing(t, "k2:"+newHex+",legacy:"+oldHex), seal)

	staged := fresh.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "sealed under k2"}`))
	want(t, staged, engine.StatusApprovalPending)
	id := staged.ApprovalID.String()
	v, err := stale.ShowApproval(ctx, "acme", id)
	if err != nil || v.Input != nil || v.InputState != engine.InputUnreadable {
		t.Fatalf("the stale replica's view = %s %s, %v", v.Input, v.InputState, err)
	}
	// The digest is shown beside no input: approving it approves nothing
	// the person read.
	for _, d := range []engine.Decision{
		{ApprovalID: id, Approve: true, Digest: v.Digest},
		{ApprovalID: id, Approve: true, Digest: v.Digest, Note: "looks fine"},
	} {
		out := stale.Decide(ctx, approver("acme"), d)
		if out.Status != engine.StatusDenied || out.Code != errcode.ApprovalInputUnreadable {
			t.Fatalf("approving an input the replica cannot show = %s %s", out.Status, out.Code)
		}
	}
	if v, err := fresh.ShowApproval(ctx, "acme", id); err != nil || v.Status != "pending" {
		t.Fatalf("after the refusals the approval is %v (%v), want pending", v.Status, err)
	}
	if out := fresh.Check(ctx, support("acme"), id); out.Status != engine.StatusPending {
		t.Fatalf("polling on the fresh replica = %s %s, want still pending", out.Status, out.Code)
	}
	if s := orderStatus(t, b, "acme", "o-1001"); s == "cancelled" {
		t.Fatal("an approval nobody was shown executed")
	}
	// Rejecting it needs no reading: refused it does nothing.
	want(t, stale.Decide(ctx, approver("acme"), engine.Decision{ApprovalID: id, Note: "cannot read it"}), engine.StatusOK)

	// Where the key is held, a new one is approved and runs.
	again := fresh.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "sealed under k2"}`))
	want(t, again, engine.StatusApprovalPending)
	approve(t, fresh, "acme", again.ApprovalID.String())
	want(t, fresh.Check(ctx, support("acme"), again.ApprovalID.String()), engine.StatusOK)
	verifyClean(t, b, "acme")
}

// TestRollbackPastKeyIDsRefusesWhatItWouldLose: migration 00022's Down
// drops the column naming the key that made an approval's digest; an open
// approval staged under a ring key would then be checked under the legacy
// key and refused as tampered when it runs. The Down refuses while one is
// open, naming it, and changes nothing; once it ran, the Down and the Up
// again go through. A sealed input, which the version below cannot hold,
// is refused by name too.
func TestRollbackPastKeyIDsRefusesWhatItWouldLose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupExample(t)
	e := ringEngine(t, b.testBundle, mustRing(t, "k2:"+strings.Repeat("2b", 32)+",legacy:"+strings.Repeat("1a", 32)))
	staged := e.Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1001", "reason": "rotated"}`))
	want(t, staged, engine.StatusApprovalPending)

	m, err := database.NewMigrator(ctx, testdb.Direct(b.url))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	refused := func(id string) {
		t.Helper()
		if _, err := m.DownTo(ctx, 21); errcode.Of(err) != errcode.RollbackRefused || !strings.Contains(err.Error(), id) {
			t.Fatalf("down past 00022: %v, want it refused (%s) naming %s", err, errcode.RollbackRefused, id)
		}
		if v, err := m.Version(ctx); err != nil || v != 22 {
			t.Fatalf("after the refusal the database is at %d (%v), want 22", v, err)
		}
		if _, err := m.Up(ctx); err != nil {
			t.Fatal(err)
		}
		b.runtime.Reset()
	}
	refused(staged.ApprovalID.String())
	approve(t, e, "acme", staged.ApprovalID.String())
	want(t, e.Check(ctx, support("acme"), staged.ApprovalID.String()), engine.StatusOK)

	if _, err := m.DownTo(ctx, 21); err != nil {
		t.Fatalf("down past 00022 once the approval ran: %v", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	b.runtime.Reset()
	sealed := sealedEngine(t, b, time.Now).Call(ctx, support("acme"), "cancel_order", json.RawMessage(`{"order_id": "o-1002", "reason": "sealed"}`))
	want(t, sealed, engine.StatusApprovalPending)
	refused(sealed.ApprovalID.String())
}
