package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/ontology"
)

// maxNumericExponent is the largest exponent Postgres's numeric input
// accepts (NUMERIC_MAX_PRECISION in its numeric.c); beyond it the text is
// refused as invalid.
const maxNumericExponent = 1000

// columnValue checks a value an agent sent for a column against the
// column's type, before any SQL runs, so that a value Postgres would refuse
// is the caller's issue at its path rather than a failed statement. It
// returns the value's text (what a cursor binds and what a text column is
// compared with) and the argument to send: a typed Go value where the type
// has one, so Postgres never parses the agent's text for it.
func columnValue(col ontology.Column, path string, v json.RawMessage) (text string, arg any, issue *Issue) {
	refuse := func(format string, args ...any) (string, any, *Issue) {
		return "", nil, &Issue{Path: path, Message: fmt.Sprintf(format, args...)}
	}
	isString := bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`))
	if col.Kind == ontology.ValueNumeric && !isString && isJSONNumber(string(bytes.TrimSpace(v))) {
		// A JSON number a double cannot hold (1e400) is still a numeric:
		// scalarText, which reads numbers as doubles, would refuse it.
		text = string(bytes.TrimSpace(v))
	} else if text, issue = scalarText(path, v); issue != nil {
		return "", nil, issue
	}
	switch col.Kind {
	case ontology.ValueInteger:
		n, err := strconv.ParseInt(text, 10, col.Bits)
		if err != nil || (isString && !isDigits(text)) {
			lo, hi := integerRange(col.Bits)
			return refuse("must be a whole number from %d to %d", lo, hi)
		}
		return text, n, nil
	case ontology.ValueNumeric:
		if utf8.RuneCountInString(text) > MaxValueLength {
			return "", nil, tooLong(path)
		}
		if !isJSONNumber(text) {
			return refuse("must be a number")
		}
		if e, ok := exponent(text); !ok || e > maxNumericExponent || e < -maxNumericExponent {
			return refuse("must be a number with an exponent from -%d to %d", maxNumericExponent, maxNumericExponent)
		}
		return text, text, nil // Postgres parses JSON's number form exactly
	case ontology.ValueFloat:
		if !isJSONNumber(text) {
			return refuse("must be a number")
		}
		f, err := strconv.ParseFloat(text, col.Bits)
		if err != nil { // out of range: Postgres refuses what the type cannot hold
			return refuse("must be a number a %d-bit float holds", col.Bits)
		}
		if col.Bits == 32 {
			return text, float32(f), nil
		}
		return text, f, nil
	case ontology.ValueBoolean:
		if text != "true" && text != "false" {
			return refuse("must be true or false")
		}
		return text, text == "true", nil
	case ontology.ValueTimestamptz:
		t, err := parseDateTime(text)
		if _, offset := t.Zone(); err != nil || !isString || offset <= -24*3600 || offset >= 24*3600 {
			return refuse("must be a time in RFC 3339 form, with its offset, such as 2024-05-01T12:00:00Z")
		}
		// Postgres keeps microseconds, rounding as it would the text.
		return text, t.Round(time.Microsecond), nil
	case ontology.ValueTimestamp:
		t, err := time.Parse("2006-01-02T15:04:05", text) // fractional seconds allowed
		if err != nil || !isString {
			return refuse("must be a date and time without an offset, such as 2024-05-01T12:00:00")
		}
		return text, t.Round(time.Microsecond), nil
	case ontology.ValueDate:
		t, err := time.Parse(time.DateOnly, text)
		if err != nil || !isString {
			return refuse("must be a date, such as 2024-05-01")
		}
		return text, t, nil
	case ontology.ValueUUID:
		u, err := uuid.Parse(text)
		if err != nil || !isString || len(text) != 36 {
			return refuse("must be a UUID, such as 123e4567-e89b-12d3-a456-426614174000")
		}
		return text, u.String(), nil
	}
	// Text, and types the engine does not model: Postgres parses the text.
	return text, text, nil
}

// bindValue checks a value for one of an object's fields against the
// catalog; a field the catalog does not describe takes any scalar.
func (e *Engine) bindValue(object, field, path string, v json.RawMessage) (string, any, *Issue) {
	col, ok := e.catalog.Column(object, field)
	if !ok {
		col = ontology.Column{Kind: ontology.ValueOther}
	}
	return columnValue(col, path, v)
}

func integerRange(bits int) (int64, int64) {
	hi := int64(math.MaxInt64) >> (64 - bits)
	return -hi - 1, hi
}

// isDigits reports whether s is a whole number in decimal digits, with an
// optional leading minus: the form a string may give an integer in.
func isDigits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// isJSONNumber reports whether s is a number as JSON writes one.
func isJSONNumber(s string) bool {
	return s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && json.Valid([]byte(s))
}

// exponent returns the exponent of a JSON number; ok is false when it does
// not fit an int.
func exponent(s string) (e int, ok bool) {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return 0, true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return n, err == nil
}

// errLeapSecond is a leap second (:60) anywhere but the last second of a
// UTC day, where none is ever inserted.
var errLeapSecond = errors.New("a leap second is 23:59:60 in UTC")

// parseDateTime parses a time in the form JSON Schema's date-time format
// names, RFC 3339's, as its validators read it, where time.Parse reads a
// narrower one: a lower-case t or z too (RFC 3339 §5.6), and a leap
// second, 23:59:60 in UTC, which is read as Postgres reads it: the next
// day's first second.
func parseDateTime(text string) (time.Time, error) {
	b := []byte(text)
	if len(b) > 10 && b[10] == 't' {
		b[10] = 'T'
	}
	if n := len(b); n > 0 && b[n-1] == 'z' {
		b[n-1] = 'Z'
	}
	// 2006-01-02T15:04:05: the seconds are bytes 17 and 18.
	leap := len(b) > 19 && b[16] == ':' && b[17] == '6' && b[18] == '0'
	if leap {
		b[18] = '9'
		b[17] = '5'
	}
	t, err := time.Parse(time.RFC3339, string(b))
	if err != nil || !leap {
		return t, err
	}
	if u := t.UTC(); u.Hour() != 23 || u.Minute() != 59 {
		return time.Time{}, errLeapSecond
	}
	return t.Add(time.Second), nil
}
