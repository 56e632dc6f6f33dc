package ontology

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSchemaAgreesWithLoader holds schemaJSON and the Go types to the same
// keys: every yaml key the loader reads is in the schema, and every key the
// schema allows is read by the loader.
func TestSchemaAgreesWithLoader(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	defs := schema["$defs"].(map[string]any)
	props := func(node map[string]any, path ...string) map[string]any {
		for _, p := range path {
			node = node["properties"].(map[string]any)[p].(map[string]any)
		}
		return node
	}
	tests := []struct {
		typ  reflect.Type
		node map[string]any
	}{
		{reflect.TypeFor[Config](), schema},
		{reflect.TypeFor[Datasource](), props(schema, "datasource")},
		{reflect.TypeFor[Identity](), props(schema, "identity")},
		{reflect.TypeFor[OIDC](), props(schema, "identity", "oidc")},
		{reflect.TypeFor[HumanRule](), props(schema, "identity", "oidc", "human")},
		{reflect.TypeFor[Desk](), props(schema, "desk")},
		{reflect.TypeFor[Approvals](), props(schema, "approvals")},
		{reflect.TypeFor[Limits](), props(schema, "limits")},
		{reflect.TypeFor[Metrics](), props(schema, "metrics")},
		{reflect.TypeFor[Tracing](), props(schema, "tracing")},
		{reflect.TypeFor[HTTP](), props(schema, "http")},
		{reflect.TypeFor[SQLQuery](), props(schema, "sql_query")},
		{reflect.TypeFor[RateLimits](), props(schema, "http", "rate_limits")},
		{reflect.TypeFor[Webhook](), props(schema, "webhooks")["items"].(map[string]any)},
		{reflect.TypeFor[Object](), defs["object"].(map[string]any)},
		{reflect.TypeFor[ListSpec](), props(defs["object"].(map[string]any), "list")},
		{reflect.TypeFor[Link](), defs["link"].(map[string]any)},
		{reflect.TypeFor[Action](), defs["action"].(map[string]any)},
		{reflect.TypeFor[Target](), props(defs["action"].(map[string]any), "target")},
		{reflect.TypeFor[Policy](), props(defs["action"].(map[string]any), "policy")},
		{reflect.TypeFor[Execute](), props(defs["action"].(map[string]any), "execute")},
		{reflect.TypeFor[SOAPExecute](), props(defs["action"].(map[string]any), "execute", "soap")},
		{reflect.TypeFor[QName](), props(defs["action"].(map[string]any), "execute", "soap", "operation")},
	}
	for _, tt := range tests {
		var goKeys []string
		for f := range tt.typ.Fields() {
			if tag := f.Tag.Get("yaml"); tag != "" {
				goKeys = append(goKeys, strings.Split(tag, ",")[0])
			}
		}
		slices.Sort(goKeys)
		schemaKeys := slices.Sorted(maps.Keys(tt.node["properties"].(map[string]any)))
		if !slices.Equal(goKeys, schemaKeys) {
			t.Errorf("%s: loader reads %v, schema allows %v", tt.typ.Name(), goKeys, schemaKeys)
		}
		if tt.node["additionalProperties"] != false {
			t.Errorf("%s: the schema allows unknown keys", tt.typ.Name())
		}
	}
	// Execute is a union: one key of its properties, each a kind, and the
	// loader reads each kind.
	execute := props(defs["action"].(map[string]any), "execute")
	if execute["minProperties"] != 1.0 || execute["maxProperties"] != 1.0 {
		t.Errorf("execute: %v to %v keys, want exactly one", execute["minProperties"], execute["maxProperties"])
	}
	var kinds []string
	for _, k := range ExecuteKinds() {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	if got := slices.Sorted(maps.Keys(execute["properties"].(map[string]any))); !slices.Equal(got, kinds) {
		t.Errorf("execute: schema allows %v, the kinds are %v", got, kinds)
	}
}

// TestSchemaEnumsAgreeWithTypes holds each closed set the schema spells as
// an enum to the Go list of its typed values, and validate refuses a value
// outside the list even when no schema stood in front (a config built in
// code).
func TestSchemaEnumsAgreeWithTypes(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	rateLimits := schema["properties"].(map[string]any)["http"].(map[string]any)["properties"].(map[string]any)["rate_limits"].(map[string]any)["properties"].(map[string]any)
	enum := func(key string) []string {
		var values []string
		for _, v := range rateLimits[key].(map[string]any)["enum"].([]any) {
			values = append(values, v.(string))
		}
		return values
	}
	if got, want := enum("store"), stringsOf(RateLimitStores()); !slices.Equal(got, want) {
		t.Errorf("http.rate_limits.store: schema %v, Go %v", got, want)
	}
	if got, want := enum("on_store_error"), stringsOf(FailureModes()); !slices.Equal(got, want) {
		t.Errorf("http.rate_limits.on_store_error: schema %v, Go %v", got, want)
	}

	var events []string
	for _, v := range schema["properties"].(map[string]any)["webhooks"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["events"].(map[string]any)["items"].(map[string]any)["enum"].([]any) {
		events = append(events, v.(string))
	}
	if want := stringsOf(WebhookEvents()); !slices.Equal(events, want) {
		t.Errorf("webhooks.events: schema %v, Go %v", events, want)
	}

	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.RateLimits.Store, cfg.HTTP.RateLimits.OnStoreError = "redis", "maybe"
	var paths []string
	for _, p := range cfg.validate() {
		paths = append(paths, p.Path)
	}
	if want := []string{"http.rate_limits.on_store_error", "http.rate_limits.store"}; !slices.Equal(paths, want) {
		t.Fatalf("problems at %v, want %v", paths, want)
	}
}

func stringsOf[S ~string](values []S) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
