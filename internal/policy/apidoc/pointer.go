package apidoc

import (
	"slices"
	"strings"
)

// Pointer appends tokens to a JSON pointer (RFC 6901), escaping each:
// Pointer("/paths", "/pets/{id}", "get") is "/paths/~1pets~1{id}/get".
func Pointer(base string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(base)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func sortStrings(s []string) { slices.Sort(s) }
