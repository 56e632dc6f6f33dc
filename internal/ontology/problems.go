package ontology

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem is one thing wrong with a config, at a field path such as
// actions.cancel_order.policy.approval.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is every problem found in a config, sorted by path. As an error,
// it lists them all, one per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("the config has %d problem(s):\n  %s", len(ps), strings.Join(lines, "\n  "))
}

func (ps Problems) sorted() Problems {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(ps)
}

// fieldPath spells a JSON pointer's tokens as a dotted field path.
func fieldPath(tokens []string) string { return strings.Join(tokens, ".") }

var configSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(configSchemaLocation, doc); err != nil {
		return nil, err
	}
	return c.Compile(configSchemaLocation)
})

var english = message.NewPrinter(language.English)

// shapeProblems checks a config against schemaJSON and returns every
// violation at its field path.
func shapeProblems(instance any) Problems {
	schema, err := configSchema()
	if err != nil {
		panic("ontology: the embedded config schema does not compile: " + err.Error())
	}
	err = schema.Validate(instance)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return Problems{{Message: err.Error()}}
	}
	var problems Problems
	// key, when set, is the path of a key its mapping does not take: the
	// propertyNames error's causes judge the name alone, an instance with
	// no location, and are reported at the key.
	var walk func(e *jsonschema.ValidationError, key string)
	walk = func(e *jsonschema.ValidationError, key string) {
		if name, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			key = fieldPath(append(mappingOf(instance, e.InstanceLocation, name.Property), name.Property))
		}
		if len(e.Causes) == 0 {
			switch extra, ok := e.ErrorKind.(*kind.AdditionalProperties); {
			case key != "":
				problems = append(problems, Problem{Path: key, Message: "the key " + e.ErrorKind.LocalizedString(english)})
			case ok:
				// An unknown key is reported at the key itself, not its parent.
				for _, k := range extra.Properties {
					problems = append(problems, Problem{Path: fieldPath(append(slices.Clone(e.InstanceLocation), k)), Message: "unknown key"})
				}
			default:
				problems = append(problems, Problem{Path: fieldPath(e.InstanceLocation), Message: withheldValue(e)})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c, key)
		}
	}
	walk(verr, "")
	return problems.sorted()
}

// withheldValue is the message of a leaf schema error; of a *_env key's
// pattern, without the value: a key that names the variable holding a
// secret is where the secret itself is written by mistake, and the
// pattern's message ("'postgres://u:password@…' does not match …")
// would print it to config check's terminal and serve's host log.
func withheldValue(e *jsonschema.ValidationError) string {
	loc := e.InstanceLocation
	if _, ok := e.ErrorKind.(*kind.Pattern); ok && len(loc) > 0 && strings.HasSuffix(loc[len(loc)-1], "_env") {
		return "is not the name of an environment variable (letters, digits and underscores, such as DATASOURCE_URL): " +
			"name the variable that holds the value, never the value itself (it is not shown here)"
	}
	return e.ErrorKind.LocalizedString(english)
}

// mappingOf returns where in instance the mapping holding key is: of the
// mappings holding it at loc's depth, the one that agrees with loc on the
// most leading parts. jsonschema's location of a propertyNames error
// shares its slice with later siblings', which overwrite its last parts
// (upstreams.carrier.auth read as upstreams.carrier.base_url).
func mappingOf(instance any, loc []string, key string) []string {
	var best []string
	bestAgree := -1
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		m, ok := v.(map[string]any)
		if len(path) == len(loc) {
			if _, holds := m[key]; ok && holds {
				agree := 0
				for agree < len(path) && path[agree] == loc[agree] {
					agree++
				}
				if agree > bestAgree {
					best, bestAgree = slices.Clone(path), agree
				}
			}
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k], append(path, k))
			}
		case []any:
			for i, item := range v {
				walk(item, append(path, strconv.Itoa(i)))
			}
		}
	}
	walk(instance, nil)
	if best == nil {
		return slices.Clone(loc)
	}
	return best
}
