package ontology

import (
	"errors"
	"slices"
	"testing"
)

// TestParsePointer: RFC 6901 pointers and escapes, a bare name meaning the
// top-level member of that exact name, and a pointer that is not one refused.
func TestParsePointer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want Pointer
	}{
		{"note", Pointer{"note"}},
		{"a/b", Pointer{"a/b"}}, // a bare name is taken verbatim
		{"/note", Pointer{"note"}},
		{"/card/number", Pointer{"card", "number"}},
		{"/items/0/sku", Pointer{"items", "0", "sku"}},
		{"/a~1b/c~0d", Pointer{"a/b", "c~d"}},
		{"/~01", Pointer{"~1"}}, // ~0 then 1, not ~ then ~1
		{"/", Pointer{""}},
	} {
		got, err := ParsePointer(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParsePointer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if tt.in[0] == '/' && got.String() != tt.in {
			t.Errorf("%q spelled back as %q", tt.in, got.String())
		}
	}
	for _, bad := range []string{"", "/a~", "/a~2", "/~x/b"} {
		if p, err := ParsePointer(bad); err == nil {
			t.Errorf("ParsePointer(%q) = %q, want an error", bad, p)
		}
	}
}

// TestMaskPathsChecked: nested pointers are followed through the input
// schema where it declares them, and taken as written where it leaves a
// part open; "*" names every element where the schema declares items, and
// is a member's name where it declares properties.
func TestMaskPathsChecked(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(replace("    input: {type: object, properties: {order_id: {type: string}}}",
		`    input:
      type: object
      properties:
        order_id: {type: string}
        card: {type: object, properties: {number: {type: string}}}
        items: {type: array, items: {type: object, properties: {sku: {type: string}}}}
        extra: {type: object}
        grid: {type: array, items: {type: array, items: {type: object, properties: {v: {type: string}}}}}
        odd: {type: object, properties: {"*": {type: string}}}
    redact_audit: [order_id, /card/number, /items/0/sku, /extra/any/depth, /items/*/sku, /grid/*/0/v, /grid/1/*/v, /odd/*]
    redact_prior: [/status, /id/x]
    redact_result: [/rows/0/id]`)(base)))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Actions["cancel_order"]
	var audit []string
	for _, p := range a.AuditMasks() {
		audit = append(audit, p.String())
	}
	if !slices.Equal(audit, []string{"/order_id", "/card/number", "/items/0/sku", "/extra/any/depth", "/items/*/sku", "/grid/*/0/v", "/grid/1/*/v", "/odd/*"}) ||
		len(a.PriorMasks()) != 2 || len(a.ResultMasks()) != 1 || a.WithholdsPrior() {
		t.Fatalf("masks %v %v %v", audit, a.PriorMasks(), a.ResultMasks())
	}
	// On an object, "*" is a member's name: card declares none so named.
	for _, bad := range []string{"/items/x/sku", "/items/0/name", "/card/number/x", "/card/cvv", "/card/*", "/items/*/name", "/items/**/sku"} {
		_, err := Parse([]byte(replace("    input: {type: object, properties: {order_id: {type: string}}}",
			`    input:
      type: object
      properties:
        card: {type: object, properties: {number: {type: string}}}
        items: {type: array, items: {type: object, properties: {sku: {type: string}}}}
    redact_audit: [`+bad+`]`)(base)))
		if err == nil || !slices.Contains(problemPaths(err), "actions.cancel_order.redact_audit.0") {
			t.Errorf("redact_audit %s: %v", bad, err)
		}
	}
}

// problemPaths returns the field paths of a load's problems.
func problemPaths(err error) []string {
	var problems Problems
	if !errors.As(err, &problems) {
		return nil
	}
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	return paths
}
