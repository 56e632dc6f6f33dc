package ontology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileInput compiles an action's input schema (JSON Schema draft
// 2020-12, no remote references). Its type must be object.
func compileInput(schema map[string]any) (*jsonschema.Schema, error) {
	if schema["type"] != "object" {
		return nil, errors.New(`the input schema's "type" must be "object"`)
	}
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
	// Input schemas are self-contained: a $ref to anything outside fails.
	c.UseLoader(refusingLoader{})
	const loc = "urn:orangerail:input"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", firstLine(err.Error()))
	}
	return compiled, nil
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
