package httpeffect_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orangerail/orangerail/internal/effects/httpeffect"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/ontology"
)

// TestRedirectsAreAnswersOnEveryClient: a redirect is an answer, never
// followed, on each of the clients a request may go out on — a bodyless
// GET, HEAD, OPTIONS or DELETE (pooled, HTTP/1.1), a bodyless POST (a
// connection of its own) and one with a body (pooled): followed, a 307
// would send the request and an api_key header, which net/http keeps
// across hosts, to whatever host it names.
func TestRedirectsAreAnswersOnEveryClient(t *testing.T) {
	t.Setenv("CARRIER_KEY_CREDENTIAL", "key-SECRET")
	var stolen atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { stolen.Add(1) }))
	t.Cleanup(elsewhere.Close)
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, elsewhere.URL+"/steal", code)
	}))
	t.Cleanup(srv.Close)
	type request struct{ method, input string }
	var requests []request
	for _, code := range []string{"301", "302", "303", "307", "308"} {
		for _, r := range []request{
			{"GET", `{"id": "o-1"}`}, {"HEAD", `{"id": "o-1"}`}, {"OPTIONS", `{"id": "o-1"}`}, {"DELETE", `{"id": "o-1"}`},
			{"POST", `{"id": "o-1"}`}, {"POST", `{"id": "o-1", "note": "n"}`},
		} {
			requests = append(requests, request{r.method, strings.Replace(r.input, "{", `{"code": "`+code+`", `, 1)})
		}
	}
	for _, tt := range requests {
		t.Run(tt.method+" "+tt.input, func(t *testing.T) {
			body := ""
			if strings.Contains(tt.input, "note") {
				body = `, body: {note: ":note"}`
			}
			cfg, err := ontology.Parse(fmt.Appendf(nil, `service: s
upstreams:
  carrier: {base_url: %q, auth: {key: {type: api_key, in: header, name: X-Key}}}
actions:
  touch:
    description: d
    input: {type: object, properties: {id: {type: string}, note: {type: string}, code: {type: string}}}
    policy: {roles: [support]}
    execute: {http: {upstream: carrier, method: %s, path: "/orders/{id}", query: {code: ":code"}, retry: never%s}}
`, srv.URL, tt.method, body))
			if err != nil {
				t.Fatal(err)
			}
			effect, err := httpeffect.New("touch", cfg.Actions["touch"])
			if err != nil {
				t.Fatal(err)
			}
			before, askedBefore := stolen.Load(), asked.Load()
			_, _ = effect.Run(context.Background(), &engine.EffectCall{Input: []byte(tt.input),
				RecordAttempt: func(context.Context, engine.EffectAttempt) error { return nil }})
			if asked.Load() == askedBefore {
				t.Fatal("the upstream was never asked")
			}
			if n := stolen.Load() - before; n != 0 {
				t.Fatalf("the redirect was followed %d times: the request and its key went to another host", n)
			}
		})
	}
}
