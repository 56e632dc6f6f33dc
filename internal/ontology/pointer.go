package ontology

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a JSON pointer (RFC 6901) as its unescaped reference tokens:
// the path of a member or element a mask names inside an audited value.
type Pointer []string

// ParsePointer reads a mask's path. A path starting with "/" is a JSON
// pointer, "~1" spelling "/" and "~0" spelling "~" in a token; any other
// path is a bare top-level member name, kept verbatim, so "note" means
// "/note" and the masks written before pointers keep their meaning.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return nil, fmt.Errorf("an empty path names the whole value: name a member, as /name")
	}
	if !strings.HasPrefix(s, "/") {
		return Pointer{s}, nil
	}
	raw := strings.Split(s[1:], "/")
	p := make(Pointer, len(raw))
	for i, token := range raw {
		// "~" may only begin "~0" or "~1"; unescaping "~1" before "~0"
		// would read "~01" as "/" instead of "~1".
		for j := 0; j < len(token); j++ {
			if token[j] == '~' && (j+1 == len(token) || (token[j+1] != '0' && token[j+1] != '1')) {
				return nil, fmt.Errorf("%q is not a JSON pointer: \"~\" must be written ~0 (and \"/\" inside a name ~1)", s)
			}
		}
		p[i] = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
	}
	return p, nil
}

// String spells the pointer as RFC 6901 does.
func (p Pointer) String() string {
	var b strings.Builder
	for _, token := range p {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// EveryElement is the token that, where a mask's path meets an array,
// names every element of it (/members/*/email). Where the path meets an
// object it is a member's name like any other: an array's elements have
// only numeric indices, so the two cannot be confused.
const EveryElement = "*"

// Index reads a token as an array index as RFC 6901 spells one: digits
// without a leading zero. "-", the element after the last, names nothing a
// mask could cover.
func Index(token string) (int, bool) {
	if token == "" || (len(token) > 1 && token[0] == '0') {
		return 0, false
	}
	for _, r := range token {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(token)
	return n, err == nil
}

// checkInputPointer follows p through an action's input schema as far as
// the schema declares it: a member of an object whose properties are
// listed must be one of them, an element of an array whose items are
// declared must be an index or EveryElement, and nothing lies inside a scalar. Past a part
// the schema leaves open (no properties, no items), the path cannot be
// checked and is taken as written.
func checkInputPointer(schema map[string]any, p Pointer) error {
	node := schema
	for i, token := range p {
		at := p[:i].String()
		if at == "" {
			at = "the input"
		}
		if props, ok := node["properties"].(map[string]any); ok {
			next, ok := props[token].(map[string]any)
			if !ok {
				return fmt.Errorf("%q is not a property of %s", token, at)
			}
			node = next
			continue
		}
		if items, ok := node["items"].(map[string]any); ok {
			if _, ok := Index(token); !ok && token != EveryElement {
				return fmt.Errorf("%q is not an index of the array %s, nor %s (every element)", token, at, EveryElement)
			}
			node = items
			continue
		}
		if t, ok := node["type"].(string); ok && t != "object" && t != "array" {
			return fmt.Errorf("%s is a %s: there is nothing inside it to mask", at, t)
		}
		return nil
	}
	return nil
}
