package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"time"
	"unicode/utf8"
)

// entryColumns are the queryable columns of an audit entry. The byte
// slices alias the entry unless a value had escapes, so reading a chain
// allocates little.
type entryColumns struct {
	tenant, at, correlationID, phase, subject, kind []byte
	action, approvalID                              []byte // nil when absent
	devMode                                         bool
	atTime                                          time.Time
	// serverJudges marks an entry whose reading is Postgres' to say: one
	// nested deeper than entryLocalDepth, or of entryLocalBytes or more.
	serverJudges bool
}

// What Postgres reads as jsonb has limits the grammar does not state: the
// nesting its parser's stack allows (max_stack_depth: some 14,500 levels
// at its 2MB default, fewer below it), and 2^28-1 bytes for a string or a
// container in jsonb's own form, which can be four times the JSON text
// (an array of zeros). An entry within both bounds below is read as
// Postgres reads it under any setting it is run with; one past either,
// which orangerail never writes (its entries' payloads are nested at most
// jcs.MaxDepth deep), is judged by the server the chain lives on, as the
// SQL verifier's reading is (VerifyTenant asks it).
const (
	entryLocalDepth = 600
	entryLocalBytes = 32 << 20
)

var errEntry = errors.New("not a valid audit entry")

// Entry members scanEntry reads, as bits of a set.
const (
	hasTenant = 1 << iota
	hasAt
	hasCorrelationID
	hasPhase
	hasDevMode

	entryRequired = hasTenant | hasAt | hasCorrelationID | hasPhase | hasDevMode
)

// scanEntry reads an entry's queryable columns under the rules of
// orangerail.audit_entry_columns: a UTF-8 JSON object Postgres reads as
// jsonb (validJSONB: its payload included, since an entry Postgres cannot
// read fails the SQL verifier's check, and the two verifiers must agree),
// with no repeated member at the top level or in "actor", and every column
// present and well typed. One walk of the entry validates it and finds
// its members; payload values are never decoded.
func scanEntry(entry []byte) (entryColumns, error) {
	var c entryColumns
	if !utf8.Valid(entry) {
		return c, errEntry
	}
	var v jsonbValidator
	members, ok := v.object(entry)
	if !ok || !decodeNames(members) {
		return c, errEntry
	}
	c.serverJudges = v.deepest > entryLocalDepth || len(entry) >= entryLocalBytes
	var version, actor []byte
	var has int
	for _, m := range members {
		var err error
		switch string(m.name) {
		case "v":
			version = m.value
		case "tenant":
			c.tenant, err = jsonString(m.value)
			has |= hasTenant
		case "at":
			c.at, err = jsonString(m.value)
			has |= hasAt
		case "correlation_id":
			c.correlationID, err = jsonString(m.value)
			has |= hasCorrelationID
		case "phase":
			c.phase, err = jsonString(m.value)
			has |= hasPhase
		case "action":
			c.action, err = jsonString(m.value)
		case "approval_id":
			c.approvalID, err = jsonString(m.value)
		case "dev_mode":
			switch string(m.value) {
			case "true":
				c.devMode = true
			case "false":
			default:
				err = errEntry
			}
			has |= hasDevMode
		case "actor":
			actor = m.value
		}
		if err != nil {
			return c, errEntry
		}
	}
	if has&entryRequired != entryRequired {
		return c, errEntry
	}
	// "v" is the number 1 in any spelling (1, 1.0, 1e0), as jsonb compares
	// it: exactly, so not 1.00000000000000000001, which a float64 rounds
	// to 1. The entry is valid JSON, so a value SetString reads is a
	// number; a string, a literal or a container it refuses. An entry
	// without "v" is refused here too (version is nil).
	if string(version) != "1" {
		v, ok := new(big.Rat).SetString(string(version))
		if !ok || v.Cmp(big.NewRat(1, 1)) != 0 {
			return c, errEntry
		}
	}
	if actor == nil || actor[0] != '{' {
		return c, errEntry
	}
	var a jsonbValidator
	actorMembers, ok := a.object(actor)
	if !ok || !decodeNames(actorMembers) {
		return c, errEntry
	}
	var hasSubject, hasKind bool
	for _, m := range actorMembers {
		var err error
		switch string(m.name) {
		case "subject":
			c.subject, err = jsonString(m.value)
			hasSubject = true
		case "kind":
			c.kind, err = jsonString(m.value)
			hasKind = true
		}
		if err != nil {
			return c, errEntry
		}
	}
	if !hasSubject || !hasKind || len(c.subject) == 0 || !slices.Contains(ActorKinds(), ActorKind(c.kind)) {
		return c, errEntry
	}
	if n := utf8.RuneCount(c.correlationID); n < 1 || n > 128 {
		return c, errEntry
	}
	var err error
	if c.atTime, err = parseAt(c.at); err != nil || !validPhase(c.phase) || (c.approvalID != nil && !validLowerUUID(c.approvalID)) {
		return c, errEntry
	}
	return c, nil
}

// decodeNames decodes each member's name in place and reports whether
// none is repeated.
func decodeNames(members []member) bool {
	for i := range members {
		name, err := jsonString(members[i].name)
		if err != nil {
			return false
		}
		for _, m := range members[:i] {
			if bytes.Equal(m.name, name) {
				return false
			}
		}
		members[i].name = name
	}
	return true
}

// parseAt parses a time that matches
// ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$.
func parseAt(s []byte) (time.Time, error) {
	const shape = "dddd-dd-ddTdd:dd:dd.ddddddZ"
	if len(s) != len(shape) {
		return time.Time{}, errEntry
	}
	for i := range len(shape) {
		if shape[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return time.Time{}, errEntry
			}
		} else if s[i] != shape[i] {
			return time.Time{}, errEntry
		}
	}
	num := func(from, to int) int {
		n := 0
		for _, d := range s[from:to] {
			n = n*10 + int(d-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec, micro := num(11, 13), num(14, 16), num(17, 19), num(20, 26)
	if year < 1 {
		return time.Time{}, errEntry // Postgres has no year 0000
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, micro*1000, time.UTC)
	// time.Date normalizes out-of-range fields (February 30th); a valid
	// time reads back the same.
	if t.Year() != year || int(t.Month()) != month || t.Day() != day || t.Hour() != hour ||
		t.Minute() != minute || t.Second() != sec {
		return time.Time{}, errEntry
	}
	return t, nil
}

// validPhase matches ^[a-z][a-z_]{0,63}$.
func validPhase(s []byte) bool {
	if len(s) < 1 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if (s[i] < 'a' || s[i] > 'z') && s[i] != '_' {
			return false
		}
	}
	return true
}

// validLowerUUID matches a lower-case hyphenated UUID.
func validLowerUUID(s []byte) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if s[i] != '-' {
				return false
			}
		case (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f'):
			return false
		}
	}
	return true
}

// jsonString decodes a JSON string token; anything else is an error. The
// result aliases value unless the string has escapes.
func jsonString(value []byte) ([]byte, error) {
	if len(value) < 2 || value[0] != '"' {
		return nil, errEntry
	}
	if bytes.IndexByte(value, '\\') < 0 {
		return value[1 : len(value)-1 : len(value)-1], nil
	}
	var s string
	if err := json.Unmarshal(value, &s); err != nil {
		return nil, errEntry
	}
	return []byte(s), nil
}
