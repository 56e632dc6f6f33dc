package ontology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// CompileSchema compiles a JSON Schema (draft 2020-12) as orangerail holds
// every schema a tool advertises: self-contained (a $ref to anything
// outside fails), and with each format it states asserted, as every other
// constraint is — format: email refuses what is no address (the draft
// makes formats annotations unless asked). loc names it in errors.
func CompileSchema(loc string, schema map[string]any) (*Validator, error) {
	c, err := compilerOf(loc, schema)
	if err != nil {
		return nil, err
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	return newValidator(compiled), nil
}

// compilerOf is the compiler CompileSchema compiles with, schema added
// at loc, for a caller that compiles parts of it too.
func compilerOf(loc string, schema map[string]any) (*jsonschema.Compiler, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c, nil
}

// compileInput compiles an action's input schema (JSON Schema draft
// 2020-12, no remote references). Its type must be object.
func compileInput(schema map[string]any) (*Validator, error) {
	if schema["type"] != "object" {
		return nil, errors.New(`the input schema's "type" must be "object"`)
	}
	const loc = "urn:orangerail:input"
	c, err := compilerOf(loc, schema)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", schemaProblem(err))
	}
	// A default is filled into every call that leaves its property out
	// (the engine's withDefaults), so one its own schema refuses would
	// refuse every such call: it is the config's mistake, at load.
	if err := checkDefaults(c, loc, "", schema); err != nil {
		return nil, err
	}
	return newValidator(compiled), nil
}

// defaultError is a declared default its own schema refuses, at its
// field path under the input schema (properties.reason.default).
type defaultError struct{ path, message string }

func (d *defaultError) Error() string { return d.message }

// checkDefaults checks each default declared under properties, at the top
// and inside object properties (where the engine applies them), against
// its property's own schema.
func checkDefaults(c *jsonschema.Compiler, loc, pointer string, schema map[string]any) error {
	props, _ := schema["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		sub, _ := props[name].(map[string]any)
		if sub == nil {
			continue
		}
		at := pointer + "/properties/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
		if d, has := sub["default"]; has {
			compiled, err := c.Compile(loc + "#" + at)
			if err != nil {
				return fmt.Errorf("invalid JSON Schema: %s", schemaProblem(err))
			}
			raw, err := json.Marshal(d)
			if err != nil {
				return err
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				return err
			}
			if err := compiled.Validate(doc); err != nil {
				path := strings.ReplaceAll(strings.TrimPrefix(at, "/"), "/", ".") + ".default"
				return &defaultError{path: path, message: "the default does not satisfy its property's own schema, so every call leaving the property out would be refused: " + leafMessage(err)}
			}
		}
		if err := checkDefaults(c, loc, at, sub); err != nil {
			return err
		}
	}
	return nil
}

// leafMessage is the first specific reason a validation failed.
func leafMessage(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return firstLine(err.Error())
	}
	return firstLeaf(verr).ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// firstLeaf is the first cause of verr that has none of its own: the
// most specific reason it failed.
func firstLeaf(verr *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(verr.Causes) > 0 {
		verr = verr.Causes[0]
	}
	return verr
}

// schemaProblem says why a schema does not compile: where the metaschema
// refused it and why (at properties.id.type: value must be one of …), not
// only that it did; else the error's first line.
func schemaProblem(err error) string {
	var invalid *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if !errors.As(err, &invalid) || !errors.As(invalid.Err, &verr) {
		return firstLine(err.Error())
	}
	verr = firstLeaf(verr)
	msg := verr.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	if at := fieldPath(verr.InstanceLocation); at != "" {
		return "at " + at + ": " + msg
	}
	return msg
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("input schemas may not refer to %s", url)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// compileWhere compiles a CEL precondition over input, caller and, when the
// action has a target, target. It must be boolean.
func compileWhere(expr string, hasTarget bool) (cel.Program, error) {
	vars := []cel.EnvOption{
		cel.Variable("input", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("caller", cel.MapType(cel.StringType, cel.DynType)),
	}
	if hasTarget {
		vars = append(vars, cel.Variable("target", cel.MapType(cel.StringType, cel.DynType)))
	}
	return compileBool(expr, vars...)
}

// compileAudience compiles an audience predicate. It sees the caller and
// nothing else — never a call's input — so that whether a tool exists for
// a caller cannot depend on what the caller sends.
func compileAudience(expr string) (cel.Program, error) {
	return compileBool(expr, cel.Variable("caller", cel.MapType(cel.StringType, cel.DynType)))
}

// compileBool compiles a boolean CEL expression over vars, bounded in cost.
func compileBool(expr string, vars ...cel.EnvOption) (cel.Program, error) {
	env, err := cel.NewEnv(vars...)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("must be boolean, but is %s", ast.OutputType())
	}
	return env.Program(ast, cel.CostLimit(whereCostLimit))
}

// whereCostLimit bounds the work one evaluation of a precondition or an
// audience may do.
const whereCostLimit = 100_000
