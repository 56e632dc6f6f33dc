package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// What a person may send as text: a decision's note, a list's filter.
// The engine holds these rules so that every way in (the approvals API,
// the desk's forms and links, the command line) refuses the same text
// with the same words.
//
// Lengths are in characters (Unicode code points), as JSON Schema's
// maxLength counts them: the approvals API's document states these bounds,
// and a client that checks a request against it must never send one the
// server refuses.
const (
	// MaxNoteChars caps a decision's note, which the approval, the audit
	// log and the agent's answer carry.
	MaxNoteChars = 4096
	// MaxFilterChars caps a list's filter (an action, a subject, a
	// correlation id): longer than any stored value it could match.
	MaxFilterChars = 1024
)

// textProblem says what keeps a person's text, named name, from Postgres,
// or "": a NUL, or bytes that are not UTF-8, which Postgres refuses in
// text and a query would fail on.
func textProblem(name, value string) string {
	switch {
	case strings.ContainsRune(value, 0):
		return name + " must not contain the NUL character (U+0000)"
	case !utf8.ValidString(value):
		return name + " must be UTF-8 text"
	}
	return ""
}

// NoteProblem says what is wrong with a decision's note, or "".
func NoteProblem(note string) string { return boundedTextProblem("note", note, MaxNoteChars) }

// ReasonProblem says what is wrong with a break-glass decision's reason,
// which its record keeps beside the note, or "": a note's rules.
func ReasonProblem(reason string) string { return boundedTextProblem("reason", reason, MaxNoteChars) }

// FilterProblem says what is wrong with a list's filter, named name, or
// "".
func FilterProblem(name, value string) string { return boundedTextProblem(name, value, MaxFilterChars) }

// boundedTextProblem is textProblem of value, named name, which may be at
// most limit characters long.
func boundedTextProblem(name, value string, limit int) string {
	if p := textProblem(name, value); p != "" {
		return p
	}
	if utf8.RuneCountInString(value) > limit {
		return fmt.Sprintf("%s is longer than %d characters", name, limit)
	}
	return ""
}
