package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/jsonmember"
	"github.com/orangerail/orangerail/internal/policy/apidoc"
	"github.com/orangerail/orangerail/internal/yamldoc"
)

// decode reads a JSON or YAML document into plain values: map[string]any,
// []any, string, bool, nil, and numbers as int64 when whole and in range,
// float64 otherwise. YAML mapping keys are read as written ("200" stays
// the string "200", never an integer), timestamps stay strings, and an
// alias is expanded against a budget, so that a small file cannot expand
// into a huge one.
func decode(data []byte) (any, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			// YAML's flow style starts the same way ({openapi: 3.1.0})
			// and is read as YAML; JSON's error is the one said.
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				if v, yerr := decodeYAML(data); yerr == nil {
					return v, nil
				}
			}
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		// Anything but the end after the value (more JSON, or text that
		// is not JSON at all) makes the file something other than one
		// JSON document.
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, errors.New("not JSON: more follows the document's value")
		}
		if err := jsonRepeatedKey(trimmed); err != nil {
			return nil, err
		}
		return numbers(v), nil
	}
	return decodeYAML(data)
}

// jsonRepeatedKey refuses JSON text in which an object gives one member
// twice: a reader keeps one of them (encoding/json the last) and drops the
// other without a word — a path, an operation, a parameter gone.
func jsonRepeatedKey(data []byte) error {
	path, ok := jsonmember.Repeated(data)
	if !ok {
		return nil
	}
	return fmt.Errorf("the key %q is given twice in one object (at %s); one would be dropped", path[len(path)-1], apidoc.Pointer("", path...))
}

func decodeYAML(data []byte) (any, error) {
	root, err := yamldoc.Decode(data)
	if errors.Is(err, yamldoc.ErrMoreDocuments) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	if root.Kind == 0 {
		// An empty file, or one of comments only: YAML's empty
		// document, null.
		return nil, nil
	}
	// Measure the expansion before making it: a billion laughs is a few
	// hundred bytes of aliases, and building even the budget's worth of
	// values would take hundreds of megabytes.
	if expanded(&root, map[*yaml.Node]int{}, 0) > maxNodes {
		return nil, errTooLarge
	}
	budget := maxNodes
	return fromYAML(&root, &budget, 0)
}

// expanded counts the values a node makes once its aliases are expanded,
// capped just past maxNodes (and at it for a node nested deeper than
// maxDepth). An alias names an anchored node, whose count is kept: each
// node is counted once, so the work is the size of the file, not of its
// expansion.
func expanded(n *yaml.Node, sizes map[*yaml.Node]int, depth int) int {
	if depth > maxDepth {
		return maxNodes + 1
	}
	if n.Anchor == "" {
		return expandedContent(n, sizes, depth)
	}
	if size, ok := sizes[n]; ok {
		return size
	}
	// An alias that reaches the node it is inside of expands forever.
	sizes[n] = maxNodes + 1
	sizes[n] = expandedContent(n, sizes, depth)
	return sizes[n]
}

// expandedContent counts a node and what it holds or names.
func expandedContent(n *yaml.Node, sizes map[*yaml.Node]int, depth int) int {
	size := 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		size += expanded(n.Alias, sizes, depth+1)
	}
	for _, c := range n.Content {
		size += expanded(c, sizes, depth+1)
		if size > maxNodes {
			size = maxNodes + 1
			break
		}
	}
	return min(size, maxNodes+1)
}

// Bounds on a decoded YAML document: nodes after alias expansion, and
// nesting.
const (
	maxNodes = 5_000_000
	maxDepth = 512
)

var errTooLarge = fmt.Errorf("%w: it expands to more than 5,000,000 values (YAML aliases?) or nests deeper than 512", ErrTooLarge)

// fromYAML converts a YAML node.
func fromYAML(n *yaml.Node, budget *int, depth int) (any, error) {
	*budget--
	if *budget < 0 || depth > maxDepth {
		return nil, errTooLarge
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromYAML(n.Content[0], budget, depth+1)
	case yaml.AliasNode:
		return fromYAML(n.Alias, budget, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromYAML(c, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		own := map[string]int{} // the mapping's own keys (not merged), and their lines
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				// <<: *base merges the base mapping's keys, which the
				// mapping's own keys override.
				merged, err := fromYAML(v, budget, depth+1)
				if err != nil {
					return nil, err
				}
				for _, m := range mergeSources(merged) {
					for mk, mv := range m {
						if _, own := out[mk]; !own {
							out[mk] = mv
						}
					}
				}
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a mapping key must be a scalar", k.Line)
			}
			if first, ok := own[k.Value]; ok {
				return nil, fmt.Errorf("line %d: the key %q is given twice in one mapping (first at line %d); one would be dropped", k.Line, k.Value, first)
			}
			own[k.Value] = k.Line
			val, err := fromYAML(v, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = val
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(n), nil
	}
	return nil, fmt.Errorf("line %d: an unknown YAML node", n.Line)
}

func mergeSources(v any) []map[string]any {
	switch v := v.(type) {
	case map[string]any:
		return []map[string]any{v}
	case []any:
		var out []map[string]any
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// scalar reads a YAML scalar by its resolved tag; a timestamp or any
// other tag stays the text written.
func scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err == nil {
			return b
		}
	case "!!int":
		if i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return f
		}
	case "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	}
	return n.Value
}

// numbers replaces each json.Number with an int64 or a float64.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v.String()
	}
	return v
}
