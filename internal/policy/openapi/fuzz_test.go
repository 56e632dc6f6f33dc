package openapi_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/policy/openapi"
)

// FuzzParse: no input makes Parse panic or run unbounded (the fuzzer
// reports an input that hangs), and what it returns keeps the reader's
// promises. The input is also served as a file beside itself, so that
// $refs into another file are exercised.
func FuzzParse(f *testing.F) {
	for _, file := range append(corpusFiles(f), fixtureFiles(f)...) {
		data, err := os.ReadFile(filepath.Join(file.dir, filepath.FromSlash(file.name)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/a":{"$ref":"other.yaml#/paths/~1a"}},"components":{"schemas":{"A":{"$ref":"other.yaml#/components/schemas/A"}}}}`))
	f.Add([]byte("swagger: 2.0\npaths:\n  /a: {get: {parameters: [{$ref: '#/parameters/p'}]}}\nparameters: {p: {$ref: 'other.yaml#/parameters/p'}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{"spec.yaml": {Data: data}, "other.yaml": {Data: data}, "sub/other.json": {Data: data}}
		doc, err := openapi.Parse(data, "spec.yaml", fsys)
		if err != nil {
			if doc != nil {
				t.Fatal("a document with an error")
			}
			if !errors.Is(err, openapi.ErrUnreadable) && !errors.Is(err, openapi.ErrNotOpenAPI) && !errors.Is(err, openapi.ErrTooLarge) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		check(t, doc)
	})
}

// check holds a document to what Parse promises.
func check(t *testing.T, doc *apidoc.Document) {
	t.Helper()
	if doc.Format != apidoc.OpenAPI && doc.Format != apidoc.Swagger {
		t.Fatalf("format %q", doc.Format)
	}
	for _, p := range doc.Problems {
		if p.Message == "" {
			t.Fatalf("a problem with no message at %q", p.Source)
		}
	}
	seen := map[*apidoc.Schema]bool{}
	for _, o := range doc.Operations {
		if o.Source == "" || !slices.Contains([]string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}, o.Method) || !strings.HasPrefix(o.Path, "/") {
			t.Fatalf("operation %q at %q: %s %s", o.ID, o.Source, o.Method, o.Path)
		}
		for _, p := range o.Parameters {
			if p.Name == "" || p.Source == "" || (p.In == apidoc.InPath && !p.Required) {
				t.Fatalf("%s: parameter %+v", o.Source, p)
			}
			if !slices.Contains([]string{apidoc.InPath, apidoc.InQuery, apidoc.InHeader, apidoc.InCookie}, p.In) {
				t.Fatalf("%s: a parameter in %q", o.Source, p.In)
			}
			walk(t, p.Schema, seen)
		}
		if o.Body != nil {
			walk(t, o.Body.Schema, seen)
		}
		for _, r := range o.Responses {
			if r.Status == "" || strings.HasPrefix(r.Status, "x-") {
				t.Fatalf("%s: response %q", o.Source, r.Status)
			}
			walk(t, r.Schema, seen)
		}
		if o.Security != nil && o.Security.Alternatives == nil {
			t.Fatalf("%s: security with nil alternatives", o.Source)
		}
	}
}

// walk visits a schema graph once per node: it must end, cycles and all,
// and every node must say where it was read.
func walk(t *testing.T, s *apidoc.Schema, seen map[*apidoc.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	// A source is a JSON pointer ("" is the whole document, which a
	// `$ref: ""` names), or file#pointer.
	if s.Source != "" && !strings.HasPrefix(s.Source, "/") && !strings.Contains(s.Source, "#") {
		t.Fatalf("a schema at %q", s.Source)
	}
	for _, p := range s.Properties {
		walk(t, p.Schema, seen)
	}
	walk(t, s.AdditionalProperties, seen)
	walk(t, s.Items, seen)
	for _, group := range [][]*apidoc.Schema{s.AllOf, s.AnyOf, s.OneOf, s.Mapping} {
		for _, c := range group {
			walk(t, c, seen)
		}
	}
}
