package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/keyring"
	"github.com/orangerail/orangerail/internal/ontology"
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
