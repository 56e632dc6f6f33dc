package api_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/orangerail/orangerail/internal/checkpoint"
	"github.com/orangerail/orangerail/internal/engine"
)

// auditProofs drives the checkpoint and proof routes through their
// answers but the ones every route shares (TestDecisionAPI drives those):
// no checkpoint yet, a checkpoint and proofs that verify offline as
// `audit check-proof` verifies them, malformed and out-of-range
// parameters, a person without the role, an approver asking for a
// record's bytes, and a log rewritten since its checkpoint. auditor reads
// acme's log; nobody holds no role; approver decides acme's approvals;
// globexAuditor reads globex's log, which it leaves rewritten.
func auditProofs(t *testing.T, d *desk, c *contract, refused func(string, *answer, int, string), auditor, nobody, approver, globexAuditor string) {
	t.Helper()
	ctx := context.Background()
	get := func(path, token string) *answer { return d.do("GET", "/api/v1"+path, token, "") }
	check := func(route, path, token string) *answer {
		t.Helper()
		a := get(path, token)
		c.check(t, "GET", route, a)
		return a
	}
	for route, path := range map[string]string{"/audit/checkpoint": "/audit/checkpoint", "/audit/proof/inclusion": "/audit/proof/inclusion?seq=1",
		"/audit/proof/consistency": "/audit/proof/consistency?from=1"} {
		refused("checkpoint_missing", check(route, path, auditor), 404, "X_AUDIT_CHECKPOINT_MISSING")
		refused("not_an_auditor", check(route, path, nobody), 403, "X_FORBIDDEN")
	}

	skey, vkey, err := checkpoint.GenerateKey("orangerail.test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoint.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	known, err := checkpoint.Verifiers([]string{vkey})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(tenant string) int64 {
		t.Helper()
		if _, err := engine.SealTenant(ctx, d.rt.Store, tenant); err != nil {
			t.Fatal(err)
		}
		cp, err := engine.SignCheckpoint(ctx, d.rt.Store, tenant, signer, "orangerail.test/orders")
		if err != nil || cp == nil {
			t.Fatalf("sign %s: %+v, %v", tenant, cp, err)
		}
		return cp.Size
	}
	first := sign("acme")
	d.stage(d.rt.Engine, d.agent("agent-7", "acme"), "cancel_order", `{"reason": "proofs", "order_id": "o-1002"}`)
	latest := sign("acme")

	a := check("/audit/checkpoint", "/audit/checkpoint", auditor)
	got := a.json(t)
	if a.status != 200 || got["size"].(float64) != float64(latest) || got["verifier_key"] != vkey || got["key_id"] != signer.KeyID() {
		t.Fatalf("checkpoint: %d %s", a.status, a.body)
	}
	if cp, _, err := checkpoint.OpenNote(got["note"].(string), known); err != nil || cp.Size != uint64(latest) || cp.Origin != "orangerail.test/orders/acme" {
		t.Fatalf("the checkpoint's note: %+v, %v", cp, err)
	}
	for route, path := range map[string]string{
		"/audit/proof/inclusion":   "/audit/proof/inclusion?seq=1",
		"/audit/proof/consistency": "/audit/proof/consistency?from=" + strconv.FormatInt(first, 10),
	} {
		a := check(route, path, auditor)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		res, err := checkpoint.Check(bytes.NewReader(a.body), known, checkpoint.CheckOptions{Origin: "orangerail.test/orders/acme"})
		if err != nil || res.Size != uint64(latest) {
			t.Fatalf("%s does not verify offline: %+v, %v", path, res, err)
		}
	}
	// An approver gets the checkpoint and a consistency proof, hashes
	// alone, but not an inclusion proof, which carries a record's entry.
	for route, path := range map[string]string{"/audit/checkpoint": "/audit/checkpoint",
		"/audit/proof/consistency": "/audit/proof/consistency?from=" + strconv.FormatInt(first, 10)} {
		if a := check(route, path, approver); a.status != 200 {
			t.Fatalf("an approver's %s: %d %s", path, a.status, a.body)
		}
	}
	refused("proof_needs_auditor", check("/audit/proof/inclusion", "/audit/proof/inclusion?seq=1", approver), 403, "X_FORBIDDEN")
	beyond := strconv.FormatInt(latest+1, 10)
	for _, tt := range []struct {
		route, path, name, code string
	}{
		{"/audit/proof/inclusion", "/audit/proof/inclusion", "proof_parameter_invalid", "X_REQUEST_INVALID"},
		{"/audit/proof/inclusion", "/audit/proof/inclusion?seq=one", "proof_parameter_invalid", "X_REQUEST_INVALID"},
		{"/audit/proof/consistency", "/audit/proof/consistency?from=1&to=x", "proof_parameter_invalid", "X_REQUEST_INVALID"},
		{"/audit/proof/inclusion", "/audit/proof/inclusion?seq=" + beyond, "proof_out_of_range", "X_AUDIT_PROOF_RANGE"},
		{"/audit/proof/inclusion", "/audit/proof/inclusion?seq=1&size=" + beyond, "proof_out_of_range", "X_AUDIT_PROOF_RANGE"},
		{"/audit/proof/consistency", "/audit/proof/consistency?from=" + strconv.FormatInt(latest, 10) + "&to=" + strconv.FormatInt(first, 10), "proof_out_of_range", "X_AUDIT_PROOF_RANGE"},
	} {
		a := check(tt.route, tt.path, auditor)
		if a.status != 400 || a.code(t) != tt.code {
			t.Fatalf("%s: %d %s", tt.path, a.status, a.body)
		}
		if tt.path == "/audit/proof/inclusion" {
			refused(tt.name, a, 400, tt.code)
		}
	}
	refused("proof_out_of_range", check("/audit/proof/inclusion", "/audit/proof/inclusion?seq="+beyond, auditor), 400, "X_AUDIT_PROOF_RANGE")

	// globex's log, rewritten after its checkpoint: no proof against it.
	d.stage(d.rt.Engine, d.agent("agent-9", "globex"), "update_shipping_address", `{"order_id": "o-1001", "address": "9 Long Street"}`)
	sign("globex")
	if _, err := d.admin.Exec(ctx, `ALTER TABLE orangerail.audit DISABLE TRIGGER USER;
		UPDATE orangerail.audit SET hash = sha256(hash) WHERE tenant_id = 'globex' AND seq = 1;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_update_delete;
		ALTER TABLE orangerail.audit ENABLE ALWAYS TRIGGER audit_refuse_truncate`); err != nil {
		t.Fatal(err)
	}
	for route, path := range map[string]string{"/audit/proof/inclusion": "/audit/proof/inclusion?seq=1", "/audit/proof/consistency": "/audit/proof/consistency?from=1"} {
		refused("chain_broken", check(route, path, globexAuditor), 409, "X_AUDIT_CHAIN_BROKEN")
	}
}
