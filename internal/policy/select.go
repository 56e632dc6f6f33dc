package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orangerail/orangerail/internal/policy/apidoc"
)

// ErrSelector is an --include that cannot be read, or picks nothing.
var ErrSelector = errors.New("an --include selector")

// SelectorKind is what a selector matches on, from a closed set.
type SelectorKind string

// The selector kinds.
const (
	SelectTag       SelectorKind = "tag"       // an operation's tag
	SelectOperation SelectorKind = "operation" // an operation id, or its tool's name
	SelectMethod    SelectorKind = "method"    // an HTTP method; soap for every SOAP operation
	SelectAll       SelectorKind = "all"       // every operation: *
)

// Selector picks operations to write actions for.
type Selector struct {
	Kind  SelectorKind
	Value string
	// Spelled is the selector as written, for errors.
	Spelled string
}

// ParseSelectors reads --include values: tag:NAME, operation:ID (op:ID),
// method:GET, or *. Each may hold several, comma-separated.
func ParseSelectors(values []string) ([]Selector, error) {
	var out []Selector
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "*" {
				out = append(out, Selector{Kind: SelectAll, Spelled: part})
				continue
			}
			kind, value, ok := strings.Cut(part, ":")
			if !ok || value == "" {
				return nil, fmt.Errorf("%w %q is not tag:NAME, operation:ID, method:METHOD or *", ErrSelector, part)
			}
			switch kind {
			case "tag":
				out = append(out, Selector{Kind: SelectTag, Value: value, Spelled: part})
			case "operation", "op":
				out = append(out, Selector{Kind: SelectOperation, Value: value, Spelled: part})
			case "method":
				out = append(out, Selector{Kind: SelectMethod, Value: strings.ToUpper(value), Spelled: part})
			default:
				return nil, fmt.Errorf("%w %q: %q is not tag, operation or method", ErrSelector, part, kind)
			}
		}
	}
	return out, nil
}

// matches reports whether the selector picks a tool's operation.
func (s Selector) matches(t *ToolPolicy, op *apidoc.Operation) bool {
	switch s.Kind {
	case SelectAll:
		return true
	case SelectTag:
		return slices.Contains(op.Tags, s.Value)
	case SelectOperation:
		return op.ID == s.Value || t.Name == s.Value
	case SelectMethod:
		if op.SOAP != nil {
			return s.Value == "SOAP"
		}
		return op.Method == s.Value
	}
	return false
}
