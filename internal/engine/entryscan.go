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
}

var errEntry = errors.New("not a valid audit entry")

// scanEntry reads an entry's queryable columns under the rules of
// orangerail.audit_entry_columns: a UTF-8 JSON object Postgres reads as
// jsonb (validJSONB: its payload included, since an entry Postgres cannot
// read fails the SQL verifier's check, and the two verifiers must agree),
// with no repeated member at the top level or in "actor", and every column
// present and well typed. After the whole entry is validated, it walks the
// members once, and skips payload values without decoding them.
func scanEntry(entry []byte) (entryColumns, error) {
	var c entryColumns
	if !utf8.Valid(entry) || !validJSONB(entry) {
		return c, errEntry
	}
	s := scanner{b: entry}
	var version []byte
	var actor []byte
	seen := make([][]byte, 0, 16)
	err := s.object(func(key, value []byte) error {
		if slices.ContainsFunc(seen, func(k []byte) bool { return bytes.Equal(k, key) }) {
			return errEntry
		}
		seen = append(seen, key)
		var err error
		switch string(key) {
		case "v":
			version = value
		case "tenant":
			c.tenant, err = jsonString(value)
		case "at":
			c.at, err = jsonString(value)
		case "correlation_id":
			c.correlationID, err = jsonString(value)
		case "phase":
			c.phase, err = jsonString(value)
		case "action":
			c.action, err = jsonString(value)
		case "approval_id":
			c.approvalID, err = jsonString(value)
		case "dev_mode":
			switch string(value) {
			case "true":
				c.devMode = true
			case "false":
			default:
				err = errEntry
			}
		case "actor":
			actor = value
		}
		return err
	})
	if err != nil {
		return c, errEntry
	}
	for _, required := range []string{"tenant", "at", "correlation_id", "phase", "dev_mode"} {
		if !slices.ContainsFunc(seen, func(k []byte) bool { return string(k) == required }) {
			return c, errEntry
		}
	}
	// "v" is the number 1 in any spelling (1, 1.0, 1e0), as jsonb compares
	// it: exactly, so not 1.00000000000000000001, which a float64 rounds
	// to 1. The entry is valid JSON, so a value SetString reads is a
	// number; a string, a literal or a container it refuses.
	if string(version) != "1" {
		v, ok := new(big.Rat).SetString(string(version))
		if !ok || v.Cmp(big.NewRat(1, 1)) != 0 {
			return c, errEntry
		}
	}
	if actor == nil || actor[0] != '{' {
		return c, errEntry
	}
	var actorKeys [][]byte
	var hasSubject, hasKind bool
	a := scanner{b: actor}
	err = a.object(func(key, value []byte) error {
		if slices.ContainsFunc(actorKeys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			return errEntry
		}
		actorKeys = append(actorKeys, key)
		var err error
		switch string(key) {
		case "subject":
			c.subject, err = jsonString(value)
			hasSubject = true
		case "kind":
			c.kind, err = jsonString(value)
			hasKind = true
		}
		return err
	})
	if err != nil || !hasSubject || !hasKind || len(c.subject) == 0 ||
		!slices.Contains(ActorKinds(), ActorKind(c.kind)) {
		return c, errEntry
	}
	if n := utf8.RuneCount(c.correlationID); n < 1 || n > 128 {
		return c, errEntry
	}
	if c.atTime, err = parseAt(c.at); err != nil || !validPhase(c.phase) || (c.approvalID != nil && !validLowerUUID(c.approvalID)) {
		return c, errEntry
	}
	return c, nil
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

// scanner walks the members of a JSON object. It never indexes past its
// input: malformed input ends in an error, not a panic.
type scanner struct {
	b   []byte
	pos int
}

func (s *scanner) space() {
	for s.pos < len(s.b) && (s.b[s.pos] == ' ' || s.b[s.pos] == '\t' || s.b[s.pos] == '\n' || s.b[s.pos] == '\r') {
		s.pos++
	}
}

// object calls fn for each member of the object at the cursor, with the
// member's decoded name and its raw value.
func (s *scanner) object(fn func(key, value []byte) error) error {
	s.space()
	if s.pos >= len(s.b) || s.b[s.pos] != '{' {
		return errEntry
	}
	s.pos++
	for {
		s.space()
		if s.pos >= len(s.b) {
			return errEntry
		}
		if s.b[s.pos] == '}' {
			s.pos++
			return nil
		}
		keyStart := s.pos
		if !s.skipValue() {
			return errEntry
		}
		key, err := jsonString(s.b[keyStart:s.pos])
		if err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.b) || s.b[s.pos] != ':' {
			return errEntry
		}
		s.pos++
		s.space()
		valueStart := s.pos
		if !s.skipValue() || s.pos == valueStart {
			return errEntry
		}
		if err := fn(key, s.b[valueStart:s.pos]); err != nil {
			return err
		}
		s.space()
		switch {
		case s.pos >= len(s.b):
			return errEntry
		case s.b[s.pos] == ',':
			s.pos++
		case s.b[s.pos] != '}':
			return errEntry
		}
	}
}

// skipValue moves past one value and reports whether it ended inside the
// input.
func (s *scanner) skipValue() bool {
	depth := 0
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case '"':
			end := s.pos + 1
			for {
				i := bytes.IndexByte(s.b[end:], '"')
				if i < 0 {
					return false
				}
				end += i
				// The quote ends the string unless an odd run of
				// backslashes escapes it.
				backslashes := 0
				for j := end - 1; j > s.pos && s.b[j] == '\\'; j-- {
					backslashes++
				}
				if backslashes%2 == 0 {
					break
				}
				end++
			}
			s.pos = end + 1
		case '{', '[':
			depth++
			s.pos++
			continue
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
			s.pos++
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.pos++
			continue
		default:
			s.pos++
			continue
		}
		if depth == 0 {
			return true
		}
	}
	return depth == 0
}
