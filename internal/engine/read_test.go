package engine_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/examples/orders"
	"github.com/orangerail/orangerail/internal/effects"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/ontology"
	"github.com/orangerail/orangerail/internal/ontology/ontologytest"
)

type exampleBundle struct {
	*testBundle
	engine *engine.Engine
	key    []byte
}

// setupExample is a database holding the orders example, seeded, and an
// engine serving it.
func setupExample(t *testing.T) *exampleBundle {
	t.Helper()
	b := setup(t)
	if _, err := b.admin.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return serve(t, b, orders.Config)
}

// serve returns an engine serving config on b's database, with a key of
// its own.
func serve(t *testing.T, b *testBundle, config []byte) *exampleBundle {
	t.Helper()
	cfg, err := ontology.Parse(config)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, engine.KeySize)
	_, _ = rand.Read(key)
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime), Key: key, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return &exampleBundle{testBundle: b, engine: e, key: key}
}

// readCatalog reads cfg's tables from the live catalog of the datasource
// pool, as serve does.
func readCatalog(t testing.TB, cfg *ontology.Config, pool *pgxpool.Pool) *ontology.Catalog {
	t.Helper()
	catalog, err := cfg.ReadCatalog(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return catalog
}

func agent(tenant string, roles ...string) *engine.Caller {
	return &engine.Caller{Subject: "agent-7", Tenant: tenant, Roles: roles, Kind: engine.ActorAgent}
}

var anonymous = &engine.Caller{Tenant: "acme"}

// item decodes a get's item.
func item(t *testing.T, out *engine.Outcome) map[string]any {
	t.Helper()
	if out.Status != engine.StatusOK {
		t.Fatalf("status %s (%v %v)", out.Status, out.Issues, out.Err)
	}
	var body struct {
		Item  map[string]any `json:"item"`
		Links map[string]any `json:"links"`
	}
	if err := json.Unmarshal(out.Data, &body); err != nil {
		t.Fatal(err)
	}
	if body.Links != nil {
		body.Item["$links"] = body.Links
	}
	return body.Item
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	get := func(c *engine.Caller, object, args string) *engine.Outcome {
		return b.engine.Get(ctx, c, object, json.RawMessage(args))
	}

	o := item(t, get(agent("acme"), "order", `{"id": "o-1001"}`))
	if o["status"] != "paid" || o["total_cents"] != float64(4999) || o["shipping_address"] == nil {
		t.Fatalf("acme o-1001 = %v", o)
	}
	if _, leaked := o["org_id"]; leaked {
		t.Fatalf("a field outside the whitelist was returned: %v", o)
	}
	// The same key in another tenant is another row.
	if o := item(t, get(agent("globex"), "order", `{"id": "o-1001"}`)); o["total_cents"] != float64(99999999) {
		t.Fatalf("globex o-1001 = %v", o)
	}
	if out := get(agent("globex"), "order", `{"id": "o-1002"}`); out.Status != engine.StatusNotFound {
		t.Fatalf("globex reading acme's o-1002: %s", out.Status)
	}

	// Hostile keys are values, never SQL.
	for _, key := range []string{`"o-1001' OR '1'='1"`, `"o-1001\"; DROP TABLE orders; --"`, `"' UNION SELECT * FROM orangerail.audit --"`} {
		if out := get(agent("acme"), "order", `{"id": `+key+`}`); out.Status != engine.StatusNotFound {
			t.Fatalf("hostile key %s: %s", key, out.Status)
		}
	}
	invalid := []struct{ args, path string }{
		{`{"id": {"$ne": 1}}`, "/id"},
		{`{"id": ["o-1001"]}`, "/id"},
		{`{"id": null}`, "/id"},
		{`{}`, "/id"},
		{`{"id": "o-1001", "org_id": "globex"}`, "/org_id"},
		{`{"id": "o-1001", "include": ["nope"]}`, "/include/0"},
		{`{"id": "o-1001", "include": ["order_customer", "order_customer"]}`, "/include/1"},
		{`[1]`, ""},
		{`{"id": "` + strings.Repeat("x", 2000) + `"}`, "/id"},
		// The key is typed by its column, text here: as its schema says.
		{`{"id": 1001}`, "/id"},
		{`{"id": true}`, "/id"},
		{`{"id": "o-1001", "include": "order_customer"}`, "/include"},
	}
	for _, tt := range invalid {
		out := get(agent("acme"), "order", tt.args)
		if out.Status != engine.StatusInvalidInput || len(out.Issues) == 0 || out.Issues[0].Path != tt.path {
			t.Errorf("Get(%.60s) = %s %v, want invalid_input at %q", tt.args, out.Status, out.Issues, tt.path)
		}
	}

	// A key is bounded in characters, as its schema says, however many
	// bytes they take or their JSON escapes spell.
	schemas, _ := b.engine.ReadSchemas("order")
	if got := schemas.GetInput["properties"].(map[string]any)["id"].(map[string]any)["maxLength"]; got != engine.MaxValueLength {
		t.Fatalf("the key's schema: maxLength %v, want %d", got, engine.MaxValueLength)
	}
	for _, key := range []string{strings.Repeat("é", engine.MaxValueLength), strings.Repeat(`\u00e9`, engine.MaxValueLength),
		strings.Repeat(`\ud83d\ude00`, engine.MaxValueLength), strings.Repeat("x", engine.MaxValueLength)} {
		if out := get(agent("acme"), "order", `{"id": "`+key+`"}`); out.Status != engine.StatusNotFound {
			t.Errorf("a key of %d characters (%.12s…): %s %v", engine.MaxValueLength, key, out.Status, out.Issues)
		}
	}
	for _, key := range []string{strings.Repeat("é", engine.MaxValueLength+1), strings.Repeat(`\u00e9`, engine.MaxValueLength+1)} {
		if out := get(agent("acme"), "order", `{"id": "`+key+`"}`); out.Status != engine.StatusInvalidInput || len(out.Issues) != 1 || out.Issues[0].Path != "/id" {
			t.Errorf("a key of %d characters (%.12s…): %s %v", engine.MaxValueLength+1, key, out.Status, out.Issues)
		}
	}

	// Read access: a caller outside an object's audience is answered as
	// for a tool that does not exist.
	if out := get(anonymous, "order", `{"id": "o-1001"}`); out.Status != engine.StatusNotFound || out.Code != errcode.MCPToolUnknown {
		t.Fatalf("anonymous order read: %s %s", out.Status, out.Code)
	}
	if out := get(anonymous, "product", `{"sku": "anvil"}`); out.Status != engine.StatusOK {
		t.Fatalf("anonymous public product read: %s", out.Status)
	}
	if out := get(agent("acme"), "customer", `{"id": "c-1"}`); out.Status != engine.StatusNotFound || out.Code != errcode.MCPToolUnknown {
		t.Fatalf("customer read without a role: %s %s", out.Status, out.Code)
	}
	if out := get(agent("acme", "support"), "customer", `{"id": "c-1"}`); out.Status != engine.StatusOK {
		t.Fatalf("customer read with support: %s", out.Status)
	}
	if out := get(agent("acme"), "nothing", `{}`); out.Status != engine.StatusNotFound {
		t.Fatalf("unknown object: %s", out.Status)
	}

	// Links: the linked object's own read access applies.
	withLink := item(t, get(agent("acme", "support"), "order", `{"id": "o-1001", "include": ["order_customer"]}`))
	linked := withLink["$links"].(map[string]any)["order_customer"].(map[string]any)
	if linked["name"] != "Ada Lovelace" {
		t.Fatalf("linked customer = %v", linked)
	}
	// A caller who cannot see customers is answered as for a link that
	// does not exist — the same words — and its get's schemas name none.
	hidden := get(agent("acme"), "order", `{"id": "o-1001", "include": ["order_customer"]}`)
	unknown := get(agent("acme"), "order", `{"id": "o-1001", "include": ["order_nothing"]}`)
	if hidden.Status != engine.StatusInvalidInput || len(hidden.Issues) != 1 || hidden.Issues[0].Path != "/include/0" || unknown.Status != engine.StatusInvalidInput ||
		strings.ReplaceAll(hidden.Issues[0].Message, "order_customer", "X") != strings.ReplaceAll(unknown.Issues[0].Message, "order_nothing", "X") {
		t.Fatalf("a link to an object the caller cannot see: %s %v; an unknown one: %s %v", hidden.Status, hidden.Issues, unknown.Status, unknown.Issues)
	}
	if links := b.engine.LinksSeen("order", func(tool string) bool { return b.engine.Sees(agent("acme"), tool) }); len(links) != 0 {
		t.Fatalf("links a caller who cannot see customers may include: %v", links)
	}
	in, out := b.engine.GetSchemas("order", nil)
	if s, _ := json.Marshal([]any{in, out}); strings.Contains(string(s), "order_customer") || strings.Contains(string(s), "email") {
		t.Fatalf("the get's schemas without links name the link or the customer's fields: %s", s)
	}
	// From the other side, a link is the rows that point here.
	cust := item(t, get(agent("acme", "support"), "customer", `{"id": "c-1", "include": ["order_customer"]}`))
	if n := len(cust["$links"].(map[string]any)["order_customer"].([]any)); n != 2 {
		t.Fatalf("c-1 has %d orders through the link, want 2", n)
	}
}

// TestIncludeNeedsTheLinkedToolsScope: including a link reads the linked
// object as its own tool would, so it passes that tool's scope too: a
// token scoped to orders alone reads no customer through an order (nor
// are orders read through a customer without the scope of order_list), and
// describe_object does not offer the link; with both scopes it is read.
func TestIncludeNeedsTheLinkedToolsScope(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	e := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.SetYAML("scopes", `{
  "orders:read": [check_approval, describe_object, describe_action, list_policies, errors_explain, order_get, order_list, product_get, product_list],
  "customers:read": [customer_get, customer_list],
  "orders:write": [cancel_order, create_return_label, update_shipping_address, add_order_note]}`))
	scoped := func(scopes ...string) *engine.Caller {
		c := agent("acme", "support")
		c.Scopes = scopes
		return c
	}
	linkOf := func(c *engine.Caller, object, args string) any {
		return item(t, e.Get(ctx, c, object, json.RawMessage(args)))["$links"].(map[string]any)["order_customer"]
	}
	ordersOnly, customersOnly, both := scoped("orders:read"), scoped("customers:read"), scoped("orders:read", "customers:read")
	if l, ok := linkOf(ordersOnly, "order", `{"id": "o-1001", "include": ["order_customer"]}`).(map[string]any); !ok || l["withheld"] == nil || l["name"] != nil {
		t.Fatalf("a token without customers:read read through the link: %v", l)
	}
	if l, ok := linkOf(both, "order", `{"id": "o-1001", "include": ["order_customer"]}`).(map[string]any); !ok || l["name"] != "Ada Lovelace" {
		t.Fatalf("a token with both scopes: %v", l)
	}
	if l, ok := linkOf(customersOnly, "customer", `{"id": "c-1", "include": ["order_customer"]}`).(map[string]any); !ok || l["withheld"] == nil {
		t.Fatalf("a token without orders:read read orders through the link: %v", l)
	}
	if l, ok := linkOf(both, "customer", `{"id": "c-1", "include": ["order_customer"]}`).([]any); !ok || len(l) != 2 {
		t.Fatalf("a token with both scopes, from the customer: %v", l)
	}
	for _, tc := range []struct {
		caller *engine.Caller
		links  int
	}{{ordersOnly, 0}, {both, 1}} {
		d, refused := e.DescribeObject(ctx, tc.caller, "order")
		if refused != nil || len(d.Links) != tc.links {
			t.Fatalf("describe_object order for scopes %v offers links %+v (%v), want %d", tc.caller.Scopes, d, refused, tc.links)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	list := func(c *engine.Caller, args string) (*engine.Outcome, []map[string]any, string) {
		out := b.engine.List(ctx, c, "order", json.RawMessage(args))
		var body struct {
			Items      []map[string]any `json:"items"`
			NextCursor string           `json:"nextCursor"`
		}
		if out.Status == engine.StatusOK {
			if err := json.Unmarshal(out.Data, &body); err != nil {
				t.Fatal(err)
			}
		}
		return out, body.Items, body.NextCursor
	}
	ids := func(items []map[string]any) []string {
		var s []string
		for _, it := range items {
			s = append(s, it["id"].(string))
		}
		return s
	}

	_, items, _ := list(agent("acme"), `{}`)
	if got := ids(items); !slices.Equal(got, []string{"o-1001", "o-1002", "o-1003"}) {
		t.Fatalf("acme orders = %v", got)
	}
	_, items, _ = list(agent("globex"), `{}`)
	if len(items) != 1 {
		t.Fatalf("globex sees %d orders", len(items))
	}
	_, items, _ = list(agent("acme"), `{"filters": {"status": {"in": ["paid", "pending"]}}, "sort": "-total_cents"}`)
	if got := ids(items); !slices.Equal(got, []string{"o-1002", "o-1001"}) {
		t.Fatalf("paid or pending by total desc = %v", got)
	}

	// Paging with the cursor visits every row once, in order.
	for _, sort := range []string{`"created_at"`, `"-total_cents"`, `null`} {
		args := `{"limit": 1`
		if sort != "null" {
			args += `, "sort": ` + sort
		}
		var seen []string
		cursor := ""
		for range 10 {
			a := args
			if cursor != "" {
				a += `, "cursor": "` + cursor + `"`
			}
			out, page, next := list(agent("acme"), a+"}")
			if out.Status != engine.StatusOK {
				t.Fatalf("page: %s %v", out.Status, out.Issues)
			}
			seen = append(seen, ids(page)...)
			if cursor = next; cursor == "" {
				break
			}
		}
		if slices.Sort(seen); !slices.Equal(seen, []string{"o-1001", "o-1002", "o-1003"}) {
			t.Fatalf("paging by %s saw %v", sort, seen)
		}
	}

	// The limit is held to the schema's maximum (max_limit), as advertised:
	// refused, not clamped; max_limit itself is answered.
	if out, _, _ := list(agent("acme"), `{"limit": 100}`); out.Status != engine.StatusOK {
		t.Fatalf("limit at max_limit: %s %v", out.Status, out.Issues)
	}
	// An integer however JSON spells it, as the schema's type admits it.
	for _, limit := range []string{"2.0", "1e2", "20E-1"} {
		if out, items, _ := list(agent("acme"), `{"limit": `+limit+`}`); out.Status != engine.StatusOK || (limit != "1e2" && len(items) != 2) {
			t.Fatalf("limit %s: %s %v, %d items", limit, out.Status, out.Issues, len(items))
		}
	}

	_, _, cursor := list(agent("acme"), `{"limit": 1}`)
	invalid := []struct{ args, path string }{
		{`{"filters": {"total_cents": {"eq": 1}}}`, "/filters/total_cents"},
		{`{"filters": {"status": {"gt": "a"}}}`, "/filters/status/gt"},
		{`{"filters": {"status": {"in": []}}}`, "/filters/status/in"},
		{`{"filters": {"status": {"eq": {"x": 1}}}}`, "/filters/status/eq"},
		{`{"filters": {"created_at": {"gt": "not a time"}}}`, "/filters/created_at/gt"},
		{`{"filters": "status = 'paid'"}`, "/filters"},
		{`{"sort": "created_at; DROP TABLE orders"}`, "/sort"},
		{`{"sort": "org_id"}`, "/sort"},
		{`{"limit": 0}`, "/limit"},
		{`{"limit": "10"}`, "/limit"},
		{`{"limit": 101}`, "/limit"},
		{`{"limit": 1000000}`, "/limit"},
		{`{"limit": 2.5}`, "/limit"},
		{`{"limit": 1e400}`, "/limit"},
		{`{"limit": -1}`, "/limit"},
		{`{"sort": "-org_id"}`, "/sort"},
		{`{"filters": {"status": {"eq": 5}}}`, "/filters/status/eq"},
		{`{"filters": {"status": {"in": ["paid", 5]}}}`, "/filters/status/in/1"},
		{`{"filters": {"status": {"eq": "paid", "like": "p%"}}}`, "/filters/status/like"},
		{`{"cursor": "` + strings.Repeat("a", 4097) + `"}`, "/cursor"},
		{`{"cursor": "forged.AAAA"}`, "/cursor"},
		{`{"cursor": "` + cursor + `", "sort": "created_at"}`, "/cursor"},
		{`{"cursor": "` + cursor + `x"}`, "/cursor"},
		{`{"where": "1=1"}`, "/where"},
	}
	for _, tt := range invalid {
		out, _, _ := list(agent("acme"), tt.args)
		if out.Status != engine.StatusInvalidInput || len(out.Issues) == 0 || out.Issues[0].Path != tt.path {
			t.Errorf("List(%.70s) = %s %v, want invalid_input at %q", tt.args, out.Status, out.Issues, tt.path)
		}
	}
	// A cursor is bound to its tenant.
	if out, _, _ := list(agent("globex"), `{"limit": 1, "cursor": "`+cursor+`"}`); out.Status != engine.StatusInvalidInput {
		t.Fatalf("acme's cursor in globex: %s", out.Status)
	}
	// A hostile filter value is a value.
	if out, items, _ := list(agent("acme"), `{"filters": {"status": {"eq": "paid' OR '1'='1"}}}`); out.Status != engine.StatusOK || len(items) != 0 {
		t.Fatalf("hostile filter value: %s %d items", out.Status, len(items))
	}
}

// TestIncludeSaysWhenALinkIsCut: a link from its to side shows the first
// max_limit rows of the linked object; when more point here, the answer
// says so (linksCut), never leaving an agent to take the first page for
// all of them.
func TestIncludeSaysWhenALinkIsCut(t *testing.T) {
	t.Parallel()
	b := setupExample(t)
	ctx := context.Background()
	answer := func(e *engine.Engine) (orders []any, cut []any) {
		out := e.Get(ctx, agent("acme", "support"), "customer", json.RawMessage(`{"id": "c-1", "include": ["order_customer"]}`))
		var body struct {
			Links    map[string][]any `json:"links"`
			LinksCut []any            `json:"linksCut"`
		}
		if out.Status != engine.StatusOK || json.Unmarshal(out.Data, &body) != nil {
			t.Fatalf("read: %s %s", out.Status, out.Data)
		}
		return body.Links["order_customer"], body.LinksCut
	}
	if orders, cut := answer(b.engine); len(orders) != 2 || cut != nil {
		t.Fatalf("c-1's two orders under the default limit: %d shown, cut %v", len(orders), cut)
	}
	cutAt1 := newEngine(t, b.testBundle, b.key, engine.ModeLive, nil, ontologytest.Set("objects.order.list.max_limit", 1))
	if orders, cut := answer(cutAt1); len(orders) != 1 || len(cut) != 1 || cut[0] != "order_customer" {
		t.Fatalf("c-1's two orders under a limit of 1: %d shown, cut %v", len(orders), cut)
	}
}

// TestCancelledReadIsNoFailure: a read its caller cancelled (an MCP
// client's notifications/cancelled, a closed connection) is logged at
// info, not as an engine failure: it logged a datasource error at ERROR
// for every call a client gave up on.
func TestCancelledReadIsNoFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.admin.Exec(context.Background(), orders.Seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	cfg, err := ontology.Parse(orders.Config)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e, err := engine.New(engine.Config{Ontology: cfg, Store: b.runtime, Effects: effects.Factories(), Catalog: readCatalog(t, cfg, b.runtime),
		Key: make([]byte, engine.KeySize), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out := e.Get(ctx, agent("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)); out.Status != engine.StatusResolveError {
		t.Fatalf("a cancelled read answered %s", out.Status)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "cancelled by its caller") {
		t.Fatalf("the host log of a cancelled read:\n%s", logs.String())
	}
	// A read that fails of itself is still an error.
	logs.Reset()
	deadline, stop := context.WithTimeout(context.Background(), -time.Second)
	defer stop()
	if out := e.Get(deadline, agent("acme"), "order", json.RawMessage(`{"id": "o-1001"}`)); out.Status != engine.StatusResolveError {
		t.Fatalf("a read past its deadline answered %s", out.Status)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("the host log of a read past its deadline:\n%s", logs.String())
	}
}
