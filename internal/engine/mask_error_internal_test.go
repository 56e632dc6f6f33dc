package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/orangerail/orangerail/internal/ontology"
)

// TestMaskErrorMasksEscapedEchoes: a message may quote a masked value
// escaped as its writer quotes strings, not as it was sent. Each form
// below is one an error reaching maskError carries: SQL's doubled quote
// (a statement or a RAISE echoing a literal), JSON's escapes (an
// upstream's error body), JSON's ASCII-only \uXXXX escapes, and Go's %q
// over such a body (httpeffect quotes the excerpt it keeps). Only the
// value as written was masked, so each echo kept the note in plaintext.
func TestMaskErrorMasksEscapedEchoes(t *testing.T) {
	t.Parallel()
	const note = `it's "bö" a\b/<x>`
	input, _ := json.Marshal(map[string]string{"note": note})
	e := &Engine{cfg: &ontology.Config{}}
	c := &call{action: &ontology.Action{}, canonical: input, sealed: true}
	goJSON, _ := json.Marshal(note)
	asJSON := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(goJSON[1 : len(goJSON)-1]))
	body := `{"error":"bad note: ` + asJSON + `"}`
	for name, text := range map[string]string{
		"as written":     "invalid input syntax for type integer: \"" + note + "\"",
		"SQL doubled":    "near '" + strings.ReplaceAll(note, "'", "''") + "'",
		"JSON":           body,
		"JSON as HTML":   string(goJSON),
		"JSON ASCII":     `{"error":"` + strings.ReplaceAll(asJSON, "ö", `\u00f6`) + `"}`,
		"Go-quoted JSON": fmt.Sprintf("answered 400 Bad Request: %q", body),
		"Go-quoted":      fmt.Sprintf("value %q refused", note),
	} {
		got := e.maskError(c, errors.New(text)).Error()
		if !strings.Contains(got, redacted) || strings.Contains(got, "bö") || strings.Contains(got, `\u00`) {
			t.Errorf("%s: %q masked to %q", name, text, got)
		}
	}
	// A masked error still unwraps to its cause.
	cause := errors.New("value " + strconv.Quote(note))
	if err := e.maskError(c, cause); !errors.Is(err, cause) {
		t.Errorf("the masked error does not unwrap to its cause: %v", err)
	}
}
