package policy

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ManifestSchema is the manifest's JSON Schema (draft 2020-12): every
// member, the closed sets, and the invariants between values (a read needs
// no approval; the hints follow the risk class and the retry policy; a
// null sensitivity gives a null sensitiveHint).
//
//go:embed manifest.schema.json
var ManifestSchema []byte

// manifestSchema compiles ManifestSchema once.
var manifestSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ManifestSchema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "urn:orangerail:policy-manifest"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
})

// ValidateManifest checks a manifest's bytes against ManifestSchema.
func ValidateManifest(data []byte) error {
	schema, err := manifestSchema()
	if err != nil {
		return fmt.Errorf("the manifest schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrManifest, err)
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf("%w: %w", ErrManifest, err)
	}
	return nil
}
