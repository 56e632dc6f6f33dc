package ontology

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// targetBase is httpBase's action with a target the carrier answers.
var targetBase = strings.Replace(httpBase, "    policy: {approval: required}\n", `    target:
      upstream: carrier
      get: {path: "/orders/{order_id}", query: {fields: status}, timeout: 1s}
    where: target.status == "open"
    redact_prior: [/customer/email]
    policy: {approval: required}
`, 1)

// TestTargetRead: a target read from an upstream loads as a GET on it,
// retried as safe, with an execute's defaults and its upstream's URL.
func TestTargetRead(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(targetBase))
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Actions["create_label"].Target
	g := tg.Get
	if !tg.Read() || g.Upstream != "carrier" || g.Method != "GET" || g.Retry != RetrySafe || g.MaxAttempts != 3 ||
		time.Duration(g.Timeout) != time.Second || time.Duration(g.Deadline) != StatementTimeoutDefault || g.MaxBytes != HTTPMaxBytesDefault {
		t.Fatalf("target %+v, get %+v", tg, g)
	}
	if g.BaseURL().String() != "https://carrier.example.com/api/v1/" || len(cfg.Actions["create_label"].PriorMasks()) != 1 {
		t.Fatalf("base %v", g.BaseURL())
	}
	// A row target keeps the definition it had: the new fields are left
	// out of its hash's JSON.
	row := Target{Object: "orders", KeyFrom: "id"}
	if b, _ := json.Marshal(row); string(b) != `{"Object":"orders","KeyFrom":"id"}` {
		t.Fatalf("a row target's definition JSON %s", b)
	}
}

func TestBrokenTargetReads(t *testing.T) {
	t.Parallel()
	at := "actions.create_label.target"
	tests := []struct {
		name  string
		edit  func(string) string
		paths []string
	}{
		{"unknown upstream", replace("      upstream: carrier", "      upstream: carier"), []string{at + ".upstream"}},
		{"no get", replace(`      get: {path: "/orders/{order_id}", query: {fields: status}, timeout: 1s}`+"\n", ""), []string{at, at}},
		{"a row's fields too", replace("      upstream: carrier", "      upstream: carrier\n      key_from: order_id"), []string{at}},
		{"path param not an input", replace("/orders/{order_id}\"", "/orders/{order}\""), []string{at + ".get.path"}},
		{"query ref not an input", replace("fields: status", `fields: ":what"`), []string{at + ".get.query.fields"}},
		{"a method", replace("timeout: 1s}", "timeout: 1s, method: DELETE}"), []string{at + ".get.method"}},
		{"a body", replace("timeout: 1s}", "timeout: 1s, body: {a: 1}}"), []string{at + ".get.body"}},
		{"timeout past the deadline", replace("timeout: 1s}", "timeout: 1s, deadline: 500ms}"), []string{at + ".get.timeout"}},
		{"deadline past statement_timeout", replace("timeout: 1s}", "timeout: 1s, deadline: 31s}"), []string{at + ".get.deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.edit(targetBase)))
			ps, ok := errors.AsType[Problems](err)
			if !ok {
				t.Fatalf("Parse = %v, want problems at %v", err, tt.paths)
			}
			var paths []string
			for _, p := range ps {
				paths = append(paths, p.Path)
			}
			slices.Sort(paths)
			if !slices.Equal(paths, tt.paths) {
				t.Fatalf("problems %v, want at %v", ps, tt.paths)
			}
		})
	}
}

// TestTargetReadSet: a Go-built target read (not from a file, so the
// schema never saw it) is held to a GET retried as safe too.
func TestTargetReadSet(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(targetBase))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Actions["create_label"].Target.Get
	g.Method, g.Retry, g.Success = "POST", RetryNever, []int{200}
	var got []string
	cfg.validateTargetRead(cfg.Actions["create_label"].Target, "t", []string{cfg.Environment}, []string{"order_id"}, func(path, _ string, _ ...any) { got = append(got, path) })
	if want := []string{"t.get.method", "t.get.retry", "t.get.success"}; !slices.Equal(got, want) {
		t.Fatalf("problems at %v", got)
	}
}
