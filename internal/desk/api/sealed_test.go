package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestSealedInputAPI: with sealed inputs the approver's detail shows the
// input opened; once shredded it shows none and says so, as the document
// allows, and a decision is refused 409 X_APPROVAL_INPUT_SHREDDED.
func TestSealedInputAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDesk(t, func(cfg *ontology.Config) {
		cfg.Approvals.SealInputs = true
		cfg.Approvals.Retention = new(ontology.Days(90 * 24 * time.Hour))
	}, nil)
	c := newContract(t)
	bob := d.token("bob", "acme", true, "approver")
	e := d.rt.Engine
	id := d.stage(e, d.agent("agent-7", "acme"), "cancel_order", `{"reason": "sealed-api-marker", "order_id": "o-1001"}`)

	a := d.do("GET", "/api/v1/approvals/"+id, bob, "")
	c.check(t, "GET", "/approvals/{id}", a)
	detail := a.json(t)
	input, _ := detail["input"].(map[string]any)
	if a.status != 200 || input["reason"] != "sealed-api-marker" || detail["input_state"] != nil {
		t.Fatalf("the sealed input's detail: %d %s", a.status, a.body)
	}
	a = d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"reject","note":"no"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	if a.status != 200 {
		t.Fatalf("reject: %d %s", a.status, a.body)
	}

	cfg := d.rt.Config
	catalog, err := cfg.ReadCatalog(ctx, d.rt.Store)
	if err != nil {
		t.Fatal(err)
	}
	later, err := engine.New(engine.Config{Ontology: cfg, Store: d.rt.Store, Effects: effects.Factories(), Catalog: catalog, Key: d.key,
		NowFunc: func() time.Time { return time.Now().Add(91 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	// The runtime's own sweeper may hold the tenant's sweep when this one
	// asks (a sweep passes over a tenant another holds): sweep until the
	// input is gone, within a bound.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := later.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		a = d.do("GET", "/api/v1/approvals/"+id, bob, "")
		if detail = a.json(t); detail["input_state"] != nil || time.Now().After(deadline) {
			break
		}
	}
	c.check(t, "GET", "/approvals/{id}", a)
	if a.status != 200 || detail["input"] != nil || detail["input_state"] != string(engine.InputShredded) || strings.Contains(string(a.body), "sealed-api-marker") {
		t.Fatalf("the shredded input's detail: %d %s", a.status, a.body)
	}
	a = d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"approve","digest":"`+detail["digest"].(string)+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	if a.status != 409 || a.code(t) != "X_APPROVAL_INPUT_SHREDDED" {
		t.Fatalf("deciding a shredded approval: %d %s", a.status, a.body)
	}
}

// TestUnreadableInputAPI: an approval whose sealed input this server
// cannot open (sealed under a key its ring does not hold, as on a replica
// not yet given a rotation's new key) shows no input and says why, and
// approving it is refused 409 X_APPROVAL_INPUT_UNREADABLE — the person was
// shown nothing — while rejecting it is recorded.
func TestUnreadableInputAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDesk(t, func(cfg *ontology.Config) { cfg.Approvals.SealInputs = true }, nil)
	c := newContract(t)
	bob := d.token("bob", "acme", true, "approver")
	cfg := d.rt.Config
	catalog, err := cfg.ReadCatalog(ctx, d.rt.Store)
	if err != nil {
		t.Fatal(err)
	}
	other := make([]byte, engine.KeySize)
	copy(other, "another replica's newer key.....")
	elsewhere, err := engine.New(engine.Config{Ontology: cfg, Store: d.rt.Store, Effects: effects.Factories(), Catalog: catalog, Key: other})
	if err != nil {
		t.Fatal(err)
	}
	id := d.stage(elsewhere, d.agent("agent-7", "acme"), "cancel_order", `{"reason": "sealed-elsewhere-marker", "order_id": "o-1001"}`)

	a := d.do("GET", "/api/v1/approvals/"+id, bob, "")
	c.check(t, "GET", "/approvals/{id}", a)
	detail := a.json(t)
	if a.status != 200 || detail["input"] != nil || detail["input_state"] != string(engine.InputUnreadable) || strings.Contains(string(a.body), "sealed-elsewhere-marker") {
		t.Fatalf("the unreadable input's detail: %d %s", a.status, a.body)
	}
	a = d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"approve","digest":"`+detail["digest"].(string)+`"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	if a.status != 409 || a.code(t) != "X_APPROVAL_INPUT_UNREADABLE" {
		t.Fatalf("approving an input nobody here was shown: %d %s", a.status, a.body)
	}
	a = d.do("POST", "/api/v1/approvals/"+id+"/decision", bob, `{"decision":"reject","note":"cannot read it"}`)
	c.check(t, "POST", "/approvals/{id}/decision", a)
	if a.status != 200 {
		t.Fatalf("rejecting it: %d %s", a.status, a.body)
	}
}
