package policy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/golden"
	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apispec"
)

// corpus is the directory of real API descriptions (testdata/apispecs,
// INDEX.md says where each came from and what it exercises).
const corpus = "testdata/apispecs"

// goldens are the corpus documents whose whole manifests are held to
// files: each was reviewed by hand for what it exercises (INDEX.md).
var goldens = map[string]string{
	"oai-petstore.yaml":       "petstore",
	"discord-api.json":        "discord",
	"adyen-transfers-v4.json": "adyen",
	"slack-web-api.json":      "slack",
	"vonage-account.yaml":     "vonage",
	"google-oauth2-v2.yaml":   "google",
	"twilio-iam-v1.yaml":      "twilio",

	"atlassian-crowd-securityserver.wsdl": "crowd",
	"taxcloud-taxcloud.wsdl":              "taxcloud",
	"synthetic-schemes.yaml":              "synthetic-schemes",
}

// load reads a corpus document, or a test's own under testdata.
func load(t testing.TB, name string) *apispec.File {
	t.Helper()
	path := filepath.Join(corpus, name)
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join("testdata", name)
	}
	f, err := apispec.Read(path)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func compile(t testing.TB, name, service string, accept map[string]string) *policy.Manifest {
	t.Helper()
	f := load(t, name)
	m, err := policy.Compile(f.Doc, policy.Options{Service: service, File: f.Name, SHA256: f.SHA256, Accept: accept})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestCorpus compiles every document of the corpus, and this package's
// synthetic ones: each gives a
// manifest its own JSON Schema accepts, with a tool per operation, the
// same bytes on a second compile, and — for the reviewed ones — the bytes
// of its golden file.
func TestCorpus(t *testing.T) {
	for _, name := range corpusNames(t) {
		t.Run(name, func(t *testing.T) {
			doc := load(t, name).Doc
			m := compile(t, name, "svc", nil)
			if len(m.Tools) != len(doc.Operations) || len(m.Tools) == 0 {
				t.Fatalf("%d tools for %d operations", len(m.Tools), len(doc.Operations))
			}
			out, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if err := policy.ValidateManifest(out); err != nil {
				t.Fatalf("the manifest fails its own schema: %v", err)
			}
			again, err := compile(t, name, "svc", nil).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, again) {
				t.Fatal("two compiles of one document differ")
			}
			back, err := policy.ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			if round, _ := back.Marshal(); !bytes.Equal(round, out) {
				t.Fatal("a manifest read back does not marshal to the same bytes")
			}
			if g, ok := goldens[name]; ok {
				golden.Bytes(t, filepath.Join("testdata", "golden", g+".manifest.json"), out)
			}
		})
	}
}

// corpusNames lists the corpus's documents and this package's synthetic
// one.
func corpusNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"synthetic-schemes.yaml"}
	for _, e := range entries {
		if name := e.Name(); name != "INDEX.md" {
			names = append(names, name)
		}
	}
	if len(names) != 1+16 {
		t.Fatalf("the corpus holds %d documents, want 16 (INDEX.md)", len(names)-1)
	}
	return names
}

// TestManifestSchemaRefuses holds the schema to the invariants it states:
// a manifest edited to contradict itself is refused.
func TestManifestSchemaRefuses(t *testing.T) {
	m := compile(t, "oai-petstore.yaml", "petstore", nil)
	mutations := map[string]func(m *policy.Manifest){
		"a read that needs approval": func(m *policy.Manifest) {
			m.Tool("listPets").Approval.Value = "required"
		},
		"a destructive hint on a read": func(m *policy.Manifest) {
			m.Tool("listPets").Annotations.DestructiveHint.Value = true
		},
		"an idempotent hint without safe retry": func(m *policy.Manifest) {
			m.Tool("createPets").Annotations.IdempotentHint.Value = true
		},
		"a value without its rule": func(m *policy.Manifest) {
			m.Tool("createPets").Risk.Rule = ""
		},
		"an unknown risk": func(m *policy.Manifest) {
			m.Tool("createPets").Risk.Value = "harmless"
		},
		"a false sensitiveHint where sensitivity is null": func(m *policy.Manifest) {
			tp := m.Tool("createPets")
			tp.Sensitivity.Value = nil
			f := false
			tp.Annotations.SensitiveHint.Value = &f
		},
		"an accepted finding that is not acceptable": func(m *policy.Manifest) {
			tp := m.Tool("createPets")
			tp.Unresolved = append(tp.Unresolved, policy.Unresolved{Kind: policy.UnresolvedUnsupported, Field: "operation", Source: []string{"/x"}, Detail: "x", Fatal: true, Accepted: "yes"})
		},
		"another format": func(m *policy.Manifest) { m.Format = "orangerail.policy/v0" },
		"two tools of one name": func(m *policy.Manifest) {
			m.Tools[1].Name = m.Tools[0].Name
		},
		"served while a fatal finding stands": func(m *policy.Manifest) {
			tp := m.Tool("createPets")
			tp.Unresolved = append(tp.Unresolved, policy.Unresolved{Kind: policy.UnresolvedUnsupported, Field: "operation", Source: []string{"/x"}, Detail: "x", Fatal: true})
			tp.Status.Value = policy.StatusServable
		},
		"failing closed with nothing fatal standing": func(m *policy.Manifest) {
			tp := m.Tool("listPets")
			tp.Unresolved = []policy.Unresolved{}
			tp.Status.Value = policy.StatusFailsClosed
		},
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			c := compile(t, "oai-petstore.yaml", "petstore", nil)
			mutate(c)
			out, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := policy.ReadManifest(out); err == nil {
				t.Fatal("the schema accepted it")
			}
		})
	}
	out, _ := m.Marshal()
	if _, err := policy.ReadManifest(out); err != nil {
		t.Fatalf("the unmutated manifest: %v", err)
	}
	if _, err := policy.ReadManifest(append(out, []byte("{}")...)); err == nil {
		t.Fatal("trailing bytes were accepted")
	}
}

// TestSchemaEnums holds the manifest schema's closed sets to the Go ones.
func TestSchemaEnums(t *testing.T) {
	var kinds []string
	for _, k := range policy.UnresolvedKinds() {
		kinds = append(kinds, `"`+string(k)+`"`)
	}
	want := `"kind": {"enum": [` + strings.Join(kinds, ", ") + `]}`
	if !bytes.Contains(policy.ManifestSchema, []byte(want)) {
		t.Errorf("the schema's unresolved kinds are not %s", want)
	}
	var sens []string
	for _, s := range policy.Sensitivities() {
		sens = append(sens, `"`+string(s)+`"`)
	}
	if want := `"sensitivity": {"$ref": "#/$defs/derived", "properties": {"value": {"enum": [null, ` + strings.Join(sens, ", ") + `]}}}`; !bytes.Contains(policy.ManifestSchema, []byte(want)) {
		t.Errorf("the schema's sensitivities are not %s", want)
	}
	if !slices.Equal(policy.Sensitivities()[1:], []policy.Sensitivity{"personal", "financial", "secret"}) {
		t.Error("a redacted field's sensitivity enum is out of step")
	}
}
