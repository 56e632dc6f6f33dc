package ontology

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// httpBase is a valid config with one upstream and one http action.
const httpBase = `service: s
upstreams:
  carrier:
    base_url: https://carrier.example.com/api/v1/
actions:
  create_label:
    description: d
    input:
      type: object
      properties: {order_id: {type: string}, weight: {type: number}, express: {type: boolean}}
    policy: {approval: required}
    execute:
      http:
        upstream: carrier
        method: POST
        path: /orders/{order_id}/labels
        query: {express: ":express", source: agent}
        headers: {X-Weight: ":weight"}
        body: {order: ":order_id", weight: ":weight", kind: return}
`

// TestHTTPExecute: an http execute loads with its defaults filled — the
// retry policy by method, the caps and the deadline from
// limits.statement_timeout — and its upstream's URL resolved.
func TestHTTPExecute(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(httpBase))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Actions["create_label"]
	h := a.Execute.HTTP
	if a.Execute.Kind() != ExecuteHTTP || h.Method != "POST" || h.Retry != RetryWithIdempotencyKey || h.MaxAttempts != 3 ||
		h.MaxBytes != HTTPMaxBytesDefault || time.Duration(h.Deadline) != StatementTimeoutDefault || time.Duration(h.Timeout) != HTTPTimeoutDefault {
		t.Fatalf("defaults not applied: %+v", h)
	}
	if h.BaseURL().String() != "https://carrier.example.com/api/v1/" || h.IdempotencyHeader() != "Idempotency-Key" {
		t.Fatalf("upstream %v, header %q", h.BaseURL(), h.IdempotencyHeader())
	}
	if !h.Succeeded(204) || h.Succeeded(301) {
		t.Fatal("success is not any 2xx by default")
	}
	for method, want := range map[string]HTTPRetry{"GET": RetrySafe, "PUT": RetrySafe, "DELETE": RetrySafe, "PATCH": RetryWithIdempotencyKey} {
		src := strings.Replace(strings.Replace(httpBase, "method: POST", "method: "+method, 1), "        body: {order: \":order_id\", weight: \":weight\", kind: return}\n", "", 1)
		cfg, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(method, err)
		}
		if got := cfg.Actions["create_label"].Execute.HTTP.Retry; got != want {
			t.Errorf("%s: retry %s, want %s", method, got, want)
		}
	}
	// A short deadline bounds the attempt's default timeout.
	cfg, err = Parse([]byte(strings.Replace(httpBase, "        path:", "        deadline: 2s\n        path:", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Actions["create_label"].Execute.HTTP; time.Duration(h.Timeout) != 2*time.Second {
		t.Fatalf("timeout %s under a 2s deadline", time.Duration(h.Timeout))
	}
}

// TestUpstreamEnvironments: base_urls are chosen by environment, and an
// action whose upstream has no URL in this one is refused at its path.
func TestUpstreamEnvironments(t *testing.T) {
	t.Parallel()
	perEnv := strings.Replace(httpBase, "    base_url: https://carrier.example.com/api/v1/\n",
		"    base_urls: {staging: \"http://127.0.0.1:9000\", production: \"https://carrier.example.com\"}\n    idempotency_header: X-Request-Key\n", 1)
	cfg, err := Parse([]byte("environment: staging\n" + perEnv))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Actions["create_label"].Execute.HTTP; h.BaseURL().String() != "http://127.0.0.1:9000" || h.IdempotencyHeader() != "X-Request-Key" {
		t.Fatalf("staging: %v %q", h.BaseURL(), h.IdempotencyHeader())
	}
	for _, env := range []string{"", "environment: development\n"} {
		_, err := Parse([]byte(env + perEnv))
		ps, ok := errors.AsType[Problems](err)
		if !ok || len(ps) != 1 || ps[0].Path != "actions.create_label.execute.http.upstream" || !strings.Contains(ps[0].Message, "no URL for the environment") {
			t.Fatalf("%q: %v", env, err)
		}
	}
}

func TestBrokenHTTPExecutes(t *testing.T) {
	t.Parallel()
	at := "actions.create_label.execute.http"
	tests := []struct {
		name  string
		edit  func(string) string
		paths []string
	}{
		{"plain http off loopback", replace("https://carrier.example.com/api/v1/", "http://carrier.example.com"), []string{"upstreams.carrier.base_url"}},
		{"a user in the URL", replace("https://carrier.example.com", "https://u:p@carrier.example.com"), []string{"upstreams.carrier.base_url"}},
		{"a query in the URL", replace("/api/v1/", "/api?k=v"), []string{"upstreams.carrier.base_url"}},
		{"both URLs", replace("    base_url:", "    base_urls: {dev: \"https://x.example\"}\n    base_url:"), []string{"upstreams.carrier"}},
		{"no URL", replace("    base_url: https://carrier.example.com/api/v1/\n", "    idempotency_header: K\n"), []string{at + ".upstream", "upstreams.carrier"}},
		{"a reserved idempotency header", replace("    base_url:", "    idempotency_header: Authorization\n    base_url:"), []string{"upstreams.carrier.idempotency_header"}},
		{"unknown upstream", replace("upstream: carrier", "upstream: carier"), []string{at + ".upstream"}},
		{"path param not an input", replace("{order_id}/labels", "{order}/labels"), []string{at + ".path"}},
		{"path without a slash", replace("path: /orders", "path: orders"), []string{at + ".path"}},
		{"path with a query", replace("/labels", "/labels?x=1"), []string{at + ".path"}},
		{"path brace unclosed", replace("{order_id}/labels", "{order_id/labels"), []string{at + ".path"}},
		{"query ref not an input", replace(`":express"`, `":fast"`), []string{at + ".query.express"}},
		{"header ref not an input", replace(`":weight"}`, `":kg"}`), []string{at + ".headers.X-Weight"}},
		{"an Authorization header", replace("X-Weight:", "Authorization:"), []string{at + ".headers.Authorization"}},
		{"the idempotency header", replace("X-Weight:", "idempotency-key:"), []string{at + ".headers.idempotency-key"}},
		{"body ref not an input", replace(`order: ":order_id"`, `order: ":order"`), []string{at + ".body"}},
		{"a GET with a body", replace("method: POST", "method: GET"), []string{at + ".body"}},
		{"unknown method", replace("method: POST", "method: TRACE"), []string{at + ".method"}},
		{"deadline past statement_timeout", replace("        path:", "        deadline: 31s\n        path:"), []string{at + ".deadline"}},
		{"timeout past the deadline", replace("        path:", "        deadline: 2s\n        timeout: 3s\n        path:"), []string{at + ".timeout"}},
		{"too many attempts", replace("        path:", "        max_attempts: 4\n        path:"), []string{at + ".max_attempts"}},
		{"bad retry", replace("        path:", "        retry: always\n        path:"), []string{at + ".retry"}},
		{"max_bytes too large", replace("        path:", "        max_bytes: 100000000\n        path:"), []string{at + ".max_bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.edit(httpBase)))
			ps, ok := errors.AsType[Problems](err)
			if !ok {
				t.Fatalf("Parse = %v, want problems at %v", err, tt.paths)
			}
			var paths []string
			for _, p := range ps {
				paths = append(paths, p.Path)
			}
			if !slices.Equal(paths, tt.paths) {
				t.Fatalf("problems %v, want at %v", ps, tt.paths)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	t.Parallel()
	parts, err := ParsePath("/a/{x}/b%20c/{y}")
	if err != nil {
		t.Fatal(err)
	}
	want := []PathPart{{Literal: "/a/"}, {Param: "x"}, {Literal: "/b%20c/"}, {Param: "y"}}
	if !slices.Equal(parts, want) {
		t.Fatalf("parts %v", parts)
	}
	for _, bad := range []string{"a", "/a}", "/{x", "/{1x}", "/a b", "/a#f", "/%zz"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestHTTPSchemaEnums: the schema's retry and method enums are the Go
// lists.
func TestHTTPSchemaEnums(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["$defs"].(map[string]any)["action"].(map[string]any)["properties"].(map[string]any)["execute"].(map[string]any)["properties"].(map[string]any)["http"].(map[string]any)["properties"].(map[string]any)
	enum := func(key string) []string {
		var values []string
		for _, v := range props[key].(map[string]any)["enum"].([]any) {
			values = append(values, v.(string))
		}
		return values
	}
	if got, want := enum("retry"), stringsOf(HTTPRetries()); !slices.Equal(got, want) {
		t.Errorf("retry: schema %v, Go %v", got, want)
	}
	if got, want := enum("method"), HTTPMethods(); !slices.Equal(got, want) {
		t.Errorf("method: schema %v, Go %v", got, want)
	}
}

// TestUpstreamAuth: each scheme must be placeable, and its credential's
// variable is named after the upstream and the scheme. An api_key may be
// sent in Authorization (Discord's "Bot <token>"), in no other header
// orangerail keeps.
func TestUpstreamAuth(t *testing.T) {
	t.Parallel()
	withAuth := func(auth string) string {
		return strings.Replace(httpBase, "    base_url: https://carrier.example.com/api/v1/\n", "    base_url: https://carrier.example.com/api/v1/\n    auth:\n"+auth, 1)
	}
	cfg, err := Parse([]byte(withAuth("      key: {type: api_key, in: query, name: api_key}\n      app_2: {type: oauth2_client_credentials, token_url: \"https://id.example.com/token\"}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(withAuth("      bot: {type: api_key, in: header, name: Authorization}\n"))); err != nil {
		t.Fatalf("an api_key in Authorization: %v", err)
	}
	slots := cfg.CredentialSlots()
	if len(slots) != 2 || slots[0].Env != "CARRIER_APP_2_CREDENTIAL" || slots[1].Path != "upstreams.carrier.auth.key" || slots[1].Env != "CARRIER_KEY_CREDENTIAL" {
		t.Fatalf("slots %+v", slots)
	}
	if cfg.Actions["create_label"].Execute.HTTP.UpstreamDecl() != cfg.Upstreams["carrier"] {
		t.Fatal("the action's upstream is not resolved")
	}
	at := "upstreams.carrier.auth."
	for _, tt := range []struct {
		auth string
		path string
	}{
		{"      key: {type: api_key, name: k}\n", at + "key.in"},
		{"      key: {type: api_key, in: header}\n", at + "key.name"},
		{"      key: {type: api_key, in: header, name: Cookie}\n", at + "key.name"},
		{"      key: {type: api_key, in: header, name: proxy-authorization}\n", at + "key.name"},
		{"      key: {type: api_key, in: header, name: Host}\n", at + "key.name"},
		// A key in Authorization is the request's one Authorization setter.
		{"      key: {type: api_key, in: header, name: authorization}\n      b: {type: bearer}\n", at + "key"},
		{"      a: {type: basic}\n      b: {type: bearer}\n", at + "b"},
		{"      a: {type: mtls}\n      b: {type: mtls}\n", at + "b"},
		{"      a: {type: oauth2_client_credentials, token_url: \"http://id.example.com/token\"}\n", at + "a.token_url"},
		{"      a: {type: bearer, token_url: \"https://id.example.com/token\"}\n", at + "a"},
		{"      a: {type: bearer, in: header}\n", at + "a"},
		{"      a: {type: digest}\n", at + "a.type"},
		// A scheme's name its mapping does not take is reported at it.
		{"      Bearer-Auth: {type: bearer}\n", at + "Bearer-Auth"},
		// Two schemes whose credential variable is one: a header's key
		// would be placed in a query.
		{"      AdminKey: {type: api_key, in: header, name: X-Admin}\n      adminkey: {type: api_key, in: query, name: admin}\n", at + "adminkey"},
	} {
		_, err := Parse([]byte(withAuth(tt.auth)))
		ps, ok := errors.AsType[Problems](err)
		if !ok || len(ps) != 1 || ps[0].Path != tt.path {
			t.Errorf("%q: %v, want one problem at %s", tt.auth, err, tt.path)
		}
	}
	// Two upstreams whose schemes' credential variable is one: the key
	// of one would go to the other's host.
	twoUpstreams := strings.Replace(withAuth("      key_x: {type: api_key, in: header, name: X-Key}\n"), "actions:\n",
		"  carrier_key:\n    base_url: https://elsewhere.example.net/\n    auth:\n      x: {type: api_key, in: header, name: X-Key}\nactions:\n", 1)
	_, err = Parse([]byte(twoUpstreams))
	if ps, ok := errors.AsType[Problems](err); !ok || len(ps) != 1 || ps[0].Path != "upstreams.carrier_key.auth.x" || !strings.Contains(ps[0].Message, "CARRIER_KEY_X_CREDENTIAL") {
		t.Errorf("two upstreams sharing a credential variable: %v", err)
	}
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, v := range schema["properties"].(map[string]any)["upstreams"].(map[string]any)["additionalProperties"].(map[string]any)["properties"].(map[string]any)["auth"].(map[string]any)["additionalProperties"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any) {
		types = append(types, v.(string))
	}
	if !slices.Equal(types, stringsOf(AuthTypes())) {
		t.Errorf("auth types: schema %v, Go %v", types, AuthTypes())
	}
}

// TestCallAuth: a call presents every scheme of its upstream unless its
// auth names the ones it presents — an empty list none — each of which
// must be one of the upstream's; the one-Authorization and
// one-client-certificate rules hold for what one request presents, so an
// upstream may declare alternatives its calls choose among, and a call
// that presents them all by default is judged as before, at the upstream.
func TestCallAuth(t *testing.T) {
	t.Parallel()
	schemes := "    auth:\n      key: {type: api_key, in: header, name: X-Api-Key}\n      bot: {type: bearer}\n      login: {type: basic}\n      cert: {type: mtls}\n      cert2: {type: mtls}\n      raw: {type: api_key, in: header, name: Authorization}\n"
	withAuth := func(auth string) string {
		src := replace("    base_url: https://carrier.example.com/api/v1/\n", "    base_url: https://carrier.example.com/api/v1/\n"+schemes)(httpBase)
		return replace("        method: POST\n", "        method: POST\n"+auth)(src)
	}
	for _, tt := range []struct {
		auth string
		want []string
	}{
		{"        auth: [bot, key, cert]\n", []string{"bot", "cert", "key"}},
		{"        auth: [login]\n", []string{"login"}},
		{"        auth: [raw, key]\n", []string{"key", "raw"}},
		{"        auth: []\n", []string{}},
	} {
		cfg, err := Parse([]byte(withAuth(tt.auth)))
		if err != nil {
			t.Fatalf("%q: %v", tt.auth, err)
		}
		if got := cfg.Actions["create_label"].Execute.HTTP.Presented(); !slices.Equal(got, tt.want) {
			t.Errorf("%q presents %v, want %v", tt.auth, got, tt.want)
		}
		for _, slot := range cfg.CredentialSlots() {
			if presented := slices.Contains(tt.want, slot.Scheme); presented != slices.Equal(slot.PresentedBy, []string{"actions.create_label.execute.http"}) || !presented && len(slot.PresentedBy) != 0 {
				t.Errorf("%q: the slot of %s is presented by %v", tt.auth, slot.Scheme, slot.PresentedBy)
			}
		}
	}
	at := "actions.create_label.execute.http.auth."
	for _, tt := range []struct {
		auth  string
		paths []string
	}{
		// By default every scheme goes on each request: judged at the
		// upstream, as before calls could choose.
		{"", []string{"upstreams.carrier.auth.cert2", "upstreams.carrier.auth.login", "upstreams.carrier.auth.raw"}},
		{"        auth: [key, nokey]\n", []string{at + "1"}},
		{"        auth: [bot, key, login]\n", []string{at + "2"}},
		{"        auth: [cert2, cert]\n", []string{at + "1"}},
		{"        auth: [key, key]\n", []string{at[:len(at)-1]}}, // the schema's uniqueItems
		{"        auth: [raw, bot]\n", []string{at + "1"}},       // a key in Authorization sets it too
		{"        auth: [login, raw]\n", []string{at + "1"}},     // whichever comes first
	} {
		_, err := Parse([]byte(withAuth(tt.auth)))
		ps, ok := errors.AsType[Problems](err)
		var paths []string
		for _, p := range ps {
			paths = append(paths, p.Path)
		}
		if !ok || !slices.Equal(paths, tt.paths) {
			t.Errorf("%q: %v, want problems at %v", tt.auth, err, tt.paths)
		}
	}
	// A target read and a soap call choose theirs too, their problems at
	// their own paths.
	target := replace("    policy: {approval: required}\n", `    target:
      upstream: carrier
      get: {path: "/orders/{order_id}", auth: [bot, login]}
    policy: {approval: required}
`)(withAuth("        auth: [key]\n"))
	if _, err := Parse([]byte(target)); err == nil || !strings.Contains(err.Error(), "actions.create_label.target.get.auth.1") {
		t.Errorf("a target read presenting two Authorization setters: %v", err)
	}
	cfg, err := Parse([]byte(replace("auth: [bot, login]", "auth: [bot]")(target)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["create_label"].Target.Get.Presented(); !slices.Equal(got, []string{"bot"}) {
		t.Errorf("the target read presents %v", got)
	}
	soap := replace("    base_url: https://carrier.example.com/api/\n", "    base_url: https://carrier.example.com/api/\n"+schemes)(soapBase)
	soap = replace("        version: 1.1\n", "        version: 1.1\n        auth: [cert, nope]\n")(soap)
	if _, err := Parse([]byte(soap)); err == nil || !strings.Contains(err.Error(), "actions.create_label.execute.soap.auth.1") {
		t.Errorf("a soap call naming no scheme of its upstream: %v", err)
	}
	cfg, err = Parse([]byte(replace("[cert, nope]", "[cert, key]")(soap)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions["create_label"].Execute.SOAP.Presented(); !slices.Equal(got, []string{"cert", "key"}) {
		t.Errorf("the soap call presents %v", got)
	}
}

// TestActionsCannotSetACredentialsPlace: a call may not set the header
// (in any case) or query parameter where one of its upstream's api_key
// schemes places a credential — presented by the call or not: where the
// credential is unset, the call's value, perhaps an agent's input, would
// go out in its place. Other names, and a cookie scheme's, are the call's.
func TestActionsCannotSetACredentialsPlace(t *testing.T) {
	t.Parallel()
	schemes := "    auth:\n      hkey: {type: api_key, in: header, name: X-Api-Key}\n      qkey: {type: api_key, in: query, name: api_key}\n      ckey: {type: api_key, in: cookie, name: express}\n"
	with := func(query, headers string) string {
		src := replace("    base_url: https://carrier.example.com/api/v1/\n", "    base_url: https://carrier.example.com/api/v1/\n"+schemes)(httpBase)
		src = replace(`        query: {express: ":express", source: agent}`, "        query: "+query)(src)
		return replace(`        headers: {X-Weight: ":weight"}`, "        headers: "+headers+"\n        auth: [qkey]")(src)
	}
	if _, err := Parse([]byte(with(`{express: ":express", API_KEY: x}`, `{X-Weight: ":weight", X-Api-Key2: x}`))); err != nil {
		t.Fatalf("names no scheme places a credential at: %v", err)
	}
	at := "actions.create_label.execute.http."
	for _, tt := range []struct {
		query, headers string
		paths          []string
	}{
		{`{api_key: ":order_id"}`, `{}`, []string{at + "query.api_key"}},
		{`{}`, `{x-api-key: ":order_id"}`, []string{at + "headers.x-api-key"}}, // hkey, though this call presents only qkey
		{`{api_key: fixed}`, `{X-API-KEY: fixed}`, []string{at + "headers.X-API-KEY", at + "query.api_key"}},
	} {
		_, err := Parse([]byte(with(tt.query, tt.headers)))
		ps, _ := errors.AsType[Problems](err)
		var paths []string
		for _, p := range ps {
			paths = append(paths, p.Path)
			if !strings.Contains(p.Message, "places its credential") {
				t.Errorf("%s: %q", p.Path, p.Message)
			}
		}
		if !slices.Equal(paths, tt.paths) {
			t.Errorf("query %s headers %s: %v, want problems at %v", tt.query, tt.headers, err, tt.paths)
		}
	}
}
