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

// TestMaskErrorDoesNotMaskItsOwnMarks: each value was replaced over the
// text the values before it had already masked, so a short value found in
// "[redacted]" (an e, a d) masked the marks again, and a sealed input of a
// repeated letter grew the text threefold per copy — an agent's input
// could make one error's text as large as memory allows.
func TestMaskErrorDoesNotMaskItsOwnMarks(t *testing.T) {
	t.Parallel()
	values := make([]string, 12)
	for i := range values {
		values[i] = "e"
	}
	input, _ := json.Marshal(map[string]any{"v": values})
	e := &Engine{cfg: &ontology.Config{}}
	c := &call{action: &ontology.Action{}, canonical: input, sealed: true}
	got := e.maskError(c, errors.New("value e refused")).Error()
	if want := "valu" + redacted + " " + redacted + " r" + redacted + "fus" + redacted + "d"; got != want {
		t.Errorf("masked to %d bytes, want %q; begins %.80q", len(got), want, got)
	}
}

// TestMaskErrorMasksOtherEncodersEchoes: PHP's json_encode writes / as
// \/ (and non-ASCII as \uXXXX) by default, and .NET's System.Text.Json
// writes non-ASCII and each of " ' + < > & ` as \uXXXX in capitals: an
// upstream of either echoing a base64 key (which holds / and +) kept it
// in plaintext, and so did Go's %q of such a body.
func TestMaskErrorMasksOtherEncodersEchoes(t *testing.T) {
	t.Parallel()
	const key = `sk/Qx+9é'Zw`
	input, _ := json.Marshal(map[string]string{"key": key, "tag": "Qx\x7fZw"})
	e := &Engine{cfg: &ontology.Config{}}
	c := &call{action: &ontology.Action{}, canonical: input, sealed: true}
	php := `{"error":"bad key sk\/Qx+9\u00e9'Zw"}`
	dotnet := `{"error":"bad key sk/Qx\u002B9\u00E9\u0027Zw"}`
	for name, text := range map[string]string{
		"PHP":            php,
		".NET":           dotnet,
		"Go-quoted PHP":  fmt.Sprintf("answered 400: %q", php),
		"Go-quoted .NET": fmt.Sprintf("answered 400: %q", dotnet),
		// Jackson's ESCAPE_NON_ASCII writes \uXXXX in capitals, / as is.
		"Jackson": `{"error":"bad key sk/Qx+9\u00E9'Zw"}`,
		// .NET escapes DEL too.
		".NET DEL": `{"error":"bad tag Qx\u007FZw"}`,
	} {
		got := e.maskError(c, errors.New(text)).Error()
		if !strings.Contains(got, redacted) || strings.Contains(got, "Qx") || strings.Contains(got, "Zw") {
			t.Errorf("%s: %q masked to %q", name, text, got)
		}
	}
}

// TestMaskErrorMasksOverlappingValues: two masked values a message writes
// overlapping were replaced one after the other, so the second, cut short
// by the first one's mark, kept its rest in plaintext.
func TestMaskErrorMasksOverlappingValues(t *testing.T) {
	t.Parallel()
	input, _ := json.Marshal(map[string]string{"a": "4111-2222", "b": "2222-3333"})
	e := &Engine{cfg: &ontology.Config{}}
	c := &call{action: &ontology.Action{}, canonical: input, sealed: true}
	if got := e.maskError(c, errors.New("card 4111-2222-3333 refused")).Error(); got != "card "+redacted+" refused" {
		t.Errorf("masked to %q", got)
	}
}

// TestMaskErrorBoundsItsWork: each masked run is looked for at every
// position it starts at, so a value of one letter repeated, in a message
// repeating it, was compared whole at each of the message's positions:
// the work grew as the message's length times the value's (and times the
// sum of the values' lengths, for many such values), and an agent sending
// such values to an upstream that echoes them made the error path take
// seconds a call. Past its bound the whole message is masked instead.
func TestMaskErrorBoundsItsWork(t *testing.T) {
	t.Parallel()
	value := strings.Repeat("a", 32<<10)
	input, _ := json.Marshal(map[string]string{"v": value})
	e := &Engine{cfg: &ontology.Config{}}
	c := &call{action: &ontology.Action{}, canonical: input, sealed: true}
	if got := e.maskError(c, errors.New("refused: "+value+value)).Error(); got != redacted {
		t.Errorf("a message repeating a long periodic value masked to %d bytes (%.40q), want the whole message masked", len(got), got)
	}
	// Within the bound, it masks as before.
	if got := e.maskError(c, errors.New(`invalid input syntax: "`+value+`"`)).Error(); got != `invalid input syntax: "`+redacted+`"` {
		t.Errorf("masked to %.80q", got)
	}
}
