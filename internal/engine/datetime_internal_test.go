package engine

import (
	"testing"
	"time"
)

// TestParseDateTimeReadsWhatTheFormatNames: what JSON Schema's date-time
// names (RFC 3339, as its test suite has it) parses, to the instant
// Postgres reads from the same text; what it refuses does not parse.
func TestParseDateTimeReadsWhatTheFormatNames(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"2024-05-01T12:00:00Z":                "2024-05-01T12:00:00Z",
		"2024-05-01t12:00:00z":                "2024-05-01T12:00:00Z",
		"2024-05-01t12:00:00.25+02:00":        "2024-05-01T10:00:00.25Z",
		"1998-12-31T23:59:60Z":                "1999-01-01T00:00:00Z",
		"1998-12-31T15:59:60.123-08:00":       "1999-01-01T00:00:00.123Z",
		"1999-01-01T05:29:60+05:30":           "1999-01-01T00:00:00Z",
		"2016-12-31t23:59:60z":                "2017-01-01T00:00:00Z",
		"2016-12-31T23:59:60.999999999Z":      "2017-01-01T00:00:00.999999999Z",
		"2024-05-01T12:00:00.000000001+00:00": "2024-05-01T12:00:00.000000001Z",
	} {
		got, err := parseDateTime(text)
		if err != nil || got.UTC().Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %s (%v), want %s", text, got.UTC().Format(time.RFC3339Nano), err, want)
		}
	}
	for _, text := range []string{
		"1998-12-31T23:58:60Z", "1998-12-31T22:59:60Z", "1998-12-31T23:59:60+01:00", "1998-12-31T23:59:61Z",
		"2024-05-01T12:00:00", "2024-05-01 12:00:00Z", "2024-05-01X12:00:00Z", "2024-05-01T12:00:00Zz", "",
		"2024-05-01T12:00:60", "60",
	} {
		if got, err := parseDateTime(text); err == nil {
			t.Errorf("%q parsed, as %s", text, got)
		}
	}
}
